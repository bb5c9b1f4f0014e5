//! The action cache on every shared kpt case (`kpt::incremental::<case>`):
//! the case rendered, edited (a comment appended to a resource file of its
//! deepest package) and rendered again with the cache shows exactly what
//! the same steps show without it (exit code, stdout, stderr, files).

use std::path::Path;

use libtest_mimic::Trial;

use crate::support::{copy_dir, edit_both, render_both, snapshot};

pub(super) fn trials() -> Vec<Trial> {
    super::per_case("incremental", run)
}

fn run(case: &Path) -> crate::Outcome {
    let temp = tempfile::tempdir()?;
    let name = crate::name_of(case);
    let flags = super::case_flags(case);
    let (a, b) = (
        temp.path().join("a").join(&name),
        temp.path().join("b").join(&name),
    );
    copy_dir(case, &a);
    copy_dir(case, &b);
    let cache = temp.path().join("cache");
    render_both(&a, &b, &cache, &flags)
        .map_err(|difference| format!("first render: {difference}"))?;
    let edited = first_resource_file(&a);
    if let Some(file) = &edited {
        edit_both([&a, &b], file, "# edited\n");
    }
    render_both(&a, &b, &cache, &flags).map_err(|difference| match &edited {
        Some(file) => format!("after a comment was appended to {file}: {difference}"),
        None => format!("second render (no resource file to edit): {difference}"),
    })?;
    Ok(())
}

/// The deepest package's first `.yaml` file other than a Kptfile.
fn first_resource_file(root: &Path) -> Option<String> {
    snapshot(root)
        .into_keys()
        .filter(|path| path.ends_with(".yaml") && !path.contains("/.") && !path.starts_with('.'))
        .max_by_key(|path| (path.matches('/').count(), std::cmp::Reverse(path.clone())))
}
