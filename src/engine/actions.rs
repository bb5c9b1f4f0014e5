//! The action cache (Bazel's, at package granularity): a package's DFS
//! pipeline run, stored on disk under the blake3 of everything its output
//! depends on, so a new process runs only the packages whose inputs changed.
//!
//! A run's key covers the krender build, the render options that change
//! what a run produces, the package's path, its decoded Kptfile, its own
//! files' bytes, the identity of each of its functions (builtin name, executable
//! digest, image; see [`CachePolicy`]), the bytes of every `configPath`,
//! and the output digests of its subpackages. A subpackage that ran again
//! to the same output keeps its digest, so its parent is a hit (backdating).
//! A run is stored only when it succeeded and every one of its functions is
//! pure; a package with an impure function runs every time, but its output
//! digest still lets its parent hit.
//!
//! A value holds the run's log, its step records and results, and its
//! output in the binary node form (`yaml::binary`), decoded only when a
//! parent that runs needs it. An entry whose bytes fail their blake3 check
//! or do not decode is recomputed, never served.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::cache::{CachePolicy, build_identity};
use super::packs::{self, Corrupt, EntryBytes, PackStore};
use super::record::{fn_result_from, fn_result_node, scalar, sequence, step_from, step_node};
use super::remote::{RemoteCache, Table};
use crate::hydrate::{PackageRun, RenderOptions};
use crate::pkg::kptfile::{self, Function, Kptfile};
use crate::pkg::reader::PackageFile;
use crate::runtime::FunctionTarget;
use crate::yaml::binary;
use crate::yaml::node::Node;

/// Bumped whenever the key or the value layout changes.
const FORMAT_VERSION: u64 = 1;

/// Magic prefix of a value.
const VALUE_MAGIC: &[u8; 4] = b"KRA1";

/// A package's inputs, as the key sees them.
#[derive(Clone, Copy)]
pub(crate) struct ActionInputs<'a> {
    /// The absolute package path.
    pub(crate) path: &'a Path,
    /// The decoded Kptfile (its bytes are among `files`; the decoded form
    /// is keyed too, should `.krmignore` hide the file).
    pub(crate) kptfile: &'a Kptfile,
    /// The package's own files.
    pub(crate) files: &'a [PackageFile],
    /// The output digests of its subpackages, in walk order (DFS), or the
    /// digest of its scope's resources (BFS).
    pub(crate) children: &'a [blake3::Hash],
    /// A breadth-first run (its input is its scope, not its files and its
    /// subpackages' outputs).
    pub(crate) bfs: bool,
}

/// A run answered from the cache: its records, and its output still
/// encoded.
pub(crate) struct CachedRun {
    /// The run with an empty output (see [`CachedOutput::decode`]).
    pub(crate) run: PackageRun,
    /// The output.
    pub(crate) output: CachedOutput,
}

/// A cached run's output, decoded only when something needs it.
pub(crate) struct CachedOutput {
    /// The digest of the encoded output.
    pub(crate) digest: blake3::Hash,
    entry: EntryBytes,
    output_at: usize,
}

impl CachedOutput {
    /// Decodes the output; `None` if the entry is corrupt.
    pub(crate) fn decode(&self) -> Option<Vec<Node>> {
        let (nodes, rest) = binary::decode(self.entry.get(self.output_at..)?)?;
        rest.is_empty().then_some(nodes)
    }
}

/// Counters of one render's use of the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActionStats {
    /// Runs answered from the cache.
    pub hits: u64,
    /// Cacheable runs not found.
    pub misses: u64,
    /// Runs stored.
    pub stores: u64,
    /// Entries dropped as corrupt.
    pub corrupt: u64,
}

/// The store of package runs inside a cache directory, apart from the
/// function results (as the manifests are): a pack store
/// (`engine::packs`), since cacache's file per entry made storing a cold
/// render's runs cost more than running them.
pub fn store_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("actions")
}

