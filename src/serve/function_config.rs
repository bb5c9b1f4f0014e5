//! Porch's `FunctionConfig` resources (`config.porch.kpt.dev/v1alpha1`),
//! read from a directory and mapped onto krender's function table.
//!
//! A FunctionConfig names an image (`spec.image`, without tag), the other
//! registry prefixes it is known under (`spec.prefixes`), and which tags run
//! as a pre-installed binary (`spec.binaryExecutor.{tags,path}`) or in a
//! pod (`spec.podExecutor.{tags,timeToLive,templateOverrides}`). krender
//! maps each listed tag to one route, in this order: its in-process builtin
//! when krender implements that image and tag, else the binary, else a
//! container engine (standing in for the pod; `timeToLive` and
//! `templateOverrides` concern pods and are accepted and ignored). An
//! executor without `tags` covers every tag.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::runtime::builtin::Builtin;
use crate::runtime::config::FunctionEntry;

/// The API group and version of a FunctionConfig.
pub(crate) const API_VERSION: &str = "config.porch.kpt.dev/v1alpha1";
/// Its kind.
pub(crate) const KIND: &str = "FunctionConfig";

/// A FunctionConfig directory that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum FunctionConfigError {
    /// The directory or one of its files could not be read.
    #[error("failed to read {path}: {message}")]
    #[diagnostic(code(krender::serve::function_config_read))]
    Read {
        /// The directory or file.
        path: PathBuf,
        /// The I/O error text.
        message: String,
    },
    /// A file is not YAML, or a FunctionConfig in it is malformed.
    #[error("invalid FunctionConfig in {path}: {message}")]
    #[diagnostic(code(krender::serve::function_config_invalid))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

#[derive(Debug, Default, Deserialize)]
struct Document {
    #[serde(default, rename = "apiVersion")]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: Metadata,
    spec: Option<Spec>,
}

#[derive(Debug, Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    image: String,
    #[serde(default)]
    prefixes: Vec<String>,
    binary_executor: Option<BinaryExecutor>,
    pod_executor: Option<PodExecutor>,
}

#[derive(Debug, Default, Deserialize)]
struct BinaryExecutor {
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    path: PathBuf,
}

#[derive(Debug, Default, Deserialize)]
struct PodExecutor {
    #[serde(default)]
    tags: Vec<String>,
}

/// The tags an executor lists (`*` when it lists none).
fn tags_or_all(tags: &[String]) -> Vec<String> {
    if tags.is_empty() {
        vec!["*".to_owned()]
    } else {
        tags.to_vec()
    }
}

/// Whether krender's builtin serves `image` at `tag` (`*`: at any tag the
/// builtin accepts).
fn builtin_serves(image: &str, tag: &str) -> bool {
    if tag == "*" {
        let short = image.rsplit('/').next().unwrap_or(image);
        return Builtin::from_name(short).is_some()
            && Builtin::for_image(&format!("{image}:latest")).is_some();
    }
    Builtin::for_image(&format!("{image}:{tag}")).is_some()
}

/// One FunctionConfig as a function-table entry (see the module doc).
fn entry(spec: &Spec) -> FunctionEntry {
    let mut builtin = Vec::new();
    let mut executable = BTreeMap::new();
    let mut container = Vec::new();
    let binary_tags = spec
        .binary_executor
        .as_ref()
        .map(|binary| tags_or_all(&binary.tags))
        .unwrap_or_default();
    let pod_tags = spec
        .pod_executor
        .as_ref()
        .map(|pod| tags_or_all(&pod.tags))
        .unwrap_or_default();
    for tag in binary_tags.iter().chain(&pod_tags) {
        if builtin.contains(tag) || executable.contains_key(tag) || container.contains(tag) {
            continue;
        }
        if builtin_serves(&spec.image, tag) {
            builtin.push(tag.clone());
        } else if binary_tags.contains(tag)
            && let Some(binary) = &spec.binary_executor
        {
            executable.insert(tag.clone(), binary.path.clone());
        } else {
            container.push(tag.clone());
        }
    }
    FunctionEntry {
        image: spec.image.clone(),
        prefixes: spec.prefixes.clone(),
        builtin,
        executable,
        container,
        ..FunctionEntry::default()
    }
}

