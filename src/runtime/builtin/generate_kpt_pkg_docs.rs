//! `generate-kpt-pkg-docs` (kyaml framework): generates a package's README
//! into the file at the config's `readme-path` (default `/tmp/README.md`)
//! when that file exists. The function reads and writes the container's
//! own file system, which `kpt fn render` mounts nothing into: the file is
//! absent, and the function only reports it, leaving the items as they
//! are:
//! `failed to generate doc: Skipping readme generation: open <path>: no
//! such file or directory` (a warning; exit code 0).
//!
//! krender takes every path as absent from the image. A path the image
//! happens to hold (a directory such as `/tmp`, or one of its own files)
//! would make the function generate the README into its own file system
//! and may fail: those configs need the image.

use super::sdk::{FnResult, Outcome, ResourceList, Severity};

const DEFAULT_README_PATH: &str = "/tmp/README.md";

/// Runs generate-kpt-pkg-docs on a parsed input.
pub(crate) fn run(input: ResourceList) -> Outcome {
    // kyaml `GetDataMap`: every `data` entry by its text.
    let readme_path = input
        .function_config
        .as_ref()
        .and_then(|config| config.get("data"))
        .and_then(|data| {
            data.pairs()
                .filter(|(key, _)| key.value == "readme-path")
                .last()
                .map(|(_, value)| value.value.to_string())
        })
        .unwrap_or_else(|| DEFAULT_README_PATH.to_owned());
    let message = format!(
        "failed to generate doc: Skipping readme generation: open {readme_path}: no such file or directory"
    );
    Outcome::kyaml(input, vec![FnResult::new(Severity::Warning, message)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn message(config: Option<&str>) -> String {
        let outcome = run(ResourceList {
            items: Vec::new(),
            function_config: config.map(|text| parse_document(text).unwrap().unwrap().into_root()),
        });
        assert_eq!(outcome.exit_code, 0);
        assert_eq!(outcome.results.len(), 1);
        assert_eq!(outcome.results[0].severity, Some(Severity::Warning));
        outcome.results[0].message.clone()
    }

    #[test]
    fn the_readme_is_absent_from_the_image() {
        let skipping = "failed to generate doc: Skipping readme generation: open ";
        assert_eq!(
            message(None),
            format!("{skipping}/tmp/README.md: no such file or directory")
        );
        assert_eq!(
            message(Some(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  readme-path: pkg/README.md\n  pkg-name: p\n"
            )),
            format!("{skipping}pkg/README.md: no such file or directory")
        );
        assert_eq!(
            message(Some(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  readme-path: ''\n"
            )),
            format!("{skipping}: no such file or directory")
        );
    }
}
