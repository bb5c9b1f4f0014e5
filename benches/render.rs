//! End-to-end render benchmark on generated monorepos (the shape of
//! `../shared/tools/gen-monorepo`): N packages in a 10-ary tree, 10
//! resources each, two mutators per Kptfile.
//!
//! For each size it measures, through the `krender` binary, first the path
//! users run (a new process rendering in place, what every CI job and shell
//! does), against the floor of the same tree in the same run:
//! - cold (an empty cache, from the generated tree), and the same render
//!   with `-o stdout`, each from a fresh copy;
//! - a second machine: the same checkout path, an empty local cache and
//!   a remote cache (`file://`, a shared directory) the first machine
//!   filled; the pipelines it ran (0 when everything came from the remote);
//! - no change (the tree at its fixed point: a second render);
//! - `fn render --check` on that rendered tree: answered by the in-place
//!   render's manifest, and with the manifests removed before each run
//!   (the action cache answers every package), each against no change;
//! - one leaf package edited, and the root package edited, each followed by
//!   a render; the pipelines each ran (from `--stats`) are reported, and
//!   the last render of each is checked file for file against a
//!   `--no-cache` render of a copy of the same edited tree.
//!
//! Then, with `-o stdout`:
//! - the floor: walk the tree, stat, read and blake3 every file;
//! - krender with builtins (set-namespace + set-labels): cold (empty
//!   function cache, with its peak RSS), warm (every step a cache hit), no
//!   change (the root's manifest replayed), `--no-cache`, and a one-leaf
//!   edit both in a new process and in one process (a `watch` session,
//!   with the number of pipelines it re-ran and the memory the session
//!   holds);
//! - krender and, when `kpt` is on PATH, `kpt fn render` with two
//!   equivalent `sed` exec functions, on the same tree, and the floor of
//!   that render: the same `sed` processes started with no YAML work.
//!
//! Every run's output is checked, so a fast wrong answer cannot look good.
//! Each process-level row is the median of `KRENDER_BENCH_RUNS` runs
//! (default 3; cold runs each start from an empty cache directory).
//! Sizes: 100 and 1,000 packages; `KRENDER_BENCH_10K=1` adds 10,000.
//! kpt is slow (10–25 s per 100 packages), so it runs only up to
//! `KRENDER_BENCH_KPT_MAX` packages (default 100). `KRENDER_BENCH_SIZES=10,50`
//! replaces the sizes; `KRENDER_BENCH_IN_PLACE_ONLY=1` stops after the
//! in-place table; `KRENDER_BENCH_GENERATE=DIR` only writes the first
//! size's tree to DIR.

#![allow(clippy::print_stdout)]

// The in-process (watch) measurements run in this process: give it the
// allocator the `krender` binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const RESOURCES_PER_PACKAGE: usize = 10;

/// Which mutators the generated Kptfiles run.
#[derive(Clone, Copy, PartialEq)]
enum Pipeline {
    Builtins,
    Sed,
}

fn kptfile(name: &str, pipeline: Pipeline) -> String {
    let mutators = match pipeline {
        Pipeline::Builtins => concat!(
            "    - image: ghcr.io/kptdev/krm-functions-catalog/set-namespace:latest\n",
            "      configMap:\n",
            "        namespace: bench\n",
            "    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\n",
            "      configMap:\n",
            "        owner: bench\n",
        )
        .to_owned(),
        Pipeline::Sed => (0..2)
            .map(|i| format!("    - exec: \"sed -e s/PLACEHOLDER[_]{i}/value-{i}/g\"\n"))
            .collect(),
    };
    format!(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\npipeline:\n  mutators:\n{mutators}"
    )
}

fn resource(pkg: usize, idx: usize) -> String {
    match idx % 3 {
        0 => format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{pkg}-{idx} # main workload\n  labels:\n    app: app-{pkg}\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.25\n          env:\n            - name: MODE\n              value: PLACEHOLDER_0\n            - name: REGION\n              value: PLACEHOLDER_1\n"
        ),
        1 => format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{pkg}-{idx}\nspec:\n  # Route to the app.\n  selector:\n    app: app-{pkg}\n  ports:\n    - port: 80\n      targetPort: 8080\n"
        ),
        _ => format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{pkg}-{idx}\ndata:\n  mode: PLACEHOLDER_0\n  region: PLACEHOLDER_1\n"
        ),
    }
}

