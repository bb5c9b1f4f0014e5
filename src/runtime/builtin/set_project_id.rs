//! `set-project-id` (kyaml framework `command.Build`, no results): sets the
//! `project-id` setter of the package's `apply-setters` function and the
//! `cnrm.cloud.google.com/project-id` annotation of Config Connector
//! resources that lack it, to the config's `data.project-id`.
//!
//! As the catalog's Go source (`functions/go/set-project-id/main.go`, the
//! version reading every Kptfile through the kpt-functions-sdk's
//! `kptfile/v1` types, SDK `v0.0.0-20210810181223`):
//! - every item of kind `Kptfile` is decoded strictly into that 2021 schema
//!   (unknown fields fail); for each, the first mutator whose image contains
//!   `apply-setters` gets `project-id` in its `configMap` when empty (the
//!   Kptfile is then re-marshalled from the structs: struct field order,
//!   sorted maps, comments dropped), or in the `data` of its `configPath`
//!   file (`data` rebuilt at the end, keys sorted); with no such mutator one
//!   is appended (`gcr.io/kpt-fn/apply-setters:v0.2`) and the Kptfile is
//!   re-marshalled;
//! - resources with apiVersion `<group>.cnrm.cloud.google.com/<version>`
//!   (group not `core`) without the annotation get it, their annotations
//!   rebuilt at the end of `metadata` with sorted keys.
//!
//! Errors: nothing in `results`; the framework prints the error and `main`
//! prints it again with a newline; exit 1; the items are written with the
//! edits made before the error.

use std::collections::BTreeMap;

use regex::Regex;

use super::sdk::{self, Outcome, ResourceList};
use crate::krm::resource::PATH;
use crate::pkg::gostruct::{
    self, GoField, GoStruct, GoType, GoValue, StructValue, field, inline_field,
};
use crate::pkg::kptfile::{GIT_LOCK, INVENTORY, STRING, UPSTREAM};
use crate::yaml::node::Node;
use crate::yaml::{SeqIndent, parse_document, to_string};

const SETTER: &str = "project-id";
const PROJECT_ID_ANNOTATION: &str = "cnrm.cloud.google.com/project-id";
/// The mutator the function adds when the Kptfile has none.
const APPLY_SETTERS_IMAGE: &str = "gcr.io/kpt-fn/apply-setters:v0.2";

