//! Cancellation of a running render: a token the caller trips (the CLI does
//! on SIGINT and SIGTERM) and every part of a render can see.
//!
//! Tripping it kills the process group of every function child running
//! under it, at once and from the tripping thread, so a render blocked on a
//! child's output wakes up without any polling; the engine and the hydrator
//! check it between steps and stop there. The token keeps no process-global
//! state: whoever creates it decides what trips it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A cancellation token; clones share it. Cheap to clone and to check.
#[derive(Clone, Debug, Default)]
pub struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    /// Process groups of the function children running now.
    groups: Mutex<BTreeSet<i32>>,
}

impl Cancel {
    /// A token that nothing has tripped yet.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Trips the token: every registered child's process group is killed
    /// and later checks see it. Tripping twice is harmless.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        let groups = match self.inner.groups.lock() {
            Ok(groups) => groups.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        for group in groups {
            kill_group(group);
        }
    }

    /// Whether the token was tripped.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Registers a running child's process group (its leader's pid); the
    /// group is killed if the token trips while the guard lives. A token
    /// tripped before the child registered kills it at once.
    pub(crate) fn register(&self, group: i32) -> GroupGuard {
        if let Ok(mut groups) = self.inner.groups.lock() {
            groups.insert(group);
        }
        // Checked after inserting: a trip between spawn and here is seen
        // either by `cancel` (which then kills the group) or here.
        if self.is_cancelled() {
            kill_group(group);
        }
        GroupGuard {
            cancel: self.clone(),
            group,
        }
    }
}

/// A registered process group; dropping it unregisters the group.
#[derive(Debug)]
pub(crate) struct GroupGuard {
    cancel: Cancel,
    group: i32,
}

impl GroupGuard {
    /// Kills the whole group (the leader and anything it started that is
    /// still in the group).
    pub(crate) fn kill(&self) {
        kill_group(self.group);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Ok(mut groups) = self.cancel.inner.groups.lock() {
            groups.remove(&self.group);
        }
    }
}

/// SIGKILL to every process of group `group`. A group with no process left
/// (ESRCH) is not an error.
pub(crate) fn kill_group(group: i32) {
    if group > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; no
        // memory is involved.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cancel;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn tripping_kills_registered_groups_and_later_registrations() {
        let cancel = Cancel::new();
        let mut child = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let pid = i32::try_from(child.id()).expect("pid fits");
        let guard = cancel.register(pid);
        assert!(!cancel.is_cancelled());
        cancel.cancel();
        assert!(cancel.is_cancelled());
        let status = child.wait().expect("reaped");
        assert!(!status.success(), "killed, not finished: {status:?}");
        drop(guard);

        // A child registered after the trip is killed on registration.
        let mut late = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let _guard = cancel.register(i32::try_from(late.id()).expect("pid fits"));
        assert!(!late.wait().expect("reaped").success());
    }
}