/// The directory of package `pkg`: package 0 is the root, the parent of
/// package i is (i - 1) / 10, so 1,000 packages reach depth 3.
fn package_dir(root: &Path, pkg: usize) -> PathBuf {
    let mut dir = root.to_path_buf();
    for pkg in ancestry(pkg).iter().rev() {
        dir.push(format!("p{pkg}"));
    }
    dir
}

/// Package `pkg` and its ancestors below the root, nearest first (empty
/// for the root): its depth is the length.
fn ancestry(pkg: usize) -> Vec<usize> {
    let mut chain = Vec::new();
    let mut current = pkg;
    while current != 0 {
        chain.push(current);
        current = (current - 1) / 10;
    }
    chain
}

fn generate(root: &Path, packages: usize, pipeline: Pipeline) {
    for pkg in 0..packages {
        let dir = package_dir(root, pkg);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Kptfile"), kptfile(&format!("p{pkg}"), pipeline)).unwrap();
        // Spread the resources over three files, as real packages do.
        for (file, range) in [
            ("deployment.yaml", 0..4),
            ("service.yaml", 4..7),
            ("config.yaml", 7..RESOURCES_PER_PACKAGE),
        ] {
            let docs: Vec<String> = range.map(|idx| resource(pkg, idx)).collect();
            std::fs::write(dir.join(file), docs.join("---\n")).unwrap();
        }
    }
}

/// Walks the tree and blake3-hashes every file: the cost of noticing that
/// nothing changed.
fn floor(root: &Path) -> (Duration, usize) {
    let started = Instant::now();
    let mut files = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                let bytes = std::fs::read(entry.path()).unwrap();
                std::hint::black_box(blake3::hash(&bytes));
                files += 1;
            }
        }
    }
    (started.elapsed(), files)
}

/// How many times each process-level row runs (`KRENDER_BENCH_RUNS`,
/// default 3); the table reports the median, since one run on a busy
/// 2-core machine can be off by a third.
fn runs() -> usize {
    std::env::var("KRENDER_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1)
}

/// Runs a render command with `-o stdout` [`runs`] times, calling `setup`
/// before each run, and returns the median time, the last output, whether
/// every run printed the same, and the largest peak RSS.
fn time_median(
    mut command: Command,
    mut setup: impl FnMut(usize),
) -> (Duration, String, bool, f64) {
    let mut times = Vec::new();
    let mut outputs: Vec<String> = Vec::new();
    let mut rss: f64 = 0.0;
    for run in 0..runs() {
        setup(run);
        let (elapsed, stdout, run_rss) = time_render_rss(&mut command);
        times.push(elapsed);
        rss = rss.max(run_rss);
        outputs.push(stdout);
    }
    times.sort();
    let same = outputs.windows(2).all(|pair| pair[0] == pair[1]);
    let last = outputs.pop().unwrap_or_default();
    (times[times.len() / 2], last, same, rss)
}

/// [`time_median`] on an unchanged tree: every run must print the same.
fn time_render(command: Command) -> (Duration, String) {
    let (elapsed, stdout, same, _) = time_median(command, |_| {});
    assert!(same, "runs of the same render differ");
    (elapsed, stdout)
}

/// [`time_render`], plus the child's peak resident set size in MB (from
/// `wait4`'s rusage, so it is this child's alone).
// The child is reaped by `wait4`, which clippy does not see.
#[allow(clippy::zombie_processes)]
fn time_render_rss(command: &mut Command) -> (Duration, String, f64) {
    use std::io::Read;
    let started = Instant::now();
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout_pipe = child.stdout.take().unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        stdout_pipe.read_to_end(&mut bytes).unwrap();
        bytes
    });
    let error_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        stderr_pipe.read_to_end(&mut bytes).unwrap();
        bytes
    });
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; wait4 reaps our own
    // child (std's handle is not waited on afterwards).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    let stdout = reader.join().unwrap();
    let stderr = error_reader.join().unwrap();
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{command:?} failed: {}",
        String::from_utf8_lossy(&stderr)
    );
    let rss_mb = usage.ru_maxrss as f64 / 1024.0;
    (elapsed, String::from_utf8(stdout).unwrap(), rss_mb)
}

