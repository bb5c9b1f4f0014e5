//! `fix` (kyaml v0.10 framework `command.Build`): migrates kpt v0.x
//! packages to kpt 1.0 (kptdev/krm-functions-catalog `functions/go/fix`,
//! `fixpkg/fix.go` and `walk.go`, its own `v1` and `v1alpha1` Kptfile types).
//!
//! As the Go source, in one pass over the items:
//! - the items are grouped into packages by their `config.kubernetes.io/path`
//!   annotation (kyaml v0.10's only path annotation): a file belongs to the
//!   nearest directory above it holding a `Kptfile` path;
//! - a `Kptfile` of apiVersion `...v1alpha2...` gets apiVersion `kpt.dev/v1`,
//!   is decoded strictly into the function's `v1` types, has each
//!   `gcr.io/kpt-fn/apply-setters:` mutator's `configMap` moved to a new
//!   `setters.yaml` ConfigMap (from the *first* mutator's `configMap`, as the
//!   Go code reads it) and is re-marshalled from those structs; a `kpt.dev/v1`
//!   one is reported as already fixed; any other is decoded strictly into the
//!   `v1alpha1` types and rebuilt as `v1`: `packageMetadata` becomes `info`,
//!   `upstream` becomes `upstream` and `upstreamLock`, the OpenAPI setters
//!   become an `apply-setters:v0.2` mutator with a `setters.yaml` ConfigMap
//!   (formatted with kyaml's `FormatFilter`, list values in block style), the
//!   package's function configs (`config.kubernetes.io/function` or
//!   `config.k8s.io/function` annotations, `metadata.configFn`, the legacy
//!   `config.kubernetes.io/container`) become mutators with a `configPath`
//!   (the config is moved to `<package>/<name>.yaml`, its function
//!   annotations dropped), and `inventory` is kept; the rebuilt Kptfile gets
//!   the original annotations back (kyaml `SetAnnotations`);
//! - inventory objects (`cli-utils.sigs.k8s.io/inventory-id` label) get a
//!   result pointing at the live docs;
//! - every other resource has its setter comments rewritten: a field whose
//!   comment (`{"$kpt-set":"x"}` or an OpenAPI `$ref`) resolves to a setter
//!   of its package's Kptfile gets `# kpt-set: ${x}`, one resolving to a
//!   substitution gets its pattern with the setters (or enum values) filled
//!   in, and a sequence field's key comment `{"$kpt-set":"x"}` becomes
//!   `kpt-set: ${x}`.
//!
//! Results carry no severity, only the message and the file. Errors: one
//! error result `failed to fix package: <error>`, the error twice on stderr
//! (the framework, then `main` with a newline), exit 1; the items are written
//! as they were when the error came (none after a setter-comment error).
//!
//! Not reproduced, failing with an error that says so instead of guessing:
//! inputs on which the Go function panics or prints kyaml's own parse errors
//! (unparsable function annotations, substitutions referring to something
//! that is not a setter or substitution, array setter definitions without
//! `items` reached through a head comment), setter extensions whose fields
//! do not have the types the Go structs expect (a number for a `value`),
//! unresolvable or non-local `$ref`s inside substitutions, and OpenAPI
//! sections or definitions that are not mappings. The Kubernetes OpenAPI
//! schemas the Go walker also consults never carry setter extensions and are
//! not looked up.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::format;
use super::sdk::{self, FileRef, FnResult, Outcome, ResourceList, go_quote};
use super::set_project_id::UPSTREAM_LOCK;
use crate::krm::resource::{LEGACY_PATH, clean_path, go_dir};
use crate::pkg::gostruct::{
    self, GoField, GoStruct, GoType, GoValue, StructValue, field, inline_field,
};
use crate::pkg::kptfile::{GIT, GIT_LOCK, INVENTORY, OBJECT_META, STRING, TYPE_META, UPSTREAM};
use crate::yaml::node::{Node, NodeKind, Style};
use crate::yaml::{SeqIndent, parse_document, to_string};

const KPTFILE: &str = "Kptfile";
const V1_API_VERSION: &str = "kpt.dev/v1";
const SETTERS_FILE: &str = "setters.yaml";
/// The mutator a v1alpha1 package's OpenAPI setters become.
const APPLY_SETTERS_IMAGE: &str = "gcr.io/kpt-fn/apply-setters:v0.2";
const INVENTORY_LABEL: &str = "cli-utils.sigs.k8s.io/inventory-id";
const SETTER_PREFIX: &str = "io.k8s.cli.setters.";
const SUBSTITUTION_PREFIX: &str = "io.k8s.cli.substitutions.";
const CLI_EXTENSION: &str = "x-k8s-cli";

// kyaml v0.10's `yaml.ResourceMeta`, inlined in both Kptfile types.
static RESOURCE_META: GoStruct = GoStruct {
    name: "yaml.ResourceMeta",
    fields: &[
        inline_field!(&TYPE_META),
        field!("metadata", GoType::Struct(&OBJECT_META)),
    ],
};

