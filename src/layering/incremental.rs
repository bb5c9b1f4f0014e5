//! Incremental layering on salsa: [`LayeringSession`] keeps a document set
//! in memory and, after a file changes, re-renders only what depends on it.
//!
//! Inputs are the files ([`SourceFile`], one per path, its text or its
//! absence) and the ordered file list ([`FileSet`]). Queries:
//! - `parse_file`: a file's documents (node and decoded form); `no_eq`, as a
//!   parse is large and always new.
//! - `layer_plan`: the checks and relations of the whole set (Deckhand's
//!   order, as `render::plan`), creating one tracked [`LayerDoc`] per
//!   document, identified by (schema, layer, name). Its tracked fields are
//!   the decoded document, the input node, the effective parent and the
//!   substitution sources, so a re-run that finds a document unchanged
//!   leaves everything reading that document alone.
//! - `rendered_data`: one document's rendered data, from its own fields, its
//!   parent's rendered data and its sources' rendered data: after an edit it
//!   re-runs only for the edited documents, their descendants and the
//!   documents substituting from them.
//! - `encoded_document`: one output document's YAML, as it follows an
//!   earlier document in the stream ([`Encoder::continuing`]).
//!
//! [`LayeringSession::render`] warms the levels in parallel on rayon (a db
//! clone per worker, outside any query, as salsa requires), then reads the
//! results in output order on the calling thread, so its bytes and its
//! first error are exactly those of [`super::render_paths`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use salsa::plumbing::AsId;
use salsa::{Database, DatabaseKeyIndex, Setter};

use super::document::{Document, InputDocument};
use super::error::LayeringError;
use super::render::{self, render_document};
use super::substitution::{SourceData, SubstitutionOptions};

use super::value::Value;
use super::{LoadedDocument, collect_files, load_text};
use crate::yaml::{Encoder, Node, NodeKind};

/// What a watched path holds: its text, nothing (deleted or never there),
/// or bytes that are not UTF-8 (reported as the batch command reports them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileContents {
    /// The file's text.
    Text(Arc<str>),
    /// The file does not exist (any more).
    Missing,
    /// The file could not be read as text; the message says why.
    Unreadable(String),
}

impl FileContents {
    /// Contents from raw bytes (`None`: the file was deleted).
    pub fn from_bytes(bytes: Option<Vec<u8>>) -> FileContents {
        match bytes.map(String::from_utf8) {
            None => FileContents::Missing,
            Some(Ok(text)) => FileContents::Text(Arc::from(text)),
            // The message `std::fs::read_to_string` gives, which the batch
            // command reports.
            Some(Err(_)) => {
                FileContents::Unreadable("stream did not contain valid UTF-8".to_owned())
            }
        }
    }
}

/// One YAML file of the set.
#[salsa::input(debug)]
pub struct SourceFile {
    /// The path as it is displayed in diagnostics.
    #[returns(ref)]
    pub path: PathBuf,
    /// Its contents.
    #[returns(ref)]
    pub contents: FileContents,
}

/// The files of the set in reading order (the batch command's order).
#[salsa::input(debug)]
pub struct FileSet {
    /// The files, in order.
    #[returns(ref)]
    pub files: Vec<SourceFile>,
    /// How substitution treats missing sources and encrypted ones.
    #[returns(copy)]
    pub options: SubstitutionOptions,
}

/// One parsed document: its node (shared, so plan re-runs do not copy it)
/// and its decoded form.
#[derive(Debug)]
struct ParsedDocument {
    node: Arc<Node>,
    input: InputDocument,
}

/// A file's documents. `no_eq`: comparing two parses costs as much as
/// making one, and the plan below compares what matters per document.
#[salsa::tracked(returns(ref), no_eq)]
fn parse_file(db: &dyn Database, file: SourceFile) -> Result<Vec<ParsedDocument>, LayeringError> {
    let path = file.path(db);
    match file.contents(db) {
        FileContents::Missing => Ok(Vec::new()),
        FileContents::Unreadable(message) => Err(LayeringError::Read {
            path: path.display().to_string(),
            message: message.clone(),
        }),
        FileContents::Text(text) => {
            let display: Arc<str> = Arc::from(path.display().to_string());
            Ok(load_text(text, &display)?
                .into_iter()
                .map(|LoadedDocument { node, input }| ParsedDocument {
                    node: Arc::new(node),
                    input,
                })
                .collect())
        }
    }
}

