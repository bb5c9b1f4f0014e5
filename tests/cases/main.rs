//! One test per case of every data-driven suite: the builtin fixtures, the
//! YAML goldens, native builtins against the wire, the shared kpt and
//! Deckhand cases. Each case is its own test (`cargo test --test cases --
//! deckhand::`), runs in parallel with the others and fails with a diff of that case alone; the summary counts
//! cases. A suite whose shared data directory is missing is one failing
//! test naming it, unless `KRENDER_SKIP_SHARED=1` (then one ignored test).

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};

mod builtins;
mod deckhand;
mod kpt;
mod native;
// Each test binary uses its own part of the helpers.
#[allow(dead_code)]
#[path = "../support.rs"]
mod support;
mod yaml;

fn main() {
    let arguments = Arguments::from_args();
    let mut trials = Vec::new();
    trials.extend(builtins::trials());
    trials.extend(deckhand::trials());
    trials.extend(kpt::trials());
    trials.extend(native::trials(&arguments));
    trials.extend(yaml::trials());
    libtest_mimic::run(&arguments, trials).exit();
}

/// Whether the command line can select a trial named `prefix` + a name
/// without `::` (libtest's filter is a substring, or the whole name with
/// `--exact`): suites whose listing is costly are not built for a run that
/// cannot select them (nextest runs each test as `--exact NAME`).
pub(crate) fn may_select(arguments: &Arguments, prefix: &str) -> bool {
    let Some(filter) = arguments.filter.as_deref() else {
        return true;
    };
    if arguments.exact {
        return filter.starts_with(prefix) && !filter[prefix.len()..].contains("::");
    }
    // A name's `::` all stand in the prefix: whatever the filter has up to
    // its last `::` must end the prefix.
    match filter.rfind("::") {
        Some(end) => prefix.ends_with(&filter[..end + 2]),
        None => true,
    }
}

/// A case's outcome: `Err` holds what differs, readable on its own.
pub(crate) type Outcome = Result<(), Failed>;

/// One trial per directory of `suite`'s shared data under `sub` (see
/// [`support::shared_dir`]), made by `cases` from that directory. A missing
/// directory is one failing trial naming it (ignored with
/// `KRENDER_SKIP_SHARED=1`), and so is a directory with no cases: an
/// emptied or renamed data set must not pass vacuously.
pub(crate) fn shared_suite(
    suite: &str,
    sub: &str,
    cases: impl FnOnce(&Path) -> Vec<Trial>,
) -> Vec<Trial> {
    let Some(dir) = support::shared_data(sub) else {
        let skip = support::skipping_shared();
        let missing = support::shared_root().join(sub);
        let message = format!(
            "shared data missing: {} is not a directory; point KRENDER_SHARED at the shared \
             directory, or set KRENDER_SKIP_SHARED=1 to skip the tests that need it",
            missing.display()
        );
        let trial = Trial::test(format!("{suite}::shared-data-missing"), move || {
            Err(message.into())
        });
        return vec![trial.with_ignored_flag(skip)];
    };
    non_empty(suite, &dir, cases(&dir))
}

/// `trials`, or one failing trial when there are none under `dir`.
pub(crate) fn non_empty(suite: &str, dir: &Path, trials: Vec<Trial>) -> Vec<Trial> {
    if !trials.is_empty() {
        return trials;
    }
    let message = format!("{suite}: no cases under {}", dir.display());
    vec![Trial::test(format!("{suite}::no-cases"), move || {
        Err(message.into())
    })]
}

/// The subdirectories of `dir` that hold `marker`, sorted.
pub(crate) fn case_dirs(dir: &Path, marker: &str) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join(marker).exists())
        .collect();
    cases.sort();
    cases
}

/// The last component of `path`, as a test name.
pub(crate) fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The text of `path`; an error names the file.
pub(crate) fn read(path: &Path) -> Result<String, Failed> {
    std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()).into())
}

/// A unified diff of `expected` against `actual`.
pub(crate) fn diff(expected: &str, actual: &str) -> String {
    similar::TextDiff::from_lines(expected, actual)
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string()
}