// The function's own `v1` Kptfile types (kpt's of mid-2021).
static STRINGS: GoType = STRING;
static PACKAGE_INFO: GoStruct = GoStruct {
    name: "v1.PackageInfo",
    fields: &[
        field!("site", STRING),
        field!("emails", GoType::List("[]string", &STRINGS)),
        field!("license", STRING),
        field!("licenseFile", STRING),
        field!("doc", STRING),
        field!("description", STRING),
        field!("keywords", GoType::List("[]string", &STRINGS)),
        field!("man", STRING),
    ],
};
static FUNCTION: GoStruct = GoStruct {
    name: "v1.Function",
    fields: &[
        field!("image", STRING),
        field!("config", GoType::Node),
        field!("configPath", STRING),
        field!("configMap", GoType::StrMap),
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
static V1_KPTFILE: GoStruct = GoStruct {
    name: "v1.KptFile",
    fields: &[
        inline_field!(&RESOURCE_META),
        field!("upstream", GoType::Struct(&UPSTREAM), pointer),
        field!("upstreamLock", GoType::Struct(&UPSTREAM_LOCK), pointer),
        field!("info", GoType::Struct(&PACKAGE_INFO), pointer),
        field!("pipeline", GoType::Struct(&PIPELINE), pointer),
        field!("inventory", GoType::Struct(&INVENTORY), pointer),
    ],
};

// The function's `v1alpha1` Kptfile types (kpt v0.x).
static V1ALPHA1_GIT: GoStruct = GoStruct {
    name: "v1alpha1.Git",
    fields: &[
        field!("commit", STRING),
        field!("repo", STRING),
        field!("directory", STRING),
        field!("ref", STRING),
    ],
};
static STDIN: GoStruct = GoStruct {
    name: "v1alpha1.Stdin",
    fields: &[
        field!("filenamePattern", STRING),
        field!("original", STRING),
    ],
};
static V1ALPHA1_UPSTREAM: GoStruct = GoStruct {
    name: "v1alpha1.Upstream",
    fields: &[
        field!("type", GoType::Str("v1alpha1.OriginType")),
        field!("git", GoType::Struct(&V1ALPHA1_GIT)),
        field!("stdin", GoType::Struct(&STDIN)),
    ],
};
static PACKAGE_META: GoStruct = GoStruct {
    name: "v1alpha1.PackageMeta",
    fields: &[
        field!("url", STRING),
        field!("email", STRING),
        field!("license", STRING),
        field!("version", STRING),
        field!("tags", GoType::List("[]string", &STRINGS)),
        field!("man", STRING),
        field!("shortDescription", STRING),
    ],
};
static V1ALPHA1_FUNCTION: GoStruct = GoStruct {
    name: "v1alpha1.Function",
    fields: &[field!("config", GoType::Node), field!("image", STRING)],
};
static V1ALPHA1_FUNCTION_TYPE: GoType = GoType::Struct(&V1ALPHA1_FUNCTION);
static DEPENDENCY: GoStruct = GoStruct {
    name: "v1alpha1.Dependency",
    fields: &[
        field!("name", STRING),
        inline_field!(&V1ALPHA1_UPSTREAM),
        field!("ensureNotExists", GoType::Bool),
        field!("updateStrategy", STRING),
        field!(
            "functions",
            GoType::List("[]v1alpha1.Function", &V1ALPHA1_FUNCTION_TYPE)
        ),
        field!("autoSet", GoType::Bool),
    ],
};
static DEPENDENCY_TYPE: GoType = GoType::Struct(&DEPENDENCY);
static STARLARK_FUNCTION: GoStruct = GoStruct {
    name: "v1alpha1.StarlarkFunction",
    fields: &[field!("name", STRING), field!("path", STRING)],
};
static STARLARK_FUNCTION_TYPE: GoType = GoType::Struct(&STARLARK_FUNCTION);
static FUNCTIONS: GoStruct = GoStruct {
    name: "v1alpha1.Functions",
    fields: &[
        field!("autoRunStarlark", GoType::Bool),
        field!(
            "starlarkFunctions",
            GoType::List("[]v1alpha1.StarlarkFunction", &STARLARK_FUNCTION_TYPE)
        ),
    ],
};
static V1ALPHA1_INVENTORY: GoStruct = GoStruct {
    name: "v1alpha1.Inventory",
    fields: &[
        field!("namespace", STRING),
        field!("name", STRING),
        field!("inventoryID", STRING),
        field!("labels", GoType::StrMap),
        field!("annotations", GoType::StrMap),
    ],
};
static V1ALPHA1_KPTFILE: GoStruct = GoStruct {
    name: "v1alpha1.KptFile",
    fields: &[
        inline_field!(&RESOURCE_META),
        field!("upstream", GoType::Struct(&V1ALPHA1_UPSTREAM), pointer),
        field!("packageMetadata", GoType::Struct(&PACKAGE_META), pointer),
        field!(
            "dependencies",
            GoType::List("[]v1alpha1.Dependency", &DEPENDENCY_TYPE)
        ),
        // `interface{}`: anything decodes.
        field!("openAPI", GoType::Node),
        field!("functions", GoType::Struct(&FUNCTIONS)),
        field!("inventory", GoType::Struct(&V1ALPHA1_INVENTORY), pointer),
    ],
};

/// kyaml setters2's `SetterDefinition`, as `listSetters` decodes it.
static SETTER_DEFINITION: GoStruct = GoStruct {
    name: "setters2.SetterDefinition",
    fields: &[
        field!("name", STRING),
        field!("value", STRING),
        field!("listValues", GoType::List("[]string", &STRINGS)),
        field!("setBy", STRING),
        field!("description", STRING),
        field!("count", GoType::Int),
        field!("type", STRING),
        field!("schema", STRING),
        field!("required", GoType::Bool),
        field!("isSet", GoType::Bool),
        field!("enumValues", GoType::StrMap),
    ],
};

/// Why the function stopped.
#[derive(Debug)]
enum Failure {
    /// The function's own error; `keep_items` says whether its output
    /// still holds the items (Go returned them with the error).
    Function { message: String, keep_items: bool },
    /// Input on which this builtin does not know what the function does.
    Unsupported(String),
}

impl Failure {
    fn function(message: impl Into<String>) -> Failure {
        Failure::Function {
            message: message.into(),
            keep_items: true,
        }
    }
}

/// One result: a message about a file.
struct Note {
    path: String,
    message: String,
}

/// Runs fix on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let ResourceList {
        mut items,
        function_config,
    } = input;
    let mut fix = Fix::default();
    let failure = fix.filter(&mut items).err();
    let input = ResourceList {
        items,
        function_config,
    };
    match failure {
        None => {
            let results = fix
                .results
                .into_iter()
                .map(|note| FnResult {
                    file: (!note.path.is_empty()).then_some(FileRef {
                        path: note.path,
                        index: 0,
                    }),
                    ..FnResult::plain(note.message)
                })
                .collect();
            Outcome::kyaml(input, results)
        }
        Some(Failure::Function {
            message,
            keep_items,
        }) => {
            let mut input = input;
            if !keep_items {
                input.items.clear();
            }
            let mut outcome = Outcome::kyaml(
                input,
                vec![FnResult::error(format!("failed to fix package: {message}"))],
            );
            // `command.Build` prints the error, then `main` with `Fprintln`.
            outcome.stderr = format!("{message}{message}\n");
            outcome.exit_code = 1;
            outcome
        }
        Some(Failure::Unsupported(what)) => {
            let mut outcome = Outcome::kyaml(input, Vec::new());
            outcome.stderr = format!(
                "builtin fix does not reproduce the function on this input ({what}); map it in \
                 render.toml to an executable or a container image\n"
            );
            outcome.exit_code = 1;
            outcome.silent = true;
            outcome
        }
    }
}

/// The function's state (`fixpkg.Fix`).
#[derive(Default)]
struct Fix {
    /// Package directory to the non-Kptfile paths directly in it.
    package_files: HashMap<String, BTreeSet<String>>,
    /// Non-Kptfile path to its package directory.
    file_package: HashMap<String, String>,
    /// The setters ConfigMaps created, appended to the items at the end.
    setters_configs: Vec<Node>,
    results: Vec<Note>,
}

/// kyaml `GetMeta`: the item decoded leniently into `yaml.ResourceMeta`.
fn meta_of(item: &Node) -> Result<StructValue, Failure> {
    gostruct::decode_lenient(item, &RESOURCE_META)
        .map_err(|errors| Failure::Unsupported(format!("unreadable metadata: {errors}")))
}

/// The `metadata` struct of a decoded `ResourceMeta`.
fn object_meta(meta: &StructValue) -> StructValue {
    match meta.get(&RESOURCE_META, "metadata") {
        Some(GoValue::Struct(Some(metadata))) => metadata.clone(),
        _ => StructValue::default(),
    }
}

/// A `map[string]string` field of a struct (nil: empty).
fn string_map(value: &StructValue, s: &'static GoStruct, key: &str) -> BTreeMap<String, String> {
    match value.get(s, key) {
        Some(GoValue::Map(Some(map))) => map.clone(),
        _ => BTreeMap::new(),
    }
}

fn annotations_of(meta: &StructValue) -> BTreeMap<String, String> {
    string_map(&object_meta(meta), &OBJECT_META, "annotations")
}

fn path_of(meta: &StructValue) -> String {
    annotations_of(meta).remove(LEGACY_PATH).unwrap_or_default()
}