/// The identity of a document in a set: Deckhand's (schema, layer, name).
type Identity = (String, Option<String>, String);

/// One document of the set, as the plan sees it.
#[salsa::tracked(debug)]
pub struct LayerDoc<'db> {
    /// (schema, layer, name): the same identity across plan re-runs.
    #[returns(ref)]
    identity: Identity,
    /// The decoded document (metadata, actions, substitutions, own data).
    #[tracked]
    #[returns(ref)]
    document: Arc<Document>,
    /// The document as read, written back with its rendered data.
    #[tracked]
    #[returns(ref)]
    node: Arc<Node>,
    /// The effective parent (after replacement), if any.
    #[tracked]
    #[returns(copy)]
    parent: Option<LayerDoc<'db>>,
    /// The concrete document each substitution source `(schema, name)`
    /// resolves to, for the sources that exist.
    #[tracked]
    #[returns(ref)]
    sources: Vec<((String, String), LayerDoc<'db>)>,
    /// The session's substitution options.
    #[tracked]
    #[returns(copy)]
    options: SubstitutionOptions,
}

/// The checked set: documents level by level (a level depends only on
/// earlier ones) and the output documents in output order.
#[derive(Debug, PartialEq, salsa::SalsaValue)]
struct LayerPlan<'db> {
    /// The set shares substituted values (see `super::shared`): a change
    /// can reach any document holding a shared value, so it is rendered
    /// whole.
    shared: bool,
    levels: Vec<Vec<LayerDoc<'db>>>,
    /// Each document's position in Deckhand's rendering order, as `levels`.
    ranks: Vec<Vec<usize>>,
    outputs: Vec<LayerDoc<'db>>,
}

#[salsa::tracked(returns(ref))]
fn layer_plan<'db>(db: &'db dyn Database, set: FileSet) -> Result<LayerPlan<'db>, LayeringError> {
    let mut inputs: Vec<&InputDocument> = Vec::new();
    let mut nodes: Vec<&Arc<Node>> = Vec::new();
    for &file in set.files(db) {
        match parse_file(db, file) {
            Ok(documents) => {
                for document in documents {
                    inputs.push(&document.input);
                    nodes.push(&document.node);
                }
            }
            Err(error) => return Err(error.clone()),
        }
    }
    let plan = render::plan(&inputs)?;
    let options = set.options(db);
    let shared = super::shared::needed(&plan);
    let is_output: Vec<bool> = (0..plan.documents.len())
        .map(|index| {
            plan.documents.get(index).is_some_and(|document| {
                !document.is_control
                    && !document.is_abstract
                    && plan
                        .family
                        .replaced_by
                        .get(index)
                        .copied()
                        .flatten()
                        .is_none()
            })
        })
        .collect();
    let render::Plan {
        documents,
        family,
        sources: source_index,
        levels: plan_levels,
        ranks: plan_ranks,
        ..
    } = plan;
    let ranks = plan_levels
        .iter()
        .map(|level| {
            level
                .iter()
                .map(|&index| plan_ranks.get(index).copied().unwrap_or(usize::MAX))
                .collect()
        })
        .collect();
    // Moved out one by one as their LayerDocs are created (no copies).
    let mut documents: Vec<Option<Document>> = documents.into_iter().map(Some).collect();
    let mut created: Vec<Option<LayerDoc<'db>>> = vec![None; documents.len()];
    let mut levels = Vec::with_capacity(plan_levels.len());
    // Parents and sources sit in earlier levels, so they exist by the time
    // a document that points at them is created.
    for level in &plan_levels {
        let mut docs = Vec::with_capacity(level.len());
        for &index in level {
            let Some(mut document) = documents.get_mut(index).and_then(Option::take) else {
                continue;
            };
            let Some(node) = nodes.get(document.input) else {
                continue;
            };
            let parent = family
                .effective_parent(index)
                .and_then(|parent| created.get(parent).copied().flatten());
            let mut sources: Vec<((String, String), LayerDoc<'db>)> = document
                .substitutions
                .iter()
                .filter_map(|substitution| {
                    let key = (
                        substitution.src.schema.clone(),
                        substitution.src.name.clone(),
                    );
                    let &source = source_index.get(&key)?;
                    let doc = created.get(source).copied().flatten()?;
                    Some((key, doc))
                })
                .collect();
            sources.sort_by(|a, b| a.0.cmp(&b.0));
            sources.dedup_by(|a, b| a.0 == b.0);
            let identity = (
                document.schema.clone(),
                document.layer.clone(),
                document.name.clone(),
            );
            // The position in the whole set is irrelevant here (the node is
            // kept instead) and would make every document after an added
            // one look changed.
            document.input = 0;
            let doc = LayerDoc::new(
                db,
                identity,
                Arc::new(document),
                Arc::clone(node),
                parent,
                sources,
                options,
            );
            if let Some(slot) = created.get_mut(index) {
                *slot = Some(doc);
            }
            docs.push(doc);
        }
        levels.push(docs);
    }
    let outputs = plan_levels
        .iter()
        .flatten()
        .filter(|&&index| is_output.get(index).copied().unwrap_or(false))
        .filter_map(|&index| created.get(index).copied().flatten())
        .collect();
    Ok(LayerPlan {
        shared,
        levels,
        ranks,
        outputs,
    })
}

