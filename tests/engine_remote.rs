//! The remote cache: a second "machine" (the same checkout path, an empty
//! local cache) renders from what the first pushed, running nothing, with
//! byte-identical output; a damaged remote value is never served; a remote
//! that is down, or dies mid-render, costs one warning and nothing else.
//! The stores are real: a directory, a GET/PUT-only HTTP server
//! (tests/http-cache.py), `redis-server` and moto's S3 server on 127.0.0.1
//! (the last two installed by `.ci/run`); without them those tests fail,
//! unless `KRENDER_SKIP_SERVICES=1`. Sharded renders, depth- and
//! breadth-first, end byte-identical to one render.

use crate::engine_actions::generate;
use crate::support::{copy_dir, normalize_durations, snapshot};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// A generated tree (kept pristine) and the checkout path every machine
/// renders it at.
struct Fleet {
    temp: tempfile::TempDir,
    orig: PathBuf,
    tree: PathBuf,
}

/// What one machine's render left: exit code, stderr (durations
/// normalised), the tree's files and `--stats`.
struct Rendered {
    code: Option<i32>,
    stderr: String,
    files: BTreeMap<String, Vec<u8>>,
    stats: serde_json::Value,
}

impl Fleet {
    fn new(fanout: usize) -> Fleet {
        Fleet::generated(fanout, false)
    }

    fn generated(fanout: usize, bfs: bool) -> Fleet {
        let temp = tempfile::tempdir().unwrap();
        let orig = temp.path().join("orig");
        generate(&orig, fanout, bfs);
        let tree = temp.path().join("checkout");
        Fleet { temp, orig, tree }
    }

    /// A fresh machine: the checkout copied anew, the local cache `cache`
    /// (empty unless a test reuses it).
    fn render(&self, cache: &str, extra: &[&str]) -> Rendered {
        self.render_with(cache, extra, |_| {})
    }

