//! Package revisions in git (issue 8): every lifecycle transition, every
//! forbidden transition, optimistic locking and concurrent writers, on real
//! repositories in temporary directories, plus one CLI session through the
//! binary.

use std::path::Path;
use std::process::Command;

use krender::lifecycle::LifecycleError;
use krender::lifecycle::rpkg::{Files, Lifecycle, PackageRepo, Revision};

fn repo() -> (tempfile::TempDir, PackageRepo) {
    let temp = tempfile::tempdir().unwrap();
    let (repo, created) = PackageRepo::open_or_init(&temp.path().join("repo")).unwrap();
    assert!(created);
    (temp, repo)
}

fn files(pairs: &[(&str, &str)]) -> Files {
    pairs
        .iter()
        .map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec()))
        .collect()
}

fn kptfile(name: &str) -> Files {
    files(&[(
        "Kptfile",
        &format!("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\n"),
    )])
}

/// A render that changes nothing and always succeeds (the real renderer is
/// exercised in `propose_renders_with_krender_and_commits_the_result`).
fn no_render(_: &Path) -> Result<(), String> {
    Ok(())
}

/// The git refs of the repository, for checking the layout.
fn refs(repo: &Path) -> Vec<String> {
    let output = Command::new("git")
        .args(["for-each-ref", "--format=%(refname)"])
        .current_dir(repo)
        .output()
        .unwrap();
    let mut refs: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    refs.sort();
    refs
}

fn draft(repo: &PackageRepo) -> Revision {
    repo.create_package("app", "ws1", &kptfile("app")).unwrap()
}

fn proposed(repo: &PackageRepo) -> Revision {
    let draft = draft(repo);
    repo.propose(&draft, None, &no_render).unwrap()
}

fn published(repo: &PackageRepo) -> Revision {
    let proposed = proposed(repo);
    repo.approve(&proposed, None).unwrap()
}

fn deletion_proposed(repo: &PackageRepo) -> Revision {
    let published = published(repo);
    repo.propose_delete(&published, None).unwrap()
}

fn assert_invalid(result: Result<Revision, LifecycleError>, action: &str, from: &str) {
    match result {
        Err(LifecycleError::InvalidTransition {
            action: got_action,
            from: got_from,
            ..
        }) => {
            assert_eq!((got_action, got_from.as_str()), (action, from));
        }
        other => panic!("expected an invalid {action} from {from}, got {other:?}"),
    }
}

// Transitions.

#[test]
fn init_creates_a_draft_branch() {
    let (temp, repo) = repo();
    let revision = draft(&repo);
    assert_eq!(revision.lifecycle, Lifecycle::Draft);
    assert_eq!(revision.id(), "app/ws1");
    assert_eq!(repo.files(&revision).unwrap(), kptfile("app"));
    assert_eq!(
        refs(&temp.path().join("repo")),
        ["refs/heads/drafts/app/ws1", "refs/heads/main"]
    );
}

#[test]
fn push_updates_a_draft() {
    let (_temp, repo) = repo();
    let revision = draft(&repo);
    let mut new_files = kptfile("app");
    new_files.insert("cm.yaml".into(), b"kind: ConfigMap\n".to_vec());
    let updated = repo
        .update_draft(&revision, revision.commit, &new_files, "add cm")
        .unwrap();
    assert_eq!(updated.lifecycle, Lifecycle::Draft);
    assert_ne!(updated.commit, revision.commit);
    assert_eq!(repo.files(&updated).unwrap(), new_files);
}

#[test]
fn propose_moves_the_draft_to_a_proposed_branch() {
    let (temp, repo) = repo();
    let revision = proposed(&repo);
    assert_eq!(revision.lifecycle, Lifecycle::Proposed);
    assert_eq!(
        refs(&temp.path().join("repo")),
        ["refs/heads/main", "refs/heads/proposed/app/ws1"]
    );
}

#[test]
fn reject_sends_a_proposal_back_to_draft() {
    let (temp, repo) = repo();
    let proposal = proposed(&repo);
    let revision = repo.reject(&proposal, None).unwrap();
    assert_eq!(revision.lifecycle, Lifecycle::Draft);
    assert_eq!(revision.commit, proposal.commit);
    assert_eq!(
        refs(&temp.path().join("repo")),
        ["refs/heads/drafts/app/ws1", "refs/heads/main"]
    );
}