impl Fix {
    fn filter(&mut self, items: &mut Vec<Node>) -> Result<(), Failure> {
        self.group_paths_in_packages(items)?;
        let schemas = setters_schemas(items)?;
        let mut kptfile_found = false;
        for i in 0..items.len() {
            let meta = meta_of(&items[i])?;
            let kind = meta.str(&RESOURCE_META, "kind").to_owned();
            let path = path_of(&meta);
            if kind == KPTFILE {
                kptfile_found = true;
                let functions = self.functions_in_package(items, &go_dir(&path))?;
                self.fix_kptfile(&mut items[i], functions)?;
                continue;
            }
            let labels = string_map(&object_meta(&meta), &OBJECT_META, "labels");
            if labels.get(INVENTORY_LABEL).is_some_and(|id| !id.is_empty()) {
                self.results.push(Note {
                    path,
                    message: "Please refer to https://googlecontainertools.github.io/kpt/reference/live/alpha/, this package is using \"inventory-object\"".to_owned(),
                });
                continue;
            }
            let package = self.file_package.get(&path).cloned().unwrap_or_default();
            let walker = Walker {
                setters: schemas.get(&package).and_then(Option::as_ref),
            };
            walker.accept(&mut items[i])?;
        }
        if !kptfile_found {
            return Err(Failure::function(
                "Kptfile not found in directory tree, make sure you specify \
                 '--include-meta-resources' flag",
            ));
        }
        items.append(&mut self.setters_configs);
        Ok(())
    }

    /// `groupPathsInPkgs`.
    fn group_paths_in_packages(&mut self, items: &[Node]) -> Result<(), Failure> {
        let mut files = BTreeSet::new();
        let mut kptfiles = BTreeSet::new();
        for item in items {
            let path = path_of(&meta_of(item)?);
            if go_base(&path) == KPTFILE {
                kptfiles.insert(path);
            } else {
                files.insert(path);
            }
        }
        for kptfile in &kptfiles {
            let package = go_dir(kptfile);
            let in_package = files_in_package(&package, &files, &kptfiles);
            for file in &in_package {
                self.file_package.insert(file.clone(), package.clone());
            }
            self.package_files.insert(package, in_package);
        }
        Ok(())
    }

    /// `FunctionsInPkg`: the package's function configs as mutators, each
    /// config moved to `<package>/<name>.yaml` without its function
    /// annotations.
    fn functions_in_package(
        &mut self,
        items: &mut [Node],
        package: &str,
    ) -> Result<Vec<StructValue>, Failure> {
        let mut functions = Vec::new();
        let Some(files) = self.package_files.get(package) else {
            return Ok(functions);
        };
        for item in items.iter_mut() {
            let meta = meta_of(item)?;
            let mut annotations = annotations_of(&meta);
            let path = annotations.get(LEGACY_PATH).cloned().unwrap_or_default();
            if !files.contains(&path) {
                continue;
            }
            let Some(image) = function_image(item, &annotations)? else {
                continue;
            };
            if item
                .get_path(&["metadata", "annotations"])
                .is_none_or(Node::is_nil_or_empty)
            {
                // kyaml's GetMeta leaves the map nil for absent or empty
                // annotations; Go assigns into it and panics.
                return Err(Failure::Unsupported(
                    "a metadata.configFn function config without annotations".to_owned(),
                ));
            }
            let name = object_meta(&meta).str(&OBJECT_META, "name").to_owned();
            let file = format!("{name}.yaml");
            let mut function = StructValue::default();
            function.set(&FUNCTION, "image", GoValue::Str(image));
            function.set(&FUNCTION, "configPath", GoValue::Str(file.clone()));
            functions.push(function);
            annotations.insert(LEGACY_PATH.to_owned(), go_join(package, &file));
            annotations.remove("config.kubernetes.io/function");
            annotations.remove("config.k8s.io/function");
            sdk::set_annotations_map(item, &annotations);
        }
        Ok(functions)
    }

