//! Package revisions in a git repository, with Porch's lifecycle state
//! machine and git layout (`krender rpkg ...`).
//!
//! Layout (Porch's git repository adapter):
//! - a package `<pkg>` lives in the directory `<pkg>/` of the repository
//!   tree;
//! - a **Draft** is the branch `drafts/<pkg>/<workspace>`;
//! - a **Proposed** revision is the branch `proposed/<pkg>/<workspace>`;
//! - a **Published** revision is the annotated tag `<pkg>/v<N>` on a commit
//!   of `main` (the tag message records the workspace);
//! - **DeletionProposed** is a published tag plus the branch
//!   `deletionProposed/<pkg>/v<N>`.
//!
//! The state machine: revisions are only ever created as Drafts (`init`,
//! `clone`, `draft`); Draft → Proposed (`propose`, after a clean render),
//! Proposed → Draft (`reject`), Proposed → Published (`approve`),
//! Published → DeletionProposed (`propose-delete`), DeletionProposed →
//! Published (`reject`), and Draft, Proposed or DeletionProposed → gone
//! (`delete`). Only a Draft's contents change (`push`); a Published
//! revision is immutable and only its lifecycle moves on.
//!
//! Concurrency is optimistic, as in Porch: every change names the commit
//! it expects a ref to point at, and all refs a transition touches are
//! locked and checked together in one libgit2 ref transaction (git's own
//! `.lock` files), so of two concurrent writers exactly one wins and the
//! other gets [`LifecycleError::Conflict`] — never a lost update.

use crate::pkg::commit::Durability;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use git2::{ErrorCode, ObjectType, Oid, Repository, Signature, Tree};

use super::error::LifecycleError;

/// The lifecycle of a package revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lifecycle {
    /// Editable work in progress.
    Draft,
    /// Waiting for approval; read-only until rejected or approved.
    Proposed,
    /// Released and immutable.
    Published,
    /// Published, with its deletion waiting for approval.
    DeletionProposed,
}

impl std::fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Lifecycle::Draft => "Draft",
            Lifecycle::Proposed => "Proposed",
            Lifecycle::Published => "Published",
            Lifecycle::DeletionProposed => "DeletionProposed",
        })
    }
}

/// One package revision as found in the repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    /// The package name (its directory in the repository).
    pub package: String,
    /// The workspace the revision was drafted in.
    pub workspace: String,
    /// `N` of `v<N>` once published.
    pub number: Option<u32>,
    /// Where it is in its lifecycle.
    pub lifecycle: Lifecycle,
    /// The commit holding its contents.
    pub commit: Oid,
}

impl Revision {
    /// The name commands take: `<pkg>/v<N>` once published, else
    /// `<pkg>/<workspace>`.
    pub fn id(&self) -> String {
        match self.number {
            Some(number) => format!("{}/v{number}", self.package),
            None => format!("{}/{}", self.package, self.workspace),
        }
    }
}

/// Package files by `/`-separated relative path.
pub type Files = BTreeMap<String, Vec<u8>>;

const MAIN: &str = "refs/heads/main";

/// A git repository holding package revisions.
pub struct PackageRepo {
    repo: Repository,
    path: PathBuf,
}

impl std::fmt::Debug for PackageRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackageRepo")
            .field("path", &self.path)
            .finish()
    }
}

/// One ref a transition changes: it must currently point at `expected`
/// (`None`: must not exist) and will point at `new` (`None`: deleted).
struct RefChange {
    name: String,
    expected: Option<Oid>,
    new: Option<Oid>,
}

/// The file in the git directory naming a transition under way (see
/// [`PackageRepo::transition`]).
const TRANSITION_JOURNAL: &str = "krender-rpkg-journal";

/// A transition under way: every ref it changes, with the target it found
/// and the one it sets (`None`: absent), as hex object ids.
#[derive(serde::Serialize, serde::Deserialize)]
struct TransitionJournal {
    reason: String,
    refs: Vec<JournalRef>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct JournalRef {
    name: String,
    expected: Option<String>,
    new: Option<String>,
}

impl PackageRepo {
    /// Opens the repository at or above `path`.
    pub fn open(path: &Path) -> Result<PackageRepo, LifecycleError> {
        let repo = Repository::discover(path).map_err(|error| LifecycleError::NotARepository {
            path: path.to_path_buf(),
            message: error.message().to_owned(),
        })?;
        let repo = PackageRepo {
            repo,
            path: path.to_path_buf(),
        };
        repo.finish_abandoned()?;
        Ok(repo)
    }