#[test]
fn approve_publishes_a_tag_on_main() {
    let (temp, repo) = repo();
    let revision = published(&repo);
    assert_eq!(revision.lifecycle, Lifecycle::Published);
    assert_eq!(revision.id(), "app/v1");
    assert_eq!(revision.workspace, "ws1");
    assert_eq!(
        refs(&temp.path().join("repo")),
        ["refs/heads/main", "refs/tags/app/v1"]
    );
    let main = Command::new("git")
        .args(["show", "main:app/Kptfile"])
        .current_dir(temp.path().join("repo"))
        .output()
        .unwrap();
    assert_eq!(main.stdout, kptfile("app")["Kptfile"]);
    // The next approval of the same package is v2; its workspace still
    // finds v1.
    let second = repo.new_draft("app", "ws2").unwrap();
    assert_eq!(repo.files(&second).unwrap(), kptfile("app"));
    let second = repo.propose(&second, None, &no_render).unwrap();
    let second = repo.approve(&second, None).unwrap();
    assert_eq!(second.id(), "app/v2");
    assert_eq!(repo.get("app/ws1").unwrap().id(), "app/v1");
}

#[test]
fn propose_delete_and_its_rejection_and_deletion() {
    let (temp, repo) = repo();
    let revision = deletion_proposed(&repo);
    assert_eq!(revision.lifecycle, Lifecycle::DeletionProposed);
    assert_eq!(
        refs(&temp.path().join("repo")),
        [
            "refs/heads/deletionProposed/app/v1",
            "refs/heads/main",
            "refs/tags/app/v1"
        ]
    );
    let back = repo.reject(&revision, None).unwrap();
    assert_eq!(back.lifecycle, Lifecycle::Published);
    let again = repo.propose_delete(&back, None).unwrap();
    repo.delete(&again, None).unwrap();
    assert_eq!(refs(&temp.path().join("repo")), ["refs/heads/main"]);
    assert!(matches!(
        repo.get("app/v1"),
        Err(LifecycleError::RevisionNotFound { .. })
    ));
}

#[test]
fn drafts_and_proposals_can_be_deleted() {
    let (temp, repo) = repo();
    let revision = draft(&repo);
    repo.delete(&revision, None).unwrap();
    let revision = proposed(&repo);
    repo.delete(&revision, None).unwrap();
    assert_eq!(refs(&temp.path().join("repo")), ["refs/heads/main"]);
}

#[test]
fn clone_creates_a_draft_of_a_new_package() {
    let (_temp, repo) = repo();
    let source = published(&repo);
    let clone = repo.clone_revision(&source, "app-copy", "ws1").unwrap();
    assert_eq!(clone.lifecycle, Lifecycle::Draft);
    assert_eq!(clone.id(), "app-copy/ws1");
    assert_eq!(repo.files(&clone).unwrap(), repo.files(&source).unwrap());
}

#[test]
fn propose_renders_with_krender_and_commits_the_result() {
    let (_temp, repo) = repo();
    let mut package = files(&[
        (
            "Kptfile",
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    \
             - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\n      configMap:\n        tier: backend\n",
        ),
        (
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
        ),
    ]);
    let revision = repo.create_package("app", "ws1", &package).unwrap();
    let proposal = repo
        .propose(&revision, None, &|dir: &std::path::Path| {
            krender::lifecycle::rpkg::render_in_place(dir, &Default::default())
        })
        .unwrap();
    assert_ne!(proposal.commit, revision.commit, "the render was committed");
    let rendered = repo.files(&proposal).unwrap();
    package.insert(
        "cm.yaml".into(),
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels:\n    tier: backend\n"
            .to_vec(),
    );
    assert_eq!(rendered["cm.yaml"], package["cm.yaml"]);
}

// Forbidden transitions.

#[test]
fn a_draft_that_does_not_render_cannot_be_proposed() {
    let (_temp, repo) = repo();
    let package = files(&[(
        "Kptfile",
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    \
         - exec: ./never-allowed\n",
    )]);
    let revision = repo.create_package("app", "ws1", &package).unwrap();
    let error = repo
        .propose(&revision, None, &|dir: &std::path::Path| {
            krender::lifecycle::rpkg::render_in_place(dir, &Default::default())
        })
        .unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, LifecycleError::RenderFailed { .. }) && text.contains("--allow-exec"),
        "{text}"
    );
    assert_eq!(repo.get("app/ws1").unwrap().lifecycle, Lifecycle::Draft);
}

#[test]
fn nothing_is_published_without_a_proposal() {
    let (_temp, repo) = repo();
    let revision = draft(&repo);
    assert_invalid(repo.approve(&revision, None), "approve", "Draft");
}

