//! The Kptfile: kpt's `kpt.dev/v1` schema, decoded strictly as kpt decodes
//! it (unknown fields and kind mismatches are errors with go-yaml's texts),
//! its validation rules and messages, the typed pipeline the hydrator runs,
//! and the §11 re-marshalling of the root Kptfile with a render status.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::gostruct::{self, GoField, GoStruct, GoType, GoValue, StructValue, field, inline_field};
use super::reader::SourceLocation;
use crate::yaml::node::Node;

/// The catalog prefix short image names are expanded with.
pub const DEFAULT_IMAGE_PREFIX: &str = "ghcr.io/kptdev/krm-functions-catalog/";
/// Root Kptfile annotation selecting breadth-first rendering.
pub const BFS_RENDERING_ANNOTATION: &str = "kpt.dev/bfs-rendering";
/// Root Kptfile annotation asking to save partial results on failure.
pub const SAVE_ON_RENDER_FAILURE_ANNOTATION: &str = "kpt.dev/save-on-render-failure";
/// The Kptfile's file name.
pub const KPTFILE_NAME: &str = "Kptfile";

/// Go's `string`.
pub(crate) const STRING: GoType = GoType::Str("string");

/// kyaml's `yaml.TypeMeta` (also in the catalog's Kptfile copies).
pub(crate) static TYPE_META: GoStruct = GoStruct {
    name: "yaml.TypeMeta",
    fields: &[field!("apiVersion", STRING), field!("kind", STRING)],
};
/// kyaml's `yaml.NameMeta`.
pub(crate) static NAME_META: GoStruct = GoStruct {
    name: "yaml.NameMeta",
    fields: &[field!("name", STRING), field!("namespace", STRING)],
};
/// kyaml's `yaml.ObjectMeta`.
pub(crate) static OBJECT_META: GoStruct = GoStruct {
    name: "yaml.ObjectMeta",
    fields: &[
        inline_field!(&NAME_META),
        field!("labels", GoType::StrMap),
        field!("annotations", GoType::StrMap),
    ],
};
/// `v1.Git` (shared with the catalog's older copies of the schema).
pub(crate) static GIT: GoStruct = GoStruct {
    name: "v1.Git",
    fields: &[
        field!("repo", STRING),
        field!("directory", STRING),
        field!("ref", STRING),
    ],
};
/// `v1.GitLock` (shared with the catalog's older copies of the schema).
pub(crate) static GIT_LOCK: GoStruct = GoStruct {
    name: "v1.GitLock",
    fields: &[
        field!("repo", STRING),
        field!("directory", STRING),
        field!("ref", STRING),
        field!("commit", STRING),
    ],
};
static GENERIC_LOCK: GoStruct = GoStruct {
    name: "v1.GenericLock",
    fields: &[
        field!("storeID", STRING),
        field!("resourceID", STRING),
        field!("resourceVersion", STRING),
    ],
};
/// `v1.Upstream` (shared with the catalog's older copies of the schema).
pub(crate) static UPSTREAM: GoStruct = GoStruct {
    name: "v1.Upstream",
    fields: &[
        field!("type", GoType::Str("v1.OriginType")),
        field!("git", GoType::Struct(&GIT), pointer),
        field!("updateStrategy", GoType::Str("v1.UpdateStrategyType")),
    ],
};
static LOCATOR: GoStruct = GoStruct {
    name: "v1.Locator",
    fields: &[
        field!("type", GoType::Str("v1.OriginType")),
        field!("git", GoType::Struct(&GIT_LOCK), pointer),
        field!("generic", GoType::Struct(&GENERIC_LOCK), pointer),
    ],
};
static READINESS_GATE: GoStruct = GoStruct {
    name: "v1.ReadinessGate",
    fields: &[field!("conditionType", STRING, required)],
};
static STRINGS: GoType = STRING;
static READINESS_GATE_TYPE: GoType = GoType::Struct(&READINESS_GATE);
static PACKAGE_INFO: GoStruct = GoStruct {
    name: "v1.PackageInfo",
    fields: &[
        field!("site", STRING),
        field!("emails", GoType::List("[]string", &STRINGS)),
        field!("license", STRING),
        field!("licenseFile", STRING),
        field!("description", STRING),
        field!("keywords", GoType::List("[]string", &STRINGS)),
        field!("man", STRING),
        field!(
            "readinessGates",
            GoType::List("[]v1.ReadinessGate", &READINESS_GATE_TYPE)
        ),
    ],
};
static SELECTOR: GoStruct = GoStruct {
    name: "v1.Selector",
    fields: &[
        field!("apiVersion", STRING),
        field!("kind", STRING),
        field!("name", STRING),
        field!("namespace", STRING),
        field!("labels", GoType::StrMap),
        field!("annotations", GoType::StrMap),
    ],
};
static SELECTOR_TYPE: GoType = GoType::Struct(&SELECTOR);
static FUNCTION: GoStruct = GoStruct {
    name: "v1.Function",
    fields: &[
        field!("image", STRING),
        field!("exec", STRING),
        field!("configPath", STRING),
        field!("configMap", GoType::StrMap),
        field!("name", STRING),
        field!("tag", STRING),
        field!("selectors", GoType::List("[]v1.Selector", &SELECTOR_TYPE)),
        field!("exclude", GoType::List("[]v1.Selector", &SELECTOR_TYPE)),
    ],
};
static FUNCTION_TYPE: GoType = GoType::Struct(&FUNCTION);
static PIPELINE: GoStruct = GoStruct {
    name: "v1.Pipeline",
    fields: &[
        field!("mutators", GoType::List("[]v1.Function", &FUNCTION_TYPE)),
        field!("validators", GoType::List("[]v1.Function", &FUNCTION_TYPE)),
    ],
};
/// `v1.Inventory` (shared with the catalog's older copies of the schema).
pub(crate) static INVENTORY: GoStruct = GoStruct {
    name: "v1.Inventory",
    fields: &[
        field!("namespace", STRING),
        field!("name", STRING),
        field!("inventoryID", STRING),
        field!("labels", GoType::StrMap),
        field!("annotations", GoType::StrMap),
    ],
};
static CONDITION: GoStruct = GoStruct {
    name: "v1.Condition",
    fields: &[
        field!("type", STRING, required),
        field!("status", GoType::Str("v1.ConditionStatus"), required),
        field!("reason", STRING),
        field!("message", STRING),
    ],
};
static CONDITION_TYPE: GoType = GoType::Struct(&CONDITION);
static RESOURCE_REF: GoStruct = GoStruct {
    name: "v1.ResourceRef",
    fields: &[
        field!("apiVersion", STRING),
        field!("kind", STRING),
        field!("name", STRING),
        field!("namespace", STRING),
    ],
};
static FIELD_REF: GoStruct = GoStruct {
    name: "v1.FieldRef",
    fields: &[
        field!("path", STRING),
        field!("currentValue", STRING),
        field!("proposedValue", STRING),
    ],
};
static FILE_REF: GoStruct = GoStruct {
    name: "v1.FileRef",
    fields: &[field!("path", STRING), field!("index", GoType::Int)],
};
/// `v1.ResultItem`: one structured result in the render status.
pub(crate) static RESULT_ITEM: GoStruct = GoStruct {
    name: "v1.ResultItem",
    fields: &[
        field!("message", STRING),
        field!("severity", STRING),
        field!("resourceRef", GoType::Struct(&RESOURCE_REF), pointer),
        field!("field", GoType::Struct(&FIELD_REF), pointer),
        field!("file", GoType::Struct(&FILE_REF), pointer),
    ],
};
static RESULT_ITEM_TYPE: GoType = GoType::Struct(&RESULT_ITEM);
/// `v1.PipelineStepResult`: one step of the render status.
pub(crate) static PIPELINE_STEP_RESULT: GoStruct = GoStruct {
    name: "v1.PipelineStepResult",
    fields: &[
        field!("name", STRING),
        field!("image", STRING),
        field!("exec", STRING),
        field!("executionError", STRING),
        field!("stderr", STRING),
        field!("exitCode", GoType::Int, required),
        field!(
            "results",
            GoType::List("[]v1.ResultItem", &RESULT_ITEM_TYPE)
        ),
        field!(
            "errorResults",
            GoType::List("[]v1.ResultItem", &RESULT_ITEM_TYPE)
        ),
    ],
};
static PIPELINE_STEP_RESULT_TYPE: GoType = GoType::Struct(&PIPELINE_STEP_RESULT);
static RENDER_STATUS: GoStruct = GoStruct {
    name: "v1.RenderStatus",
    fields: &[
        field!(
            "mutationSteps",
            GoType::List("[]v1.PipelineStepResult", &PIPELINE_STEP_RESULT_TYPE)
        ),
        field!(
            "validationSteps",
            GoType::List("[]v1.PipelineStepResult", &PIPELINE_STEP_RESULT_TYPE)
        ),
        field!("errorSummary", STRING),
    ],
};
static STATUS: GoStruct = GoStruct {
    name: "v1.Status",
    fields: &[
        field!(
            "conditions",
            GoType::List("[]v1.Condition", &CONDITION_TYPE)
        ),
        field!("renderStatus", GoType::Struct(&RENDER_STATUS), pointer),
    ],
};
static KPTFILE: GoStruct = GoStruct {
    name: "v1.KptFile",
    fields: &[
        inline_field!(&TYPE_META),
        field!("metadata", GoType::Struct(&OBJECT_META)),
        field!("upstream", GoType::Struct(&UPSTREAM), pointer),
        field!("upstreamLock", GoType::Struct(&LOCATOR), pointer),
        field!("info", GoType::Struct(&PACKAGE_INFO), pointer),
        field!("pipeline", GoType::Struct(&PIPELINE), pointer),
        field!("inventory", GoType::Struct(&INVENTORY), pointer),
        field!("status", GoType::Struct(&STATUS), pointer),
    ],
};