/// Decodes the FunctionConfigs of one file's text (other documents are
/// skipped); `path` names the file in errors.
pub(crate) fn parse(text: &str, path: &Path) -> Result<Vec<FunctionEntry>, FunctionConfigError> {
    let invalid = |message: String| FunctionConfigError::Invalid {
        path: path.to_owned(),
        message,
    };
    let documents =
        crate::yaml::parse_documents(text).map_err(|error| invalid(error.to_string()))?;
    let mut entries = Vec::new();
    for node in &documents {
        if node.root().is_null() {
            continue;
        }
        let document: Document =
            crate::yaml::de::from_node(node).map_err(|error| invalid(error.to_string()))?;
        if document.kind != KIND || document.api_version != API_VERSION {
            continue;
        }
        let name = &document.metadata.name;
        let spec = document
            .spec
            .ok_or_else(|| invalid(format!("FunctionConfig {name:?} has no spec")))?;
        if spec.image.is_empty() {
            return Err(invalid(format!(
                "FunctionConfig {name:?} has no spec.image"
            )));
        }
        if spec.image.contains('@')
            || !crate::runtime::builtin::split_image(&spec.image)
                .1
                .is_empty()
        {
            return Err(invalid(format!(
                "FunctionConfig {name:?}: spec.image {:?} must name the image without a tag or digest (list tags under binaryExecutor or podExecutor)",
                spec.image
            )));
        }
        if let Some(binary) = &spec.binary_executor
            && binary.path.as_os_str().is_empty()
        {
            return Err(invalid(format!(
                "FunctionConfig {name:?} has a binaryExecutor without a path"
            )));
        }
        entries.push(entry(&spec));
    }
    Ok(entries)
}

/// Reads every `*.yaml`/`*.yml` file of `dir` (not its subdirectories), in
/// name order, and returns the table entries of their FunctionConfigs.
pub(crate) fn load_dir(dir: &Path) -> Result<Vec<FunctionEntry>, FunctionConfigError> {
    let read_error = |path: &Path, error: std::io::Error| FunctionConfigError::Read {
        path: path.to_owned(),
        message: error.to_string(),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|error| read_error(dir, error))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_file()
                && path
                    .extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    let mut entries = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|error| read_error(&file, error))?;
        entries.extend(parse(&text, &file)?);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::config::{FunctionTable, Route};

    const CONFIGS: &str = r#"
apiVersion: config.porch.kpt.dev/v1alpha1
kind: FunctionConfig
metadata:
  name: set-namespace
spec:
  image: ghcr.io/kptdev/krm-functions-catalog/set-namespace
  prefixes: ["gcr.io/kpt-fn/"]
  binaryExecutor:
    tags: ["v0.4.1"]
    path: /functions/set-namespace
  podExecutor:
    tags: ["v0.4.1", "v0.4.2"]
    timeToLive: 30m
    templateOverrides:
      spec: {}
---
apiVersion: config.porch.kpt.dev/v1alpha1
kind: FunctionConfig
metadata:
  name: custom
spec:
  image: example.com/fns/custom
  binaryExecutor:
    tags: ["v1"]
    path: /functions/custom
  podExecutor:
    tags: ["v2"]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: not-a-function-config
"#;

    fn table() -> FunctionTable {
        let entries = parse(CONFIGS, Path::new("configs.yaml")).unwrap_or_default();
        FunctionTable {
            functions: entries,
            ..FunctionTable::default()
        }
    }

    #[test]
    fn serve_maps_builtin_then_binary_then_pod() {
        let table = table();
        assert_eq!(table.functions.len(), 2);
        assert_eq!(
            table.known_route("ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1"),
            Some(Route::Builtin(Builtin::SetNamespace))
        );
        assert_eq!(
            table.known_route("gcr.io/kpt-fn/set-namespace:v0.4.2"),
            Some(Route::Builtin(Builtin::SetNamespace))
        );
        assert_eq!(
            table.known_route("example.com/fns/custom:v1"),
            Some(Route::Executable(PathBuf::from("/functions/custom")))
        );
        assert_eq!(
            table.known_route("example.com/fns/custom:v2"),
            Some(Route::Container { pull_policy: None })
        );
        assert_eq!(table.known_route("example.com/fns/custom:v3"), None);
        assert_eq!(table.known_route("example.com/unknown:v1"), None);
    }

    #[test]
    fn serve_rejects_malformed_function_configs() {
        for bad in [
            "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata: {name: x}\n",
            "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata: {name: x}\nspec: {image: a/b:v1}\n",
            "apiVersion: config.porch.kpt.dev/v1alpha1\nkind: FunctionConfig\nmetadata: {name: x}\nspec: {image: a/b, binaryExecutor: {tags: [v1]}}\n",
            "apiVersion: [",
        ] {
            assert!(
                matches!(
                    parse(bad, Path::new("bad.yaml")),
                    Err(FunctionConfigError::Invalid { .. })
                ),
                "{bad}"
            );
        }
    }
}