    /// `FixKptfile`: replaces `item` with its v1 form.
    fn fix_kptfile(&mut self, item: &mut Node, functions: Vec<StructValue>) -> Result<(), Failure> {
        // Read again: the function configs' moves may have touched it.
        let meta = &meta_of(item)?;
        let annotations = annotations_of(meta);
        let path = annotations.get(LEGACY_PATH).cloned().unwrap_or_default();
        let setters_path = go_join(&go_dir(&path), SETTERS_FILE);
        let api_version = meta.str(&RESOURCE_META, "apiVersion").to_owned();
        if api_version.contains("v1alpha2") {
            // kyaml `SetApiVersion`: the value node is replaced, before the
            // decoding that may fail.
            if let Some(slot) = item.get_mut("apiVersion") {
                *slot = Node::new_untagged_scalar(V1_API_VERSION);
            } else {
                item.push_pair(
                    Node::new_string("apiVersion"),
                    Node::new_untagged_scalar(V1_API_VERSION),
                );
            }
            self.results.push(Note {
                path: path.clone(),
                message: format!("Updated apiVersion to {V1_API_VERSION}"),
            });
            let mut kptfile = decode_kptfile(item, &V1_KPTFILE, "v1")?;
            if let Some(GoValue::Struct(Some(pipeline))) = kptfile.get(&V1_KPTFILE, "pipeline") {
                let mut pipeline = pipeline.clone();
                let mut mutators = match pipeline.get(&PIPELINE, "mutators") {
                    Some(GoValue::List(Some(mutators))) => mutators.clone(),
                    _ => Vec::new(),
                };
                for i in 0..mutators.len() {
                    let GoValue::Struct(Some(function)) = &mutators[i] else {
                        continue;
                    };
                    let image = function.str(&FUNCTION, "image");
                    let config_map = string_map(function, &FUNCTION, "configMap");
                    if !image.contains("gcr.io/kpt-fn/apply-setters:") || config_map.is_empty() {
                        continue;
                    }
                    // The Go code reads the first mutator's configMap here.
                    let first = match mutators.first() {
                        Some(GoValue::Struct(Some(first))) => {
                            string_map(first, &FUNCTION, "configMap")
                        }
                        _ => BTreeMap::new(),
                    };
                    self.setters_configs
                        .push(setters_config(&first, &setters_path)?);
                    if let GoValue::Struct(Some(function)) = &mut mutators[i] {
                        function.set(&FUNCTION, "configMap", GoValue::Map(None));
                        function.set(
                            &FUNCTION,
                            "configPath",
                            GoValue::Str(SETTERS_FILE.to_owned()),
                        );
                    }
                    self.results.push(Note {
                        path: setters_path.clone(),
                        message: "Moved setters from configMap to configPath".to_owned(),
                    });
                }
                pipeline.set(&PIPELINE, "mutators", GoValue::List(Some(mutators)));
                kptfile.set(&V1_KPTFILE, "pipeline", GoValue::Struct(Some(pipeline)));
            }
            let mut node = gostruct::marshal(&kptfile, &V1_KPTFILE);
            sdk::set_annotations_map(&mut node, &annotations);
            *item = node;
            return Ok(());
        }
        if api_version.as_str() == V1_API_VERSION {
            self.results.push(Note {
                path,
                message: format!(
                    "This package is already fixed as it is on latest apiVersion {V1_API_VERSION}"
                ),
            });
            return Ok(());
        }
        let old = decode_kptfile(item, &V1ALPHA1_KPTFILE, "v1alpha1")?;
        let mut new = StructValue::default();
        let mut resource_meta = meta.clone();
        resource_meta.set(
            &RESOURCE_META,
            "apiVersion",
            GoValue::Str(V1_API_VERSION.to_owned()),
        );
        for key in ["apiVersion", "kind", "metadata"] {
            if let Some(value) = resource_meta.get(&RESOURCE_META, key) {
                new.set(&V1_KPTFILE, key, value.clone());
            }
        }
        if let Some(GoValue::Struct(Some(package_meta))) =
            old.get(&V1ALPHA1_KPTFILE, "packageMetadata")
        {
            let text = |key| GoValue::Str(package_meta.str(&PACKAGE_META, key).to_owned());
            let email = package_meta.str(&PACKAGE_META, "email");
            let mut info = StructValue::default();
            info.set(&PACKAGE_INFO, "site", text("url"));
            info.set(
                &PACKAGE_INFO,
                "emails",
                GoValue::List((!email.is_empty()).then(|| vec![GoValue::Str(email.to_owned())])),
            );
            info.set(&PACKAGE_INFO, "license", text("license"));
            info.set(&PACKAGE_INFO, "description", text("shortDescription"));
            if let Some(tags) = package_meta.get(&PACKAGE_META, "tags") {
                info.set(&PACKAGE_INFO, "keywords", tags.clone());
            }
            info.set(&PACKAGE_INFO, "man", text("man"));
            new.set(&V1_KPTFILE, "info", GoValue::Struct(Some(info)));
            self.results.push(Note {
                path: path.clone(),
                message: "Transformed \"packageMetadata\" to \"info\"".to_owned(),
            });
        }
        if let Some(GoValue::Struct(Some(upstream))) = old.get(&V1ALPHA1_KPTFILE, "upstream") {
            let origin = GoValue::Str(upstream.str(&V1ALPHA1_UPSTREAM, "type").to_owned());
            let git = match upstream.get(&V1ALPHA1_UPSTREAM, "git") {
                Some(GoValue::Struct(Some(git))) => git.clone(),
                _ => StructValue::default(),
            };
            let text = |key| GoValue::Str(git.str(&V1ALPHA1_GIT, key).to_owned());
            let mut new_git = StructValue::default();
            let mut lock_git = StructValue::default();
            for key in ["repo", "directory", "ref"] {
                new_git.set(&GIT, key, text(key));
                lock_git.set(&GIT_LOCK, key, text(key));
            }
            lock_git.set(&GIT_LOCK, "commit", text("commit"));
            let mut new_upstream = StructValue::default();
            new_upstream.set(&UPSTREAM, "type", origin.clone());
            new_upstream.set(&UPSTREAM, "git", GoValue::Struct(Some(new_git)));
            new_upstream.set(
                &UPSTREAM,
                "updateStrategy",
                GoValue::Str("resource-merge".to_owned()),
            );
            let mut lock = StructValue::default();
            lock.set(&UPSTREAM_LOCK, "type", origin);
            lock.set(&UPSTREAM_LOCK, "git", GoValue::Struct(Some(lock_git)));
            new.set(&V1_KPTFILE, "upstream", GoValue::Struct(Some(new_upstream)));
            new.set(&V1_KPTFILE, "upstreamLock", GoValue::Struct(Some(lock)));
            self.results.push(Note {
                path: path.clone(),
                message: "Transformed \"upstream\" to \"upstream\" and \"upstreamLock\"".to_owned(),
            });
        }
        let setters = list_setters(item)?;
        for function in &functions {
            self.results.push(Note {
                path: path.clone(),
                message: format!(
                    "Added {} to mutators list, please move it to validators section if it is a \
                     validator function",
                    go_quote(function.str(&FUNCTION, "image"))
                ),
            });
        }
        let mut mutators = Vec::new();
        if !setters.is_empty() {
            let mut function = StructValue::default();
            function.set(
                &FUNCTION,
                "image",
                GoValue::Str(APPLY_SETTERS_IMAGE.to_owned()),
            );
            function.set(
                &FUNCTION,
                "configPath",
                GoValue::Str(SETTERS_FILE.to_owned()),
            );
            self.setters_configs
                .push(setters_config(&setters, &setters_path)?);
            mutators.push(GoValue::Struct(Some(function)));
            self.results.push(Note {
                path: path.clone(),
                message: "Transformed \"openAPI\" definitions to \"apply-setters\" function"
                    .to_owned(),
            });
        }
        mutators.extend(functions.into_iter().map(|f| GoValue::Struct(Some(f))));
        let mut pipeline = StructValue::default();
        if !mutators.is_empty() {
            pipeline.set(&PIPELINE, "mutators", GoValue::List(Some(mutators)));
        }
        // A non-nil pointer: an empty pipeline is written as `{}`.
        new.set(&V1_KPTFILE, "pipeline", GoValue::Struct(Some(pipeline)));
        if let Some(GoValue::Struct(Some(inventory))) = old.get(&V1ALPHA1_KPTFILE, "inventory") {
            let mut new_inventory = StructValue::default();
            for key in ["namespace", "name", "inventoryID", "labels", "annotations"] {
                if let Some(value) = inventory.get(&V1ALPHA1_INVENTORY, key) {
                    new_inventory.set(&INVENTORY, key, value.clone());
                }
            }
            new.set(
                &V1_KPTFILE,
                "inventory",
                GoValue::Struct(Some(new_inventory)),
            );
        }
        let mut node = gostruct::marshal(&new, &V1_KPTFILE);
        sdk::set_annotations_map(&mut node, &annotations);
        *item = node;
        Ok(())
    }
}

/// `filesInPackage`: the paths whose nearest directory with a Kptfile is
/// `package`.
fn files_in_package(
    package: &str,
    files: &BTreeSet<String>,
    kptfiles: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for file in files {
        let mut dir = go_dir(file);
        loop {
            if kptfiles.contains(&go_join(&dir, KPTFILE)) {
                if dir == package {
                    found.insert(file.clone());
                }
                break;
            }
            if dir.is_empty() || dir == "." {
                break;
            }
            dir = go_dir(&dir);
        }
    }
    found
}

/// kyaml `runtimeutil.GetFunctionSpec(...).Container.Image`, `None` for an
/// item that is no function config.
fn function_image(
    item: &Node,
    annotations: &BTreeMap<String, String>,
) -> Result<Option<String>, Failure> {
    let spec = ["config.kubernetes.io/function", "config.k8s.io/function"]
        .into_iter()
        .filter_map(|key| annotations.get(key))
        .find(|text| !text.is_empty())
        .map(|text| {
            parse_document(text)
                .map(|document| document.map(Node::into_root))
                .map_err(|_| ())
        })
        .or_else(|| {
            item.get_path(&["metadata", "configFn"])
                .filter(|node| !node.is_null())
                .map(|node| Ok(Some(node.clone())))
        });
    let Some(spec) = spec else {
        return Ok(annotations
            .get("config.kubernetes.io/container")
            .filter(|image| !image.is_empty())
            .cloned());
    };
    let unsupported =
        || Failure::Unsupported("a function config whose function spec does not decode".to_owned());
    let spec = spec.map_err(|()| unsupported())?;
    let Some(spec) = spec else {
        return Ok(Some(String::new()));
    };
    if spec.is_null() {
        return Ok(Some(String::new()));
    }
    if !spec.is_mapping() {
        return Err(unsupported());
    }
    let image = match spec.get("container") {
        None => String::new(),
        Some(container) if container.is_null() => String::new(),
        Some(container) if container.is_mapping() => match container.get("image") {
            None => String::new(),
            Some(image) if image.is_null() => String::new(),
            Some(image) if image.is_scalar() => image.value.to_string(),
            Some(_) => return Err(unsupported()),
        },
        Some(_) => return Err(unsupported()),
    };
    Ok(Some(image))
}