/// Why a Kptfile could not be read or is not valid. `Display` is the text
/// kpt prints after `Error: ` (or alone, for validation errors).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum KptfileError {
    /// The directory has no Kptfile.
    #[error("No Kptfile found at {:?}.", .dir.display().to_string())]
    #[diagnostic(code(krender::kptfile::missing))]
    Missing {
        /// The package directory.
        dir: PathBuf,
    },
    /// The Kptfile is not valid YAML, or does not decode into the schema.
    #[error("Kptfile at {:?} can't be read.\n\nDetails:\n{details}", .dir.display().to_string())]
    #[diagnostic(code(krender::kptfile::unreadable))]
    Unreadable {
        /// The package directory.
        dir: PathBuf,
        /// The go-yaml error text.
        details: String,
        /// Where in the Kptfile, when the error points at a place.
        location: Option<SourceLocation>,
    },
    /// A `kpt.dev/v1alpha1` or `v1alpha2` Kptfile.
    #[error(
        "Kptfile at {:?} has an old version ({:?}) of the Kptfile schema.\nPlease update the package to the latest format by following https://kpt.dev/installation/migration.",
        .dir.display().to_string(), .version
    )]
    #[diagnostic(code(krender::kptfile::legacy))]
    Legacy {
        /// The package directory.
        dir: PathBuf,
        /// `v1alpha1` or `v1alpha2`.
        version: String,
    },
    /// Not a Kptfile: another kind, or an apiVersion kpt does not know.
    #[error(
        "Kptfile at {:?} has an unknown resource type ({:?}).",
        .dir.display().to_string(), .gvk
    )]
    #[diagnostic(code(krender::kptfile::unknown_type))]
    UnknownType {
        /// The package directory.
        dir: PathBuf,
        /// The group, version and kind found, as Kubernetes prints them
        /// (`kpt.dev/v1, Kind=ConfigMap`).
        gvk: String,
        /// The `apiVersion` (or `kind`) that is not a Kptfile's.
        location: Option<SourceLocation>,
    },
    /// A rule of kpt's Kptfile validation failed.
    #[error("{}", validation_text(.field, .value.as_deref(), .reason))]
    #[diagnostic(code(krender::kptfile::invalid))]
    Invalid {
        /// The field path, e.g. `pipeline.mutators[0].configPath`.
        field: String,
        /// The offending value, if kpt shows one.
        value: Option<String>,
        /// Why it is invalid.
        reason: String,
    },
}