    fn render_with(&self, cache: &str, extra: &[&str], during: impl FnOnce(&Child)) -> Rendered {
        let _ = std::fs::remove_dir_all(&self.tree);
        copy_dir(&self.orig, &self.tree);
        let stats = self.temp.path().join("stats.json");
        let child = Command::new(env!("CARGO_BIN_EXE_krender"))
            .args(["fn", "render"])
            .arg(&self.tree)
            .arg("--cache-dir")
            .arg(self.temp.path().join(cache))
            .arg("--stats")
            .arg(&stats)
            .args(extra)
            .env("KRENDER_CONFIG", self.temp.path().join("no-render.toml"))
            .env_remove("KRENDER_REMOTE_CACHE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        during(&child);
        let output: Output = child.wait_with_output().unwrap();
        Rendered {
            code: output.status.code(),
            stderr: normalize_durations(&String::from_utf8_lossy(&output.stderr)),
            files: snapshot(&self.tree),
            stats: serde_json::from_slice(&std::fs::read(&stats).unwrap_or_default())
                .unwrap_or_default(),
        }
    }

    fn url(&self) -> String {
        format!("file://{}", self.temp.path().join("remote").display())
    }
}

fn warnings(stderr: &str) -> usize {
    stderr.matches("krender: warning: remote cache").count()
}

#[test]
fn a_second_machine_runs_nothing_from_a_file_remote() {
    let fleet = Fleet::new(3);
    let url = fleet.url();
    let first = fleet.render("cache-1", &["--remote-cache", &url]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(first.stats["pipelines_run"], 13);
    // The store's entries: each distinct resource, log and run once.
    assert!(
        first.stats["remote"]["pushes"].as_u64() > Some(13),
        "{}",
        first.stats
    );
    let second = fleet.render("cache-2", &["--remote-cache", &url]);
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert_eq!(second.stats["pipelines_run"], 0, "{}", second.stats);
    assert_eq!(second.files, first.files);
    assert_eq!(second.stderr, first.stderr);
    assert_eq!(warnings(&second.stderr), 0);
    // Read-only (a pull request): served, nothing pushed.
    let reader = fleet.render(
        "cache-3",
        &["--remote-cache", &url, "--remote-cache-mode", "read"],
    );
    assert_eq!(reader.stats["pipelines_run"], 0);
    assert_eq!(reader.files, first.files);
    let pushed_before = snapshot(&fleet.temp.path().join("remote")).len();
    std::fs::write(
        fleet.orig.join("config.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: changed\n",
    )
    .unwrap();
    let edited = fleet.render(
        "cache-4",
        &["--remote-cache", &url, "--remote-cache-mode", "read"],
    );
    assert_eq!(edited.code, Some(0));
    assert_eq!(edited.stats["pipelines_run"], 1, "only the root ran");
    assert_eq!(
        snapshot(&fleet.temp.path().join("remote")).len(),
        pushed_before
    );
}

/// bazel-remote's HTTP layout: a server that answers only GET and PUT of
/// `/ac/<hex>` and `/cas/<hex>` (tests/http-cache.py) serves a second
/// machine everything, and the client asks for nothing else.
#[test]
fn a_second_machine_runs_nothing_from_a_bazel_remote_http_cache() {
    let fleet = Fleet::new(2);
    let store = fleet.temp.path().join("http-store");
    let log = fleet.temp.path().join("http.log");
    let mut server = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/http-cache.py"))
        .arg(&store)
        .arg(&log)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs tests/http-cache.py");
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut port,
    )
    .unwrap();
    let url = format!("http://127.0.0.1:{}/", port.trim());
    let first = fleet.render("cache-1", &["--remote-cache", &url]);
    let second = fleet.render("cache-2", &["--remote-cache", &url]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(warnings(&first.stderr), 0, "{}", first.stderr);
    assert!(
        first.stats["remote"]["pushes"].as_u64() > Some(0),
        "{}",
        first.stats
    );
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert_eq!(second.stats["pipelines_run"], 0, "{}", second.stats);
    assert_eq!(second.files, first.files);
    let requests = std::fs::read_to_string(&log).unwrap();
    for line in requests.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        assert!(
            matches!(
                fields.as_slice(),
                ["GET", _, "200" | "404"] | ["PUT", _, "201"]
            ),
            "{line}"
        );
    }
    assert!(requests.contains("PUT /ac/"), "{requests}");
    assert!(requests.contains("GET /ac/"), "{requests}");
}

#[test]
fn a_damaged_remote_value_is_never_served() {
    let fleet = Fleet::new(2);
    let url = fleet.url();
    let first = fleet.render("cache-1", &["--remote-cache", &url]);
    assert_eq!(first.code, Some(0));
    for file in snapshot(&fleet.temp.path().join("remote")).into_keys() {
        let path = fleet.temp.path().join("remote").join(file);
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x20;
        std::fs::write(&path, bytes).unwrap();
    }
    let second = fleet.render("cache-2", &["--remote-cache", &url]);
    assert_eq!(second.code, Some(0));
    assert_eq!(second.stats["pipelines_run"], 7, "everything ran again");
    assert_eq!(second.stats["remote"]["hits"], 0);
    assert_eq!(second.files, first.files);
    assert_eq!(warnings(&second.stderr), 1, "{}", second.stderr);
    assert!(
        second
            .stderr
            .contains("failed their digest and were ignored")
    );
}

#[test]
fn a_dead_remote_costs_one_warning() {
    let fleet = Fleet::new(2);
    let reference = fleet.render("reference", &["--no-cache"]);
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let started = Instant::now();
    let dead = fleet.render("cache-1", &["--remote-cache", &url]);
    assert_eq!(dead.code, Some(0), "{}", dead.stderr);
    assert_eq!(dead.files, reference.files);
    assert_eq!(warnings(&dead.stderr), 1, "{}", dead.stderr);
    assert!(dead.stderr.contains("unavailable"), "{}", dead.stderr);
    assert_eq!(dead.stats["remote"]["gave_up"], true);
    // The breaker stops the retries: a few bounded timeouts at worst.
    assert!(started.elapsed() < Duration::from_secs(20));
    // A URL no store answers to is a command error, before anything runs.
    let bad = fleet.render("cache-2", &["--remote-cache", "nosuchstore://x"]);
    assert_eq!(bad.code, Some(1));
    assert!(
        bad.stderr.contains("remote cache nosuchstore://x"),
        "{}",
        bad.stderr
    );
}

/// A Redis server on a free port, stopped when dropped.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start() -> Option<Redis> {
        if std::env::var_os("KRENDER_SKIP_SERVICES").is_some() {
            return None;
        }
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server must be installed for the remote cache tests (.ci/run installs it; KRENDER_SKIP_SERVICES=1 skips them)");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Redis { child, port })
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap()
}

/// `s3://` with a custom endpoint and the usual AWS variables, against
/// moto's S3 server (`pip install 'moto[server]'`, done by `.ci/run`).
#[test]
fn a_second_machine_runs_nothing_from_an_s3_bucket() {
    if std::env::var_os("KRENDER_SKIP_SERVICES").is_some() {
        return;
    }
    let port = free_port();
    let mut moto = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("moto_server must be installed for the S3 test (.ci/run installs it; KRENDER_SKIP_SERVICES=1 skips it)");
    let endpoint = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    // Make the bucket with a bare CreateBucket (moto accepts any keys).
    let created = loop {
        let status = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut stream| {
            use std::io::{Read, Write};
            write!(
                stream,
                "PUT /krender HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer)?;
            Ok(answer)
        });
        match status {
            Ok(answer) => break answer,
            Err(_) if started.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("moto_server did not start: {error}"),
        }
    };
    assert!(created.starts_with("HTTP/1.1 200"), "{created}");
    let fleet = Fleet::new(2);
    let url = format!("s3://krender/cache?endpoint={endpoint}");
    let render = |cache: &str| {
        let _ = std::fs::remove_dir_all(&fleet.tree);
        copy_dir(&fleet.orig, &fleet.tree);
        let stats = fleet.temp.path().join(format!("{cache}.json"));
        let output = Command::new(env!("CARGO_BIN_EXE_krender"))
            .args(["fn", "render"])
            .arg(&fleet.tree)
            .args(["--remote-cache", &url, "--cache-dir"])
            .arg(fleet.temp.path().join(cache))
            .arg("--stats")
            .arg(&stats)
            .env("KRENDER_CONFIG", fleet.temp.path().join("no-render.toml"))
            .env("AWS_ACCESS_KEY_ID", "krender-test")
            .env("AWS_SECRET_ACCESS_KEY", "krender-test-secret")
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap();
        let stats: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&stats).unwrap_or_default()).unwrap_or_default();
        (output, stats, snapshot(&fleet.tree))
    };
    let (first, first_stats, first_files) = render("cache-1");
    let (second, second_stats, second_files) = render("cache-2");
    let _ = moto.kill();
    let _ = moto.wait();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(0), "{stderr}");
    assert_eq!(warnings(&stderr), 0, "{stderr}");
    assert!(!stderr.contains("krender-test-secret"));
    assert!(
        first_stats["remote"]["pushes"].as_u64() > Some(0),
        "{first_stats}"
    );
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(second_stats["pipelines_run"], 0, "{second_stats}");
    assert_eq!(second_files, first_files);
}