/// The action cache in a cache directory (in its [`store_dir`]).
pub struct ActionCache {
    store: PackStore,
    policy: CachePolicy,
    build: String,
    /// Function identities by target: an executable's digest is read once
    /// per render, not once per package.
    identities: Mutex<HashMap<String, Option<String>>>,
    hits: AtomicU64,
    misses: AtomicU64,
    stores: AtomicU64,
    corrupt: AtomicU64,
    remote: Option<Arc<RemoteCache>>,
}

impl ActionCache {
    /// The cache in the cache directory `cache_dir`, deciding purity with
    /// `policy`.
    pub fn new(cache_dir: &Path, policy: CachePolicy) -> ActionCache {
        ActionCache::for_build(cache_dir, policy, build_identity())
    }

    /// [`ActionCache::new`] keyed for the krender build `build` (see
    /// [`super::cache::build_identity_of`]).
    pub fn for_build(cache_dir: &Path, policy: CachePolicy, build: String) -> ActionCache {
        ActionCache {
            store: PackStore::open(store_dir(cache_dir)),
            policy,
            build,
            identities: Mutex::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            stores: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            remote: None,
        }
    }

    /// Also looks runs up in, and pushes them to, `remote` (keys then name
    /// the build by its executable's bytes, the same on every machine).
    pub fn with_remote(self, remote: Arc<RemoteCache>) -> ActionCache {
        ActionCache {
            build: super::cache::build_identity_by_content(),
            remote: Some(remote),
            ..self
        }
    }