#[test]
fn forbidden_transitions_from_draft() {
    let (_temp, repo) = repo();
    let revision = draft(&repo);
    assert_invalid(repo.reject(&revision, None), "reject", "Draft");
    assert_invalid(
        repo.propose_delete(&revision, None),
        "propose-delete",
        "Draft",
    );
}

#[test]
fn forbidden_transitions_from_proposed() {
    let (_temp, repo) = repo();
    let revision = proposed(&repo);
    assert_invalid(
        repo.propose(&revision, None, &no_render),
        "propose",
        "Proposed",
    );
    assert_invalid(
        repo.propose_delete(&revision, None),
        "propose-delete",
        "Proposed",
    );
    assert_invalid(
        repo.update_draft(&revision, revision.commit, &kptfile("x"), "edit"),
        "push",
        "Proposed",
    );
}

#[test]
fn forbidden_transitions_from_published() {
    let (_temp, repo) = repo();
    let revision = published(&repo);
    assert_invalid(
        repo.propose(&revision, None, &no_render),
        "propose",
        "Published",
    );
    assert_invalid(repo.approve(&revision, None), "approve", "Published");
    assert_invalid(repo.reject(&revision, None), "reject", "Published");
    let error = repo.delete(&revision, None).unwrap_err();
    assert!(
        matches!(&error, LifecycleError::InvalidTransition { action: "delete", from, .. } if from == "Published"),
        "{error:?}"
    );
    // Published is immutable.
    let error = repo
        .update_draft(&revision, revision.commit, &kptfile("changed"), "edit")
        .unwrap_err();
    assert!(
        matches!(error, LifecycleError::PublishedImmutable { .. }),
        "{error:?}"
    );
    assert_eq!(repo.files(&revision).unwrap(), kptfile("app"));
}

#[test]
fn forbidden_transitions_from_deletion_proposed() {
    let (_temp, repo) = repo();
    let revision = deletion_proposed(&repo);
    assert_invalid(
        repo.propose(&revision, None, &no_render),
        "propose",
        "DeletionProposed",
    );
    assert_invalid(repo.approve(&revision, None), "approve", "DeletionProposed");
    assert_invalid(
        repo.propose_delete(&revision, None),
        "propose-delete",
        "DeletionProposed",
    );
}

#[test]
fn names_and_workspaces_are_unique_and_checked() {
    let (_temp, repo) = repo();
    let revision = published(&repo);
    assert!(matches!(
        repo.create_package("app", "other", &kptfile("app")),
        Err(LifecycleError::RevisionExists { .. })
    ));
    // The published revision still owns its workspace.
    let error = repo.new_draft("app", &revision.workspace).unwrap_err();
    assert!(
        matches!(&error, LifecycleError::RevisionExists { revision, .. } if revision == "app/v1"),
        "{error:?}"
    );
    for (package, workspace) in [
        ("App", "ws"),
        ("a/b", "ws"),
        ("app2", "v3"),
        ("app3", "..x"),
    ] {
        let error = repo
            .create_package(package, workspace, &kptfile("x"))
            .unwrap_err();
        assert!(
            matches!(error, LifecycleError::InvalidName { .. }),
            "{package}/{workspace}: {error:?}"
        );
    }
    assert!(matches!(
        repo.new_draft("missing", "ws"),
        Err(LifecycleError::RevisionNotFound { .. })
    ));
}

// Optimistic locking.

#[test]
fn a_stale_commit_id_is_a_conflict() {
    let (_temp, repo) = repo();
    let revision = draft(&repo);
    let updated = repo
        .update_draft(&revision, revision.commit, &kptfile("one"), "one")
        .unwrap();
    // Someone still holding the first commit id loses.
    let error = repo
        .update_draft(&updated, revision.commit, &kptfile("two"), "two")
        .unwrap_err();
    assert!(
        matches!(&error, LifecycleError::Conflict { expected, actual, .. }
            if *expected == revision.commit.to_string() && *actual == updated.commit.to_string()),
        "{error:?}"
    );
    let error = repo
        .propose(&updated, Some(revision.commit), &no_render)
        .unwrap_err();
    assert!(
        matches!(error, LifecycleError::Conflict { .. }),
        "{error:?}"
    );
    assert_eq!(
        repo.files(&repo.get("app/ws1").unwrap()).unwrap(),
        kptfile("one")
    );
}

