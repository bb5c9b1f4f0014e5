//! `render.toml`: the function table deciding how each `image:` step runs —
//! in process (builtin), as a local executable speaking the KRM protocol, or
//! in a container — modelled on Porch's FunctionConfig (an image, its
//! accepted prefixes, and per-executor tag lists).
//!
//! Without a table, builtins run the functions krender implements and a
//! container engine runs the rest. See the documented example `render.toml`
//! at the repository root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::builtin::{Builtin, DEFAULT_IMAGE_PREFIX, catalog_name, split_image};

/// Default per-function deadline (kpt uses no deadline; five minutes keeps
/// a hung function from hanging the render).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// A render.toml that could not be read or decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("failed to read {path}: {message}")]
    #[diagnostic(code(krender::runtime::config_read))]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error text.
        message: String,
    },
    /// The file is not a valid function table.
    #[error("invalid function table {path}: {message}")]
    #[diagnostic(code(krender::runtime::config_invalid))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The decoder's message (with line and column).
        message: String,
    },
}

/// How one image runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// In process.
    Builtin(Builtin),
    /// A local binary speaking the KRM function protocol on stdin/stdout.
    Executable(PathBuf),
    /// A container, with an optional pull policy.
    Container {
        /// `Always`, `IfNotPresent` or `Never`; `None` = the CLI's default.
        pull_policy: Option<String>,
    },
}

/// The tag of `image` (`latest` when it has none; a digest is dropped).
fn tag_of(image: &str) -> &str {
    let (_, rest) = split_image(image);
    rest.strip_prefix(':')
        .map(|tag| tag.split('@').next().unwrap_or(tag))
        .unwrap_or("latest")
}

/// The decoded table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionTable {
    /// Settings applying to every function.
    #[serde(default)]
    pub defaults: Defaults,
    /// Per-image entries.
    #[serde(default, rename = "function")]
    pub functions: Vec<FunctionEntry>,
    /// Kptfile `exec:` programs declared pure (their results are cached).
    #[serde(default, rename = "exec")]
    pub execs: Vec<ExecEntry>,
    /// `[cache]`: the cache shared between machines.
    #[serde(default)]
    pub cache: CacheSettings,
}

/// `[cache]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSettings {
    /// The remote cache's URL (`--remote-cache` wins).
    pub remote: Option<String>,
    /// `read` or `read-write` (`--remote-cache-mode` wins).
    pub mode: Option<String>,
}

/// `[[exec]]`: a program that Kptfile `exec:` steps run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecEntry {
    /// The program: the first word of the step's `exec:` string, as
    /// written there (`sed`, `./fn.sh`, `/usr/local/bin/fn`).
    pub program: String,
    /// True when the program is a pure function of its stdin and arguments,
    /// so its results may be cached (keyed also by the program file's
    /// digest).
    #[serde(default)]
    pub cache: bool,
    /// Deadline override in seconds for the program's steps.
    pub timeout_seconds: Option<u64>,
}

/// `[defaults]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Per-function deadline in seconds.
    pub timeout_seconds: Option<u64>,
    /// When false, no builtin runs unless an entry pins it.
    pub builtins: Option<bool>,
}

/// `[[function]]`: one image and how its tags run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionEntry {
    /// The image name without tag; a bare name gets the catalog prefix.
    pub image: String,
    /// Other prefixes under which the same function is accepted.
    #[serde(default)]
    pub prefixes: Vec<String>,
    /// Tags run in process (`*` = every tag).
    #[serde(default)]
    pub builtin: Vec<String>,
    /// Tag → path of a local binary (`*` = every tag).
    #[serde(default)]
    pub executable: BTreeMap<String, PathBuf>,
    /// Tags run in a container (`*` = every tag).
    #[serde(default)]
    pub container: Vec<String>,
    /// Pull policy for the container tags.
    pub pull_policy: Option<String>,
    /// Deadline override in seconds.
    pub timeout_seconds: Option<u64>,
    /// True when the executable and container tags are pure functions of
    /// their input, so their results may be cached (builtins always are).
    #[serde(default)]
    pub cache: bool,
    /// The tag `image` was written with (`name:tag`): the entry is for that
    /// tag alone, and `*` in its lists means it.
    #[serde(skip)]
    pub pinned_tag: Option<String>,
}