/// One document's rendered data and the warnings of what the options let
/// through.
#[derive(Debug, PartialEq)]
struct RenderedDoc {
    data: Value,
    warnings: Vec<String>,
}

/// A document's rendered data; `None` for control documents. The name is
/// what [`LayeringSession::render`] counts as "recomputed".
#[salsa::tracked(returns(ref))]
fn rendered_data<'db>(
    db: &'db dyn Database,
    doc: LayerDoc<'db>,
) -> Result<Option<RenderedDoc>, LayeringError> {
    let document = doc.document(db);
    if document.is_control {
        return Ok(None);
    }
    let parent = match doc.parent(db) {
        None => None,
        Some(parent) => match rendered_data(db, parent) {
            Ok(rendered) => Some((
                &**parent.document(db),
                rendered.as_ref().map_or(&Value::Null, |r| &r.data),
            )),
            // The parent's own error is reported first (it is in an earlier
            // level); this copy only stops the descendants.
            Err(error) => return Err(error.clone()),
        },
    };
    let sources = doc.sources(db);
    let source = |schema: &str, name: &str| {
        let (_, source) = sources
            .iter()
            .find(|((s, n), _)| s == schema && n == name)?;
        let data = &rendered_data(db, *source).as_ref().ok()?.as_ref()?.data;
        Some(SourceData {
            reference: &source.document(db).reference,
            data,
        })
    };
    render_document(document, parent, source, doc.options(db))
        .map(|(data, warnings)| Some(RenderedDoc { data, warnings }))
}

/// The output node of `doc` with its rendered `data`, redacted as the
/// options say.
fn output_node(db: &dyn Database, doc: LayerDoc<'_>, data: &Value) -> Node {
    let mut node = with_data(doc.node(db), data.to_node());
    if doc.options(db).redact_encrypted {
        let sources = doc.sources(db);
        let encrypted = super::redact::encrypted_positions(doc.document(db), |schema, name| {
            sources.iter().any(|((s, n), source)| {
                s == schema && n == name && source.document(db).is_encrypted
            })
        });
        super::redact::redact_node(&mut node, &encrypted);
    }
    node
}

/// An output document's YAML as it follows an earlier document in the
/// stream, and whether it ended plainly (so the next one can follow it).
#[derive(Debug, PartialEq, Eq)]
struct EncodedDocument {
    text: String,
    ended_plainly: bool,
}

#[salsa::tracked(returns(ref))]
fn encoded_document<'db>(db: &'db dyn Database, doc: LayerDoc<'db>) -> Option<EncodedDocument> {
    let data = &rendered_data(db, doc).as_ref().ok()?.as_ref()?.data;
    let node = output_node(db, doc, data);
    let mut text = String::new();
    let mut encoder = Encoder::continuing(&mut text);
    encoder.encode(&node);
    let ended_plainly = encoder.ended_plainly();
    Some(EncodedDocument {
        text,
        ended_plainly,
    })
}

