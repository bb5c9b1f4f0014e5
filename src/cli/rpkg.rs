//! The lifecycle commands: `krender rpkg ...` (package revisions in git),
//! and the lock-and-recover step other commands run before they touch a
//! package.

use std::io::Write;
use std::path::Path;

use super::args::{RpkgArgs, RpkgCommand};
use crate::hydrate::Report;
use crate::lifecycle::rpkg::{
    Files, PackageRepo, initial_kptfile, read_dir_files, render_in_place,
};
use crate::lifecycle::{self, LifecycleError, LockMode, PackageSession, Recovery};

/// Locks the package a render reads (shared: other readers may run) or
/// writes in place (exclusive), recovering interrupted commits first. A render that only reads (`-o ...`) of a
/// package krender cannot lock (a read-only directory) still runs,
/// unlocked; a package held by a live process is always a conflict.
pub(super) fn open_for_render(
    root: &Path,
    in_place: bool,
    err: &mut dyn Write,
) -> Result<Option<PackageSession>, Report> {
    if !root.is_dir() {
        // kpt's own error for a missing package comes next.
        return Ok(None);
    }
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mode = if in_place {
        LockMode::Exclusive
    } else {
        LockMode::Shared
    };
    match lifecycle::open_package_mode(root, &command, mode, super::durability()) {
        Ok(session) => {
            if let Some(dead) = &session.lock.took_over {
                let _ = writeln!(
                    err,
                    "krender: took over the lock of {} from pid {} ({}), which is gone",
                    root.display(),
                    dead.pid,
                    dead.command
                );
            }
            for (dir, recovery) in &session.recovered {
                let what = match recovery {
                    Recovery::Clean => continue,
                    Recovery::RolledBack { .. } => "removed the staging area of".to_owned(),
                    Recovery::RolledForward(summary) => format!(
                        "completed ({} written, {} deleted)",
                        summary.written, summary.deleted
                    ),
                };
                let _ = writeln!(
                    err,
                    "krender: {what} an interrupted commit in {}",
                    dir.display()
                );
            }
            Ok(Some(session))
        }
        // A reader goes on without a lock where it cannot take one (a
        // read-only package), but never over a commit that was not finished:
        // it would read a half-written package.
        Err(
            error @ (LifecycleError::Io { .. }
            | LifecycleError::Commit(crate::pkg::commit::CommitError::Io { .. })),
        ) if !in_place => {
            if crate::pkg::commit::needs_recovery(root) {
                Err(Report::Error(format!(
                    "package {} has an unfinished commit that cannot be completed now; \
                     nothing was read: {error}",
                    root.display()
                )))
            } else {
                Ok(None)
            }
        }
        Err(error) => Err(Report::Error(error.to_string())),
    }
}

/// Name of the file `rpkg pull` writes into the directory: which revision
/// and commit the files came from, for `rpkg push`'s optimistic locking.
const PULL_RECORD: &str = ".krender-rpkg.json";

/// What `rpkg pull` records.
#[derive(serde::Serialize, serde::Deserialize)]
struct PullRecord {
    revision: String,
    commit: String,
}

/// Runs `krender rpkg ...`; returns the exit code. Errors are graphical
/// miette reports: these are krender-only commands.
pub(super) fn run(args: &RpkgArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    match execute(args, out) {
        Ok(()) => 0,
        Err(error) => {
            let mut text = String::new();
            let handler = miette::GraphicalReportHandler::new_themed(
                miette::GraphicalTheme::unicode_nocolor(),
            );
            if handler.render_report(&mut text, &error).is_err() {
                text = format!("Error: {error}\n");
            }
            let _ = err.write_all(text.as_bytes());
            1
        }
    }
}