#[test]
fn concurrent_writers_exactly_one_wins() {
    let (temp, repo) = repo();
    let revision = draft(&repo);
    let path = temp.path().join("repo");
    let writers = 8;
    let barrier = std::sync::Barrier::new(writers);
    let results: Vec<Result<Revision, LifecycleError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|writer| {
                let (path, revision, barrier) = (&path, &revision, &barrier);
                scope.spawn(move || {
                    // Each writer has its own repository handle, as separate
                    // processes would.
                    let repo = PackageRepo::open(path).unwrap();
                    let content = kptfile(&format!("writer-{writer}"));
                    barrier.wait();
                    repo.update_draft(revision, revision.commit, &content, "edit")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<&Revision> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for result in &results {
        if let Err(error) = result {
            assert!(
                matches!(error, LifecycleError::Conflict { .. }),
                "{error:?}"
            );
        }
    }
    let now = repo.get("app/ws1").unwrap();
    assert_eq!(now.commit, winners[0].commit);
    assert_eq!(repo.files(&now).unwrap(), repo.files(winners[0]).unwrap());
}

// The CLI.

#[test]
fn cli_session_pull_push_propose_approve() {
    let temp = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = crate::support::krender_command()
            .arg("rpkg")
            .args(["--repo", "repo"])
            .args(args)
            .current_dir(temp.path())
            .env("KRENDER_CONFIG", temp.path().join("no-render.toml"))
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stdout, _) = run(&["init", "app", "--workspace", "ws1"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("app/ws1 created (Draft at "), "{stdout}");
    let (code, _, stderr) = run(&["pull", "app/ws1", "work"]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::write(
        temp.path().join("work/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run(&["push", "work", "-m", "add cm"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("app/ws1 pushed (Draft at "), "{stdout}");
    // A second copy pulled before that push is now stale.
    let (code, _, stderr) = run(&["push", "work", "--commit", &"1".repeat(40)]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("krender::lifecycle::conflict"), "{stderr}");
    let (code, stdout, stderr) = run(&["propose", "app/ws1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.starts_with("app/ws1 proposed (Proposed at "),
        "{stdout}"
    );
    let (code, stdout, _) = run(&["approve", "app/ws1"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.starts_with("app/v1 published (Published at "),
        "{stdout}"
    );
    let (code, stdout, _) = run(&["list"]);
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[1].starts_with("app                      v1           ws1              Published"),
        "{stdout}"
    );
    // The pulled directory now names a published revision: immutable.
    let (code, _, stderr) = run(&["push", "work"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("published and immutable"), "{stderr}");
    let (code, _, stderr) = run(&["approve", "app/v1"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("cannot approve: lifecycle is Published (allowed from Proposed)"),
        "{stderr}"
    );
}

#[test]
fn a_bare_repository_can_be_shared() {
    let temp = tempfile::tempdir().unwrap();
    let shared = temp.path().join("shared.git");
    let status = Command::new("git")
        .args(["init", "--bare", "-q"])
        .arg(&shared)
        .status()
        .unwrap();
    assert!(status.success());
    // Two users, two handles on the same bare repository.
    let alice = PackageRepo::open(&shared).unwrap();
    let bob = PackageRepo::open(&shared).unwrap();
    let draft = alice.create_package("app", "ws1", &kptfile("app")).unwrap();
    let seen_by_bob = bob.get("app/ws1").unwrap();
    assert_eq!(seen_by_bob, draft);
    let proposal = bob.propose(&seen_by_bob, None, &no_render).unwrap();
    let published = alice.approve(&proposal, None).unwrap();
    assert_eq!(published.id(), "app/v1");
    assert_eq!(bob.files(&published).unwrap(), kptfile("app"));
}

/// SIGKILL at random instants of `draft`, `propose` and `approve` (the
/// transitions that create one ref and remove another): after every kill
/// the repository still holds each revision exactly once (none lost), and
/// the next command goes through (no lock left that blocks it). At least
/// 200 kills, or `KRENDER_RPKG_KILLS`.
#[test]
fn killed_transitions_lose_no_revision_and_leave_no_stuck_lock() {
    use std::time::{Duration, Instant};
    let kills_wanted: usize = std::env::var("KRENDER_RPKG_KILLS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(200);
    let temp = tempfile::tempdir().unwrap();
    let repo_dir = temp.path().join("repo");
    let command = |args: &[&str]| {
        let mut command = crate::support::krender_command();
        command
            .arg("rpkg")
            .args(["--repo", "repo"])
            .args(args)
            .current_dir(temp.path())
            .env("KRENDER_CONFIG", temp.path().join("no-render.toml"))
            .env("KRENDER_FSYNC", "0")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        command
    };
    let run = |args: &[&str]| {
        let output = command(args).output().unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // A fixed-seed xorshift: the kill delays are reproducible.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next_delay = move |max_micros: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        Duration::from_micros(seed % max_micros)
    };
    let (code, stderr) = run(&["init", "app", "--workspace", "ws0"]);
    assert_eq!(code, Some(0), "{stderr}");
    // How long a transition takes here, to aim the kills inside it.
    let started = Instant::now();
    let (code, stderr) = run(&["propose", "app/ws0"]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = run(&["approve", "app/ws0"]);
    assert_eq!(code, Some(0), "{stderr}");
    let span = (started.elapsed().as_micros() as u64 / 2).max(2_000);

    let states = |label: &str| -> Vec<(String, Lifecycle)> {
        let repo = PackageRepo::open(&repo_dir).unwrap_or_else(|error| panic!("{label}: {error}"));
        let mut seen: Vec<(String, Lifecycle)> = repo
            .list()
            .unwrap_or_else(|error| panic!("{label}: {error}"))
            .into_iter()
            .map(|revision| (revision.workspace, revision.lifecycle))
            .collect();
        seen.sort();
        seen
    };
    let mut kills = 0;
    let mut workspace = 0;
    while kills < kills_wanted {
        workspace += 1;
        let ws = format!("ws{workspace}");
        let id = format!("app/{ws}");
        for (args, done) in [
            (
                vec!["draft", "app", "--workspace", ws.as_str()],
                Lifecycle::Draft,
            ),
            (vec!["propose", id.as_str()], Lifecycle::Proposed),
            (vec!["approve", id.as_str()], Lifecycle::Published),
        ] {
            let before = states("before");
            let mut child = command(&args).spawn().unwrap();
            std::thread::sleep(next_delay(span));
            let _ = child.kill();
            let _ = child.wait();
            kills += 1;
            // Every earlier revision is still there, exactly once; the one
            // being moved is in its old or its new state.
            let after = states(&format!("after killing {args:?}"));
            let others = |seen: &[(String, Lifecycle)]| -> Vec<(String, Lifecycle)> {
                seen.iter().filter(|(w, _)| *w != ws).cloned().collect()
            };
            assert_eq!(others(&after), others(&before), "killing {args:?}");
            let moved: Vec<&Lifecycle> = after
                .iter()
                .filter(|(w, _)| *w == ws)
                .map(|(_, l)| l)
                .collect();
            assert!(
                moved.len() <= 1,
                "{ws} twice after killing {args:?}: {after:?}"
            );
            // The command again, unkilled: it goes through, or finds it
            // had gone through before the kill.
            let (code, stderr) = run(&args);
            let state = states("after the retry");
            let now: Vec<&Lifecycle> = state
                .iter()
                .filter(|(w, _)| *w == ws)
                .map(|(_, l)| l)
                .collect();
            assert_eq!(now, [&done], "{args:?} exit {code:?}: {stderr}");
        }
    }
    // Opening the repository finished whatever the last kill interrupted.
    states("at the end");
    assert!(!repo_dir.join(".git/krender-rpkg-journal").exists());
}

/// A truncated loose object (a crash of some other git writer, a full
/// disk) made libgit2 spin forever in `pull` and `approve`; it is now an
/// error naming the object's file, at once.
#[test]
fn a_truncated_object_is_an_error_not_a_hang() {
    let (temp, repo) = repo();
    let proposed = {
        let draft = repo.create_package("app", "ws1", &kptfile("app")).unwrap();
        repo.propose(&draft, None, &no_render).unwrap()
    };
    let git_dir = temp.path().join("repo/.git");
    for id in [proposed.commit, {
        let output = Command::new("git")
            .args(["rev-parse", &format!("{}^{{tree}}", proposed.commit)])
            .current_dir(temp.path().join("repo"))
            .output()
            .unwrap();
        git2::Oid::from_str(String::from_utf8_lossy(&output.stdout).trim()).unwrap()
    }] {
        let hex = id.to_string();
        let path = git_dir.join("objects").join(&hex[..2]).join(&hex[2..]);
        let bytes = std::fs::read(&path).unwrap();
        let mut permissions = std::fs::metadata(&path).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        permissions.set_readonly(false);
        std::fs::set_permissions(&path, permissions).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    }
    for args in [vec!["pull", "app/ws1", "work"], vec!["approve", "app/ws1"]] {
        let mut child = crate::support::krender_command()
            .arg("rpkg")
            .args(["--repo", "repo"])
            .args(&args)
            .current_dir(temp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > std::time::Duration::from_secs(30) {
                let _ = child.kill();
                panic!("{args:?} hung on a truncated object");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("corrupt git object"), "{args:?}: {stderr}");
    }
}