// The SDK's 2021 copy of kpt's `kptfile/v1` schema: its own meta types, no
// `status`, no `upstreamLock.generic`, no `info.readinessGates`, and
// functions with image, exec, configPath and configMap only.
static TYPE_META: GoStruct = GoStruct {
    name: "v1.TypeMeta",
    fields: &[field!("apiVersion", STRING), field!("kind", STRING)],
};
static NAME_META: GoStruct = GoStruct {
    name: "v1.NameMeta",
    fields: &[field!("name", STRING), field!("namespace", STRING)],
};
static OBJECT_META: GoStruct = GoStruct {
    name: "v1.ObjectMeta",
    fields: &[
        inline_field!(&NAME_META),
        field!("labels", GoType::StrMap),
        field!("annotations", GoType::StrMap),
    ],
};
static RESOURCE_META: GoStruct = GoStruct {
    name: "v1.ResourceMeta",
    fields: &[
        inline_field!(&TYPE_META),
        field!("metadata", GoType::Struct(&OBJECT_META)),
    ],
};
/// `v1.UpstreamLock` without `generic` (also the fix function's copy).
pub(crate) static UPSTREAM_LOCK: GoStruct = GoStruct {
    name: "v1.UpstreamLock",
    fields: &[
        field!("type", GoType::Str("v1.OriginType")),
        field!("git", GoType::Struct(&GIT_LOCK), pointer),
    ],
};
static STRINGS: GoType = STRING;
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
    ],
};
static FUNCTION: GoStruct = GoStruct {
    name: "v1.Function",
    fields: &[
        field!("image", STRING),
        field!("exec", STRING),
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
static KPTFILE: GoStruct = GoStruct {
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

/// Runs set-project-id on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    let project_id = data_map(input.function_config.as_ref())
        .remove(SETTER)
        .unwrap_or_default();
    let mut input = input;
    let done = set_setters(&mut input.items, &project_id)
        .map_err(|error| format!("failed to set project-id setter: {error}"));
    if done.is_ok() {
        set_annotations(&mut input.items, &project_id);
    }
    let mut outcome = Outcome::kyaml(input, Vec::new());
    if let Err(error) = done {
        // `command.Build` prints the error, then `main` with `Fprintln`.
        outcome.stderr = format!("{error}{error}\n");
        outcome.exit_code = 1;
    }
    outcome
}

/// kyaml `GetDataMap`: the scalar text of each `data` entry (the last of
/// repeated keys; other values read as empty).
pub(crate) fn data_map(config: Option<&Node>) -> BTreeMap<String, String> {
    config
        .and_then(|config| config.get("data"))
        .map(|data| {
            data.pairs()
                .map(|(key, value)| (key.value.to_string(), value.value.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// The item's `internal.config.kubernetes.io/path` annotation, or "".
fn path_of(item: &Node) -> &str {
    sdk::annotation(item, PATH).unwrap_or_default()
}

fn set_setters(items: &mut [Node], project_id: &str) -> Result<(), String> {
    let mut kptfiles = Vec::new();
    for item in items.iter() {
        if item.get_str(&["kind"]) != Some("Kptfile") {
            continue;
        }
        kptfiles.push(
            decode_kptfile(item).map_err(|error| {
                format!("failed to find Kptfile: failed to read Kptfile: {error}")
            })?,
        );
    }
    if kptfiles.is_empty() {
        return Err(
            "failed to find Kptfile: unable to find Kptfile, please include \
                    --include-meta-resources flag if a Kptfile is present"
                .to_owned(),
        );
    }
    for kptfile in kptfiles {
        set_setters_on_kptfile(items, kptfile, project_id)
            .map_err(|error| format!("error updating Kptfile: {error}"))?;
    }
    Ok(())
}

/// `DecodeKptfile(node.String())`: the item written out alone and decoded
/// from that text, so error lines count from its first line.
fn decode_kptfile(item: &Node) -> Result<StructValue, String> {
    let text = to_string(item, SeqIndent::Compact);
    let document = parse_document(&text)
        .map_err(|error| format!("invalid 'v1' Kptfile: {error}"))?
        .unwrap_or_else(|| Node::new_document(Node::new_mapping()));
    gostruct::decode(&document, &KPTFILE)
        .map_err(|errors| format!("invalid 'v1' Kptfile: {errors}"))
}

fn set_setters_on_kptfile(
    items: &mut [Node],
    mut kptfile: StructValue,
    project_id: &str,
) -> Result<(), String> {
    let mut pipeline = match kptfile.get(&KPTFILE, "pipeline") {
        Some(GoValue::Struct(Some(pipeline))) => pipeline.clone(),
        _ => StructValue::default(),
    };
    let mut mutators = match pipeline.get(&PIPELINE, "mutators") {
        Some(GoValue::List(Some(mutators))) => mutators.clone(),
        _ => Vec::new(),
    };
    let found = mutators.iter_mut().find_map(|mutator| match mutator {
        GoValue::Struct(Some(function))
            if function.str(&FUNCTION, "image").contains("apply-setters") =>
        {
            Some(function)
        }
        _ => None,
    });
    if let Some(function) = found {
        if let Some(GoValue::Map(Some(config_map))) = function.get(&FUNCTION, "configMap") {
            let mut config_map = config_map.clone();
            if config_map.get(SETTER).is_none_or(String::is_empty) {
                config_map.insert(SETTER.to_owned(), project_id.to_owned());
            }
            function.set(&FUNCTION, "configMap", GoValue::Map(Some(config_map)));
        } else {
            let config_path = function.str(&FUNCTION, "configPath").to_owned();
            if config_path.is_empty() {
                return Err("unable to find `ConfigMap` or `configPath` as the \
                            `functionConfig` for apply-setters"
                    .to_owned());
            }
            let setters = items
                .iter_mut()
                .find(|item| path_of(item) == config_path)
                .ok_or_else(|| {
                    format!(
                        "failed to find setter file: file {config_path} doesn't exist, please \
                         ensure the file specified in \"configPath\" exists and retry"
                    )
                })?;
            let mut data = data_map(Some(setters));
            if data.get(SETTER).is_none_or(String::is_empty) {
                data.insert(SETTER.to_owned(), project_id.to_owned());
                set_data_map(setters, &data);
            }
            // The setter file was the edit: the Kptfile stays as it was.
            return Ok(());
        }
    } else {
        let mut function = StructValue::default();
        function.set(
            &FUNCTION,
            "image",
            GoValue::Str(APPLY_SETTERS_IMAGE.to_owned()),
        );
        function.set(
            &FUNCTION,
            "configMap",
            GoValue::Map(Some(BTreeMap::from([(
                SETTER.to_owned(),
                project_id.to_owned(),
            )]))),
        );
        mutators.push(GoValue::Struct(Some(function)));
    }
    pipeline.set(&PIPELINE, "mutators", GoValue::List(Some(mutators)));
    kptfile.set(&KPTFILE, "pipeline", GoValue::Struct(Some(pipeline)));
    replace_kptfile(items, &kptfile);
    Ok(())
}

/// `setKptfile`: the re-marshalled Kptfile replaces the first item whose
/// path annotation is the Kptfile's own.
fn replace_kptfile(items: &mut [Node], kptfile: &StructValue) {
    let path = match kptfile
        .get(&KPTFILE, "metadata")
        .and_then(|metadata| match metadata {
            GoValue::Struct(Some(metadata)) => metadata.get(&OBJECT_META, "annotations"),
            _ => None,
        }) {
        Some(GoValue::Map(Some(annotations))) => annotations.get(PATH).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    if let Some(slot) = items.iter_mut().find(|item| path_of(item) == path) {
        *slot = gostruct::marshal(kptfile, &KPTFILE);
    }
}

/// kyaml `SetDataMap`: `data` removed, then rebuilt at the end of the
/// mapping with sorted keys and `!!str` values (literal when multi-line).
fn set_data_map(item: &mut Node, data: &BTreeMap<String, String>) {
    item.remove("data");
    if data.is_empty() {
        return;
    }
    let Some(mapping) = sdk::ensure_mapping(item, "data") else {
        return;
    };
    for (key, value) in data {
        let mut node = Node::new_string(value.as_str());
        if value.contains('\n') {
            node.style = crate::yaml::Style::LITERAL;
        }
        mapping.set(key, node);
    }
}

/// `setProjectIDAnnotation`.
fn set_annotations(items: &mut [Node], project_id: &str) {
    static KCC_API_VERSION: std::sync::LazyLock<Option<Regex>> =
        std::sync::LazyLock::new(|| Regex::new(r"^(\w+)\.cnrm\.cloud\.google\.com/\w+$").ok());
    let Some(kcc) = KCC_API_VERSION.as_ref() else {
        return;
    };
    for item in items.iter_mut() {
        let api_version = item.get_str(&["apiVersion"]).unwrap_or_default();
        let is_kcc = kcc
            .captures(api_version)
            .and_then(|captures| captures.get(1))
            .is_some_and(|group| group.as_str() != "core");
        if !is_kcc {
            continue;
        }
        let mut annotations = sdk::annotations_map(item);
        if annotations.contains_key(PROJECT_ID_ANNOTATION) {
            continue;
        }
        annotations.insert(PROJECT_ID_ANNOTATION.to_owned(), project_id.to_owned());
        sdk::set_annotations_map(item, &annotations);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(text: &str) -> Node {
        parse_document(text).unwrap().unwrap().into_root()
    }

    fn stderr_of(items: Vec<Node>) -> String {
        let config = item("apiVersion: v1\nkind: ConfigMap\ndata:\n  project-id: foo\n");
        run(ResourceList {
            items,
            function_config: Some(config),
        })
        .stderr
    }

    #[test]
    fn each_error_reads_as_the_function_prints_it() {
        let twice = |error: &str| format!("{error}{error}\n");
        assert_eq!(
            stderr_of(vec![item(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
            )]),
            twice(
                "failed to set project-id setter: failed to find Kptfile: unable to find \
                 Kptfile, please include --include-meta-resources flag if a Kptfile is present"
            )
        );
        assert_eq!(
            stderr_of(vec![item(
                "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\nstatus: {}\n"
            )]),
            twice(
                "failed to set project-id setter: failed to find Kptfile: failed to read \
                 Kptfile: invalid 'v1' Kptfile: yaml: unmarshal errors:\n  line 5: field \
                 status not found in type v1.KptFile"
            )
        );
        assert_eq!(
            stderr_of(vec![item(
                "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\npipeline:\n  \
                 mutators:\n  - image: apply-setters:v0.2\n"
            )]),
            twice(
                "failed to set project-id setter: error updating Kptfile: unable to find \
                 `ConfigMap` or `configPath` as the `functionConfig` for apply-setters"
            )
        );
        assert_eq!(
            stderr_of(vec![item(
                "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\npipeline:\n  \
                 mutators:\n  - image: apply-setters:v0.2\n    configPath: setters.yaml\n"
            )]),
            twice(
                "failed to set project-id setter: error updating Kptfile: failed to find \
                 setter file: file setters.yaml doesn't exist, please ensure the file \
                 specified in \"configPath\" exists and retry"
            )
        );
    }
}