    /// Whether runs are shared with other machines.
    pub fn has_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// What the cache did so far.
    pub fn stats(&self) -> ActionStats {
        ActionStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            stores: self.stores.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
        }
    }

    /// The key of a package's run, or `None` when one of its functions is
    /// not known to be pure (or cannot run at all).
    pub(crate) fn key(
        &self,
        inputs: &ActionInputs<'_>,
        options: &RenderOptions,
        save_on_failure: bool,
    ) -> Option<String> {
        let mut key = KeyHasher::default();
        key.number(FORMAT_VERSION);
        key.text(&self.build);
        key.text(&inputs.path.to_string_lossy());
        key.text(if inputs.bfs { "bfs" } else { "dfs" });
        // Not `in_place`: a run's output is the same whatever becomes of
        // it, so `-o stdout` and in-place renders share entries.
        key.flags(&[
            options.allow_exec,
            options.allow_wasm,
            options.truncate_output,
            save_on_failure,
        ]);
        key.text(&options.image_prefix);
        key.text(&format!("{:?}", inputs.kptfile));
        let pipeline = &inputs.kptfile.pipeline;
        for function in pipeline.mutators.iter().chain(&pipeline.validators) {
            key.text(&self.function_identity(function, &options.image_prefix)?);
            if !function.config_path.is_empty() {
                // Read where the step reads it; a missing file is part of
                // the key too (the step fails, and failures are not stored).
                let config = std::fs::read(inputs.path.join(&function.config_path));
                key.bytes(config.as_deref().unwrap_or(b"\0missing"));
            }
        }
        key.number(inputs.files.len() as u64);
        for file in inputs.files {
            key.text(&file.relative);
            key.bytes(&file.bytes);
        }
        key.number(inputs.children.len() as u64);
        for child in inputs.children {
            key.bytes(child.as_bytes());
        }
        Some(key.finish())
    }

    fn function_identity(&self, function: &Function, prefix: &str) -> Option<String> {
        let (kind, target) = if !function.image.is_empty() {
            if !function.tag.is_empty() {
                return None;
            }
            let image = kptfile::with_default_tag(&kptfile::resolve_image(&function.image, prefix));
            ("image", image)
        } else if !function.exec.is_empty() {
            ("exec", function.exec.clone())
        } else {
            return None;
        };
        let memo = format!("{kind}\0{target}");
        if let Ok(known) = self.identities.lock()
            && let Some(identity) = known.get(&memo)
        {
            return identity.clone();
        }
        let identity = match kind {
            "image" => self.policy.identity(FunctionTarget::Image(&target)),
            _ => self.policy.identity(FunctionTarget::Exec(&target)),
        }
        .map(|identity| format!("{identity}\0{memo}"));
        if let Ok(mut known) = self.identities.lock() {
            known.insert(memo, identity.clone());
        }
        identity
    }

    /// Reads the run stored under `key`; a corrupt entry is not served.
    pub(crate) fn lookup(&self, key: &str) -> Option<CachedRun> {
        let entry = match self.store.get(&pack_key(key)) {
            Ok(Some(entry)) => entry,
            Ok(None) => match self.fetch(key) {
                Some(entry) => entry,
                None => {
                    self.misses.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            },
            Err(Corrupt) => {
                self.drop_corrupt(key);
                return None;
            }
        };
        match decode_entry(entry) {
            Some(cached) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(cached)
            }
            None => {
                self.drop_corrupt(key);
                None
            }
        }
    }

    /// A run the remote has under `key` (verified there), kept locally too.
    fn fetch(&self, key: &str) -> Option<EntryBytes> {
        let bytes = self.remote.as_ref()?.get(Table::Actions, key)?;
        if let Err(error) = self.store.put(&pack_key(key), &[&bytes]) {
            tracing::debug!(target: "krender::actions", %error, "keeping a remote run failed");
        }
        Some(EntryBytes::from(bytes))
    }

    /// Counts the entry under `key` as corrupt: it is not served, and the
    /// run that replaces it supersedes it in the store.
    pub(crate) fn drop_corrupt(&self, key: &str) {
        self.corrupt.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(target: "krender::actions", key, "ignoring a corrupt action cache entry");
    }

    /// Stores a successful run whose output encodes to `output` (see
    /// [`encode_output`]). A failure to store only costs the next render.
    pub(crate) fn store(&self, key: &str, run: &PackageRun, output: &[u8], digest: blake3::Hash) {
        let head = encode_head(run, digest);
        if let Some(remote) = &self.remote {
            remote.put(Table::Actions, key, &[head.as_slice(), output].concat());
        }
        match self.store.put(&pack_key(key), &[&head, output]) {
            Ok(()) => {
                self.stores.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::debug!(target: "krender::actions", %error, "action cache write failed");
            }
        }
    }

    /// After a run: its output's digest when it succeeded (its parent's key
    /// covers it), the run stored under `key` when there is one.
    pub(crate) fn record(&self, key: Option<&str>, run: &PackageRun) -> Option<blake3::Hash> {
        let output = run.output.as_ref().ok()?;
        let (bytes, digest) = encode_output(output);
        if let Some(key) = key {
            self.store(key, run, &bytes, digest);
        }
        Some(digest)
    }

    /// Publishes the runs stored so far to other processes.
    pub fn finish(&self) {
        if let Err(error) = self.store.finish() {
            tracing::debug!(target: "krender::actions", %error, "writing the action index failed");
        }
    }
}

/// The pack key of a hex key (its blake3, which a hex digest's bytes are
/// not, but any text key is fine).
fn pack_key(key: &str) -> packs::Key {
    *blake3::hash(key.as_bytes()).as_bytes()
}

/// The entries in the action store of `cache_dir` and their bytes.
pub fn summarize(cache_dir: &Path) -> std::io::Result<(u64, u64)> {
    packs::summarize(&store_dir(cache_dir))
}

/// Removes the stored runs last written before `cutoff`; returns (entries
/// removed, entries kept).
pub fn prune(cache_dir: &Path, cutoff: std::time::SystemTime) -> std::io::Result<(u64, u64)> {
    packs::prune(&store_dir(cache_dir), cutoff)
}

