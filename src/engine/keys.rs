//! A package run's key: what its output depends on (the krender build, the
//! options that change a run, the package's path relative to the root, its
//! files' digests, each function's identity and its subpackages' output
//! digests) and nothing that names the checkout, unless a function can see
//! it.

use super::cache::CachePolicy;
use super::db::RenderContext;
use super::plan::{Plan, PlannedPackage};
use super::record::KeyHasher;
use crate::hydrate::item::Digest;
use crate::pkg::kptfile::{self, Function};
use crate::runtime::FunctionTarget;

/// The key of `pkg`'s run given its subpackages' output digests, and
/// whether the run may be stored (see [`key_pipeline`]); `None` when one of
/// its functions is not known to be pure (or cannot run).
pub(crate) fn package_key(
    context: &RenderContext,
    plan: &Plan,
    pkg: &PlannedPackage,
    children: &[Digest],
) -> Option<(Digest, bool)> {
    let mut key = KeyHasher::of(&context.build, "dfs");
    let stored = key_pipeline(&mut key, context, plan, pkg)?;
    let files = pkg.files.as_ref().ok()?;
    key.number(files.len() as u64);
    for file in files {
        key.text(&file.file.relative);
        key.digest(&file.digest);
    }
    key.number(children.len() as u64);
    for child in children {
        key.digest(child);
    }
    Some((key.finish(), stored))
}

/// What every key of `pkg`'s runs covers: the package (by its path
/// relative to the root), the options that change a run, its Kptfile and
/// each function's identity and `configPath` file, and the checkout path
/// when a function can see it. `None` when a function is not known to be
/// pure; `Some(false)` when one is not but the context remembers such runs
/// for its own life (a watch session): the key is then never stored.
pub(crate) fn key_pipeline(
    key: &mut KeyHasher,
    context: &RenderContext,
    plan: &Plan,
    pkg: &PlannedPackage,
) -> Option<bool> {
    let policy = context.policy.as_ref()?;
    let options = &context.options;
    key.text(&pkg.rel);
    // Not the output mode: a run's output is the same whatever becomes of
    // it, so `-o stdout` and in-place renders share entries.
    key.flags(&[
        options.allow_exec,
        options.allow_wasm,
        options.truncate_output,
        context.save_on_failure,
    ]);
    key.text(&options.image_prefix);
    // The Kptfile is one of the package's files (kpt hands it to the
    // functions), so its bytes are in every key by digest; only a package
    // whose files do not list it (a `.krmignore`) is keyed by its decoded
    // form.
    let kptfile_listed = pkg.files.as_ref().is_ok_and(|files| {
        files
            .iter()
            .any(|file| file.file.relative == kptfile::KPTFILE_NAME)
    });
    if !kptfile_listed {
        key.text(&format!("{:?}", pkg.kptfile));
    }
    let pipeline = &pkg.kptfile.pipeline;
    let mut sees_checkout = false;
    let mut stored = true;
    for function in pipeline.mutators.iter().chain(&pipeline.validators) {
        let identity = match function_identity(policy, function, &options.image_prefix) {
            Some(identity) => identity,
            None if context.remember_impure => {
                stored = false;
                format!("session\0{}\0{}", function.image, function.exec)
            }
            None => return None,
        };
        sees_checkout |= !path_blind(&identity);
        key.text(&identity);
        if !function.config_path.is_empty() {
            // A config inside the package is among its files; one outside
            // is read where the step reads it.
            let config = std::fs::read(pkg.path.join(&function.config_path));
            key.bytes(config.as_deref().unwrap_or(b"\0missing"));
        }
    }
    if sees_checkout {
        // The function reads the resources' absolute package paths.
        key.text(&plan.root.display().to_string());
    }
    Some(stored)
}

/// The identities of `pkg`'s functions, in pipeline order (what
/// [`key_pipeline`] keys them by); `None` when one is not known to be pure.
pub(crate) fn function_identities(
    context: &RenderContext,
    pkg: &PlannedPackage,
) -> Option<Vec<String>> {
    let policy = context.policy.as_ref()?;
    let pipeline = &pkg.kptfile.pipeline;
    pipeline
        .mutators
        .iter()
        .chain(&pipeline.validators)
        .map(|function| function_identity(policy, function, &context.options.image_prefix))
        .collect()
}

/// The identity of `function` for keys (`builtin:set-namespace\0image`),
/// or `None` when it is not known to be pure.
fn function_identity(policy: &CachePolicy, function: &Function, prefix: &str) -> Option<String> {
    if !function.image.is_empty() {
        if !function.tag.is_empty() {
            return None;
        }
        let image = kptfile::with_default_tag(&kptfile::resolve_image(&function.image, prefix));
        let identity = policy.identity(FunctionTarget::Image(&image))?;
        Some(format!("{identity}\0image\0{image}"))
    } else if !function.exec.is_empty() {
        let identity = policy.identity(FunctionTarget::Exec(&function.exec))?;
        Some(format!("{identity}\0exec\0{}", function.exec))
    } else {
        None
    }
}

/// Whether a function with `identity` never sees the checkout path: the
/// builtins do not read package paths, except Starlark, whose scripts may.
fn path_blind(identity: &str) -> bool {
    identity.starts_with("builtin:") && !identity.starts_with("builtin:starlark")
}
