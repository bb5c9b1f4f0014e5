//! A package run's record: what the store keeps of a successful run, as
//! Bazel's `ActionResult` keeps an action's outputs by digest. Its output
//! is a list of [items](crate::hydrate::item) (each resource's digest and
//! the facts kpt's bookkeeping reads), never the resources themselves:
//! those are blobs of their own, stored once however many ancestors' runs
//! list them. The rest is what kpt prints and records for the run: its log
//! (the package's display name left as a marker, see [`ROOT_MARKER`]), its
//! step records and function results.
//!
//! Nothing here names an absolute path: input files are relative to the
//! package, packages relative to the render root.

use std::sync::Arc;

use crate::hydrate::item::{Digest, Item, ItemMeta, list_digest};
use crate::hydrate::results::{FnResult, ResultItems, StepRecord};
use crate::yaml::binary;
use crate::yaml::node::Node;

/// Bumped whenever a record's layout or a key's parts change.
pub(crate) const FORMAT_VERSION: u64 = 2;

/// Magic prefix of an encoded record.
const MAGIC: &[u8; 4] = b"KRR2";

/// Stands for the render root's directory name in a stored log: kpt's
/// lines name packages as `<root name>/<path>`, and the same tree checked
/// out under another name must replay with that name. A printable
/// character no path or function output plausibly holds, so that both
/// Rust's and Go's quoting leave it as it is.
pub const ROOT_MARKER: &str = "\u{2983}root\u{2984}";

/// A run's output items: read from a stored record only when something
/// needs them (a parent that runs again, the writer): most stored runs of a
/// render are needed only for their output's digest and their log.
#[derive(Clone)]
pub struct Output {
    items: Arc<std::sync::OnceLock<Option<Arc<[Item]>>>>,
    encoded: Option<Arc<[u8]>>,
}

impl Output {
    /// An output known as items.
    pub fn items(items: Arc<[Item]>) -> Output {
        Output {
            items: Arc::new(std::sync::OnceLock::from(Some(items))),
            encoded: None,
        }
    }

    /// The items (`None` when the stored form does not read).
    pub fn get(&self) -> Option<Arc<[Item]>> {
        self.items
            .get_or_init(|| {
                let bytes = self.encoded.as_ref()?;
                let mut input = Reader(bytes);
                let items = read_items(&mut input)?;
                input.0.is_empty().then_some(items)
            })
            .clone()
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.get().iter().flat_map(|items| items.iter()))
            .finish()
    }
}

impl PartialEq for Output {
    fn eq(&self, other: &Output) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Output {}

/// A successful package run, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRecord {
    /// The output resources, in order.
    pub output: Output,
    /// [`list_digest`] of the output: what the parent's key covers.
    pub output_digest: Digest,
    /// What the run printed, with [`ROOT_MARKER`] for the root's name.
    pub log: Vec<u8>,
    /// Mutation steps, in execution order.
    pub mutation_steps: Vec<StepRecord>,
    /// Validation steps.
    pub validation_steps: Vec<StepRecord>,
    /// Every function call.
    pub fn_results: Vec<FnResult>,
    /// Functions that ran successfully.
    pub executed: usize,
    /// The package's own input files, relative to the package (pruning).
    pub input_files: Vec<String>,
    /// How long the run took when it ran, in milliseconds.
    pub elapsed_ms: u64,
}

impl RunRecord {
    /// A record whose output digest is computed from `output`.
    pub fn new(
        output: Arc<[Item]>,
        log: Vec<u8>,
        mutation_steps: Vec<StepRecord>,
        validation_steps: Vec<StepRecord>,
        fn_results: Vec<FnResult>,
        executed: usize,
        input_files: Vec<String>,
        elapsed_ms: u64,
    ) -> RunRecord {
        let output_digest = list_digest(output.iter().map(|item| &item.digest));
        RunRecord {
            output: Output::items(output),
            output_digest,
            log,
            mutation_steps,
            validation_steps,
            fn_results,
            executed,
            input_files,
            elapsed_ms,
        }
    }

    /// The stored form: the output's digest first, its items last (read
    /// only when needed).
    pub fn encode(&self) -> Vec<u8> {
        let items = self.output.get().unwrap_or_default();
        let mut out = Writer(Vec::with_capacity(256 + items.len() * 96 + self.log.len()));
        out.0.extend_from_slice(MAGIC);
        out.0.extend_from_slice(&self.output_digest.0);
        out.bytes(&self.log);
        out.number(self.executed as u64);
        out.number(self.elapsed_ms);
        out.number(self.input_files.len() as u64);
        for file in &self.input_files {
            out.text(file);
        }
        let records = [
            sequence(self.mutation_steps.iter().map(step_node)),
            sequence(self.validation_steps.iter().map(step_node)),
            sequence(self.fn_results.iter().map(fn_result_node)),
        ];
        let mut steps = Vec::new();
        binary::encode(&records, &mut steps);
        out.bytes(&steps);
        write_items(&mut out, &items);
        out.0
    }