#[test]
fn a_second_machine_runs_nothing_from_redis_and_survives_its_death() {
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let fleet = Fleet::new(4);
    let url = redis.url();
    let first = fleet.render("cache-1", &["--remote-cache", &url]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert!(
        first.stats["remote"]["pushes"].as_u64() > Some(21),
        "{}",
        first.stats
    );
    let second = fleet.render("cache-2", &["--remote-cache", &url]);
    assert_eq!(second.stats["pipelines_run"], 0, "{}", second.stats);
    assert_eq!(second.files, first.files);
    assert_eq!(second.stderr, first.stderr);
    // Redis killed while a third machine renders: it goes on without it.
    let third = fleet.render_with("cache-3", &["--remote-cache", &url], |_| {
        std::thread::sleep(Duration::from_millis(30));
        let _ = redis.child.kill();
        let _ = redis.child.wait();
    });
    assert_eq!(third.code, Some(0), "{}", third.stderr);
    assert_eq!(third.files, first.files);
    assert!(warnings(&third.stderr) <= 1, "{}", third.stderr);
}

/// Four shards in parallel, then the final render: byte-identical to one
/// render, the shards write nothing in place, and the final render runs
/// only the packages above the cut.
#[test]
fn four_shards_and_a_final_render_equal_one_render() {
    let fleet = Fleet::new(4);
    let (above, last) = four_shards_then_final(&fleet);
    assert_eq!(last.stats["pipelines_run"], above, "{}", last.stats);
    // Without a remote a shard has nowhere to leave its runs.
    let lonely = fleet.render("lonely", &["--shard", "1/2"]);
    assert_eq!(lonely.code, Some(1));
    assert!(
        lonely.stderr.contains("--shard needs a remote cache"),
        "{}",
        lonely.stderr
    );
}

/// Breadth-first, every shard runs the packages above the cut as well
/// (they feed its subtrees), so the final render runs nothing, and its
/// output is still one render's.
#[test]
fn breadth_first_shards_leave_the_final_render_nothing_to_run() {
    let fleet = Fleet::generated(4, true);
    let (_, last) = four_shards_then_final(&fleet);
    assert_eq!(last.stats["pipelines_run"], 0, "{}", last.stats);
    assert_eq!(last.stats["action_cache_hits"], 21, "{}", last.stats);
}

/// Renders the fleet's tree once without a cache, then as four shards in
/// parallel and a final render through one remote; checks that the shards
/// wrote nothing, that every package was in exactly one shard or above the
/// cut, and that the final render equals the single one. Returns the
/// number above the cut and the final render.
fn four_shards_then_final(fleet: &Fleet) -> (usize, Rendered) {
    let single = fleet.render("single", &["--no-cache"]);
    assert_eq!(single.code, Some(0), "{}", single.stderr);
    let url = fleet.url();
    let _ = std::fs::remove_dir_all(&fleet.tree);
    copy_dir(&fleet.orig, &fleet.tree);
    let shards: Vec<Child> = (1..=4)
        .map(|k| {
            Command::new(env!("CARGO_BIN_EXE_krender"))
                .args(["fn", "render"])
                .arg(&fleet.tree)
                .args(["--shard", &format!("{k}/4"), "--remote-cache", &url])
                .arg("--cache-dir")
                .arg(fleet.temp.path().join(format!("shard-{k}")))
                .env("KRENDER_CONFIG", fleet.temp.path().join("no-render.toml"))
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut above = None;
    let mut sharded = 0;
    for shard in shards {
        let output = shard.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        // "shard K/4: P of T packages ...; the final render runs the A above the cut"
        // or "...; the A above the cut ran here too (...)"
        let words: Vec<&str> = stderr.split_whitespace().collect();
        sharded += words[2].parse::<usize>().unwrap();
        let at = words.iter().rposition(|w| *w == "above").unwrap();
        above = words[at - 1].parse::<usize>().ok();
    }
    assert_eq!(
        snapshot(&fleet.tree),
        snapshot(&fleet.orig),
        "a shard wrote in place"
    );
    let above = above.unwrap();
    assert_eq!(
        sharded + above,
        21,
        "every package in one shard or above the cut"
    );
    let last = fleet.render("final", &["--remote-cache", &url]);
    assert_eq!(last.code, Some(0), "{}", last.stderr);
    assert_eq!(last.files, single.files);
    (above, last)
}