/// The binary form of a run's output and its digest.
fn encode_output(output: &[Node]) -> (Vec<u8>, blake3::Hash) {
    let mut bytes = Vec::new();
    binary::encode(output, &mut bytes);
    let digest = blake3::hash(&bytes);
    (bytes, digest)
}

/// Length-prefixed fields into blake3, so no two inputs hash alike by
/// shifting bytes from one field to the next.
#[derive(Default)]
struct KeyHasher(blake3::Hasher);

impl KeyHasher {
    fn number(&mut self, value: u64) {
        self.0.update(&value.to_le_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.number(bytes.len() as u64);
        self.0.update(bytes);
    }

    fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    fn flags(&mut self, flags: &[bool]) {
        let bits = flags
            .iter()
            .enumerate()
            .fold(0u64, |bits, (i, flag)| bits | (u64::from(*flag) << i));
        self.number(bits);
    }

    fn finish(self) -> String {
        self.0.finalize().to_hex().to_string()
    }
}

/// Magic, output digest, log, then the records as one binary node list;
/// the output follows.
fn encode_head(run: &PackageRun, digest: blake3::Hash) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(64 + run.log.len());
    bytes.extend_from_slice(VALUE_MAGIC);
    bytes.extend_from_slice(digest.as_bytes());
    bytes.extend_from_slice(&(run.log.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&run.log);
    let records = [
        scalar(&run.executed.to_string()),
        sequence(run.input_files.iter().map(|file| scalar(file))),
        sequence(run.mutation_steps.iter().map(step_node)),
        sequence(run.validation_steps.iter().map(step_node)),
        sequence(run.fn_results.iter().map(fn_result_node)),
    ];
    binary::encode(&records, &mut bytes);
    bytes
}

fn decode_entry(entry: EntryBytes) -> Option<CachedRun> {
    let rest = entry.strip_prefix(VALUE_MAGIC.as_slice())?;
    let (digest, rest) = rest.split_first_chunk::<32>()?;
    let (log_len, rest) = rest.split_first_chunk::<8>()?;
    let log_len = usize::try_from(u64::from_le_bytes(*log_len)).ok()?;
    if rest.len() < log_len {
        return None;
    }
    let (log, rest) = rest.split_at(log_len);
    let (records, output) = binary::decode(rest)?;
    let [executed, input_files, mutation, validation, fn_results] = records.as_slice() else {
        return None;
    };
    let run = PackageRun {
        output: Ok(Vec::new()),
        log: log.to_vec(),
        mutation_steps: mutation
            .content
            .iter()
            .map(step_from)
            .collect::<Option<_>>()?,
        validation_steps: validation
            .content
            .iter()
            .map(step_from)
            .collect::<Option<_>>()?,
        fn_results: fn_results
            .content
            .iter()
            .map(fn_result_from)
            .collect::<Option<_>>()?,
        executed: executed.value.parse().ok()?,
        input_files: input_files
            .content
            .iter()
            .map(|file| file.value.to_string())
            .collect(),
    };
    let output_at = entry.len() - output.len();
    Some(CachedRun {
        run,
        output: CachedOutput {
            digest: blake3::Hash::from_bytes(*digest),
            entry,
            output_at,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hydrate::results::{FnResult, ResultItems, StepRecord};
    use crate::yaml::parse_documents;

    fn sample_run() -> PackageRun {
        let results = parse_documents(
            "- message: set namespace\n  severity: info\n  resourceRef: {apiVersion: v1, kind: ConfigMap, name: cm}\n  field: {path: metadata.namespace}\n  tags: {a: b}\n",
        )
        .unwrap();
        let items = ResultItems::from_node(results.first()).unwrap();
        assert!(!items.is_empty());
        PackageRun {
            output: Ok(parse_documents(
                "apiVersion: v1\nkind: ConfigMap # c\nmetadata:\n  name: cm\n",
            )
            .unwrap()),
            log: b"[RUNNING] \"x\"\n[PASS] \"x\" in 0s\n".to_vec(),
            mutation_steps: vec![StepRecord {
                name: "n".into(),
                image: "ghcr.io/x:v1".into(),
                stderr: "warn\n".into(),
                results: items.clone(),
                ..StepRecord::default()
            }],
            validation_steps: Vec::new(),
            fn_results: vec![FnResult {
                image: "ghcr.io/x:v1".into(),
                exit_code: 0,
                results: items,
                ..FnResult::default()
            }],
            executed: 1,
            input_files: vec!["a.yaml".into(), "Kptfile".into()],
        }
    }

    #[test]
    fn a_stored_run_reads_back_equal() {
        let run = sample_run();
        let output = run.output.as_ref().unwrap();
        let (bytes, digest) = encode_output(output);
        let mut entry = encode_head(&run, digest);
        entry.extend_from_slice(&bytes);
        let cached = decode_entry(entry.into()).unwrap();
        assert_eq!(cached.output.digest, digest);
        assert_eq!(&cached.output.decode().unwrap(), output);
        assert_eq!(cached.run.log, run.log);
        assert_eq!(cached.run.mutation_steps, run.mutation_steps);
        assert_eq!(cached.run.fn_results, run.fn_results);
        assert_eq!(cached.run.executed, 1);
        assert_eq!(cached.run.input_files, run.input_files);
        assert_eq!(
            cached.run.mutation_steps[0].results.lines(),
            run.mutation_steps[0].results.lines()
        );
    }

    #[test]
    fn a_truncated_entry_is_not_served() {
        let run = sample_run();
        let (bytes, digest) = encode_output(run.output.as_ref().unwrap());
        let mut entry = encode_head(&run, digest);
        entry.extend_from_slice(&bytes);
        for len in 0..entry.len() {
            let served = decode_entry(entry[..len].to_vec().into())
                .and_then(|cached| cached.output.decode());
            assert!(served.is_none(), "truncated to {len}");
        }
    }

    #[test]
    fn the_key_changes_with_every_input_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ActionCache::new(dir.path(), CachePolicy::default());
        let kptfile = Kptfile::parse(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n",
            Path::new("/p"),
        )
        .unwrap();
        let file = |bytes: &[u8]| PackageFile {
            relative: "a.yaml".into(),
            absolute: PathBuf::from("/p/a.yaml"),
            bytes: bytes.into(),
        };
        let files = [file(b"a: 1\n")];
        let child = [blake3::hash(b"child")];
        let inputs = ActionInputs {
            path: Path::new("/p"),
            kptfile: &kptfile,
            files: &files,
            children: &child,
            bfs: false,
        };
        let options = RenderOptions::default();
        let base = cache.key(&inputs, &options, false).unwrap();
        assert_eq!(cache.key(&inputs, &options, false).unwrap(), base);
        let edited = [file(b"a: 2\n")];
        let other_kptfile = Kptfile::parse(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: q\n",
            Path::new("/p"),
        )
        .unwrap();
        let other_child = [blake3::hash(b"other")];
        let variants = [
            ActionInputs {
                files: &edited,
                ..inputs
            },
            ActionInputs {
                children: &other_child,
                ..inputs
            },
            ActionInputs {
                bfs: true,
                ..inputs
            },
            ActionInputs {
                kptfile: &other_kptfile,
                ..inputs
            },
            ActionInputs {
                path: Path::new("/q"),
                ..inputs
            },
        ];
        for variant in &variants {
            assert_ne!(cache.key(variant, &options, false).unwrap(), base);
        }
        assert_ne!(cache.key(&inputs, &options, true).unwrap(), base);
        let prefixed = RenderOptions {
            image_prefix: "example.com/fns".into(),
            ..RenderOptions::default()
        };
        assert_ne!(cache.key(&inputs, &prefixed, false).unwrap(), base);
    }
}