fn execute(args: &RpkgArgs, out: &mut dyn Write) -> Result<(), LifecycleError> {
    let repo_path = &args.repo;
    if let RpkgCommand::Init {
        package,
        workspace,
        description,
    } = &args.command
    {
        let (repo, created) = PackageRepo::open_or_init(repo_path)?;
        if created {
            let _ = writeln!(
                out,
                "initialized package repository {}",
                repo_path.display()
            );
        }
        let mut files = Files::new();
        files.insert("Kptfile".to_owned(), initial_kptfile(package, description));
        let revision = repo.create_package(package, workspace, &files)?;
        return print_revision(out, &revision, "created");
    }
    let repo = PackageRepo::open(repo_path)?;
    match &args.command {
        RpkgCommand::Init { .. } => Ok(()),
        RpkgCommand::Clone {
            source,
            package,
            workspace,
        } => {
            let source = repo.get(source)?;
            let revision = repo.clone_revision(&source, package, workspace)?;
            print_revision(out, &revision, "created")
        }
        RpkgCommand::Draft { package, workspace } => {
            let revision = repo.new_draft(package, workspace)?;
            print_revision(out, &revision, "created")
        }
        RpkgCommand::Propose(target) => {
            let revision = repo.get(&target.revision)?;
            let expected = parse_commit(&target.revision, target.commit.as_deref())?;
            let options = crate::hydrate::RenderOptions {
                attribution: super::attribution_enabled(),
                native: super::native_mode(),
                ..crate::hydrate::RenderOptions::default()
            };
            let render = |dir: &Path| render_in_place(dir, &options);
            let revision = repo.propose(&revision, expected, &render)?;
            print_revision(out, &revision, "proposed")
        }
        RpkgCommand::Approve(target) => {
            let revision = repo.get(&target.revision)?;
            let expected = parse_commit(&target.revision, target.commit.as_deref())?;
            let revision = repo.approve(&revision, expected)?;
            print_revision(out, &revision, "published")
        }
        RpkgCommand::Reject(target) => {
            let revision = repo.get(&target.revision)?;
            let expected = parse_commit(&target.revision, target.commit.as_deref())?;
            let revision = repo.reject(&revision, expected)?;
            print_revision(out, &revision, "rejected")
        }
        RpkgCommand::ProposeDelete(target) => {
            let revision = repo.get(&target.revision)?;
            let expected = parse_commit(&target.revision, target.commit.as_deref())?;
            let revision = repo.propose_delete(&revision, expected)?;
            print_revision(out, &revision, "proposed for deletion")
        }
        RpkgCommand::Delete(target) => {
            let revision = repo.get(&target.revision)?;
            let expected = parse_commit(&target.revision, target.commit.as_deref())?;
            repo.delete(&revision, expected)?;
            let _ = writeln!(out, "{} deleted", revision.id());
            Ok(())
        }
        RpkgCommand::List { package } => {
            let _ = writeln!(
                out,
                "{:<24} {:<12} {:<16} {:<17} COMMIT",
                "PACKAGE", "REVISION", "WORKSPACE", "LIFECYCLE"
            );
            for revision in repo.list()? {
                if package
                    .as_ref()
                    .is_some_and(|only| *only != revision.package)
                {
                    continue;
                }
                let number = revision
                    .number
                    .map_or_else(|| "-".to_owned(), |n| format!("v{n}"));
                let commit = revision.commit.to_string();
                let _ = writeln!(
                    out,
                    "{:<24} {:<12} {:<16} {:<17} {}",
                    revision.package,
                    number,
                    revision.workspace,
                    revision.lifecycle.to_string(),
                    commit.get(..12).unwrap_or(&commit)
                );
            }
            Ok(())
        }
        RpkgCommand::Pull { revision, dir } => {
            let revision = repo.get(revision)?;
            let files = repo.files(&revision)?;
            crate::pkg::commit::commit_new_dir(dir, &files, super::durability())?;
            let record = PullRecord {
                revision: revision.id(),
                commit: revision.commit.to_string(),
            };
            write_record(dir, &record)?;
            let _ = writeln!(
                out,
                "{} ({}) pulled into {}",
                revision.id(),
                revision.lifecycle,
                dir.display()
            );
            Ok(())
        }
        RpkgCommand::Push {
            dir,
            commit,
            message,
        } => {
            let record_path = dir.join(PULL_RECORD);
            let record: PullRecord = std::fs::read(&record_path)
                .map_err(|error| LifecycleError::io(&record_path, &error))
                .and_then(|bytes| {
                    serde_json::from_slice(&bytes).map_err(|error| LifecycleError::Io {
                        path: record_path.clone(),
                        message: error.to_string(),
                    })
                })?;
            let revision = repo.get(&record.revision)?;
            // The pulled commit unless `--commit` overrides it: pushing
            // onto a draft that moved since the pull is a conflict.
            let expected_text = commit.as_deref().unwrap_or(&record.commit);
            let expected =
                parse_commit(&record.revision, Some(expected_text))?.unwrap_or(revision.commit);
            let files = read_dir_files(dir)?;
            let message = message
                .clone()
                .unwrap_or_else(|| format!("Update {}", revision.id()));
            let updated = repo.update_draft(&revision, expected, &files, &message)?;
            write_record(
                dir,
                &PullRecord {
                    revision: updated.id(),
                    commit: updated.commit.to_string(),
                },
            )?;
            print_revision(out, &updated, "pushed")
        }
    }
}

fn write_record(dir: &Path, record: &PullRecord) -> Result<(), LifecycleError> {
    let path = dir.join(PULL_RECORD);
    let text = serde_json::to_string_pretty(record).unwrap_or_default();
    std::fs::write(&path, text + "\n").map_err(|error| LifecycleError::io(&path, &error))
}

fn print_revision(
    out: &mut dyn Write,
    revision: &lifecycle::rpkg::Revision,
    what: &str,
) -> Result<(), LifecycleError> {
    let _ = writeln!(
        out,
        "{} {what} ({} at {})",
        revision.id(),
        revision.lifecycle,
        revision.commit
    );
    Ok(())
}

fn parse_commit(revision: &str, commit: Option<&str>) -> Result<Option<git2::Oid>, LifecycleError> {
    commit
        .map(|text| {
            git2::Oid::from_str(text).map_err(|_| LifecycleError::Conflict {
                revision: revision.to_owned(),
                expected: text.to_owned(),
                actual: "(not a full commit id)".to_owned(),
            })
        })
        .transpose()
}
