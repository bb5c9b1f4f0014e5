//! Everything krender does not implement goes to the real kpt: `alias
//! kpt=krender` must not hide `pkg`, `live`, `alpha` or `fn doc`.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

/// Names the kpt binary to hand commands to, instead of `kpt` on `PATH`.
const KPT_ENV: &str = "KRENDER_KPT";
/// Set on the kpt krender starts, so a `kpt` that is krender itself (a
/// symlink under another name) is caught instead of looping.
const HANDED_ENV: &str = "KRENDER_HANDED_TO_KPT";

/// The kpt release whose command-line texts krender reproduces.
pub(super) const KPT_TEXTS: &str = "1.0.0-beta.56";
/// The kpt commit whose `fn render` e2e suite krender passes.
pub(super) const KPT_E2E_COMMIT: &str = "23c57d7f";

/// Replaces this process with `kpt <args>` (same arguments, standard
/// streams and exit code); returns only when that cannot be done, with
/// the exit code after saying why.
pub(super) fn hand_over(args: &[OsString], err: &mut dyn Write) -> i32 {
    let command = args
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .filter(|arg| !arg.starts_with('-'))
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    if std::env::var_os(HANDED_ENV).is_some() {
        let _ = writeln!(
            err,
            "error: `kpt {command}` is not implemented by krender, and the kpt it was handed to is krender again; set {KPT_ENV} to the real kpt binary"
        );
        return 1;
    }
    let Some(kpt) = find_kpt() else {
        let _ = writeln!(
            err,
            "error: `kpt {command}` is not implemented by krender, which hands such commands to kpt, but no kpt was found on PATH (install kpt, or set {KPT_ENV} to its path)"
        );
        return 1;
    };
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new(&kpt)
        .args(args)
        .env(HANDED_ENV, "1")
        .exec();
    let _ = writeln!(err, "error: cannot run {}: {error}", kpt.display());
    1
}

/// `$KRENDER_KPT`, else the first `kpt` on `PATH` that is not this binary.
fn find_kpt() -> Option<PathBuf> {
    if let Some(kpt) = std::env::var_os(KPT_ENV).filter(|kpt| !kpt.is_empty()) {
        return Some(PathBuf::from(kpt));
    }
    let me = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    crate::runtime::exec::on_path("kpt").find(|kpt| std::fs::canonicalize(kpt).ok() != me)
}