/// `v1.ReadFile` / `v1alpha1.ReadFile`: the node written out alone and
/// decoded strictly from that text.
fn decode_kptfile(
    item: &Node,
    schema: &'static GoStruct,
    version: &str,
) -> Result<StructValue, Failure> {
    let text = to_string(item, SeqIndent::Wide);
    let invalid = |error: String| {
        Failure::function(format!(
            "please make sure the package has a valid '{version}' Kptfile: {error}"
        ))
    };
    let document = parse_document(&text)
        .map_err(|error| invalid(error.to_string()))?
        .unwrap_or_else(|| Node::new_document(Node::new_mapping()));
    gostruct::decode(&document, schema).map_err(|errors| invalid(errors.to_string()))
}

/// `listSetters`: setter name to value (list values as `[a, b]`) from the
/// Kptfile's `openAPI.definitions`.
fn list_setters(kptfile: &Node) -> Result<BTreeMap<String, String>, Failure> {
    let mut setters = BTreeMap::new();
    let Some(open_api) = kptfile.get("openAPI").filter(|node| !node.is_null()) else {
        return Ok(setters);
    };
    if !open_api.is_mapping() {
        return Err(Failure::Unsupported(
            "an openAPI field that is no mapping".to_owned(),
        ));
    }
    let Some(definitions) = open_api.get("definitions").filter(|node| !node.is_null()) else {
        return Ok(setters);
    };
    if !definitions.is_mapping() {
        return Err(Failure::Unsupported(
            "openAPI definitions that are no mapping".to_owned(),
        ));
    }
    for (key, definition) in definitions.pairs() {
        if !key.value.starts_with(SETTER_PREFIX) {
            continue;
        }
        let extension = definition
            .get(CLI_EXTENSION)
            .filter(|_| definition.is_mapping());
        if definition.kind != NodeKind::Mapping && !definition.is_null()
            || extension.is_some_and(|node| !node.is_mapping() && !node.is_null())
        {
            return Err(Failure::Unsupported(format!(
                "setter definition {} is no mapping",
                key.value
            )));
        }
        let Some(setter) = extension
            .and_then(|extension| extension.get("setter"))
            .filter(|node| !node.is_null())
        else {
            return Err(Failure::function(format!(
                "missing x-k8s-cli.setter for {}",
                key.value
            )));
        };
        // `yaml.Unmarshal(setterNode.String())`: line numbers of that text.
        let text = to_string(setter, SeqIndent::Wide);
        let document = parse_document(&text)
            .map_err(|error| Failure::function(error.to_string()))?
            .unwrap_or_else(|| Node::new_document(Node::new_mapping()));
        let definition = gostruct::decode_lenient(&document, &SETTER_DEFINITION)
            .map_err(|errors| Failure::function(errors.to_string()))?;
        let name = definition.str(&SETTER_DEFINITION, "name").to_owned();
        let list: Vec<String> = match definition.get(&SETTER_DEFINITION, "listValues") {
            Some(GoValue::List(Some(values))) => values
                .iter()
                .map(|value| match value {
                    GoValue::Str(text) => text.clone(),
                    _ => String::new(),
                })
                .collect(),
            _ => Vec::new(),
        };
        let value = if list.is_empty() {
            definition.str(&SETTER_DEFINITION, "value").to_owned()
        } else {
            format!("[{}]", list.join(", "))
        };
        setters.insert(name, value);
    }
    Ok(setters)
}

/// `SettersNodeFromSetters`: the `setters` ConfigMap at `path`, formatted
/// by kyaml's `FormatFilter`.
fn setters_config(setters: &BTreeMap<String, String>, path: &str) -> Result<Node, Failure> {
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: setters\n  annotations:\n    \
         {LEGACY_PATH}: {path}\n    config.kubernetes.io/index: \"0\"\n"
    );
    let mut node = parse_document(&text)
        .map_err(|error| Failure::function(error.to_string()))?
        .map(Node::into_root)
        .ok_or_else(|| Failure::Unsupported("an empty setters ConfigMap".to_owned()))?;
    for (name, value) in setters {
        let value = standardize_array_value(value)?;
        let mut value_node = Node::new_untagged_scalar(value.as_str());
        if value.is_empty() {
            value_node.style = Style::DOUBLE_QUOTED;
        }
        let data = sdk::ensure_mapping(&mut node, "data")
            .ok_or_else(|| Failure::Unsupported("a setters ConfigMap without data".to_owned()))?;
        data.push_pair(Node::new_string(name.as_str()), value_node);
    }
    format::format_item(&mut node).map_err(Failure::Unsupported)?;
    Ok(node)
}

/// `standardizeArrayValue`: a flow sequence value (`[a, b]`) written as a
/// block sequence.
fn standardize_array_value(value: &str) -> Result<String, Failure> {
    if !value.starts_with('[') {
        return Ok(value.to_owned());
    }
    let parsed = parse_document(value).map_err(|error| {
        Failure::function(format!(
            "failed to parse the array node value {} with error {}",
            go_quote(value),
            go_quote(&error.to_string())
        ))
    })?;
    let Some(mut document) = parsed else {
        return Ok(value.to_owned());
    };
    let root = document.root_mut();
    if root.kind != NodeKind::Sequence {
        return Ok(value.to_owned());
    }
    root.style = Style::PLAIN;
    Ok(to_string(&document, SeqIndent::Wide))
}

/// `getPkgPathToSettersSchema`: each Kptfile's directory to its `openAPI`
/// section as JSON (`None` when it has none).
fn setters_schemas(items: &[Node]) -> Result<HashMap<String, Option<Value>>, Failure> {
    let mut schemas = HashMap::new();
    for item in items {
        let meta = meta_of(item)?;
        if meta.str(&RESOURCE_META, "kind") != KPTFILE {
            continue;
        }
        let schema = match item.get("openAPI") {
            Some(open_api) if !open_api.is_nil_or_empty() => {
                let json = to_json(open_api)?;
                if !json.is_object() {
                    return Err(Failure::Unsupported(
                        "an openAPI field that is no mapping".to_owned(),
                    ));
                }
                if json
                    .get("definitions")
                    .is_some_and(|definitions| !definitions.is_object() && !definitions.is_null())
                {
                    return Err(Failure::Unsupported(
                        "openAPI definitions that are no mapping".to_owned(),
                    ));
                }
                Some(json)
            }
            _ => None,
        };
        schemas.insert(go_dir(&path_of(&meta)), schema);
    }
    Ok(schemas)
}