    /// Finishes a transition whose writer died (its journal is there and
    /// nobody holds the writer lock), so that readers too see each
    /// revision once. A live writer's transition is left to it.
    fn finish_abandoned(&self) -> Result<(), LifecycleError> {
        if !self.git_dir().join(TRANSITION_JOURNAL).exists() {
            return Ok(());
        }
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        match super::lock::PackageLock::try_acquire(self.git_dir(), &command) {
            Ok(_lock) => self.finish_interrupted(),
            Err(LifecycleError::Locked { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Opens the repository at `path`, creating it (with an empty first
    /// commit on `main`) when there is none. Returns whether it was created.
    pub fn open_or_init(path: &Path) -> Result<(PackageRepo, bool), LifecycleError> {
        if let Ok(repo) = PackageRepo::open(path) {
            return Ok((repo, false));
        }
        let mut options = git2::RepositoryInitOptions::new();
        options.initial_head("main").mkpath(true);
        let repo = Repository::init_opts(path, &options)
            .map_err(|error| LifecycleError::git(format!("init {}", path.display()), &error))?;
        let repo = PackageRepo {
            repo,
            path: path.to_path_buf(),
        };
        let signature = repo.signature()?;
        let tree_id = repo
            .repo
            .treebuilder(None)
            .and_then(|builder| builder.write())
            .map_err(|error| LifecycleError::git("write empty tree", &error))?;
        {
            let tree = repo.find_tree(tree_id)?;
            repo.repo
                .commit(
                    Some(MAIN),
                    &signature,
                    &signature,
                    "Initialize package repository",
                    &tree,
                    &[],
                )
                .map_err(|error| LifecycleError::git("first commit", &error))?;
        }
        Ok((repo, true))
    }

    /// Every package revision, sorted by package, then published revisions
    /// by number, then workspaces by name.
    pub fn list(&self) -> Result<Vec<Revision>, LifecycleError> {
        let mut revisions = Vec::new();
        for (prefix, lifecycle) in [
            ("refs/heads/drafts/", Lifecycle::Draft),
            ("refs/heads/proposed/", Lifecycle::Proposed),
        ] {
            for (name, commit) in self.refs_under(prefix)? {
                let Some((package, workspace)) = name.split_once('/') else {
                    continue;
                };
                if workspace.contains('/') {
                    continue;
                }
                revisions.push(Revision {
                    package: package.to_owned(),
                    workspace: workspace.to_owned(),
                    number: None,
                    lifecycle,
                    commit,
                });
            }
        }
        for (name, _) in self.refs_under("refs/tags/")? {
            let Some((package, version)) = name.split_once('/') else {
                continue;
            };
            let Some(number) = parse_version(version) else {
                continue;
            };
            revisions.push(self.published(package, number)?);
        }
        revisions.sort_by(|a, b| {
            (&a.package, a.number.is_none(), a.number, &a.workspace).cmp(&(
                &b.package,
                b.number.is_none(),
                b.number,
                &b.workspace,
            ))
        });
        Ok(revisions)
    }

    /// Finds the revision `id`: `<pkg>/v<N>`, or `<pkg>/<workspace>` for any
    /// lifecycle.
    pub fn get(&self, id: &str) -> Result<Revision, LifecycleError> {
        let not_found = || LifecycleError::RevisionNotFound {
            revision: id.to_owned(),
        };
        let (package, name) = id.split_once('/').ok_or_else(not_found)?;
        if let Some(number) = parse_version(name) {
            return self.published(package, number).map_err(|_| not_found());
        }
        self.list()?
            .into_iter()
            .find(|revision| revision.package == package && revision.workspace == name)
            .ok_or_else(not_found)
    }

    /// The package files of a revision.
    pub fn files(&self, revision: &Revision) -> Result<Files, LifecycleError> {
        let tree = self.commit_tree(revision.commit)?;
        let mut files = Files::new();
        if let Some(subtree) = self.package_tree(&tree, &revision.package)? {
            self.collect_files(&subtree, "", &mut files)?;
        }
        Ok(files)
    }

    /// `init`: a new package, as a Draft holding `files`.
    pub fn create_package(
        &self,
        package: &str,
        workspace: &str,
        files: &Files,
    ) -> Result<Revision, LifecycleError> {
        check_name("package", package)?;
        if let Some(existing) = self.list()?.into_iter().find(|r| r.package == package) {
            return Err(LifecycleError::RevisionExists {
                revision: existing.id(),
                lifecycle: existing.lifecycle.to_string(),
            });
        }
        self.create_draft(
            package,
            workspace,
            files,
            &format!("Create package {package}"),
        )
    }

    /// `clone`: a new package whose first Draft holds the files of
    /// `source` (any revision, of another package).
    pub fn clone_revision(
        &self,
        source: &Revision,
        package: &str,
        workspace: &str,
    ) -> Result<Revision, LifecycleError> {
        let files = self.files(source)?;
        check_name("package", package)?;
        if let Some(existing) = self.list()?.into_iter().find(|r| r.package == package) {
            return Err(LifecycleError::RevisionExists {
                revision: existing.id(),
                lifecycle: existing.lifecycle.to_string(),
            });
        }
        let message = format!("Clone {} into {package}", source.id());
        self.create_draft(package, workspace, &files, &message)
    }

    /// `draft`: a new Draft of an existing package, starting from its latest
    /// published revision (Porch's `copy`).
    pub fn new_draft(&self, package: &str, workspace: &str) -> Result<Revision, LifecycleError> {
        let latest = self
            .list()?
            .into_iter()
            .filter(|r| r.package == package && r.number.is_some())
            .max_by_key(|r| r.number)
            .ok_or_else(|| LifecycleError::RevisionNotFound {
                revision: format!("{package}/v* (no published revision to start from)"),
            })?;
        let files = self.files(&latest)?;
        let message = format!("Draft {package}/{workspace} from {}", latest.id());
        self.create_draft(package, workspace, &files, &message)
    }

    fn create_draft(
        &self,
        package: &str,
        workspace: &str,
        files: &Files,
        message: &str,
    ) -> Result<Revision, LifecycleError> {
        check_name("package", package)?;
        check_name("workspace", workspace)?;
        if parse_version(workspace).is_some() {
            return Err(LifecycleError::InvalidName {
                what: "workspace",
                value: workspace.to_owned(),
                reason: "v<N> names published revisions",
            });
        }
        let id = format!("{package}/{workspace}");
        if let Some(existing) = self
            .list()?
            .into_iter()
            .find(|r| r.package == package && r.workspace == workspace)
        {
            return Err(LifecycleError::RevisionExists {
                revision: existing.id(),
                lifecycle: existing.lifecycle.to_string(),
            });
        }
        let main = self.ref_target(MAIN)?;
        let commit = self.commit_package(main, main, package, files, message)?;
        self.transition(
            &id,
            "Draft created",
            vec![RefChange {
                name: draft_ref(package, workspace),
                expected: None,
                new: Some(commit),
            }],
        )?;
        self.get(&id)
    }

    /// `push`: replaces a Draft's files. `expected` is the commit the
    /// caller's copy was based on (optimistic locking).
    pub fn update_draft(
        &self,
        revision: &Revision,
        expected: Oid,
        files: &Files,
        message: &str,
    ) -> Result<Revision, LifecycleError> {
        self.require(revision, "push", &[Lifecycle::Draft])?;
        Self::check_expected(revision, expected)?;
        let commit = self.commit_package(
            Some(expected),
            Some(expected),
            &revision.package,
            files,
            message,
        )?;
        self.transition(
            &revision.id(),
            "Draft updated",
            vec![RefChange {
                name: draft_ref(&revision.package, &revision.workspace),
                expected: Some(expected),
                new: Some(commit),
            }],
        )?;
        self.get(&revision.id())
    }

    /// `propose`: Draft → Proposed. The draft is rendered first (`render`
    /// renders a directory in place); it must render cleanly, and what the
    /// render changed is committed to the revision before it is proposed.
    pub fn propose(
        &self,
        revision: &Revision,
        expected: Option<Oid>,
        render: &dyn Fn(&Path) -> Result<(), String>,
    ) -> Result<Revision, LifecycleError> {
        self.require(revision, "propose", &[Lifecycle::Draft])?;
        let expected = expected.unwrap_or(revision.commit);
        Self::check_expected(revision, expected)?;
        let files = self.files(revision)?;
        let rendered = render_files(&revision.package, &files, render).map_err(|message| {
            LifecycleError::RenderFailed {
                revision: revision.id(),
                message,
            }
        })?;
        let head = if rendered == files {
            expected
        } else {
            let message = format!("Render {}", revision.id());
            self.commit_package(
                Some(expected),
                Some(expected),
                &revision.package,
                &rendered,
                &message,
            )?
        };
        self.transition(
            &revision.id(),
            "Proposed",
            vec![
                RefChange {
                    name: draft_ref(&revision.package, &revision.workspace),
                    expected: Some(expected),
                    new: None,
                },
                RefChange {
                    name: proposed_ref(&revision.package, &revision.workspace),
                    expected: None,
                    new: Some(head),
                },
            ],
        )?;
        self.get(&revision.id())
    }

    /// `reject`: Proposed → Draft, or DeletionProposed → Published.
    pub fn reject(
        &self,
        revision: &Revision,
        expected: Option<Oid>,
    ) -> Result<Revision, LifecycleError> {
        self.require(
            revision,
            "reject",
            &[Lifecycle::Proposed, Lifecycle::DeletionProposed],
        )?;
        let expected = expected.unwrap_or(revision.commit);
        let changes = if revision.lifecycle == Lifecycle::Proposed {
            vec![
                RefChange {
                    name: proposed_ref(&revision.package, &revision.workspace),
                    expected: Some(expected),
                    new: None,
                },
                RefChange {
                    name: draft_ref(&revision.package, &revision.workspace),
                    expected: None,
                    new: Some(expected),
                },
            ]
        } else {
            vec![RefChange {
                name: deletion_ref(&revision.package, revision.number.unwrap_or(0)),
                expected: Some(expected),
                new: None,
            }]
        };
        self.transition(&revision.id(), "Rejected", changes)?;
        self.get(&revision.id())
    }

    /// `approve`: Proposed → Published as `<pkg>/v<N+1>`: the package's
    /// directory on `main` becomes the proposal's, and the tag marks it.
    pub fn approve(
        &self,
        revision: &Revision,
        expected: Option<Oid>,
    ) -> Result<Revision, LifecycleError> {
        self.require(revision, "approve", &[Lifecycle::Proposed])?;
        let expected = expected.unwrap_or(revision.commit);
        Self::check_expected(revision, expected)?;
        let number = self
            .list()?
            .iter()
            .filter(|r| r.package == revision.package)
            .filter_map(|r| r.number)
            .max()
            .unwrap_or(0)
            + 1;
        let main = self.ref_target(MAIN)?;
        let files = self.files(revision)?;
        let message = format!(
            "Publish {}/v{number} (workspace {})",
            revision.package, revision.workspace
        );
        let parents: Vec<Oid> = main.into_iter().chain([expected]).collect();
        let commit =
            self.commit_package_with_parents(main, &parents, &revision.package, &files, &message)?;
        let signature = self.signature()?;
        let target = self
            .repo
            .find_object(commit, Some(ObjectType::Commit))
            .map_err(|error| LifecycleError::git("find commit", &error))?;
        let tag_name = format!("{}/v{number}", revision.package);
        let tag_message = format!(
            "Package revision {tag_name}\n\nPackage: {}\nWorkspace: {}\nRevision: {number}\n",
            revision.package, revision.workspace
        );
        let tag = self
            .repo
            .tag_annotation_create(&tag_name, &target, &signature, &tag_message)
            .map_err(|error| LifecycleError::git("create tag", &error))?;
        self.transition(
            &revision.id(),
            "Published",
            vec![
                RefChange {
                    name: proposed_ref(&revision.package, &revision.workspace),
                    expected: Some(expected),
                    new: None,
                },
                RefChange {
                    name: MAIN.to_owned(),
                    expected: main,
                    new: Some(commit),
                },
                RefChange {
                    name: format!("refs/tags/{tag_name}"),
                    expected: None,
                    new: Some(tag),
                },
            ],
        )?;
        self.get(&tag_name)
    }

    /// `propose-delete`: Published → DeletionProposed.
    pub fn propose_delete(
        &self,
        revision: &Revision,
        expected: Option<Oid>,
    ) -> Result<Revision, LifecycleError> {
        self.require(revision, "propose-delete", &[Lifecycle::Published])?;
        let commit = expected.unwrap_or(revision.commit);
        Self::check_expected(revision, commit)?;
        self.transition(
            &revision.id(),
            "DeletionProposed",
            vec![RefChange {
                name: deletion_ref(&revision.package, revision.number.unwrap_or(0)),
                expected: None,
                new: Some(commit),
            }],
        )?;
        self.get(&revision.id())
    }

    /// `delete`: removes a Draft, a Proposed revision, or a published
    /// revision whose deletion was proposed (its tag; `main` keeps history).
    pub fn delete(&self, revision: &Revision, expected: Option<Oid>) -> Result<(), LifecycleError> {
        self.require(
            revision,
            "delete",
            &[
                Lifecycle::Draft,
                Lifecycle::Proposed,
                Lifecycle::DeletionProposed,
            ],
        )?;
        let expected = expected.unwrap_or(revision.commit);
        let changes = match revision.lifecycle {
            Lifecycle::Draft => vec![RefChange {
                name: draft_ref(&revision.package, &revision.workspace),
                expected: Some(expected),
                new: None,
            }],
            Lifecycle::Proposed => vec![RefChange {
                name: proposed_ref(&revision.package, &revision.workspace),
                expected: Some(expected),
                new: None,
            }],
            Lifecycle::Published | Lifecycle::DeletionProposed => {
                let number = revision.number.unwrap_or(0);
                let tag_ref = format!("refs/tags/{}/v{number}", revision.package);
                vec![
                    RefChange {
                        name: deletion_ref(&revision.package, number),
                        expected: Some(expected),
                        new: None,
                    },
                    RefChange {
                        expected: Some(self.ref_target(&tag_ref)?.unwrap_or(expected)),
                        name: tag_ref,
                        new: None,
                    },
                ]
            }
        };
        self.transition(&revision.id(), "Deleted", changes)
    }

    /// Optimistic locking, early: `expected` must be where the revision is
    /// now. (The ref transaction checks again, atomically; this check only
    /// gives the clear error before new commits are built on `expected`.)
    fn check_expected(revision: &Revision, expected: Oid) -> Result<(), LifecycleError> {
        if expected == revision.commit {
            return Ok(());
        }
        Err(LifecycleError::Conflict {
            revision: revision.id(),
            expected: expected.to_string(),
            actual: revision.commit.to_string(),
        })
    }

    /// Fails with the state machine's error unless `revision` is in one of
    /// `allowed`; changing a published revision's contents is
    /// [`LifecycleError::PublishedImmutable`].
    fn require(
        &self,
        revision: &Revision,
        action: &'static str,
        allowed: &'static [Lifecycle],
    ) -> Result<(), LifecycleError> {
        if allowed.contains(&revision.lifecycle) {
            return Ok(());
        }
        if action == "push"
            && matches!(
                revision.lifecycle,
                Lifecycle::Published | Lifecycle::DeletionProposed
            )
        {
            return Err(LifecycleError::PublishedImmutable {
                revision: revision.id(),
                package: revision.package.clone(),
                attempted: "its contents cannot change".to_owned(),
            });
        }
        Err(LifecycleError::InvalidTransition {
            revision: revision.id(),
            action,
            from: revision.lifecycle.to_string(),
            allowed: allowed_names(allowed),
        })
    }

    /// Applies `changes` so that no crash can lose a revision or leave a
    /// lock behind:
    ///
    /// 1. Under the repository's krender lock (an flock, so a writer that
    ///    died holds nothing), an interrupted transition is finished first
    ///    and `.lock` files left on the refs by a dead writer are removed.
    /// 2. Every ref is checked against its expected target.
    /// 3. A journal naming the whole transition is written durably: the
    ///    commit point.
    /// 4. New and moved refs are written first, in one ref transaction, and
    ///    only then are the refs the transition removes deleted: a crash in
    ///    between leaves the journal, and the next transition (step 1)
    ///    deletes them. libgit2's ref transaction is not atomic across refs,
    ///    so a deletion ordered before a creation in one transaction could
    ///    lose the revision.
    fn transition(
        &self,
        revision: &str,
        reason: &str,
        changes: Vec<RefChange>,
    ) -> Result<(), LifecycleError> {
        let _lock = self.writer_lock()?;
        self.finish_interrupted()?;
        for change in &changes {
            let actual = self.ref_target(&change.name)?;
            if actual != change.expected {
                return Err(LifecycleError::Conflict {
                    revision: revision.to_owned(),
                    expected: describe(change.expected),
                    actual: describe(actual),
                });
            }
        }
        let journal = TransitionJournal {
            reason: reason.to_owned(),
            refs: changes
                .iter()
                .map(|change| JournalRef {
                    name: change.name.clone(),
                    expected: change.expected.map(|oid| oid.to_string()),
                    new: change.new.map(|oid| oid.to_string()),
                })
                .collect(),
        };
        self.write_journal(&journal)?;
        self.apply_journal(&journal, revision)?;
        self.remove_journal()
    }

    /// Where krender keeps its lock and transition journal: the git
    /// directory.
    fn git_dir(&self) -> &Path {
        self.repo.path()
    }

    /// The repository's writer lock, waiting a little for another krender
    /// writer (a second writer then finds the refs moved: a conflict).
    fn writer_lock(&self) -> Result<super::lock::PackageLock, LifecycleError> {
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match super::lock::PackageLock::try_acquire(self.git_dir(), &command) {
                Err(LifecycleError::Locked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    /// Step 1 of [`PackageRepo::transition`]: under the writer lock, ref
    /// `.lock` files are stale (their writer died holding them), and a
    /// journal is a transition to finish.
    fn finish_interrupted(&self) -> Result<(), LifecycleError> {
        self.remove_stale_ref_locks()?;
        let path = self.git_dir().join(TRANSITION_JOURNAL);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(LifecycleError::io(&path, &error)),
        };
        match serde_json::from_slice::<TransitionJournal>(&bytes) {
            Ok(journal) => {
                tracing::warn!(
                    reason = journal.reason,
                    "finishing an interrupted transition"
                );
                self.apply_journal(&journal, "interrupted transition")?;
            }
            // A journal is renamed into place whole; a torn one was never
            // published, so nothing of it happened.
            Err(error) => tracing::warn!(%error, "dropping an unreadable transition journal"),
        }
        self.remove_journal()
    }

    /// Removes the `.lock` files git and libgit2 leave beside refs and
    /// `packed-refs` when their writer dies.
    fn remove_stale_ref_locks(&self) -> Result<(), LifecycleError> {
        let git_dir = self.git_dir();
        let packed = git_dir.join("packed-refs.lock");
        if packed.exists() {
            std::fs::remove_file(&packed).map_err(|error| LifecycleError::io(&packed, &error))?;
        }
        let mut pending = vec![git_dir.join("refs")];
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    pending.push(path);
                } else if path.extension().is_some_and(|ext| ext == "lock") {
                    tracing::warn!(path = %path.display(), "removing a stale ref lock");
                    std::fs::remove_file(&path)
                        .map_err(|error| LifecycleError::io(&path, &error))?;
                }
            }
        }
        Ok(())
    }

    /// Step 4, idempotent (also how an interrupted transition is finished):
    /// refs not yet at their new target are set, then the removed ones
    /// that still point where the transition found them are deleted.
    fn apply_journal(
        &self,
        journal: &TransitionJournal,
        revision: &str,
    ) -> Result<(), LifecycleError> {
        let parse = |text: &Option<String>| -> Result<Option<Oid>, LifecycleError> {
            text.as_deref()
                .map(Oid::from_str)
                .transpose()
                .map_err(|error| LifecycleError::git("read transition journal", &error))
        };
        let mut sets = Vec::new();
        let mut removes = Vec::new();
        for entry in &journal.refs {
            let (expected, new) = (parse(&entry.expected)?, parse(&entry.new)?);
            let actual = self.ref_target(&entry.name)?;
            match new {
                Some(target) if actual != Some(target) => sets.push((&entry.name, target)),
                None if actual.is_some() && actual == expected => removes.push(&entry.name),
                _ => {}
            }
        }
        let signature = self.signature()?;
        for batch in [true, false] {
            let names: Vec<&String> = if batch {
                sets.iter().map(|(name, _)| *name).collect()
            } else {
                removes.clone()
            };
            if names.is_empty() {
                continue;
            }
            let mut transaction = self
                .repo
                .transaction()
                .map_err(|error| LifecycleError::git("start ref transaction", &error))?;
            for name in &names {
                transaction.lock_ref(name).map_err(|error| {
                    if matches!(error.code(), ErrorCode::Locked | ErrorCode::Exists) {
                        LifecycleError::Conflict {
                            revision: revision.to_owned(),
                            expected: "no other writer".to_owned(),
                            actual: format!("{name} (being updated concurrently)"),
                        }
                    } else {
                        LifecycleError::git(format!("lock {name}"), &error)
                    }
                })?;
            }
            if batch {
                for (name, target) in &sets {
                    transaction
                        .set_target(name, *target, Some(&signature), &journal.reason)
                        .map_err(|error| LifecycleError::git(format!("update {name}"), &error))?;
                }
            } else {
                for name in &removes {
                    transaction
                        .remove(name)
                        .map_err(|error| LifecycleError::git(format!("update {name}"), &error))?;
                }
            }
            transaction.commit().map_err(|error| {
                LifecycleError::git(format!("{} {revision}", journal.reason), &error)
            })?;
        }
        Ok(())
    }

    fn write_journal(&self, journal: &TransitionJournal) -> Result<(), LifecycleError> {
        let path = self.git_dir().join(TRANSITION_JOURNAL);
        let temp = self.git_dir().join(format!("{TRANSITION_JOURNAL}.new"));
        let bytes = serde_json::to_vec(journal).map_err(|error| LifecycleError::Io {
            path: temp.clone(),
            message: error.to_string(),
        })?;
        // Revision transitions are always flushed: they are git's own state.
        crate::pkg::commit::write_durably(&temp, &bytes, None, Durability::Flushed)?;
        std::fs::rename(&temp, &path).map_err(|error| LifecycleError::io(&path, &error))?;
        Ok(crate::pkg::commit::sync_dir(
            self.git_dir(),
            Durability::Flushed,
        )?)
    }

    fn remove_journal(&self) -> Result<(), LifecycleError> {
        let path = self.git_dir().join(TRANSITION_JOURNAL);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(crate::pkg::commit::sync_dir(
                self.git_dir(),
                Durability::Flushed,
            )?),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(LifecycleError::io(&path, &error)),
        }
    }

    fn published(&self, package: &str, number: u32) -> Result<Revision, LifecycleError> {
        let tag_ref = format!("refs/tags/{package}/v{number}");
        let reference =
            self.repo
                .find_reference(&tag_ref)
                .map_err(|_| LifecycleError::RevisionNotFound {
                    revision: format!("{package}/v{number}"),
                })?;
        let commit = reference
            .peel_to_commit()
            .map_err(|error| LifecycleError::git(format!("read {tag_ref}"), &error))?
            .id();
        let workspace = reference
            .peel_to_tag()
            .ok()
            .and_then(|tag| {
                tag.message().ok().flatten().and_then(|message| {
                    message
                        .lines()
                        .find_map(|line| line.strip_prefix("Workspace: "))
                        .map(str::to_owned)
                })
            })
            .unwrap_or_default();
        let lifecycle = if self.ref_target(&deletion_ref(package, number))?.is_some() {
            Lifecycle::DeletionProposed
        } else {
            Lifecycle::Published
        };
        Ok(Revision {
            package: package.to_owned(),
            workspace,
            number: Some(number),
            lifecycle,
            commit,
        })
    }

    /// `(name below prefix, target)` of every ref under `prefix`.
    fn refs_under(&self, prefix: &str) -> Result<Vec<(String, Oid)>, LifecycleError> {
        let references = self
            .repo
            .references()
            .map_err(|error| LifecycleError::git("list refs", &error))?;
        let mut found = Vec::new();
        for reference in references.flatten() {
            let Ok(name) = reference.name() else {
                continue;
            };
            let Some(rest) = name.strip_prefix(prefix) else {
                continue;
            };
            if let Some(target) = reference.target() {
                found.push((rest.to_owned(), target));
            }
        }
        Ok(found)
    }

    fn ref_target(&self, name: &str) -> Result<Option<Oid>, LifecycleError> {
        match self.repo.find_reference(name) {
            Ok(reference) => Ok(reference.target()),
            Err(error) if error.code() == ErrorCode::NotFound => Ok(None),
            Err(error) => Err(LifecycleError::git(format!("read {name}"), &error)),
        }
    }

    /// A commit whose tree is `base`'s tree with `<package>/` replaced by
    /// `files`, with `parent` as its only parent.
    fn commit_package(
        &self,
        base: Option<Oid>,
        parent: Option<Oid>,
        package: &str,
        files: &Files,
        message: &str,
    ) -> Result<Oid, LifecycleError> {
        let parents: Vec<Oid> = parent.into_iter().collect();
        self.commit_package_with_parents(base, &parents, package, files, message)
    }

    fn commit_package_with_parents(
        &self,
        base: Option<Oid>,
        parents: &[Oid],
        package: &str,
        files: &Files,
        message: &str,
    ) -> Result<Oid, LifecycleError> {
        let base_tree = match base {
            Some(id) => Some(self.commit_tree(id)?),
            None => None,
        };
        let package_tree = self.write_tree(files)?;
        let mut root = self
            .repo
            .treebuilder(base_tree.as_ref())
            .map_err(|error| LifecycleError::git("build tree", &error))?;
        let git = |error: git2::Error| LifecycleError::git("build tree", &error);
        if files.is_empty() {
            if root.get(package).map_err(git)?.is_some() {
                root.remove(package).map_err(git)?;
            }
        } else {
            root.insert(package, package_tree, 0o040_000).map_err(git)?;
        }
        let tree = self.find_tree(root.write().map_err(git)?)?;
        let parent_commits = parents
            .iter()
            .map(|id| self.find_commit(*id))
            .collect::<Result<Vec<_>, _>>()?;
        let parent_refs: Vec<&git2::Commit<'_>> = parent_commits.iter().collect();
        let signature = self.signature()?;
        self.repo
            .commit(None, &signature, &signature, message, &tree, &parent_refs)
            .map_err(|error| LifecycleError::git("commit", &error))
    }

    /// Writes `files` as nested git trees; returns the top tree.
    fn write_tree(&self, files: &Files) -> Result<Oid, LifecycleError> {
        let git = |error: git2::Error| LifecycleError::git("write tree", &error);
        // Group by first path component; recurse into directories.
        let mut blobs: BTreeMap<&str, &Vec<u8>> = BTreeMap::new();
        let mut dirs: BTreeMap<&str, Files> = BTreeMap::new();
        for (path, bytes) in files {
            match path.split_once('/') {
                Some((dir, rest)) => {
                    dirs.entry(dir)
                        .or_default()
                        .insert(rest.to_owned(), bytes.clone());
                }
                None => {
                    blobs.insert(path, bytes);
                }
            }
        }
        let mut builder = self.repo.treebuilder(None).map_err(git)?;
        for (name, bytes) in blobs {
            let blob = self.repo.blob(bytes).map_err(git)?;
            builder.insert(name, blob, 0o100_644).map_err(git)?;
        }
        for (name, children) in dirs {
            let subtree = self.write_tree(&children)?;
            builder.insert(name, subtree, 0o040_000).map_err(git)?;
        }
        builder.write().map_err(git)
    }

    fn package_tree(
        &self,
        root: &Tree<'_>,
        package: &str,
    ) -> Result<Option<Tree<'_>>, LifecycleError> {
        let Some(entry) = root.get_name(package) else {
            return Ok(None);
        };
        if entry.kind() != Some(ObjectType::Tree) {
            return Ok(None);
        }
        self.find_tree(entry.id()).map(Some)
    }

    fn collect_files(
        &self,
        tree: &Tree<'_>,
        prefix: &str,
        files: &mut Files,
    ) -> Result<(), LifecycleError> {
        for entry in tree {
            let Ok(name) = entry.name() else {
                continue;
            };
            let path = format!("{prefix}{name}");
            match entry.kind() {
                Some(ObjectType::Tree) => {
                    let subtree = self.find_tree(entry.id())?;
                    self.collect_files(&subtree, &format!("{path}/"), files)?;
                }
                Some(ObjectType::Blob) => {
                    self.check_loose_object(entry.id())?;
                    let blob = self
                        .repo
                        .find_blob(entry.id())
                        .map_err(|error| LifecycleError::git(format!("read {path}"), &error))?;
                    files.insert(path, blob.content().to_vec());
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn find_commit(&self, id: Oid) -> Result<git2::Commit<'_>, LifecycleError> {
        self.check_loose_object(id)?;
        self.repo
            .find_commit(id)
            .map_err(|error| LifecycleError::git(format!("find commit {id}"), &error))
    }

    fn find_tree(&self, id: Oid) -> Result<Tree<'_>, LifecycleError> {
        self.check_loose_object(id)?;
        self.repo
            .find_tree(id)
            .map_err(|error| LifecycleError::git(format!("find tree {id}"), &error))
    }

    /// The tree of the commit `id`.
    fn commit_tree(&self, id: Oid) -> Result<Tree<'_>, LifecycleError> {
        let tree = self.find_commit(id)?.tree_id();
        self.find_tree(tree)
    }

    /// libgit2 (1.9.7 still) spins forever inflating a truncated loose
    /// object. Before it reads one, the file (if the object is loose; packed
    /// objects are checked by libgit2 itself) must inflate to its end: else
    /// the repository is corrupt, and the error names the object's file.
    fn check_loose_object(&self, id: Oid) -> Result<(), LifecycleError> {
        let hex = id.to_string();
        let path = self
            .git_dir()
            .join("objects")
            .join(&hex[..2])
            .join(&hex[2..]);
        let Ok(compressed) = std::fs::read(&path) else {
            return Ok(());
        };
        let corrupt = |reason: &str| LifecycleError::Io {
            path: path.clone(),
            message: format!("corrupt git object {hex}: {reason}"),
        };
        let mut inflater = flate2::Decompress::new(true);
        let mut output = vec![0u8; 64 * 1024];
        loop {
            let (read_before, written_before) = (inflater.total_in(), inflater.total_out());
            let offset = usize::try_from(read_before).unwrap_or(usize::MAX);
            let input = compressed.get(offset..).unwrap_or_default();
            let status = inflater
                .decompress(input, &mut output, flate2::FlushDecompress::None)
                .map_err(|error| corrupt(&error.to_string()))?;
            if status == flate2::Status::StreamEnd {
                return Ok(());
            }
            // No progress either way: the stream stops before its end.
            if inflater.total_in() == read_before && inflater.total_out() == written_before {
                return Err(corrupt("truncated"));
            }
        }
    }

    /// The configured git identity, or krender's when none is configured
    /// (a fresh CI machine), so commits never fail for want of a name.
    fn signature(&self) -> Result<Signature<'static>, LifecycleError> {
        self.repo
            .signature()
            .or_else(|_| Signature::now("krender", "krender@localhost"))
            .map_err(|error| LifecycleError::git("signature", &error))
    }
}

/// Checks out `files` into a private directory named after the package,
/// renders it in place with `render`, and reads the result back.
fn render_files(
    package: &str,
    files: &Files,
    render: &dyn Fn(&Path) -> Result<(), String>,
) -> Result<Files, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let scratch =
        std::env::temp_dir().join(format!(".krender-propose-{}-{nanos:x}", std::process::id()));
    let dir = scratch.join(package);
    let result = (|| {
        for (relative, bytes) in files {
            let path = dir.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|error| error.to_string())?;
            }
            std::fs::write(&path, bytes).map_err(|error| error.to_string())?;
        }
        std::fs::create_dir_all(&dir).map_err(|error| error.to_string())?;
        render(&dir)?;
        read_dir_files(&dir).map_err(|error| error.to_string())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Every regular file below `dir` by relative path, skipping `.git` and
/// krender's own `.krender-*` files.
pub fn read_dir_files(dir: &Path) -> Result<Files, LifecycleError> {
    let mut files = Files::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((current, prefix)) = pending.pop() {
        let entries =
            std::fs::read_dir(&current).map_err(|error| LifecycleError::io(&current, &error))?;
        for entry in entries {
            let entry = entry.map_err(|error| LifecycleError::io(&current, &error))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == ".git" || crate::pkg::commit::is_reserved_name(&name) {
                continue;
            }
            let path = entry.path();
            let file_type = entry
                .file_type()
                .map_err(|error| LifecycleError::io(&path, &error))?;
            if file_type.is_dir() {
                pending.push((path, format!("{prefix}{name}/")));
            } else if file_type.is_file() {
                let bytes =
                    std::fs::read(&path).map_err(|error| LifecycleError::io(&path, &error))?;
                files.insert(format!("{prefix}{name}"), bytes);
            }
        }
    }
    Ok(files)
}

/// The Kptfile `rpkg init` writes (kpt's `pkg init` form).
pub fn initial_kptfile(package: &str, description: &str) -> Vec<u8> {
    format!(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {package}\n  annotations:\n    \
         config.kubernetes.io/local-config: \"true\"\ninfo:\n  description: {description}\n"
    )
    .into_bytes()
}

fn draft_ref(package: &str, workspace: &str) -> String {
    format!("refs/heads/drafts/{package}/{workspace}")
}

fn proposed_ref(package: &str, workspace: &str) -> String {
    format!("refs/heads/proposed/{package}/{workspace}")
}

fn deletion_ref(package: &str, number: u32) -> String {
    format!("refs/heads/deletionProposed/{package}/v{number}")
}

/// `N` of `vN` (no sign, no leading zeros beyond `v0`).
fn parse_version(name: &str) -> Option<u32> {
    let digits = name.strip_prefix('v')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Package and workspace names become git ref components and directory
/// names: lowercase letters, digits, `-`, `_` and `.`, starting with a
/// letter or digit.
fn check_name(what: &'static str, value: &str) -> Result<(), LifecycleError> {
    let invalid = |reason| LifecycleError::InvalidName {
        what,
        value: value.to_owned(),
        reason,
    };
    let first_ok = value
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !first_ok {
        return Err(invalid("must start with a lowercase letter or digit"));
    }
    let rest_ok = value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'));
    if !rest_ok || value.contains("..") || value.ends_with(".lock") || value.len() > 63 {
        return Err(invalid(
            "use at most 63 lowercase letters, digits, '-', '_' and '.'",
        ));
    }
    Ok(())
}

fn describe(target: Option<Oid>) -> String {
    target.map_or_else(|| "nothing (absent)".to_owned(), |id| id.to_string())
}

fn allowed_names(allowed: &'static [Lifecycle]) -> &'static [&'static str] {
    match allowed {
        [Lifecycle::Draft] => &["Draft"],
        [Lifecycle::Proposed] => &["Proposed"],
        [Lifecycle::Published] => &["Published"],
        [Lifecycle::Proposed, Lifecycle::DeletionProposed] => &["Proposed", "DeletionProposed"],
        _ => &["Draft", "Proposed", "DeletionProposed"],
    }
}

/// Renders the package directory `dir` in place with krender's own
/// renderer (builtin and container functions, no `exec:` steps), as
/// `propose` requires, through the engine's one-shot entry point (as `fn
/// render` does), with `options` (the default ones but for what the
/// caller sets); the error is the render's text.
pub fn render_in_place(dir: &Path, options: &crate::hydrate::RenderOptions) -> Result<(), String> {
    use crate::engine::db::RenderContext;
    use crate::hydrate::{self, Output};
    use crate::pkg::kptfile::SAVE_ON_RENDER_FAILURE_ANNOTATION;
    let kptfile = hydrate::load_root(dir).map_err(|error| error.to_string())?;
    let context = RenderContext {
        save_on_failure: kptfile.annotation_is_true(SAVE_ON_RENDER_FAILURE_ANNOTATION),
        ..RenderContext::uncached(dir, options.clone())
    };
    let mut log = Vec::new();
    let (outcome, _) =
        crate::engine::oneshot::render_once(&context, None, kptfile, &mut log, None, None, true);
    let mut stdout = Vec::new();
    hydrate::apply(outcome, &Output::InPlace, None, &mut stdout, &mut log).map_err(|error| {
        let report = error
            .report()
            .stderr_text()
            .unwrap_or_else(|| error.to_string());
        let log = String::from_utf8_lossy(&log);
        format!("{}\n{log}", report.trim_end())
    })
}