    /// Reads [`RunRecord::encode`]'s form; `None` for anything malformed.
    pub fn decode(bytes: &[u8]) -> Option<RunRecord> {
        let mut input = Reader(bytes.strip_prefix(MAGIC.as_slice())?);
        let output_digest = Digest(input.take(32)?.try_into().ok()?);
        let log = input.bytes()?.to_vec();
        let executed = usize::try_from(input.number()?).ok()?;
        let elapsed_ms = input.number()?;
        let files = input.count()?;
        let input_files = (0..files)
            .map(|_| input.text().map(str::to_owned))
            .collect::<Option<Vec<_>>>()?;
        let (records, rest) = binary::decode(input.bytes()?)?;
        if !rest.is_empty() {
            return None;
        }
        let [mutation, validation, fn_results] = records.as_slice() else {
            return None;
        };
        // The items stay encoded until asked for; their count must at
        // least read.
        Reader(input.0).count()?;
        let steps = |node: &Node| {
            node.content
                .iter()
                .map(step_from)
                .collect::<Option<Vec<_>>>()
        };
        Some(RunRecord {
            output: Output {
                items: Arc::default(),
                encoded: Some(Arc::from(input.0)),
            },
            output_digest,
            log,
            mutation_steps: steps(mutation)?,
            validation_steps: steps(validation)?,
            fn_results: fn_results
                .content
                .iter()
                .map(fn_result_from)
                .collect::<Option<_>>()?,
            executed,
            input_files,
            elapsed_ms,
        })
    }

    /// The log as printed for a render root named `root_name`.
    pub fn log_for(&self, root_name: &str) -> Vec<u8> {
        replace_marker(&self.log, root_name)
    }
}

/// `log` with every [`ROOT_MARKER`] replaced by `root_name`.
pub fn replace_marker(log: &[u8], root_name: &str) -> Vec<u8> {
    let marker = ROOT_MARKER.as_bytes();
    let mut out = Vec::with_capacity(log.len());
    let mut rest = log;
    while let Some(at) = memchr::memmem::find(rest, marker) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(root_name.as_bytes());
        rest = &rest[at + marker.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Items in their stored form: count, then each digest and meta.
pub(crate) fn write_items(out: &mut Writer, items: &[Item]) {
    out.number(items.len() as u64);
    for item in items {
        out.0.extend_from_slice(&item.digest.0);
        let meta = &item.meta;
        out.text(&meta.sort_key);
        out.text(&meta.package);
        out.text(&meta.path);
        out.text(&meta.index);
        out.0.push(meta.flags);
    }
}

/// Reads [`write_items`]'s form.
pub(crate) fn read_items(input: &mut Reader<'_>) -> Option<Arc<[Item]>> {
    let count = input.count()?;
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        let digest = Digest(input.take(32)?.try_into().ok()?);
        let meta = ItemMeta {
            sort_key: input.text()?.to_owned(),
            package: input.text()?.to_owned(),
            path: input.text()?.to_owned(),
            index: input.text()?.to_owned(),
            flags: *input.take(1)?.first()?,
        };
        items.push(Item {
            digest,
            meta: Arc::new(meta),
        });
    }
    Some(items.into())
}

/// Appends varints, length-prefixed bytes and texts.
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn number(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.number(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    pub(crate) fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }
}

/// Reads what a [`Writer`] wrote; every read is bounded by the input.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        if self.0.len() < len {
            return None;
        }
        let (taken, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(taken)
    }

    pub(crate) fn number(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.take(1)?.first()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(value);
            }
        }
        None
    }

    /// A count of things still to read, each at least a byte long: a count
    /// larger than the input left is corrupt (and must not size an
    /// allocation).
    pub(crate) fn count(&mut self) -> Option<usize> {
        let count = usize::try_from(self.number()?).ok()?;
        (count <= self.0.len()).then_some(count)
    }

    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.number()?).ok()?;
        self.take(len)
    }

    pub(crate) fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
}

/// Length-prefixed fields into blake3, so no two inputs hash alike by
/// shifting bytes from one field to the next.
#[derive(Default)]
pub(crate) struct KeyHasher(blake3::Hasher);

impl KeyHasher {
    /// A key of `kind` (`"dfs"`, `"parse"`, …) for the krender `build`, in
    /// this format.
    pub(crate) fn of(build: &str, kind: &str) -> KeyHasher {
        let mut key = KeyHasher::default();
        key.number(FORMAT_VERSION);
        key.text(build);
        key.text(kind);
        key
    }

    pub(crate) fn number(&mut self, value: u64) {
        self.0.update(&value.to_le_bytes());
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.number(bytes.len() as u64);
        self.0.update(bytes);
    }