fn validation_text(field: &str, value: Option<&str>, reason: &str) -> String {
    let mut text = format!("Kptfile is invalid:\nField: `{field}`\n");
    if let Some(value) = value {
        text.push_str(&format!("Value: {value:?}\n"));
    }
    text.push_str(&format!("Reason: {reason}\n"));
    text
}

/// A resource selector of a pipeline step (`selectors` / `exclude`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// `apiVersion` to match, if set.
    pub api_version: String,
    /// `kind` to match, if set.
    pub kind: String,
    /// `metadata.name` to match, if set.
    pub name: String,
    /// `metadata.namespace` to match, if set.
    pub namespace: String,
    /// Labels that must all be present with these values.
    pub labels: BTreeMap<String, String>,
    /// Annotations that must all be present with these values.
    pub annotations: BTreeMap<String, String>,
}

/// One pipeline step as declared in the Kptfile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Function {
    /// `image:` as written.
    pub image: String,
    /// `exec:` as written.
    pub exec: String,
    /// `configPath:`.
    pub config_path: String,
    /// `configMap:` (keys sorted, as the wire needs them).
    pub config_map: BTreeMap<String, String>,
    /// `name:`.
    pub name: String,
    /// `tag:` (a semver constraint; resolving it needs a registry).
    pub tag: String,
    /// `selectors:`.
    pub selectors: Vec<Selector>,
    /// `exclude:`.
    pub exclude: Vec<Selector>,
}

impl Function {
    /// True when the step declares `selectors` or `exclude` (kpt then shows
    /// the selected resource count and uses temporary resource ids).
    pub fn has_selection(&self) -> bool {
        !self.selectors.is_empty() || !self.exclude.is_empty()
    }

    /// The function's short name as kpt's validation messages use it: the
    /// last path segment of the image, without tag or digest.
    pub fn short_name(&self) -> String {
        let image = if self.image.is_empty() {
            &self.exec
        } else {
            &self.image
        };
        let last = image.rsplit('/').next().unwrap_or(image);
        let last = last.split('@').next().unwrap_or(last);
        last.split(':').next().unwrap_or(last).to_owned()
    }
}

/// The Kptfile's pipeline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pipeline {
    /// Mutators in order.
    pub mutators: Vec<Function>,
    /// Validators in order.
    pub validators: Vec<Function>,
}

impl Pipeline {
    /// True when the pipeline declares no functions.
    pub fn is_empty(&self) -> bool {
        self.mutators.is_empty() && self.validators.is_empty()
    }

    /// The `configPath` of every step that has one: files the step reads
    /// from disk itself, outside its input resources.
    pub fn config_paths(&self) -> impl Iterator<Item = &str> {
        self.mutators
            .iter()
            .chain(&self.validators)
            .map(|function| function.config_path.as_str())
            .filter(|path| !path.is_empty())
    }
}

/// A decoded Kptfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kptfile {
    /// The Go struct value (for re-marshalling).
    value: StructValue,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// The pipeline (empty when absent).
    pub pipeline: Pipeline,
}