/// `node` with its `data` entry set to `data`, as [`Node::set`] would, but
/// copying only the entries that stay (the old data can be large).
fn with_data(node: &Node, data: Node) -> Node {
    if node.kind != NodeKind::Mapping {
        return node.clone();
    }
    let mut copy = node.clone_without_content();
    copy.content.reserve_exact(node.content.len() + 2);
    let data_index = node.key_index("data");
    let mut data = Some(data);
    for (i, child) in node.content.iter().enumerate() {
        if Some(i) == data_index.map(|k| k + 1) {
            if let Some(data) = data.take() {
                copy.content.push(data);
            }
        } else {
            copy.content.push(child.clone());
        }
    }
    if let Some(data) = data {
        copy.content.push(Node::new_string("data"));
        copy.content.push(data);
    }
    copy
}

/// The salsa database of a session. `storage` is the last field, as salsa
/// requires for its drop order.
#[salsa::db]
#[derive(Clone)]
struct LayeringDb {
    /// Query executions since the last [`LayeringSession::render`] started.
    executed: Arc<Mutex<Vec<DatabaseKeyIndex>>>,
    storage: salsa::Storage<Self>,
}

#[salsa::db]
impl Database for LayeringDb {}

impl LayeringDb {
    fn new() -> LayeringDb {
        let executed: Arc<Mutex<Vec<DatabaseKeyIndex>>> = Arc::default();
        let log = Arc::clone(&executed);
        let storage = salsa::Storage::new(Some(Box::new(move |event: salsa::Event| {
            if let salsa::EventKind::WillExecute { database_key } = event.kind
                && let Ok(mut log) = log.lock()
            {
                log.push(database_key);
            }
        })));
        LayeringDb { executed, storage }
    }
}

/// The result of one [`LayeringSession::render`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerRender {
    /// Exactly what `krender layer render` prints for the same files.
    pub output_bytes: Vec<u8>,
    /// Documents whose rendered data was computed in this render (all of
    /// them on the first render; after an edit, the edited documents, their
    /// descendants and their substitution dependants).
    pub recomputed: usize,
    /// `schema/name` of each recomputed document, sorted.
    pub recomputed_documents: Vec<String>,
    /// Files parsed in this render.
    pub reparsed_files: usize,
    /// Documents in the set (after Deckhand's de-duplication).
    pub documents: usize,
    /// The warnings of what the options let through, as the batch command
    /// prints them.
    pub warnings: Vec<String>,
}

/// A layered document set kept in memory for repeated renders (`krender
/// watch`): create it from the command's paths, report file changes with
/// [`LayeringSession::apply_change`], and call [`LayeringSession::render`].
pub struct LayeringSession {
    db: LayeringDb,
    set: FileSet,
    roots: Vec<PathBuf>,
    /// Every known file, keyed by (root index, path) so that iteration is
    /// the batch command's reading order.
    files: BTreeMap<(usize, PathBuf), SourceFile>,
}

impl LayeringSession {
    /// Reads the files under `paths` (files or directories, as
    /// `krender layer render` takes them).
    pub fn new(paths: &[PathBuf]) -> Result<LayeringSession, LayeringError> {
        LayeringSession::with_options(paths, SubstitutionOptions::default())
    }

    /// [`LayeringSession::new`], rendering under `options` as
    /// [`super::render_paths_with`] does.
    pub fn with_options(
        paths: &[PathBuf],
        options: SubstitutionOptions,
    ) -> Result<LayeringSession, LayeringError> {
        let db = LayeringDb::new();
        let mut files = BTreeMap::new();
        for (root_index, root) in paths.iter().enumerate() {
            let mut found = Vec::new();
            collect_files(root, &mut found)?;
            for path in found {
                let bytes = std::fs::read(&path).map_err(|error| LayeringError::Read {
                    path: path.display().to_string(),
                    message: error.to_string(),
                })?;
                let contents = FileContents::from_bytes(Some(bytes));
                let file = SourceFile::new(&db, path.clone(), contents);
                files.entry((root_index, path)).or_insert(file);
            }
        }
        let set = FileSet::new(&db, Vec::new(), options);
        let mut session = LayeringSession {
            db,
            set,
            roots: paths.to_vec(),
            files,
        };
        session.update_file_set();
        Ok(session)
    }