impl FunctionEntry {
    fn short_name(&self) -> &str {
        self.image.rsplit('/').next().unwrap_or(&self.image)
    }

    fn accepts(&self, name: &str) -> bool {
        // A catalog function is the same function under either catalog
        // prefix, or none.
        if let (Some(mine), Some(theirs)) = (catalog_name(&self.image), catalog_name(name))
            && mine == theirs
        {
            return true;
        }
        let canonical = if self.image.contains('/') {
            self.image.clone()
        } else {
            format!("{DEFAULT_IMAGE_PREFIX}{}", self.image)
        };
        name == canonical
            || name == self.image
            || self
                .prefixes
                .iter()
                .any(|prefix| name == format!("{prefix}{}", self.short_name()))
    }

    /// Whether the entry covers `image` (`name[:tag][@digest]`).
    fn covers(&self, image: &str) -> bool {
        let (name, _) = split_image(image);
        self.accepts(name)
            && self
                .pinned_tag
                .as_ref()
                .is_none_or(|pinned| *pinned == tag_of(image))
    }

    /// The route for `tag`, exact tags before `*`.
    fn route(&self, tag: &str) -> Option<Route> {
        if self.pinned_tag.as_ref().is_some_and(|pinned| pinned != tag) {
            return None;
        }
        for wanted in [tag, "*"] {
            if let Some(path) = self.executable.get(wanted) {
                return Some(Route::Executable(path.clone()));
            }
            if self.builtin.iter().any(|t| t == wanted)
                && let Some(builtin) = Builtin::from_name(self.short_name())
            {
                return Some(Route::Builtin(builtin));
            }
            if self.container.iter().any(|t| t == wanted) {
                return Some(Route::Container {
                    pull_policy: self.pull_policy.clone(),
                });
            }
        }
        None
    }
}