fn str_of(value: Option<&GoValue>) -> String {
    match value {
        Some(GoValue::Str(text)) => text.clone(),
        _ => String::new(),
    }
}

fn map_of(value: Option<&GoValue>) -> BTreeMap<String, String> {
    match value {
        Some(GoValue::Map(Some(map))) => map.clone(),
        _ => BTreeMap::new(),
    }
}

fn list_of(value: Option<&GoValue>) -> Vec<&StructValue> {
    match value {
        Some(GoValue::List(Some(items))) => items
            .iter()
            .filter_map(|item| match item {
                GoValue::Struct(Some(s)) => Some(s),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn selector_of(value: &StructValue) -> Selector {
    Selector {
        api_version: value.str(&SELECTOR, "apiVersion").to_owned(),
        kind: value.str(&SELECTOR, "kind").to_owned(),
        name: value.str(&SELECTOR, "name").to_owned(),
        namespace: value.str(&SELECTOR, "namespace").to_owned(),
        labels: map_of(value.get(&SELECTOR, "labels")),
        annotations: map_of(value.get(&SELECTOR, "annotations")),
    }
}

fn function_of(value: &StructValue) -> Function {
    Function {
        image: value.str(&FUNCTION, "image").to_owned(),
        exec: value.str(&FUNCTION, "exec").to_owned(),
        config_path: value.str(&FUNCTION, "configPath").to_owned(),
        config_map: map_of(value.get(&FUNCTION, "configMap")),
        name: value.str(&FUNCTION, "name").to_owned(),
        tag: value.str(&FUNCTION, "tag").to_owned(),
        selectors: list_of(value.get(&FUNCTION, "selectors"))
            .into_iter()
            .map(selector_of)
            .collect(),
        exclude: list_of(value.get(&FUNCTION, "exclude"))
            .into_iter()
            .map(selector_of)
            .collect(),
    }
}

/// Decoded Kptfiles by package directory and blake3 of their bytes: a
/// render reads every Kptfile twice (the scheduler's scan, then kpt's walk),
/// and `watch` re-reads them all on every change.
static DECODED: std::sync::LazyLock<std::sync::Mutex<DecodedKptfiles>> =
    std::sync::LazyLock::new(Default::default);

/// Kptfiles by (package directory, blake3 of the bytes).
type DecodedKptfiles = std::collections::HashMap<(PathBuf, [u8; 32]), Kptfile>;

/// Entries past which [`DECODED`] starts over (a bound for long watches).
const DECODED_MAX: usize = 50_000;

impl KptfileError {
    /// Where in the Kptfile the error is, when it points at a place.
    pub fn location(&self) -> Option<SourceLocation> {
        match self {
            KptfileError::Unreadable { location, .. }
            | KptfileError::UnknownType { location, .. } => location.clone(),
            _ => None,
        }
    }
}

impl Kptfile {
    /// [`Kptfile::parse`] of a Kptfile's bytes (lossily UTF-8), remembering
    /// what decoded: the same bytes in the same directory decode once per
    /// process. Errors are not remembered.
    pub fn parse_bytes(bytes: &[u8], dir: &Path) -> Result<Kptfile, KptfileError> {
        let key = (dir.to_path_buf(), *blake3::hash(bytes).as_bytes());
        if let Ok(decoded) = DECODED.lock()
            && let Some(kptfile) = decoded.get(&key)
        {
            return Ok(kptfile.clone());
        }
        // Not lossily: a Kptfile go-yaml cannot read is an error, and
        // never rewritten (its status) with its bad bytes replaced.
        let text =
            crate::pkg::reader::decode_text(bytes).map_err(|reason| KptfileError::Unreadable {
                dir: dir.to_path_buf(),
                details: format!("yaml: {reason}"),
                location: None,
            })?;
        let kptfile = Kptfile::parse(&text, dir)?;
        if let Ok(mut decoded) = DECODED.lock() {
            if decoded.len() >= DECODED_MAX {
                decoded.clear();
            }
            decoded.insert(key, kptfile.clone());
        }
        Ok(kptfile)
    }

    /// Parses a Kptfile's text. `dir` is the package directory, for messages.
    pub fn parse(text: &str, dir: &Path) -> Result<Kptfile, KptfileError> {
        let file = dir.join(KPTFILE_NAME);
        let unreadable = |details: String, location| KptfileError::Unreadable {
            dir: dir.to_path_buf(),
            details,
            location,
        };
        let document = crate::yaml::parse_document(text).map_err(|error| {
            let location = SourceLocation::at(&file, text, error.offset, error.problem());
            unreadable(error.to_string(), Some(location))
        })?;
        let Some(document) = document else {
            return Err(unreadable("EOF".to_owned(), None));
        };
        Kptfile::from_node(&document, dir)
    }

    /// Decodes a parsed Kptfile document.
    pub fn from_node(document: &Node, dir: &Path) -> Result<Kptfile, KptfileError> {
        // kpt checks the type with a lenient decode before the strict one
        // (`checkKptfileVersion`): kpt.dev/v1 Kptfile, a known old
        // version, or an unknown resource type.
        let root = document.root();
        let api_version = root.get_str(&["apiVersion"]).unwrap_or_default();
        let kind = root.get_str(&["kind"]).unwrap_or_default();
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        if (group, version, kind) != ("kpt.dev", "v1", "Kptfile") {
            if group == "kpt.dev" && kind == "Kptfile" && matches!(version, "v1alpha1" | "v1alpha2")
            {
                return Err(KptfileError::Legacy {
                    dir: dir.to_path_buf(),
                    version: version.to_owned(),
                });
            }
            // Point at what is not a Kptfile's: the apiVersion, else the
            // kind, else the document.
            let (field, problem) = if group != "kpt.dev" || version != "v1" {
                ("apiVersion", "not kpt.dev/v1")
            } else {
                ("kind", "not Kptfile")
            };
            let node = root.get(field).unwrap_or(root);
            let location = (node.line > 0).then(|| SourceLocation {
                path: dir.join(KPTFILE_NAME),
                line: node.line as usize,
                column: (node.column as usize).max(1),
                problem: problem.to_owned(),
            });
            return Err(KptfileError::UnknownType {
                dir: dir.to_path_buf(),
                gvk: format!("{group}/{version}, Kind={kind}"),
                location,
            });
        }
        let value =
            gostruct::decode(document, &KPTFILE).map_err(|errors| KptfileError::Unreadable {
                dir: dir.to_path_buf(),
                details: errors.to_string(),
                location: errors.first_line().map(|(line, problem)| SourceLocation {
                    path: dir.join(KPTFILE_NAME),
                    line,
                    column: errors.first_column(),
                    problem,
                }),
            })?;
        Ok(Kptfile::from_value(value))
    }

    fn from_value(value: StructValue) -> Kptfile {
        let metadata = match value.get(&KPTFILE, "metadata") {
            Some(GoValue::Struct(Some(metadata))) => metadata.clone(),
            _ => StructValue::default(),
        };
        let pipeline = match value.get(&KPTFILE, "pipeline") {
            Some(GoValue::Struct(Some(pipeline))) => Pipeline {
                mutators: list_of(pipeline.get(&PIPELINE, "mutators"))
                    .into_iter()
                    .map(function_of)
                    .collect(),
                validators: list_of(pipeline.get(&PIPELINE, "validators"))
                    .into_iter()
                    .map(function_of)
                    .collect(),
            },
            _ => Pipeline::default(),
        };
        Kptfile {
            name: str_of(metadata.get(&OBJECT_META, "name")),
            annotations: map_of(metadata.get(&OBJECT_META, "annotations")),
            value,
            pipeline,
        }
    }

    /// True when the annotation `key` reads as kpt's `ConditionTrue`.
    pub fn annotation_is_true(&self, key: &str) -> bool {
        self.annotations
            .get(key)
            .is_some_and(|value| value.eq_ignore_ascii_case("true"))
    }

    /// Validates the Kptfile as kpt's `Validate` does when a package node is
    /// created: function references and function-config paths.
    pub fn validate(&self, pkg_dir: &Path) -> Result<(), KptfileError> {
        for (kind, functions) in [
            ("mutators", &self.pipeline.mutators),
            ("validators", &self.pipeline.validators),
        ] {
            for (index, function) in functions.iter().enumerate() {
                validate_function(function, &format!("pipeline.{kind}[{index}]"), pkg_dir)?;
            }
        }
        Ok(())
    }

    /// Replaces the `Rendered` condition and the render status, then writes
    /// the Kptfile as Go's marshaller would (wide sequences, struct order).
    pub(crate) fn with_render_status(
        &self,
        condition: &Condition,
        render_status: Option<StructValue>,
    ) -> Node {
        let mut value = self.value.clone();
        let mut status = match value.get(&KPTFILE, "status") {
            Some(GoValue::Struct(Some(status))) => status.clone(),
            _ => StructValue::default(),
        };
        let mut conditions: Vec<GoValue> = match status.get(&STATUS, "conditions") {
            Some(GoValue::List(Some(items))) => items
                .iter()
                .filter(|item| match item {
                    GoValue::Struct(Some(c)) => c.str(&CONDITION, "type") != "Rendered",
                    _ => true,
                })
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        let mut condition_value = StructValue::default();
        condition_value.set(&CONDITION, "type", GoValue::Str("Rendered".to_owned()));
        condition_value.set(
            &CONDITION,
            "status",
            GoValue::Str(condition.status.to_owned()),
        );
        condition_value.set(
            &CONDITION,
            "reason",
            GoValue::Str(condition.reason.to_owned()),
        );
        condition_value.set(
            &CONDITION,
            "message",
            GoValue::Str(condition.message.clone()),
        );
        conditions.push(GoValue::Struct(Some(condition_value)));
        status.set(&STATUS, "conditions", GoValue::List(Some(conditions)));
        status.set(&STATUS, "renderStatus", GoValue::Struct(render_status));
        value.set(&KPTFILE, "status", GoValue::Struct(Some(status)));
        gostruct::marshal(&value, &KPTFILE)
    }
}

/// A function as `fn eval --save` writes it into a Kptfile pipeline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedFunction {
    /// The (resolved) image, or empty.
    pub image: String,
    /// The exec command, or empty.
    pub exec: String,
    /// `configPath`, relative to the package, or empty.
    pub config_path: String,
    /// `configMap` (omitted when empty).
    pub config_map: BTreeMap<String, String>,
    /// `selectors` (omitted when empty).
    pub selectors: Vec<Selector>,
    /// `exclude` (omitted when empty).
    pub exclude: Vec<Selector>,
}

fn selector_value(selector: &Selector) -> GoValue {
    let mut value = StructValue::default();
    for (key, text) in [
        ("apiVersion", &selector.api_version),
        ("kind", &selector.kind),
        ("name", &selector.name),
        ("namespace", &selector.namespace),
    ] {
        if !text.is_empty() {
            value.set(&SELECTOR, key, GoValue::Str(text.clone()));
        }
    }
    for (key, map) in [
        ("labels", &selector.labels),
        ("annotations", &selector.annotations),
    ] {
        if !map.is_empty() {
            value.set(&SELECTOR, key, GoValue::Map(Some(map.clone())));
        }
    }
    GoValue::Struct(Some(value))
}

impl SavedFunction {
    fn value(&self) -> GoValue {
        let mut value = StructValue::default();
        if !self.image.is_empty() {
            value.set(&FUNCTION, "image", GoValue::Str(self.image.clone()));
        } else {
            value.set(&FUNCTION, "exec", GoValue::Str(self.exec.clone()));
        }
        if !self.config_path.is_empty() {
            value.set(
                &FUNCTION,
                "configPath",
                GoValue::Str(self.config_path.clone()),
            );
        }
        if !self.config_map.is_empty() {
            value.set(
                &FUNCTION,
                "configMap",
                GoValue::Map(Some(self.config_map.clone())),
            );
        }
        for (key, selectors) in [("selectors", &self.selectors), ("exclude", &self.exclude)] {
            if !selectors.is_empty() {
                let list = selectors.iter().map(selector_value).collect();
                value.set(&FUNCTION, key, GoValue::List(Some(list)));
            }
        }
        GoValue::Struct(Some(value))
    }
}

impl Kptfile {
    /// kpt's `fn eval --save` edit (`updateFnList`): in `pipeline.mutators`
    /// (`validators` when `validator`), every function with the same image
    /// or exec is replaced by `function`; without one it is appended. Returns
    /// the Kptfile marshalled as Go would (struct order, before kpt syncs
    /// comments and field order from the file) and whether a function was
    /// replaced ("Updated") rather than added.
    pub fn with_saved_function(&self, validator: bool, function: &SavedFunction) -> (Node, bool) {
        let list = if validator { "validators" } else { "mutators" };
        let mut value = self.value.clone();
        let mut pipeline = match value.get(&KPTFILE, "pipeline") {
            Some(GoValue::Struct(Some(pipeline))) => pipeline.clone(),
            _ => StructValue::default(),
        };
        let old = match pipeline.get(&PIPELINE, list) {
            Some(GoValue::List(Some(items))) => items.clone(),
            _ => Vec::new(),
        };
        let mut replaced = false;
        let mut functions: Vec<GoValue> = old
            .into_iter()
            .map(|item| {
                let same = match &item {
                    GoValue::Struct(Some(old)) => {
                        let image = old.str(&FUNCTION, "image");
                        let exec = old.str(&FUNCTION, "exec");
                        (!image.is_empty() && image == function.image)
                            || (!exec.is_empty() && exec == function.exec)
                    }
                    _ => false,
                };
                if same {
                    replaced = true;
                    function.value()
                } else {
                    item
                }
            })
            .collect();
        if !replaced {
            functions.push(function.value());
        }
        pipeline.set(&PIPELINE, list, GoValue::List(Some(functions)));
        value.set(&KPTFILE, "pipeline", GoValue::Struct(Some(pipeline)));
        (gostruct::marshal(&value, &KPTFILE), replaced)
    }
}

/// The `Rendered` condition kpt writes into the root Kptfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `"True"` or `"False"`.
    pub status: &'static str,
    /// `RenderSuccess` or `RenderFailed`.
    pub reason: &'static str,
    /// The error text with the root path replaced by `.` (empty on success).
    pub message: String,
}

/// Builds a `v1.RenderStatus` value from steps, for [`Kptfile::with_render_status`].
pub(crate) fn render_status_value(
    mutation_steps: Vec<StructValue>,
    validation_steps: Vec<StructValue>,
    error_summary: &str,
) -> StructValue {
    let mut value = StructValue::default();
    let wrap = |steps: Vec<StructValue>| {
        GoValue::List(Some(
            steps
                .into_iter()
                .map(|s| GoValue::Struct(Some(s)))
                .collect(),
        ))
    };
    value.set(&RENDER_STATUS, "mutationSteps", wrap(mutation_steps));
    value.set(&RENDER_STATUS, "validationSteps", wrap(validation_steps));
    value.set(
        &RENDER_STATUS,
        "errorSummary",
        GoValue::Str(error_summary.to_owned()),
    );
    value
}

fn invalid(field: String, value: Option<&str>, reason: impl Into<String>) -> KptfileError {
    KptfileError::Invalid {
        field,
        value: value.map(str::to_owned),
        reason: reason.into(),
    }
}

fn validate_function(function: &Function, field: &str, pkg_dir: &Path) -> Result<(), KptfileError> {
    if function.image.is_empty() && function.exec.is_empty() {
        return Err(invalid(
            format!("{field}.image"),
            Some(""),
            "must specify a functionConfig image or exec",
        ));
    }
    if !function.image.is_empty() && !function.exec.is_empty() {
        return Err(invalid(
            field.to_owned(),
            None,
            "must not specify both `image` and `exec` at the same time",
        ));
    }
    if !function.config_map.is_empty() && !function.config_path.is_empty() {
        return Err(invalid(
            field.to_owned(),
            None,
            "functionConfig must not specify both `configMap` and `configPath` at the same time",
        ));
    }
    if function.config_path.is_empty() {
        return Ok(());
    }
    let config_field = format!("{field}.configPath");
    let config_path = function.config_path.as_str();
    if Path::new(config_path).is_absolute() {
        return Err(invalid(
            config_field,
            Some(config_path),
            "path must be relative",
        ));
    }
    if escapes(config_path) {
        return Err(invalid(
            config_field,
            Some(config_path),
            "path must not be outside the package",
        ));
    }
    let file = pkg_dir.join(config_path);
    let text = match std::fs::read(&file) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) => {
            return Err(invalid(
                config_field,
                Some(config_path),
                format!(
                    "failed to open functionConfig from path {config_path:?}: open {}: {}",
                    file.display(),
                    io_error_text(&error)
                ),
            ));
        }
    };
    let documents = crate::yaml::parse_documents(&text).map_err(|error| {
        invalid(
            config_field.clone(),
            Some(config_path),
            format!("functionConfig {config_path:?}: {error}"),
        )
    })?;
    let documents: Vec<&Node> = documents.iter().filter(|d| !d.root().is_null()).collect();
    if documents.len() > 1 {
        return Err(invalid(
            config_field,
            Some(config_path),
            format!(
                "functionConfig {config_path:?} must not contain more than one config, got {}",
                documents.len()
            ),
        ));
    }
    if let Some(document) = documents.first()
        && let Err(reason) = check_krm(document)
    {
        return Err(invalid(
            config_field,
            Some(config_path),
            format!("functionConfig {config_path:?}: {reason}"),
        ));
    }
    Ok(())
}

/// kpt's `IsKRM`: a resource needs `apiVersion`, `kind` and `metadata.name`.
pub fn check_krm(resource: &Node) -> Result<(), &'static str> {
    let root = resource.root();
    let present = |path: &[&str]| root.get_str(path).is_some_and(|value| !value.is_empty());
    if !present(&["apiVersion"]) {
        return Err("resource must have `apiVersion`");
    }
    if !present(&["kind"]) {
        return Err("resource must have `kind`");
    }
    if !present(&["metadata", "name"]) {
        return Err("resource must have `metadata.name`");
    }
    Ok(())
}