    /// Records that `path` now holds `bytes` (`None`: it was deleted). A new
    /// `.yaml`/`.yml` file under one of the session's directories joins the
    /// set; other paths are ignored. Returns whether the set changed.
    pub fn apply_change(&mut self, path: &Path, bytes: Option<Vec<u8>>) -> bool {
        let contents = FileContents::from_bytes(bytes);
        // Watchers report absolute paths while the roots may be relative:
        // compare absolute forms, keep the roots' form for display (the
        // batch command names files as it reached them from its arguments).
        let wanted = absolute(path);
        if let Some(file) = self
            .files
            .iter()
            .find(|((_, known), _)| known == path || absolute(known) == wanted)
            .map(|(_, file)| *file)
        {
            if file.contents(&self.db) == &contents {
                return false;
            }
            file.set_contents(&mut self.db).to(contents);
            return true;
        }
        if contents == FileContents::Missing {
            return false;
        }
        let is_yaml = path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml");
        let Some((root_index, display)) =
            self.roots.iter().enumerate().find_map(|(index, root)| {
                let root_absolute = absolute(root);
                if root_absolute == wanted {
                    return Some((index, root.clone()));
                }
                let relative = wanted.strip_prefix(&root_absolute).ok()?;
                is_yaml.then(|| (index, root.join(relative)))
            })
        else {
            return false;
        };
        let file = SourceFile::new(&self.db, display.clone(), contents);
        self.files.insert((root_index, display), file);
        self.update_file_set();
        true
    }

    fn update_file_set(&mut self) {
        let files: Vec<SourceFile> = self.files.values().copied().collect();
        if self.set.files(&self.db) != &files {
            self.set.set_files(&mut self.db).to(files);
        }
    }

    /// Renders the set: the bytes `krender layer render` would print for
    /// the files as they are now, or its error.
    pub fn render(&mut self) -> Result<LayerRender, LayeringError> {
        self.take_executed();
        let result = self.render_inner();
        let executed = self.take_executed();
        let (output_bytes, documents, warnings) = result?;
        let mut recomputed_documents = Vec::new();
        let mut reparsed_files = 0;
        let plan_docs = self.plan_documents_by_id();
        for key in executed {
            let name = self.db.ingredient_debug_name(key.ingredient_index());
            if name == "rendered_data" {
                if let Some(label) = plan_docs.get(&key.key_index()) {
                    recomputed_documents.push(label.clone());
                }
            } else if name == "parse_file" {
                reparsed_files += 1;
            }
        }
        recomputed_documents.sort();
        Ok(LayerRender {
            output_bytes,
            recomputed: recomputed_documents.len(),
            recomputed_documents,
            reparsed_files,
            documents,
            warnings,
        })
    }

    fn take_executed(&self) -> Vec<DatabaseKeyIndex> {
        self.db
            .executed
            .lock()
            .map(|mut log| std::mem::take(&mut *log))
            .unwrap_or_default()
    }

    /// `schema/name` of every document of the current plan, by salsa id.
    fn plan_documents_by_id(&self) -> BTreeMap<salsa::Id, String> {
        let db = &self.db;
        let Ok(plan) = layer_plan(db, self.set) else {
            return BTreeMap::new();
        };
        plan.levels
            .iter()
            .flatten()
            .map(|doc| {
                let (schema, _, name) = doc.identity(db);
                (doc.as_id(), format!("{schema}/{name}"))
            })
            .collect()
    }