/// A node as go-yaml decodes it into `interface{}`, then `json.Marshal`.
fn to_json(node: &Node) -> Result<Value, Failure> {
    Ok(match node.kind {
        NodeKind::Mapping => {
            let mut map = Map::new();
            for (key, value) in node.pairs() {
                if !key.is_scalar() || sdk::effective_tag(key) != crate::yaml::node::tag::STR {
                    return Err(Failure::Unsupported(
                        "an openAPI mapping key that is no string".to_owned(),
                    ));
                }
                map.insert(key.value.to_string(), to_json(value)?);
            }
            Value::Object(map)
        }
        NodeKind::Sequence => Value::Array(
            node.content
                .iter()
                .map(to_json)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        NodeKind::Scalar => {
            use crate::yaml::node::tag;
            let text = node.value.as_str();
            match sdk::effective_tag(node) {
                tag::NULL => Value::Null,
                tag::BOOL => Value::Bool(matches!(text, "true" | "True" | "TRUE")),
                tag::INT | tag::FLOAT => serde_json::from_str::<serde_json::Number>(text)
                    .map(Value::Number)
                    .unwrap_or_else(|_| Value::from(0)),
                _ => Value::String(text.to_owned()),
            }
        }
        NodeKind::Document => match node.content.first() {
            Some(root) => to_json(root)?,
            None => Value::Null,
        },
        NodeKind::Alias => {
            return Err(Failure::Unsupported(
                "an alias in the openAPI section".to_owned(),
            ));
        }
    })
}

/// kyaml setters2 `CliExtension`.
#[derive(Debug, Default)]
struct Extension {
    setter: Option<Setter>,
    substitution: Option<Substitution>,
}

#[derive(Debug, Default)]
struct Setter {
    name: String,
    value: String,
    enum_values: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct Substitution {
    name: String,
    pattern: String,
    /// (marker, ref)
    values: Vec<(String, String)>,
}

/// encoding/json's field lookup after `json.Marshal` sorted the keys: of
/// the keys equal to `name` ignoring case, the last in byte order.
fn json_field<'a>(map: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    map.iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case(name))
        .max_by(|a, b| a.0.cmp(b.0))
        .map(|(_, value)| value)
        .filter(|value| !value.is_null())
}

fn mistyped(what: &str) -> Failure {
    Failure::Unsupported(format!(
        "a setter extension whose {what} does not decode into the Go struct"
    ))
}

fn json_string(map: &Map<String, Value>, name: &str) -> Result<String, Failure> {
    match json_field(map, name) {
        None => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(mistyped(name)),
    }
}

fn json_object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, Failure> {
    value.as_object().ok_or_else(|| mistyped(what))
}

/// `setters2.GetExtFromSchema`: the schema's `x-k8s-cli` extension.
fn extension_of(schema: &Value) -> Result<Option<Extension>, Failure> {
    let Some(raw) = schema.get(CLI_EXTENSION).filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    let raw = json_object(raw, CLI_EXTENSION)?;
    let mut extension = Extension::default();
    if let Some(setter) = json_field(raw, "setter") {
        let setter = json_object(setter, "setter")?;
        let mut enum_values = BTreeMap::new();
        if let Some(values) = json_field(setter, "enumValues") {
            for (key, value) in json_object(values, "enumValues")? {
                match value {
                    Value::String(text) => {
                        enum_values.insert(key.clone(), text.clone());
                    }
                    Value::Null => {
                        enum_values.insert(key.clone(), String::new());
                    }
                    _ => return Err(mistyped("enumValues")),
                }
            }
        }
        if let Some(list) = json_field(setter, "listValues")
            && !list
                .as_array()
                .is_some_and(|list| list.iter().all(|v| v.is_string() || v.is_null()))
        {
            return Err(mistyped("listValues"));
        }
        extension.setter = Some(Setter {
            name: json_string(setter, "name")?,
            value: json_string(setter, "value")?,
            enum_values,
        });
    }
    if let Some(substitution) = json_field(raw, "substitution") {
        let substitution = json_object(substitution, "substitution")?;
        let mut values = Vec::new();
        if let Some(list) = json_field(substitution, "values") {
            let list = list.as_array().ok_or_else(|| mistyped("values"))?;
            for value in list {
                if value.is_null() {
                    values.push((String::new(), String::new()));
                    continue;
                }
                let value = json_object(value, "values")?;
                values.push((json_string(value, "marker")?, json_string(value, "ref")?));
            }
        }
        extension.substitution = Some(Substitution {
            name: json_string(substitution, "name")?,
            pattern: json_string(substitution, "pattern")?,
            values,
        });
    }
    Ok(Some(extension))
}

/// The setter-comment walker (`walk.go` with `Fix`'s visitor) over one
/// resource, with its package's setter definitions.
struct Walker<'a> {
    /// The package Kptfile's `openAPI` section (`nil` in Go: no setters).
    setters: Option<&'a Value>,
}

impl Walker<'_> {
    /// `accept`.
    fn accept(&self, item: &mut Node) -> Result<(), Failure> {
        let schema = self.schema(item, None, None)?;
        self.visit(item, schema).map_err(|failure| match failure {
            // The Go filter returns no items with this error.
            Failure::Function { message, .. } => Failure::Function {
                message,
                keep_items: false,
            },
            other => other,
        })
    }

    /// `acceptImpl`.
    fn visit(&self, node: &mut Node, schema: Option<Value>) -> Result<(), Failure> {
        match node.kind {
            NodeKind::Document => {
                for child in &mut node.content {
                    let schema = self.schema(child, None, None)?;
                    self.visit(child, schema)?;
                }
            }
            NodeKind::Mapping => {
                visit_mapping(node);
                for pair in node.content.chunks_exact_mut(2) {
                    let [key, value] = pair else { continue };
                    let name = key.value.to_string();
                    let field_schema = self.schema(key, schema.as_ref(), Some(&name))?;
                    self.visit(value, field_schema)?;
                }
            }
            NodeKind::Sequence => {
                let elements = self.schema(node, schema.as_ref(), None)?;
                for child in &mut node.content {
                    self.visit(child, elements.clone())?;
                }
            }
            NodeKind::Scalar => {
                let schema = self.schema(node, schema.as_ref(), None)?;
                self.visit_scalar(node, schema.as_ref())?;
            }
            NodeKind::Alias => {}
        }
        Ok(())
    }

    /// `getSchema`: the schema a comment on `node` names, else what the
    /// inherited schema says for the field, the elements or the node.
    fn schema(
        &self,
        node: &Node,
        inherited: Option<&Value>,
        field: Option<&str>,
    ) -> Result<Option<Value>, Failure> {
        if let Some(mut schema) = self.comment_schema(node) {
            if let Some(reference) = schema.get("$ref").and_then(Value::as_str)
                && let Some(resolved) = self.resolve(reference)
            {
                schema = resolved.clone();
            }
            return Ok(Some(schema));
        }
        let Some(inherited) = inherited else {
            return Ok(None);
        };
        if let Some(field) = field.filter(|field| !field.is_empty()) {
            return Ok(field_schema(inherited, field));
        }
        if node.kind == NodeKind::Sequence {
            return element_schema(inherited);
        }
        Ok(Some(inherited.clone()))
    }

    /// walk.go `Read`: the schema in the node's line comment, else its head
    /// comment (only the first non-empty one is read): the `$kpt-set`
    /// shorthand when it names a setter or substitution of the package,
    /// else any non-empty JSON object.
    fn comment_schema(&self, node: &Node) -> Option<Value> {
        let comment = [node.line_comment(), node.head_comment()]
            .into_iter()
            .find(|comment| !comment.is_empty())?;
        let comment = comment.trim_start_matches('#');
        if let Some(schema) = self.shorthand(comment) {
            return Some(schema);
        }
        match serde_json::from_str::<Value>(comment).ok()? {
            Value::Object(map) if !map.is_empty() => Some(Value::Object(map)),
            _ => None,
        }
    }

    /// `processShortHand`.
    fn shorthand(&self, comment: &str) -> Option<Value> {
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(comment) else {
            return None;
        };
        // `map[string]string`: a null value decodes as "".
        if !map
            .values()
            .all(|value| value.is_string() || value.is_null())
        {
            return None;
        }
        let name = map.get("$kpt-set").and_then(Value::as_str)?;
        if name.is_empty() {
            return None;
        }
        [SETTER_PREFIX, SUBSTITUTION_PREFIX]
            .into_iter()
            .map(|prefix| format!("#/definitions/{prefix}{name}"))
            .find(|reference| self.resolve(reference).is_some())
            .map(|reference| serde_json::json!({ "$ref": reference }))
    }

    /// `openapi.Resolve` of a local reference against the package's
    /// OpenAPI section.
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.setters?
            .pointer(pointer)
            .filter(|value| value.is_object())
    }

    /// `visitScalar`.
    fn visit_scalar(&self, node: &mut Node, schema: Option<&Value>) -> Result<(), Failure> {
        let Some(extension) = schema.map(extension_of).transpose()?.flatten() else {
            return Ok(());
        };
        if let Some(setter) = &extension.setter {
            node.set_line_comment(format!("# kpt-set: ${{{}}}", setter.name));
            return Ok(());
        }
        if let Some(substitution) = &extension.substitution {
            let mut visited = BTreeSet::new();
            let pattern = self.substitute(substitution, &mut visited)?;
            node.set_line_comment(format!("# kpt-set: {pattern}"));
        }
        Ok(())
    }

    /// `substituteUtil`: the pattern with nested substitutions expanded and
    /// setters as `${name}` (or their enum value). `visited` is shared by
    /// the whole expansion, as in Go.
    fn substitute(
        &self,
        substitution: &Substitution,
        visited: &mut BTreeSet<String>,
    ) -> Result<String, Failure> {
        if !visited.insert(substitution.name.clone()) {
            return Err(Failure::function(format!(
                "cyclic substitution detected with name {}",
                substitution.name
            )));
        }
        let mut pattern = substitution.pattern.clone();
        for (marker, reference) in &substitution.values {
            if reference.is_empty() {
                return Err(Failure::function(format!(
                    "missing reference on substitution {}",
                    substitution.name
                )));
            }
            let definition = self.resolve(reference).ok_or_else(|| {
                Failure::Unsupported(format!(
                    "substitution {} refers to {reference}, which does not resolve",
                    substitution.name
                ))
            })?;
            let panics = || {
                Failure::Unsupported(format!(
                    "substitution {} refers to {reference}, which is neither a setter nor a \
                     substitution (the function panics)",
                    substitution.name
                ))
            };
            let extension = extension_of(definition)?.ok_or_else(panics)?;
            if let Some(nested) = &extension.substitution {
                let value = self.substitute(nested, visited)?;
                pattern = pattern.replace(marker.as_str(), &value);
                continue;
            }
            let setter = extension.setter.ok_or_else(panics)?;
            let value = match setter.enum_values.get(&setter.value) {
                Some(value) => value.clone(),
                None => format!("${{{}}}", setter.name),
            };
            pattern = pattern.replace(marker.as_str(), &value);
        }
        Ok(pattern)
    }
}