/// Go's `os.PathError` texts for the errors a read can hit.
pub(crate) fn io_error_text(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => {
            let text = error.to_string();
            // Rust appends " (os error N)"; Go does not.
            match text.find(" (os error") {
                Some(cut) => text[..cut].to_lowercase(),
                None => text,
            }
        }
    }
}

/// True when a relative slash path leaves its base directory.
pub(crate) fn escapes(path: &str) -> bool {
    let mut depth: i64 = 0;
    for component in Path::new(path).components() {
        match component {
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            Component::Normal(_) => depth += 1,
            _ => {}
        }
    }
    false
}

/// Expands a short image name (`set-labels:v1`) with the catalog prefix, as
/// kpt's `ResolveToImage` does: names without a `/` get `prefix`.
pub fn resolve_image(image: &str, prefix: &str) -> String {
    if image.contains('/') {
        return image.to_owned();
    }
    let mut prefix = prefix.to_owned();
    if !prefix.is_empty() && !prefix.ends_with('/') {
        prefix.push('/');
    }
    format!("{prefix}{image}")
}

/// Adds `:latest` to an image reference without tag or digest.
pub fn with_default_tag(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    if last.contains(':') || last.contains('@') {
        image.to_owned()
    } else {
        format!("{image}:latest")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kpt's `checkKptfileVersion` texts, checked against kpt itself.
    #[test]
    fn only_kpt_dev_v1_kptfiles_decode() {
        let dir = Path::new("/pkg");
        let unknown = |text: &str| {
            Kptfile::parse(text, dir)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            unknown("apiVersion: kpt.dev/v1\nkind: ConfigMap\nmetadata:\n  name: x\n"),
            Err("Kptfile at \"/pkg\" has an unknown resource type (\"kpt.dev/v1, Kind=ConfigMap\").".to_owned())
        );
        assert_eq!(
            unknown("apiVersion: kpt.dev/v1alpha9\nkind: Kptfile\nmetadata:\n  name: x\n"),
            Err("Kptfile at \"/pkg\" has an unknown resource type (\"kpt.dev/v1alpha9, Kind=Kptfile\").".to_owned())
        );
        assert_eq!(
            unknown("apiVersion: v1\nkind: Kptfile\nmetadata:\n  name: x\n"),
            Err(
                "Kptfile at \"/pkg\" has an unknown resource type (\"/v1, Kind=Kptfile\")."
                    .to_owned()
            )
        );
        assert!(matches!(
            Kptfile::parse("apiVersion: kpt.dev/v1alpha2\nkind: Kptfile\n", dir),
            Err(KptfileError::Legacy { .. })
        ));
        assert!(unknown("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: x\n").is_ok());
    }

    #[test]
    fn a_step_may_not_name_both_an_image_and_a_command() {
        let kptfile = Kptfile::parse(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: x\npipeline:\n  mutators:\n    - image: set-labels\n      exec: sed\n",
            Path::new("/pkg"),
        )
        .expect("decodes");
        assert_eq!(
            kptfile.validate(Path::new("/pkg")).map_err(|e| e.to_string()),
            Err("Kptfile is invalid:\nField: `pipeline.mutators[0]`\nReason: must not specify both `image` and `exec` at the same time\n".to_owned())
        );
    }

    #[test]
    fn escapes_detects_parent_paths() {
        assert!(escapes("some/../../home/.kube/config"));
        assert!(escapes("../x"));
        assert!(!escapes("a/../b"));
        assert!(!escapes("db/labelconfig.yaml"));
    }

    #[test]
    fn image_names() {
        assert_eq!(
            resolve_image("set-labels:v0.1", DEFAULT_IMAGE_PREFIX),
            "ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.1"
        );
        assert_eq!(
            resolve_image("gcr.io/x/y", DEFAULT_IMAGE_PREFIX),
            "gcr.io/x/y"
        );
        assert_eq!(
            with_default_tag("ghcr.io/a/no-op"),
            "ghcr.io/a/no-op:latest"
        );
        assert_eq!(
            with_default_tag("localhost:5000/a"),
            "localhost:5000/a:latest"
        );
        assert_eq!(with_default_tag("a/b@sha256:00"), "a/b@sha256:00");
    }

    #[test]
    fn short_names() {
        let f = Function {
            image: "ghcr.io/kptdev/krm-functions-catalog/set-labels:latest".into(),
            ..Function::default()
        };
        assert_eq!(f.short_name(), "set-labels");
    }

    #[test]
    fn validation_message_text() {
        let error = invalid(
            "pipeline.mutators[0].configPath".into(),
            Some("/x"),
            "path must be relative",
        );
        assert_eq!(
            error.to_string(),
            "Kptfile is invalid:\nField: `pipeline.mutators[0].configPath`\nValue: \"/x\"\nReason: path must be relative\n"
        );
    }
}

#[cfg(test)]
mod status_tests {
    use super::*;
    use crate::yaml::SeqIndent;

    fn map(pairs: Vec<(&str, Node)>) -> Node {
        let mut node = Node::new_mapping();
        for (key, value) in pairs {
            node.set(key, value);
        }
        node
    }

    fn s(text: &str) -> Node {
        let mut node = Node::new_string(text);
        node.line = 1;
        node
    }

    #[test]
    fn status_rewrite_follows_struct_order() {
        let mut mutator = map(vec![
            (
                "configMap",
                map(vec![("tier", s("backend")), ("a", s("true"))]),
            ),
            ("image", s("set-labels")),
        ]);
        mutator.line = 7;
        let mut mutators = Node::new_sequence();
        mutators.content.push(mutator);
        let document = Node::new_document(map(vec![
            ("apiVersion", s("kpt.dev/v1")),
            ("kind", s("Kptfile")),
            ("metadata", map(vec![("name", s("app"))])),
            ("pipeline", map(vec![("mutators", mutators)])),
        ]));
        let kptfile = Kptfile::from_node(&document, Path::new("/x")).expect("decodes");
        let condition = Condition {
            status: "False",
            reason: "RenderFailed",
            message: "pkg.render: pkg .:\n\tpipeline.run: already handled error".into(),
        };
        let node = kptfile.with_render_status(&condition, None);
        assert_eq!(
            crate::yaml::to_string(&node, SeqIndent::Wide),
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - image: set-labels\n      configMap:\n        a: \"true\"\n        tier: backend\nstatus:\n  conditions:\n    - type: Rendered\n      status: \"False\"\n      reason: RenderFailed\n      message: |-\n        pkg.render: pkg .:\n        \tpipeline.run: already handled error\n"
        );
    }

    #[test]
    fn unknown_fields_are_reported_with_go_type_names() {
        let mut key_line = Node::new_string("targetResources");
        key_line.line = 13;
        let mut function = map(vec![("image", s("x"))]);
        function.content.push(key_line);
        function.content.push(s("y"));
        let mut mutators = Node::new_sequence();
        mutators.content.push(function);
        let document = Node::new_document(map(vec![
            ("apiVersion", s("kpt.dev/v1")),
            ("kind", s("Kptfile")),
            ("pipeline", map(vec![("mutators", mutators)])),
        ]));
        let error = Kptfile::from_node(&document, Path::new("/p/app")).expect_err("unknown field");
        assert_eq!(
            error.to_string(),
            "Kptfile at \"/p/app\" can't be read.\n\nDetails:\nyaml: unmarshal errors:\n  line 13: field targetResources not found in type v1.Function"
        );
    }
}