    fn render_inner(&self) -> Result<(Vec<u8>, usize, Vec<String>), LayeringError> {
        let db = &self.db;
        // Parse the files in parallel first (memoized; unchanged files are
        // only checked), so the plan below finds them ready.
        self.set
            .files(db)
            .par_iter()
            .for_each_with(db.clone(), |db, file| {
                let _ = parse_file(db, *file);
            });
        let plan = layer_plan(db, self.set).as_ref().map_err(Clone::clone)?;
        if plan.shared {
            let documents = plan.levels.iter().map(Vec::len).sum();
            let (bytes, warnings) = self.render_whole()?;
            return Ok((bytes, documents, warnings));
        }
        // Warm each level in parallel. The error is the batch command's:
        // of the documents that failed although their parent and sources
        // rendered, the first in Deckhand's order.
        let mut first: Option<(usize, &LayeringError)> = None;
        for (level, ranks) in plan.levels.iter().zip(&plan.ranks) {
            level.par_iter().for_each_with(db.clone(), |db, doc| {
                let _ = rendered_data(db, *doc);
            });
            for (doc, &rank) in level.iter().zip(ranks) {
                let Err(error) = rendered_data(db, *doc) else {
                    continue;
                };
                let blocked = doc
                    .parent(db)
                    .into_iter()
                    .chain(doc.sources(db).iter().map(|(_, source)| *source))
                    .any(|need| rendered_data(db, need).is_err());
                if !blocked && first.is_none_or(|(best, _)| rank < best) {
                    first = Some((rank, error));
                }
            }
        }
        if let Some((_, error)) = first {
            return Err(error.clone());
        }
        plan.outputs
            .par_iter()
            .for_each_with(db.clone(), |db, doc| {
                let _ = encoded_document(db, *doc);
            });
        let documents = plan.levels.iter().map(Vec::len).sum();
        // In the batch command's order: level by level, in index order.
        let warnings = plan
            .levels
            .iter()
            .flatten()
            .filter_map(|doc| rendered_data(db, *doc).as_ref().ok()?.as_ref())
            .flat_map(|rendered| rendered.warnings.iter().cloned())
            .collect();
        Ok((self.assemble(plan), documents, warnings))
    }

    /// Joins the output documents. The first is encoded as a stream's first
    /// document; the others are their cached encodings, valid because each
    /// earlier one ended plainly. Otherwise (a kept block scalar at the end
    /// of a document, rare) everything is encoded in one stream.
    fn assemble(&self, plan: &LayerPlan<'_>) -> Vec<u8> {
        let db = &self.db;
        let mut out = String::new();
        let mut first = true;
        let mut plain = true;
        for doc in &plan.outputs {
            if first {
                let Some(Some(rendered)) = rendered_data(db, *doc).as_ref().ok() else {
                    continue;
                };
                let node = output_node(db, *doc, &rendered.data);
                let mut encoder = Encoder::new(&mut out);
                encoder.encode(&node);
                plain = encoder.ended_plainly();
                first = false;
                continue;
            }
            match encoded_document(db, *doc) {
                Some(encoded) if plain => {
                    out.push_str(&encoded.text);
                    plain = encoded.ended_plainly;
                }
                Some(_) => return self.encode_whole(plan).into_bytes(),
                None => {}
            }
        }
        out.into_bytes()
    }

    /// The batch command's render of the whole set, from the parsed files
    /// (for sets that share substituted values).
    fn render_whole(&self) -> Result<(Vec<u8>, Vec<String>), LayeringError> {
        let db = &self.db;
        let mut inputs = Vec::new();
        let mut nodes = Vec::new();
        for &file in self.set.files(db) {
            for document in parse_file(db, file).as_ref().map_err(Clone::clone)? {
                inputs.push(document.input.clone());
                nodes.push(Node::clone(&document.node));
            }
        }
        let (rendered, warnings) = render::render_with(&inputs, self.set.options(db))?;
        Ok((
            super::encode_output(&mut nodes, &rendered).into_bytes(),
            warnings,
        ))
    }

    fn encode_whole(&self, plan: &LayerPlan<'_>) -> String {
        let db = &self.db;
        let mut out = String::new();
        let mut encoder = Encoder::new(&mut out);
        for doc in &plan.outputs {
            if let Ok(Some(rendered)) = rendered_data(db, *doc) {
                encoder.encode(&output_node(db, *doc, &rendered.data));
            }
        }
        out
    }
}

/// `path` made absolute against the current directory, without touching
/// the file system (the file may be gone); unchanged if that fails.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}