/// kyaml `ResourceSchema.Field` on a setter definition: a property's (or
/// the additional properties') schema; one given by `$ref` resolves into
/// kyaml's Kubernetes schema, which carries no setters.
fn field_schema(schema: &Value, field: &str) -> Option<Value> {
    let found = schema
        .get("properties")
        .and_then(|properties| properties.get(field))
        .or_else(|| {
            schema
                .get("additionalProperties")
                .filter(|value| value.is_object())
        })?;
    (found.is_object() && found.get("$ref").is_none()).then(|| found.clone())
}

/// kyaml `ResourceSchema.Elements` on a setter definition.
fn element_schema(schema: &Value) -> Result<Option<Value>, Failure> {
    let is_array = match schema.get("type") {
        Some(Value::String(kind)) => kind == "array",
        Some(Value::Array(kinds)) => kinds.len() == 1 && kinds[0] == "array",
        _ => false,
    };
    if !is_array {
        return Ok(None);
    }
    match schema.get("items") {
        Some(items) if items.is_object() => {
            Ok((items.get("$ref").is_none()).then(|| items.clone()))
        }
        _ => Err(Failure::Unsupported(
            "an array setter definition without items schema applied to a sequence (the \
             function panics)"
                .to_owned(),
        )),
    }
}

/// `visitMapping`: a sequence field's key comment `{"$kpt-set":"x"}` (or
/// `{"$ref":"#/definitions/io.k8s.cli.<x>"}`) becomes `kpt-set: ${x}`,
/// with the Go code's prefix and suffix trimming.
fn visit_mapping(node: &mut Node) {
    const PREFIXES: [&str; 2] = [
        "# {\"$kpt-set\":\"",
        "# {\"$ref\":\"#/definitions/io.k8s.cli.",
    ];
    for pair in node.content.chunks_exact_mut(2) {
        let [key, value] = pair else { continue };
        if value.kind != NodeKind::Sequence || value.content.is_empty() {
            continue;
        }
        let comment = key.line_comment().to_string();
        for prefix in PREFIXES {
            if comment.contains(prefix) {
                let name = comment.strip_prefix(prefix).unwrap_or(&comment);
                let name = name.strip_suffix("\"}").unwrap_or(name);
                key.set_line_comment(format!("# kpt-set: ${{{name}}}"));
            }
        }
    }
}