impl FunctionTable {
    /// Decodes a table from TOML text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<FunctionTable, ConfigError> {
        let mut table: FunctionTable =
            toml::from_str(text).map_err(|err| ConfigError::Invalid {
                path: path.to_owned(),
                message: err.to_string(),
            })?;
        for entry in &mut table.functions {
            let (name, rest) = split_image(&entry.image);
            let problem = if name.is_empty() {
                Some("has no name")
            } else if rest.contains('@') {
                Some(
                    "names a digest: give the name (and a tag), and list tags under builtin, executable or container",
                )
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!("[[function]] image = {:?} {problem}", entry.image),
                });
            }
            if let Some(tag) = rest.strip_prefix(':') {
                let (name, tag) = (name.to_owned(), tag.to_owned());
                entry.image = name;
                entry.pinned_tag = Some(tag);
            }
        }
        Ok(table)
    }

    /// Reads `path`; a missing file is an empty table.
    pub fn load(path: &Path) -> Result<FunctionTable, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => FunctionTable::parse(&text, path),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(FunctionTable::default()),
            Err(err) => Err(ConfigError::Read {
                path: path.to_owned(),
                message: err.to_string(),
            }),
        }
    }

    /// How `image` (`name[:tag][@digest]`) runs: an unknown image runs in
    /// a container.
    pub fn route(&self, image: &str) -> Route {
        self.known_route(image)
            .unwrap_or(Route::Container { pull_policy: None })
    }

    /// How `image` runs when an entry or a builtin covers it; `None` for an
    /// image neither names (`route` runs it in a container, `krender serve`
    /// answers NotFound, as Porch's function runner does).
    pub fn known_route(&self, image: &str) -> Option<Route> {
        let (name, _) = split_image(image);
        let tag = tag_of(image);
        if let Some(route) = self
            .functions
            .iter()
            .filter(|entry| entry.accepts(name))
            .find_map(|entry| entry.route(tag))
        {
            return Some(route);
        }
        match Builtin::for_image(image) {
            Some(builtin) if self.defaults.builtins != Some(false) => Some(Route::Builtin(builtin)),
            _ => None,
        }
    }

    /// Whether the table declares `image`'s executable or container pure.
    pub fn image_is_pure(&self, image: &str) -> bool {
        self.functions
            .iter()
            .filter(|entry| entry.covers(image))
            .any(|entry| entry.cache)
    }

    /// Whether the table declares the program of an `exec:` step pure.
    pub fn exec_is_pure(&self, exec: &str) -> bool {
        let program = exec.split_whitespace().next().unwrap_or("");
        !program.is_empty()
            && self
                .execs
                .iter()
                .any(|entry| entry.cache && entry.program == program)
    }

    /// The deadline the table sets for an `exec:` step (its `[[exec]]`
    /// entry's, else `[defaults]`'s), if it sets one.
    pub fn exec_timeout_override(&self, exec: &str) -> Option<Duration> {
        let program = exec.split_whitespace().next().unwrap_or("");
        self.execs
            .iter()
            .filter(|entry| entry.program == program)
            .find_map(|entry| entry.timeout_seconds)
            .or(self.defaults.timeout_seconds)
            .map(Duration::from_secs)
    }

    /// The deadline for `image`.
    pub fn timeout(&self, image: &str) -> Duration {
        self.timeout_override(image).unwrap_or(DEFAULT_TIMEOUT)
    }

    /// The deadline the table sets for `image`, if it sets one.
    pub fn timeout_override(&self, image: &str) -> Option<Duration> {
        self.functions
            .iter()
            .filter(|entry| entry.covers(image))
            .find_map(|entry| entry.timeout_seconds)
            .or(self.defaults.timeout_seconds)
            .map(Duration::from_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = r#"
[defaults]
timeout_seconds = 60

[[function]]
image = "set-namespace"
prefixes = ["gcr.io/kpt-fn/"]
builtin = ["*"]
executable = { "v0.4.2" = "/usr/local/bin/set-namespace" }
container = ["v0.4.1"]
pull_policy = "IfNotPresent"
"#;

    #[test]
    fn routes_by_tag() {
        let table = FunctionTable::parse(TABLE, Path::new("render.toml")).unwrap_or_default();
        let full = "ghcr.io/kptdev/krm-functions-catalog/set-namespace";
        assert_eq!(
            table.route(&format!("{full}:v0.4.2")),
            Route::Executable(PathBuf::from("/usr/local/bin/set-namespace"))
        );
        assert_eq!(
            table.route(&format!("{full}:v0.4.1")),
            Route::Container {
                pull_policy: Some("IfNotPresent".to_owned())
            }
        );
        assert_eq!(
            table.route("gcr.io/kpt-fn/set-namespace:latest"),
            Route::Builtin(Builtin::SetNamespace)
        );
        assert_eq!(
            table.route("ghcr.io/kptdev/krm-functions-catalog/set-labels:v1"),
            Route::Builtin(Builtin::SetLabels)
        );
        assert_eq!(
            table.route("example.com/other:v1"),
            Route::Container { pull_policy: None }
        );
        assert_eq!(table.timeout(full), Duration::from_secs(60));
        assert!(!table.image_is_pure(full));
    }

    #[test]
    fn purity_is_declared_per_image_and_per_program() {
        let table = FunctionTable::parse(
            "[[function]]\nimage = \"example.com/fn\"\ncontainer = [\"*\"]\ncache = true\n\n[[exec]]\nprogram = \"sed\"\ncache = true\n\n[[exec]]\nprogram = \"date\"\n",
            Path::new("render.toml"),
        )
        .unwrap_or_default();
        assert!(table.image_is_pure("example.com/fn:v1"));
        assert!(!table.image_is_pure("example.com/other:v1"));
        assert!(table.exec_is_pure("sed -e s/a/b/"));
        assert!(!table.exec_is_pure("date"));
        assert!(!table.exec_is_pure("sedx"));
        assert!(!table.exec_is_pure(""));
    }

    #[test]
    fn the_documented_example_parses_and_uncommented_entries_too() {
        let example = include_str!("../../render.toml");
        assert_eq!(
            FunctionTable::parse(example, Path::new("render.toml")),
            Ok(FunctionTable::default())
        );
        let uncommented: String = example
            .lines()
            .map(|line| line.strip_prefix("# ").unwrap_or(line))
            .filter(|line| line.starts_with('[') || line.contains(" = ") && !line.starts_with('#'))
            .map(|line| format!("{line}\n"))
            .collect();
        let table = FunctionTable::parse(&uncommented, Path::new("render.toml"));
        assert!(table.is_ok(), "{table:?}\n{uncommented}");
    }

    /// `image = "name:tag"` is an entry for that tag alone; a digest is
    /// refused with how to write the entry.
    #[test]
    fn a_tagged_image_pins_its_entry_to_the_tag() {
        let table = FunctionTable::parse(
            "[[function]]\nimage = \"gcr.io/kpt-fn/render-helm-chart:v0.1\"\nexecutable = { \"*\" = \"/bin/gf\" }\ntimeout_seconds = 9\n",
            Path::new("render.toml"),
        )
        .unwrap_or_default();
        assert_eq!(
            table.route("gcr.io/kpt-fn/render-helm-chart:v0.1"),
            Route::Executable(PathBuf::from("/bin/gf"))
        );
        // The same function under the other catalog prefix.
        assert_eq!(
            table.route("ghcr.io/kptdev/krm-functions-catalog/render-helm-chart:v0.1"),
            Route::Executable(PathBuf::from("/bin/gf"))
        );
        assert_eq!(
            table.route("gcr.io/kpt-fn/render-helm-chart:v0.2"),
            Route::Container { pull_policy: None }
        );
        assert_eq!(
            table.timeout_override("gcr.io/kpt-fn/render-helm-chart:v0.1"),
            Some(Duration::from_secs(9))
        );
        assert_eq!(
            table.timeout_override("gcr.io/kpt-fn/render-helm-chart:v0.2"),
            None
        );
        let digest = FunctionTable::parse(
            "[[function]]\nimage = \"example.com/fn@sha256:abc\"\ncontainer = [\"*\"]\n",
            Path::new("render.toml"),
        );
        assert!(
            matches!(&digest, Err(ConfigError::Invalid { message, .. }) if message.contains("names a digest")),
            "{digest:?}"
        );
    }

    /// The two catalog prefixes and a bare name are one function.
    #[test]
    fn both_catalog_prefixes_name_the_same_function() {
        for written in [
            "set-image",
            "gcr.io/kpt-fn/set-image",
            "ghcr.io/kptdev/krm-functions-catalog/set-image",
        ] {
            let table = FunctionTable::parse(
                &format!("[[function]]\nimage = \"{written}\"\ncontainer = [\"*\"]\n"),
                Path::new("render.toml"),
            )
            .unwrap_or_default();
            for image in [
                "gcr.io/kpt-fn/set-image:v0.1",
                "ghcr.io/kptdev/krm-functions-catalog/set-image:v0.1",
                "set-image:v0.1",
            ] {
                assert_eq!(
                    table.route(image),
                    Route::Container { pull_policy: None },
                    "{written} / {image}"
                );
            }
            assert_eq!(
                table.route("example.com/set-image:v0.1"),
                Route::Container { pull_policy: None }
            );
            assert_eq!(
                table.route("gcr.io/kpt-fn/set-labels:v0.2"),
                Route::Builtin(Builtin::SetLabels)
            );
        }
    }

    #[test]
    fn unknown_keys_are_errors() {
        let err = FunctionTable::parse(
            "[[function]]\nimage = \"x\"\nbogus = 1\n",
            Path::new("r.toml"),
        );
        assert!(matches!(err, Err(ConfigError::Invalid { .. })));
    }
}
