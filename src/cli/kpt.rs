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
/// kpt's own top-level commands and `fn` subcommands (kpt 1.0): a word
/// closer to one of these than to any of krender's goes to kpt, which has
/// its own suggestions.
const KPT_COMMANDS: [&str; 7] = [
    "alpha",
    "completion",
    "fn",
    "help",
    "live",
    "pkg",
    "version",
];
const KPT_FN_COMMANDS: [&str; 6] = ["doc", "eval", "render", "sink", "source", "help"];

/// krender's own command a mistyped word most likely meant: within two
/// edits, and no farther than any kpt command of the same level. `None`
/// for an exact kpt command or a word near none of krender's.
fn own_suggestion(word: &str, own: &[String], kpt: &[&str]) -> Option<String> {
    if kpt.contains(&word) || word.starts_with('-') {
        return None;
    }
    let (distance, name) = own
        .iter()
        .map(|name| (strsim::levenshtein(word, name), name))
        .filter(|(distance, _)| *distance <= 2)
        .min()?;
    let nearest_kpt = kpt
        .iter()
        .map(|name| strsim::levenshtein(word, name))
        .min()
        .unwrap_or(usize::MAX);
    (distance <= nearest_kpt).then(|| name.clone())
}

/// Hands `args` to kpt, unless its command word is a typo of one of
/// krender's own (`krender wacth`): then clap's "did you mean" and exit 2,
/// as for any other mistyped krender command.
pub(super) fn hand_over_or_suggest(args: &[OsString], err: &mut dyn Write) -> i32 {
    use clap::CommandFactory;
    let words: Vec<String> = args
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .filter(|arg| !arg.starts_with('-'))
        .take(2)
        .collect();
    let cli = super::args::Cli::command();
    let names = |command: &clap::Command| -> Vec<String> {
        command
            .get_subcommands()
            .flat_map(|sub| {
                std::iter::once(sub.get_name().to_owned())
                    .chain(sub.get_all_aliases().map(str::to_owned))
            })
            .collect()
    };
    let suggestion = match words.as_slice() {
        [fn_word, word] if fn_word == "fn" => cli
            .find_subcommand("fn")
            .and_then(|fn_command| own_suggestion(word, &names(fn_command), &KPT_FN_COMMANDS))
            .map(|name| (format!("fn {word}"), format!("fn {name}"))),
        [word, ..] => {
            own_suggestion(word, &names(&cli), &KPT_COMMANDS).map(|name| (word.clone(), name))
        }
        [] => None,
    };
    if let Some((typed, meant)) = suggestion {
        let _ = writeln!(
            err,
            "error: unrecognized subcommand '{typed}'\n\n  tip: a similar subcommand exists: '{meant}'\n\nFor more information, try 'krender --help'."
        );
        return 2;
    }
    hand_over(args, err)
}

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

#[cfg(test)]
mod suggestion_tests {
    use super::*;

    fn own() -> Vec<String> {
        ["render", "watch", "rpkg", "serve", "layer", "cache", "man"]
            .map(str::to_owned)
            .to_vec()
    }

    #[test]
    fn a_typo_of_a_krender_command_is_caught_and_kpts_commands_pass() {
        assert_eq!(
            own_suggestion("wacth", &own(), &KPT_COMMANDS),
            Some("watch".to_owned())
        );
        assert_eq!(
            own_suggestion("serv", &own(), &KPT_COMMANDS),
            Some("serve".to_owned())
        );
        // kpt's own commands, and words nearer to them, go to kpt.
        assert_eq!(own_suggestion("pkg", &own(), &KPT_COMMANDS), None);
        assert_eq!(own_suggestion("live", &own(), &KPT_COMMANDS), None);
        assert_eq!(own_suggestion("lve", &own(), &KPT_COMMANDS), None);
        assert_eq!(own_suggestion("xyzzy", &own(), &KPT_COMMANDS), None);
    }
}