/// Go's `filepath.Base`.
fn go_base(path: &str) -> &str {
    if path.is_empty() {
        return ".";
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// Go's `filepath.Join` of two elements.
fn go_join(dir: &str, name: &str) -> String {
    match (dir.is_empty(), name.is_empty()) {
        (true, true) => String::new(),
        (true, false) => clean_path(name),
        (false, true) => clean_path(dir),
        (false, false) => clean_path(&format!("{dir}/{name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(text: &str) -> Node {
        parse_document(text).unwrap().unwrap().into_root()
    }

    fn run_items(items: &[&str]) -> Outcome {
        run(ResourceList {
            items: items.iter().map(|text| node(text)).collect(),
            function_config: None,
        })
    }

    /// The function's `TestSettersNodeFromSetters`: every kind of value,
    /// a flow list standardized to a block one.
    #[test]
    fn setters_config_as_the_go_test_expects() {
        let setters: BTreeMap<String, String> = [
            ("environment", ""),
            ("integer", "10"),
            ("number", "1.1"),
            ("boolean", "true"),
            ("string", "foo"),
            ("region", "us-east-1"),
            ("flow-style-setter", "[dev, prod]"),
            ("folded-style-setter", "- hi\n- hello"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let config = setters_config(&setters, "foo/bar").unwrap();
        assert_eq!(
            to_string(&config, SeqIndent::Compact),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: setters\n  annotations:\n    \
             config.kubernetes.io/index: \"0\"\n    config.kubernetes.io/path: foo/bar\ndata:\n  \
             boolean: \"true\"\n  environment: \"\"\n  flow-style-setter: |\n    - dev\n    - prod\n  \
             folded-style-setter: |-\n    - hi\n    - hello\n  integer: \"10\"\n  number: \"1.1\"\n  \
             region: us-east-1\n  string: foo\n"
        );
        let invalid: BTreeMap<String, String> =
            [("setter".to_owned(), "[dev, prod,".to_owned())].into();
        let Err(Failure::Function { message, .. }) = setters_config(&invalid, "foo/bar") else {
            panic!("an invalid flow sequence must fail");
        };
        assert_eq!(
            message,
            "failed to parse the array node value \"[dev, prod,\" with error \"yaml: line 1: did \
             not find expected node content\""
        );
    }

    /// Each error the function gives, as it reports it.
    #[test]
    fn errors_read_as_the_function_writes_them() {
        let stderr = |outcome: &Outcome| outcome.stderr.clone();
        let twice = |error: &str| format!("{error}{error}\n");
        let outcome = run_items(&["apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"]);
        let error = "Kptfile not found in directory tree, make sure you specify \
                     '--include-meta-resources' flag";
        assert_eq!(stderr(&outcome), twice(error));
        assert_eq!(outcome.exit_code, 1);
        assert_eq!(
            outcome.results[0].message,
            format!("failed to fix package: {error}")
        );
        assert_eq!(outcome.items.len(), 1, "the items are kept");

        let outcome = run_items(&[
            "apiVersion: kpt.dev/v1alpha1\nkind: Kptfile\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: Kptfile\nbogus: 1\n",
        ]);
        assert_eq!(
            stderr(&outcome),
            twice(
                "please make sure the package has a valid 'v1alpha1' Kptfile: yaml: unmarshal \
                 errors:\n  line 7: field bogus not found in type v1alpha1.KptFile"
            )
        );

        let outcome = run_items(&[
            "apiVersion: kpt.dev/v1alpha2\nkind: Kptfile\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: Kptfile\nopenAPI: {}\n",
        ]);
        assert_eq!(
            stderr(&outcome),
            twice(
                "please make sure the package has a valid 'v1' Kptfile: yaml: unmarshal \
                 errors:\n  line 7: field openAPI not found in type v1.KptFile"
            )
        );
        assert_eq!(
            outcome.items[0].get_str(&["apiVersion"]),
            Some("kpt.dev/v1"),
            "the apiVersion was set before the decoding failed"
        );

        let outcome = run_items(&[
            "apiVersion: kpt.dev/v1alpha1\nkind: Kptfile\nmetadata:\n  name: a\nopenAPI:\n  definitions:\n    io.k8s.cli.setters.x:\n      description: no extension\n",
        ]);
        assert_eq!(
            stderr(&outcome),
            twice("missing x-k8s-cli.setter for io.k8s.cli.setters.x")
        );

        let kptfile = "apiVersion: kpt.dev/v1alpha1\nkind: Kptfile\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: Kptfile\nopenAPI:\n  definitions:\n    io.k8s.cli.substitutions.a:\n      x-k8s-cli:\n        substitution:\n          name: a\n          pattern: ${b}\n          values:\n          - marker: ${b}\n            ref: '#/definitions/io.k8s.cli.substitutions.b'\n    io.k8s.cli.substitutions.b:\n      x-k8s-cli:\n        substitution:\n          name: b\n          pattern: ${a}\n          values:\n          - marker: ${a}\n            ref: '#/definitions/io.k8s.cli.substitutions.a'\n    io.k8s.cli.substitutions.c:\n      x-k8s-cli:\n        substitution:\n          name: c\n          pattern: ${a}\n          values:\n          - marker: ${a}\n";
        let resource = |setter: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m # {{\"$kpt-set\":\"{setter}\"}}\n  annotations:\n    config.kubernetes.io/path: m.yaml\n"
            )
        };
        let outcome = run_items(&[kptfile, &resource("a")]);
        assert_eq!(
            stderr(&outcome),
            twice("cyclic substitution detected with name a")
        );
        assert!(outcome.items.is_empty(), "no items after a walker error");
        let outcome = run_items(&[kptfile, &resource("c")]);
        assert_eq!(
            stderr(&outcome),
            twice("missing reference on substitution c")
        );
    }

    /// A v1alpha1 Kptfile with nothing to convert still gets a (non-nil,
    /// empty) pipeline; `$ref` comments and head comments resolve too, and
    /// a shorthand naming no setter of the package is left alone.
    #[test]
    fn bare_kptfiles_and_comment_forms() {
        let outcome = run_items(&[
            "apiVersion: kpt.dev/v1alpha1\nkind: Kptfile\nmetadata:\n  name: a\n  labels:\n    app: x\n  annotations:\n    config.kubernetes.io/path: Kptfile\nopenAPI:\n  definitions:\n    io.k8s.cli.setters.replicas:\n      x-k8s-cli:\n        setter:\n          name: replicas\n          value: \"3\"\n          enumValues:\n            \"3\": three\n    io.k8s.cli.substitutions.s:\n      x-k8s-cli:\n        substitution:\n          name: s\n          pattern: r-R\n          values:\n          - marker: R\n            ref: '#/definitions/io.k8s.cli.setters.replicas'\n",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d # {\"$ref\":\"#/definitions/io.k8s.cli.substitutions.s\"}\n  annotations:\n    config.kubernetes.io/path: d.yaml\nspec:\n  # {\"$kpt-set\":\"replicas\"}\n  replicas: 3\n  paused: false # {\"$kpt-set\":\"unknown\"}\n",
        ]);
        assert_eq!(outcome.exit_code, 0, "{}", outcome.stderr);
        assert_eq!(
            to_string(&outcome.items[0], SeqIndent::Compact),
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\n  labels:\n    app: x\n  annotations:\n    config.kubernetes.io/path: Kptfile\npipeline:\n  mutators:\n  - image: gcr.io/kpt-fn/apply-setters:v0.2\n    configPath: setters.yaml\n"
        );
        assert_eq!(
            to_string(&outcome.items[1], SeqIndent::Compact),
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d # kpt-set: r-three\n  annotations:\n    config.kubernetes.io/path: d.yaml\nspec:\n  # {\"$kpt-set\":\"replicas\"}\n  replicas: 3 # kpt-set: ${replicas}\n  paused: false # {\"$kpt-set\":\"unknown\"}\n"
        );
        let outcome =
            run_items(&["apiVersion: kpt.dev/v1alpha1\nkind: Kptfile\nmetadata:\n  name: a\n"]);
        assert_eq!(
            to_string(&outcome.items[0], SeqIndent::Compact),
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\npipeline: {}\n"
        );
    }

    #[test]
    fn go_paths() {
        assert_eq!(go_base(""), ".");
        assert_eq!(go_base("a/Kptfile"), "Kptfile");
        assert_eq!(go_base("Kptfile/"), "Kptfile");
        assert_eq!(go_join(".", "setters.yaml"), "setters.yaml");
        assert_eq!(go_join("a/b", "c.yaml"), "a/b/c.yaml");
        let kptfiles: BTreeSet<String> = ["Kptfile".to_owned(), "sub/Kptfile".to_owned()].into();
        let files: BTreeSet<String> = ["a.yaml", "sub/b.yaml", "sub/x/c.yaml", "d/e.yaml", ""]
            .into_iter()
            .map(str::to_owned)
            .collect();
        let root: Vec<String> = files_in_package(".", &files, &kptfiles)
            .into_iter()
            .collect();
        assert_eq!(root, ["", "a.yaml", "d/e.yaml"]);
        let sub: Vec<String> = files_in_package("sub", &files, &kptfiles)
            .into_iter()
            .collect();
        assert_eq!(sub, ["sub/b.yaml", "sub/x/c.yaml"]);
    }
}