/// The first Deployment file of the deepest, last package: a leaf.
fn leaf_file(root: &Path, packages: usize) -> PathBuf {
    package_dir(root, packages - 1).join("deployment.yaml")
}

/// Edits the leaf's first replica count (a new value each call).
fn edit_leaf(root: &Path, packages: usize, replicas: usize) {
    let file = leaf_file(root, packages);
    let text = std::fs::read_to_string(&file).unwrap();
    let start = text.find("replicas: ").unwrap() + "replicas: ".len();
    let end = start + text[start..].find('\n').unwrap();
    let edited = format!("{}{replicas}{}", &text[..start], &text[end..]);
    std::fs::write(&file, edited).unwrap();
}

/// In-process incremental render (what `krender watch` does): a session's
/// first render, then one-leaf edits (`KRENDER_BENCH_EDITS`, default 5,
/// each a new value). Returns (first, the median edit, pipelines run by the
/// last edit, the last edit's stdout bytes, and this process's resident
/// memory in MB while the session is alive).
fn session_edit(root: &Path, packages: usize) -> (Duration, Duration, usize, String, f64) {
    use krender::engine::db::RenderContext;
    use krender::engine::session::RenderSession;
    use krender::hydrate::{self, Output, RenderOptions};
    let context = RenderContext::uncached(root, RenderOptions::default());
    // `RUST_LOG=krender=info` times the session's phases, as the CLI does.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .try_init();
    }
    let mut session = RenderSession::new(context, None);
    // After the first render, refresh as `krender watch` does on an event
    // naming the edited file.
    let edited = std::collections::BTreeSet::from([leaf_file(root, packages)]);
    let render = |session: &mut RenderSession, first: bool| {
        let kptfile = hydrate::load_root(root).unwrap();
        if first {
            session.refresh(&kptfile);
        } else {
            session.refresh_changed(&kptfile, &edited);
        }
        let mut log = Vec::new();
        let outcome = session.render(kptfile, &mut log);
        let mut out = Vec::new();
        hydrate::apply(outcome, &Output::Stdout, None, &mut out, &mut Vec::new()).unwrap();
        String::from_utf8(out).unwrap()
    };
    let started = Instant::now();
    render(&mut session, true);
    let first = started.elapsed();
    let edits: usize = std::env::var("KRENDER_BENCH_EDITS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let mut times = Vec::new();
    let mut last = (0, String::new());
    for replicas in 0..edits {
        edit_leaf(root, packages, 7 + replicas);
        let before = session.pipelines_run();
        let started = Instant::now();
        let output = render(&mut session, false);
        times.push(started.elapsed());
        last = (session.pipelines_run() - before, output);
    }
    times.sort();
    let resident = resident_mb();
    drop(session);
    (first, times[times.len() / 2], last.0, last.1, resident)
}

/// This process's resident set now (`VmRSS`), in MB; 0 where /proc is
/// missing.
fn resident_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn krender(root: &Path, cache: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_krender"));
    command
        .args(["fn", "render"])
        .arg(root)
        .args(["-o", "stdout", "--cache-dir"])
        .arg(cache)
        .args(extra)
        .env("KRENDER_CONFIG", root.join("no-render.toml"));
    command
}

fn check_builtins(output: &str, packages: usize) {
    let resources = packages * RESOURCES_PER_PACKAGE;
    // Each resource gets the namespace; Kptfiles also carry it in their configMap.
    assert!(
        output.matches("namespace: bench").count() >= resources,
        "namespaces set"
    );
    assert!(
        !output.contains("kind: Deployment\nmetadata:\n  name: app-0-0 # main workload\n  labels"),
        "namespace inserted"
    );
    assert!(
        output.matches("owner: bench").count() >= resources,
        "labels set"
    );
}

