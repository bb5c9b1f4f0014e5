//! The lifecycle module's one error type: lock conflicts (with who holds
//! the lock), atomic commits (wrapped) and crash recovery, and the
//! package-revision state machine in git. Every
//! variant names the package, path or revision it is about, and carries a
//! `krender::lifecycle::*` diagnostic code.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A lifecycle failure.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum LifecycleError {
    /// Another live process holds the package lock (try-lock: no waiting).
    #[error("package {} is locked by {holder}", path.display())]
    #[diagnostic(
        code(krender::lifecycle::locked),
        help(
            "wait for that command to finish; a lock left by a dead process is taken over automatically"
        )
    )]
    Locked {
        /// The package directory.
        path: PathBuf,
        /// Who holds the lock, as recorded in its lock file.
        holder: LockHolder,
    },
    /// A file or directory operation failed.
    #[error("{}: {message}", path.display())]
    #[diagnostic(code(krender::lifecycle::io))]
    Io {
        /// The path operated on.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// An atomic commit of package files, or its recovery, failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Commit(#[from] crate::pkg::commit::CommitError),
    /// The path is not inside a git repository (for `rpkg`).
    #[error("{}: not a krender package repository: {message}", path.display())]
    #[diagnostic(
        code(krender::lifecycle::not_a_repository),
        help("run `krender rpkg init` (or `krender rpkg clone URL DIR`) first")
    )]
    NotARepository {
        /// The directory given.
        path: PathBuf,
        /// git's message.
        message: String,
    },
    /// A package revision does not exist.
    #[error("package revision {revision} not found")]
    #[diagnostic(code(krender::lifecycle::revision_not_found))]
    RevisionNotFound {
        /// `<package>/<workspace>` or `<package>/v<N>`.
        revision: String,
    },
    /// A draft or proposal with this package and workspace already exists,
    /// or a workspace name was reused.
    #[error("package revision {revision} already exists ({lifecycle})")]
    #[diagnostic(code(krender::lifecycle::revision_exists))]
    RevisionExists {
        /// `<package>/<workspace>`.
        revision: String,
        /// Its current lifecycle.
        lifecycle: String,
    },
    /// The state machine forbids this transition.
    #[error(
        "package revision {revision}: cannot {action}: lifecycle is {from}{}",
        allowed_text(allowed)
    )]
    #[diagnostic(code(krender::lifecycle::invalid_transition))]
    InvalidTransition {
        /// `<package>/<workspace>` or `<package>/v<N>`.
        revision: String,
        /// The command (`propose`, `approve`, ...).
        action: &'static str,
        /// The current lifecycle.
        from: String,
        /// The lifecycles from which `action` is allowed.
        allowed: &'static [&'static str],
    },
    /// Published revisions are immutable: only their lifecycle may move on.
    #[error("package revision {revision} is published and immutable: {attempted}")]
    #[diagnostic(
        code(krender::lifecycle::published_immutable),
        help("start a new draft from it with `krender rpkg draft {package} --workspace <name>`")
    )]
    PublishedImmutable {
        /// `<package>/v<N>`.
        revision: String,
        /// The package name.
        package: String,
        /// What was attempted.
        attempted: String,
    },
    /// Optimistic locking: the caller's idea of the revision is stale.
    #[error(
        "package revision {revision}: conflict: expected commit {expected}, but it is at {actual}"
    )]
    #[diagnostic(
        code(krender::lifecycle::conflict),
        help("someone else updated it; pull, review the new state and retry")
    )]
    Conflict {
        /// `<package>/<workspace>`.
        revision: String,
        /// The commit id the caller named.
        expected: String,
        /// The commit id the branch points at now.
        actual: String,
    },
    /// A draft must render cleanly before it can be proposed.
    #[error("package revision {revision} does not render cleanly: {message}")]
    #[diagnostic(
        code(krender::lifecycle::render_failed),
        help(
            "fix the draft (e.g. `krender fn render` in its checkout), push it, then propose again"
        )
    )]
    RenderFailed {
        /// `<package>/<workspace>`.
        revision: String,
        /// The render's error text.
        message: String,
    },
    /// A name (package, workspace) that git or the layout cannot hold.
    #[error("invalid {what} {value:?}: {reason}")]
    #[diagnostic(code(krender::lifecycle::invalid_name))]
    InvalidName {
        /// `package` or `workspace`.
        what: &'static str,
        /// The name given.
        value: String,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A git operation failed.
    #[error("git: {context}: {message}")]
    #[diagnostic(code(krender::lifecycle::git))]
    Git {
        /// What krender was doing.
        context: String,
        /// libgit2's message.
        message: String,
    },
}

fn allowed_text(allowed: &[&str]) -> String {
    if allowed.is_empty() {
        String::new()
    } else {
        format!(" (allowed from {})", allowed.join(" or "))
    }
}

impl LifecycleError {
    /// An [`LifecycleError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, error: &std::io::Error) -> Self {
        LifecycleError::Io {
            path: path.into(),
            message: error.to_string(),
        }
    }
    /// A [`LifecycleError::Git`] with what krender was doing.
    pub(crate) fn git(context: impl Into<String>, error: &git2::Error) -> Self {
        LifecycleError::Git {
            context: context.into(),
            message: error.message().to_owned(),
        }
    }
}

/// Who holds (or held) a package lock, as recorded in the lock file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub host: String,
    /// The command line.
    pub command: String,
    /// When the lock was taken (seconds since the Unix epoch).
    pub since: u64,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pid == 0 {
            // The holder locked the file but has not written its name yet.
            return f.write_str("another krender process (not recorded yet)");
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        write!(
            f,
            "pid {} on {} ({}), held for {}s",
            self.pid,
            self.host,
            self.command,
            now.saturating_sub(self.since)
        )
    }
}