    pub(crate) fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    pub(crate) fn digest(&mut self, digest: &Digest) {
        self.0.update(&digest.0);
    }

    pub(crate) fn flags(&mut self, flags: &[bool]) {
        let bits = flags
            .iter()
            .enumerate()
            .fold(0u64, |bits, (i, flag)| bits | (u64::from(*flag) << i));
        self.number(bits);
    }

    pub(crate) fn finish(self) -> Digest {
        Digest(*self.0.finalize().as_bytes())
    }
}

/// The node shapes run records and the old action cache share.
pub(super) fn scalar(text: &str) -> Node {
    Node::new_untagged_scalar(text)
}

pub(super) fn sequence(items: impl Iterator<Item = Node>) -> Node {
    let mut node = Node::new_sequence();
    node.content = items.collect();
    node
}

pub(super) fn step_node(step: &StepRecord) -> Node {
    sequence(
        [
            scalar(&step.name),
            scalar(&step.image),
            scalar(&step.exec),
            scalar(&step.execution_error),
            scalar(&step.stderr),
            scalar(&step.exit_code.to_string()),
            step.results.to_node(),
        ]
        .into_iter(),
    )
}

pub(super) fn step_from(node: &Node) -> Option<StepRecord> {
    let [
        name,
        image,
        exec,
        execution_error,
        stderr,
        exit_code,
        results,
    ] = node.content.as_slice()
    else {
        return None;
    };
    Some(StepRecord {
        name: name.value.to_string(),
        image: image.value.to_string(),
        exec: exec.value.to_string(),
        execution_error: execution_error.value.to_string(),
        stderr: stderr.value.to_string(),
        exit_code: exit_code.value.parse().ok()?,
        results: ResultItems::from_cached(results),
    })
}

pub(super) fn fn_result_node(result: &FnResult) -> Node {
    sequence(
        [
            scalar(&result.image),
            scalar(&result.exec),
            scalar(&result.stderr),
            scalar(&result.exit_code.to_string()),
            result.results.to_node(),
        ]
        .into_iter(),
    )
}

pub(super) fn fn_result_from(node: &Node) -> Option<FnResult> {
    let [image, exec, stderr, exit_code, results] = node.content.as_slice() else {
        return None;
    };
    Some(FnResult {
        image: image.value.to_string(),
        exec: exec.value.to_string(),
        stderr: stderr.value.to_string(),
        exit_code: exit_code.value.parse().ok()?,
        results: ResultItems::from_cached(results),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_documents;

    fn sample() -> RunRecord {
        let results = parse_documents(
            "- message: set namespace\n  severity: info\n  resourceRef: {apiVersion: v1, kind: ConfigMap, name: cm}\n  field: {path: metadata.namespace}\n  tags: {a: b}\n",
        )
        .unwrap();
        let items = ResultItems::from_node(results.first()).unwrap();
        assert!(!items.is_empty());
        let item = Item {
            digest: Digest::of(b"resource"),
            meta: Arc::new(ItemMeta {
                sort_key: "v1 ConfigMap  cm".into(),
                package: "team/app".into(),
                path: "cm.yaml".into(),
                index: "0".into(),
                flags: 7,
            }),
        };
        RunRecord::new(
            vec![item.clone(), item].into(),
            format!("Package \"{ROOT_MARKER}/team/app\":\n").into_bytes(),
            vec![StepRecord {
                name: "n".into(),
                image: "ghcr.io/x:v1".into(),
                stderr: "warn\n".into(),
                results: items.clone(),
                ..StepRecord::default()
            }],
            Vec::new(),
            vec![FnResult {
                image: "ghcr.io/x:v1".into(),
                exit_code: 0,
                results: items,
                ..FnResult::default()
            }],
            1,
            vec!["cm.yaml".into(), "Kptfile".into()],
            12,
        )
    }

    #[test]
    fn a_record_reads_back_equal_and_replays_under_any_root_name() {
        let record = sample();
        let decoded = RunRecord::decode(&record.encode()).unwrap();
        assert_eq!(decoded, record);
        assert_eq!(decoded.output.get().unwrap().len(), 2);
        assert_eq!(
            decoded.mutation_steps[0].results.lines(),
            record.mutation_steps[0].results.lines()
        );
        assert_eq!(
            decoded.log_for("checkout"),
            b"Package \"checkout/team/app\":\n".to_vec()
        );
    }

    #[test]
    fn a_truncated_or_extended_record_is_not_read() {
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            let read = RunRecord::decode(&bytes[..len]).and_then(|record| record.output.get());
            assert!(read.is_none(), "truncated to {len}");
        }
        let mut longer = bytes;
        longer.push(0);
        let read = RunRecord::decode(&longer).and_then(|record| record.output.get());
        assert!(read.is_none());
    }
}