fn check_sed(output: &str, packages: usize) {
    assert!(
        !output.contains("PLACEHOLDER_0") && !output.contains("PLACEHOLDER_1"),
        "placeholders replaced"
    );
    assert!(
        output.matches("value-1").count() >= packages * 4,
        "values written"
    );
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

fn kpt_available() -> bool {
    Command::new("kpt")
        .arg("version")
        .output()
        .is_ok_and(|out| out.status.success())
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

/// The in-place rows of one size (the path users run).
struct InPlaceRow {
    packages: usize,
    files: usize,
    floor: Duration,
    cold: Duration,
    cold_rss: f64,
    cold_stdout: Duration,
    next: Duration,
    next_rss: f64,
    next_runs: u64,
    remote_hit: Duration,
    remote_runs: u64,
    no_change: Duration,
    check: Duration,
    check_no_manifest: Duration,
    leaf: Duration,
    leaf_runs: u64,
    leaf_rss: f64,
    root: Duration,
    root_runs: u64,
}

/// An in-place render of `root` with the cache `cache`, its stats written
/// to `stats`.
fn krender_in_place(root: &Path, cache: &Path, stats: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_krender"));
    command
        .args(["fn", "render"])
        .arg(root)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--stats")
        .arg(stats)
        .args(extra)
        .env("KRENDER_CONFIG", root.join("no-render.toml"));
    command
}

/// `pipelines_run` from a `--stats` file.
fn pipelines_run(stats: &Path) -> u64 {
    let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(stats).unwrap()).unwrap();
    stats["pipelines_run"].as_u64().unwrap()
}

/// Copies the tree `from` to `to` (replacing it).
fn copy_tree(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// Renders a copy of `tree` (as it is now, before its own render) with
/// `--no-cache`, for [`assert_same_tree`].
fn reference_copy(tree: &Path, work: &Path) -> PathBuf {
    let copy = work.join("reference");
    copy_tree(tree, &copy);
    let status = Command::new(env!("CARGO_BIN_EXE_krender"))
        .args(["fn", "render"])
        .arg(&copy)
        .arg("--no-cache")
        .env("KRENDER_CONFIG", copy.join("no-render.toml"))
        .output()
        .unwrap();
    assert!(status.status.success(), "reference render failed");
    copy
}

/// Every file of the two trees is byte-identical (the root Kptfile's
/// status included).
fn assert_same_tree(rendered: &Path, reference: &Path, what: &str) {
    assert!(
        snapshot_tree(rendered) == snapshot_tree(reference),
        "{what}: differs from a --no-cache render"
    );
}

/// Every file under `root` and its bytes, by path relative to it.
fn snapshot_tree(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = files_under(root)
        .into_iter()
        .map(|(path, bytes)| (path.strip_prefix(root).unwrap().to_path_buf(), bytes))
        .collect();
    files.sort();
    files
}

/// Edits the root package's first replica count.
fn edit_root(root: &Path, replicas: usize) {
    let file = root.join("deployment.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let start = text.find("replicas: ").unwrap() + "replicas: ".len();
    let end = start + text[start..].find('\n').unwrap();
    std::fs::write(
        &file,
        format!("{}{replicas}{}", &text[..start], &text[end..]),
    )
    .unwrap();
}

fn in_place(work: &Path, generated: &Path, packages: usize) -> InPlaceRow {
    let tree = work.join("tree");
    let cache = work.join("cache");
    let stats = work.join("stats.json");
    // Cold: each run from the generated tree and an empty cache.
    let fresh = |_: usize| {
        copy_tree(generated, &tree);
        let _ = std::fs::remove_dir_all(&cache);
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
    };
    let (cold_stdout, stdout, _, _) = time_median(
        krender_in_place(&tree, &cache, &stats, &["-o", "stdout"]),
        fresh,
    );
    check_builtins(&stdout, packages);
    let (cold, _, _, cold_rss) = time_median(krender_in_place(&tree, &cache, &stats, &[]), fresh);
    // The render right after a cold one: its input is what the cold render
    // wrote.
    let (next, _, _, next_rss) = time_median(krender_in_place(&tree, &cache, &stats, &[]), |run| {
        fresh(run);
        time_render_rss(&mut krender_in_place(&tree, &cache, &stats, &[]));
    });
    let next_runs = pipelines_run(&stats);
    // A second machine: another checkout path, an empty local cache, a
    // remote cache (a shared directory) the first machine filled.
    let remote = work.join("remote");
    let remote_url = format!("file://{}", remote.display());
    let remote_flags = ["--remote-cache", remote_url.as_str()];
    let _ = std::fs::remove_dir_all(&remote);
    fresh(0);
    time_render_rss(&mut krender_in_place(&tree, &cache, &stats, &remote_flags));
    let first_machine = snapshot_tree(&tree);
    let elsewhere = work.join("elsewhere").join("tree");
    let other_cache = work.join("elsewhere").join("cache");
    let (remote_hit, _, _, _) = time_median(
        krender_in_place(&elsewhere, &other_cache, &stats, &remote_flags),
        |_| {
            copy_tree(generated, &elsewhere);
            let _ = std::fs::remove_dir_all(&other_cache);
        },
    );
    let remote_runs = pipelines_run(&stats);
    assert!(
        snapshot_tree(&elsewhere) == first_machine,
        "second machine: differs from the first"
    );
    // The floor of the rendered tree, in the same run.
    floor(&tree);
    let (floor_time, files) = floor(&tree);
    // The first render rewrote every file: a second one reaches the fixed
    // point (and records the manifest) before "no change" is timed.
    time_render_rss(&mut krender_in_place(&tree, &cache, &stats, &[]));
    let (no_change, _) = time_render(krender_in_place(&tree, &cache, &stats, &[]));
    // `--check` on the rendered tree: answered by the in-place render's
    // manifest, then with the manifests gone (the action cache answers).
    let (check, diff) = time_render(krender_in_place(&tree, &cache, &stats, &["--check"]));
    assert!(diff.is_empty(), "--check found changes on a rendered tree");
    let (check_no_manifest, _, _, _) = time_median(
        krender_in_place(&tree, &cache, &stats, &["--check"]),
        |_| {
            let _ = std::fs::remove_dir_all(cache.join("manifests"));
        },
    );
    let (leaf, _, _, leaf_rss) = time_median(krender_in_place(&tree, &cache, &stats, &[]), |run| {
        edit_leaf(&tree, packages, 30 + run);
    });
    let leaf_runs = pipelines_run(&stats);
    // The last edit again, checked against a --no-cache render.
    edit_leaf(&tree, packages, 90);
    let reference = reference_copy(&tree, work);
    time_render_rss(&mut krender_in_place(&tree, &cache, &stats, &[]));
    assert_same_tree(&tree, &reference, "leaf edit");
    let (root, _, _, _) = time_median(krender_in_place(&tree, &cache, &stats, &[]), |run| {
        edit_root(&tree, 40 + run);
    });
    let root_runs = pipelines_run(&stats);
    edit_root(&tree, 91);
    let reference = reference_copy(&tree, work);
    time_render_rss(&mut krender_in_place(&tree, &cache, &stats, &[]));
    assert_same_tree(&tree, &reference, "root edit");
    InPlaceRow {
        packages,
        files,
        floor: floor_time,
        cold,
        cold_rss,
        cold_stdout,
        next,
        next_rss,
        next_runs,
        remote_hit,
        remote_runs,
        no_change,
        check,
        check_no_manifest,
        leaf,
        leaf_runs,
        leaf_rss,
        root,
        root_runs,
    }
}

fn print_in_place(rows: &[InPlaceRow]) {
    println!();
    println!(
        "New process, in place (what CI and a shell run); ratios against the floor of the same tree, measured in this run:"
    );
    println!();
    println!(
        "| packages | files | floor | cold | cold / floor | cold -o stdout | in place / stdout | peak RSS cold | next render | / floor | pipelines run | peak RSS | 2nd machine (other path), remote | / floor | pipelines run | no change | / floor | --check, rendered | / no change | --check, no manifest | / no change | leaf edit | / floor | pipelines run | peak RSS | root edit | / floor | pipelines run |"
    );
    println!(
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for row in rows {
        let ratio = |time: Duration| time.as_secs_f64() / row.floor.as_secs_f64();
        println!(
            "| {} | {} | {} | {} | {:.1}× | {} | {:.2}× | {:.0} MB | {} | {:.1}× | {} of {} | {:.0} MB | {} | {:.1}× | {} of {} | {} | {:.1}× | {} | {:.2}× | {} | {:.2}× | {} | {:.1}× | {} of {} | {:.0} MB | {} | {:.1}× | {} of {} |",
            row.packages,
            row.files,
            ms(row.floor),
            ms(row.cold),
            ratio(row.cold),
            ms(row.cold_stdout),
            row.cold.as_secs_f64() / row.cold_stdout.as_secs_f64(),
            row.cold_rss,
            ms(row.next),
            ratio(row.next),
            row.next_runs,
            row.packages,
            row.next_rss,
            ms(row.remote_hit),
            ratio(row.remote_hit),
            row.remote_runs,
            row.packages,
            ms(row.no_change),
            ratio(row.no_change),
            ms(row.check),
            row.check.as_secs_f64() / row.no_change.as_secs_f64(),
            ms(row.check_no_manifest),
            row.check_no_manifest.as_secs_f64() / row.no_change.as_secs_f64(),
            ms(row.leaf),
            ratio(row.leaf),
            row.leaf_runs,
            row.packages,
            row.leaf_rss,
            ms(row.root),
            ratio(row.root),
            row.root_runs,
            row.packages,
        );
    }
}

fn main() {
    let mut sizes = vec![100, 1_000];
    if std::env::var_os("KRENDER_BENCH_10K").is_some() {
        sizes.push(10_000);
    }
    // `KRENDER_BENCH_SIZES=10,50` overrides the sizes (quick checks).
    if let Ok(list) = std::env::var("KRENDER_BENCH_SIZES") {
        sizes = list
            .split(',')
            .filter_map(|size| size.trim().parse().ok())
            .collect();
    }
    let kpt_max: usize = std::env::var("KRENDER_BENCH_KPT_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    // `KRENDER_BENCH_GENERATE=DIR` writes the first size's tree to DIR and
    // stops: the bench's tree, to profile or try by hand.
    if let Some(dir) = std::env::var_os("KRENDER_BENCH_GENERATE") {
        generate(
            Path::new(&dir),
            sizes.first().copied().unwrap_or(1_000),
            Pipeline::Builtins,
        );
        return;
    }
    let has_kpt = kpt_available();
    let temp = tempfile::tempdir().unwrap();
    let _ = Command::new(env!("CARGO_BIN_EXE_krender"))
        .arg("--version")
        .output();
    let mut in_place_rows = Vec::new();
    for &packages in &sizes {
        let generated = temp.path().join(format!("in-place-{packages}"));
        generate(&generated, packages, Pipeline::Builtins);
        let work = temp.path().join(format!("in-place-work-{packages}"));
        std::fs::create_dir_all(&work).unwrap();
        in_place_rows.push(in_place(&work, &generated, packages));
        let _ = std::fs::remove_dir_all(&work);
    }
    print_in_place(&in_place_rows);
    if std::env::var_os("KRENDER_BENCH_IN_PLACE_ONLY").is_some() {
        return;
    }
    let mut rows = Vec::new();
    for &packages in &sizes {
        let builtin_tree = temp.path().join(format!("builtins-{packages}"));
        generate(&builtin_tree, packages, Pipeline::Builtins);
        let sed_tree = temp.path().join(format!("sed-{packages}"));
        generate(&sed_tree, packages, Pipeline::Sed);
        let cache = temp.path().join(format!("cache-{packages}"));

        // Flush the freshly written trees, so their writeback does not land
        // in the first timed render, and load the binary once.
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let _ = Command::new(env!("CARGO_BIN_EXE_krender"))
            .arg("--version")
            .output();
        // Warm the page cache once so the floor is a hot-cache number, like the warm render.
        floor(&builtin_tree);
        let (floor_time, files) = floor(&builtin_tree);

        // Each cold run starts from an empty cache directory.
        let (cold, cold_out, same, cold_rss) =
            time_median(krender(&builtin_tree, &cache, &[]), |_| {
                let _ = std::fs::remove_dir_all(&cache);
            });
        assert!(same, "cold runs differ");
        check_builtins(&cold_out, packages);
        // `-o stdout` leaves the tree alone, so the cold render already
        // recorded the root's manifest: drop it before each run to time the
        // function cache.
        let manifests = krender::engine::cache::manifest_dir(&cache);
        let (warm, warm_out, same, _) = time_median(krender(&builtin_tree, &cache, &[]), |_| {
            let _ = std::fs::remove_dir_all(&manifests);
        });
        assert!(same, "warm runs differ");
        assert_eq!(warm_out, cold_out, "warm render differs from cold");
        let (no_change, no_change_out) = time_render(krender(&builtin_tree, &cache, &[]));
        assert_eq!(no_change_out, cold_out, "manifest replay differs from cold");
        let (uncached, uncached_out) = time_render(krender(&builtin_tree, &cache, &["--no-cache"]));
        assert_eq!(uncached_out, cold_out, "--no-cache render differs");
        // One leaf edited, a new process: only the edited path misses (a
        // new value for each run).
        let (leaf_cli, leaf_cli_out, _, _) =
            time_median(krender(&builtin_tree, &cache, &[]), |run| {
                edit_leaf(&builtin_tree, packages, 20 + run);
            });
        let last_value = format!("replicas: {}", 20 + runs() - 1);
        assert!(leaf_cli_out.contains(&last_value), "leaf edit rendered");
        // The same in one process (watch): the session re-runs the path.
        let (_, leaf_watch, leaf_runs, leaf_watch_out, session_rss) =
            session_edit(&builtin_tree, packages);
        let (_, fresh_out) = time_render(krender(&builtin_tree, &cache, &["--no-cache"]));
        assert_eq!(
            leaf_watch_out, fresh_out,
            "incremental render differs from a fresh one"
        );

        let (sed, sed_out) = time_render(krender(&sed_tree, &cache, &["--allow-exec"]));
        check_sed(&sed_out, packages);
        let sed_floor = exec_floor(&sed_tree, packages);
        let kpt = (has_kpt && packages <= kpt_max).then(|| {
            let mut command = Command::new("kpt");
            command
                .args(["fn", "render"])
                .arg(&sed_tree)
                .args(["--allow-exec", "-o", "stdout"]);
            let (time, out) = time_render(command);
            check_sed(&out, packages);
            // kpt 1.0.0-beta.56 orders `-o stdout` items differently for
            // nested packages; report that apart from content differences.
            let same = if out == sed_out {
                "yes"
            } else if sorted_lines(&out) == sorted_lines(&sed_out) {
                "order only"
            } else {
                "no"
            };
            (time, same)
        });
        rows.push(Row {
            packages,
            files,
            floor_time,
            cold,
            cold_rss,
            warm,
            no_change,
            uncached,
            leaf_cli,
            leaf_watch,
            leaf_runs,
            session_rss,
            sed,
            sed_floor,
            kpt,
        });
    }

    println!();
    println!("The other paths (`-o stdout`, watch, exec functions, kpt):");
    println!();
    println!(
        "| packages | files | floor (walk+read+blake3) | cold, builtins | warm, fn cache | no change (manifest) | no change / floor | leaf edit, new process | leaf edit, watch | watch edit / floor | pipelines re-run | watch session RSS | --no-cache | peak RSS cold | krender sed exec | exec floor (spawn + sed only) | krender exec / floor | kpt sed exec | kpt / krender (exec) | kpt-exec / krender-builtins cold | same bytes as kpt |"
    );
    println!(
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"
    );
    for row in rows {
        let (kpt_time, ratio_exec, ratio_builtins, same) = match row.kpt {
            Some((time, same)) => (
                ms(time),
                format!("{:.0}×", time.as_secs_f64() / row.sed.as_secs_f64()),
                format!("{:.0}×", time.as_secs_f64() / row.cold.as_secs_f64()),
                same.to_owned(),
            ),
            None => (
                "skipped".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
            ),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.1}× | {} | {} | {:.1}× | {} of {} | {:.0} MB | {} | {:.0} MB | {} | {} | {:.1}× | {kpt_time} | {ratio_exec} | {ratio_builtins} | {same} |",
            row.packages,
            row.files,
            ms(row.floor_time),
            ms(row.cold),
            ms(row.warm),
            ms(row.no_change),
            row.no_change.as_secs_f64() / row.floor_time.as_secs_f64(),
            ms(row.leaf_cli),
            ms(row.leaf_watch),
            row.leaf_watch.as_secs_f64() / row.floor_time.as_secs_f64(),
            row.leaf_runs,
            row.packages,
            row.session_rss,
            ms(row.uncached),
            row.cold_rss,
            ms(row.sed),
            ms(row.sed_floor),
            row.sed.as_secs_f64() / row.sed_floor.as_secs_f64(),
        );
    }
}

/// One size's measurements.
struct Row {
    packages: usize,
    files: usize,
    floor_time: Duration,
    cold: Duration,
    cold_rss: f64,
    warm: Duration,
    no_change: Duration,
    uncached: Duration,
    leaf_cli: Duration,
    leaf_watch: Duration,
    leaf_runs: usize,
    session_rss: f64,
    sed: Duration,
    sed_floor: Duration,
    kpt: Option<(Duration, &'static str)>,
}

/// The floor of the exec rows: the processes a render starts (two `sed`s
/// per package, through krender's own spawn path), each fed the files of
/// its package's subtree, level by level from the leaves with a level's
/// packages in parallel, and no YAML work at all. No implementation that
/// runs the functions can beat it; the inputs lack the annotations the
/// real ResourceLists carry, so it is, if anything, low.
fn exec_floor(root: &Path, packages: usize) -> Duration {
    use rayon::prelude::*;
    let depth = |pkg: usize| ancestry(pkg).len();
    let inputs: Vec<Vec<u8>> = (0..packages)
        .map(|pkg| subtree_bytes(&package_dir(root, pkg)))
        .collect();
    let deepest = (0..packages).map(depth).max().unwrap_or(0);
    let args: Vec<Vec<String>> = (0..2)
        .map(|i| vec!["-e".to_owned(), format!("s/PLACEHOLDER[_]{i}/value-{i}/g")])
        .collect();
    let mut times = Vec::new();
    for _ in 0..runs() {
        let started = Instant::now();
        for level in (0..=deepest).rev() {
            let members: Vec<usize> = (0..packages).filter(|&pkg| depth(pkg) == level).collect();
            members.par_iter().for_each(|&pkg| {
                for args in &args {
                    let response = krender::runtime::exec::run_process(
                        "sed",
                        args,
                        &inputs[pkg],
                        Duration::from_secs(60),
                        &krender::runtime::cancel::Cancel::default(),
                    )
                    .unwrap();
                    assert_eq!(response.exit_code, 0, "sed failed");
                }
            });
        }
        times.push(started.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}

/// Every file under `dir`, subpackages included, concatenated.
fn subtree_bytes(dir: &Path) -> Vec<u8> {
    files_under(dir)
        .into_iter()
        .flat_map(|(_, bytes)| bytes)
        .collect()
}

/// Every file under `dir` (subdirectories included) with its bytes.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.push((path, bytes));
            }
        }
    }
    files
}
