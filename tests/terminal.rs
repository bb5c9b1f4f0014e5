//! krender as a person runs it: on a pseudo-terminal, with the progress bar,
//! piped into another program, and stopped with Ctrl-C or SIGTERM.
//!
//! Each run has a deadline, so a hang fails the test instead of stalling
//! the suite. Functions are `exec:` shell one-liners that sleep, so a render
//! outlives the bar's first tick.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{Child, CommandBuilder, PtySize, native_pty_system};

use crate::support::snapshot;

/// Generous: only a hang should ever reach it.
const DEADLINE: Duration = Duration::from_secs(60);

/// krender running on a pseudo-terminal, with everything it wrote to the
/// terminal collected as it arrives.
struct Terminal {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<String>>,
    /// Kept for the terminal's lifetime (closing it hangs up the child).
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Terminal {
    /// Runs `program args` in `dir` on a new 100×30 terminal, with its own
    /// cache directory.
    fn spawn(program: &str, args: &[&str], dir: &Path, cache: &Path) -> Terminal {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 30,
                cols: 100,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("a pseudo-terminal");
        let mut command = CommandBuilder::new(program);
        command.args(args);
        command.cwd(dir);
        command.env("TERM", "xterm");
        command.env("KRENDER_CACHE_DIR", cache);
        command.env_remove("RUST_LOG");
        let child = pty
            .slave
            .spawn_command(command)
            .expect("spawns on the terminal");
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().expect("terminal reader");
        let writer = pty.master.take_writer().expect("terminal writer");
        let screen = Arc::new(Mutex::new(String::new()));
        let sink = screen.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(read) = reader.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                if let Ok(mut screen) = sink.lock() {
                    screen.push_str(&String::from_utf8_lossy(&buffer[..read]));
                }
            }
        });
        Terminal {
            child,
            writer,
            screen,
            _master: pty.master,
        }
    }

    /// krender itself on the terminal.
    fn krender(args: &[&str], dir: &Path, cache: &Path) -> Terminal {
        Terminal::spawn(env!("CARGO_BIN_EXE_krender"), args, dir, cache)
    }

    fn screen(&self) -> String {
        self.screen
            .lock()
            .map(|screen| screen.clone())
            .unwrap_or_default()
    }

    /// Waits until the screen shows `text` `count` times; panics with the
    /// screen at the deadline.
    fn wait_for(&mut self, text: &str, count: usize) {
        let started = Instant::now();
        while self.screen().matches(text).count() < count {
            if started.elapsed() > DEADLINE {
                panic!(
                    "no {count}× {text:?} on the terminal in {DEADLINE:?}:\n{}",
                    self.screen()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (a second at most) until the reader thread has copied what
    /// the program wrote before it exited: the screen stops growing.
    fn drain(&self) {
        let started = Instant::now();
        let mut seen = self.screen().len();
        let mut quiet = 0;
        while quiet < 3 && started.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(30));
            let now = self.screen().len();
            quiet = if now == seen { quiet + 1 } else { 0 };
            seen = now;
        }
    }

    /// Waits until a whole line of the screen (escapes removed) is `line`:
    /// the reader thread may still be copying the last output after the
    /// program exited. Panics with the screen at the deadline.
    fn wait_for_line(&mut self, line: &str) {
        let started = Instant::now();
        while !plain_lines(&self.screen()).any(|shown| shown == line) {
            if started.elapsed() > DEADLINE {
                panic!(
                    "no line {line:?} on the terminal in {DEADLINE:?}:\n{}",
                    self.screen()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `bytes` (b"\x03" is Ctrl-C).
    fn press(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("typed");
        self.writer.flush().expect("typed");
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.process_id().expect("running")).expect("pid fits")
    }

    /// The exit code, waiting at most until the deadline (a hang kills the
    /// child and fails the test).
    fn exit_code(&mut self) -> u32 {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("waits") {
                self.drain();
                return status.exit_code();
            }
            if started.elapsed() > DEADLINE {
                let _ = self.child.kill();
                panic!("krender hung on the terminal:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// A root package with `children` subpackages, one ConfigMap each, every
/// Kptfile running `function` (an exec command).
fn package_tree(dir: &Path, children: usize, function: &str) {
    let write_package = |path: &Path, name: &str| {
        std::fs::create_dir_all(path).expect("package dir");
        let kptfile = format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\npipeline:\n  mutators:\n    - exec: {function:?}\n"
        );
        std::fs::write(path.join("Kptfile"), kptfile).expect("Kptfile");
        let config_map = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: PLACEHOLDER\n"
        );
        std::fs::write(path.join("cm.yaml"), config_map).expect("resource");
    };
    write_package(dir, "root");
    for index in 0..children {
        let name = format!("child-{index:03}");
        write_package(&dir.join(&name), &name);
    }
}

/// True while a process with this pid exists (and is not a zombie we
/// could still reap: the renders here are our children's children).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.contains(") Z"),
        Err(_) => false,
    }
}

fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

struct Scratch {
    _dir: tempfile::TempDir,
    pkg: PathBuf,
    cache: PathBuf,
}

impl Scratch {
    /// `krender fn render --allow-exec --no-cache PKG` on a terminal.
    fn render_on_terminal(&self) -> Terminal {
        let pkg = self.pkg.to_str().expect("utf-8 path");
        Terminal::krender(
            &["fn", "render", "--allow-exec", "--no-cache", pkg],
            &self.pkg,
            &self.cache,
        )
    }

    /// `krender watch --allow-exec --debounce-ms DEBOUNCE PKG` on a terminal.
    fn watch_on_terminal(&self, debounce: &str) -> Terminal {
        let pkg = self.pkg.to_str().expect("utf-8 path");
        Terminal::krender(
            &["watch", "--allow-exec", "--debounce-ms", debounce, pkg],
            &self.pkg,
            &self.cache,
        )
    }
}

fn scratch(children: usize, function: &str) -> Scratch {
    let dir = tempfile::tempdir().expect("tempdir");
    let pkg = dir.path().join("pkg");
    package_tree(&pkg, children, function);
    let cache = dir.path().join("cache");
    Scratch {
        pkg,
        cache,
        _dir: dir,
    }
}

/// The screen's lines as text: terminal control sequences (the bar's
/// redraws) removed, carriage returns ending lines too.
fn plain_lines(screen: &str) -> impl Iterator<Item = String> + '_ {
    screen.split(['\n', '\r']).map(|line| {
        let mut plain = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                // CSI: ESC [ parameters, then one final byte in @..~.
                if chars.next() == Some('[') {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
            } else {
                plain.push(c);
            }
        }
        plain.trim().to_owned()
    })
}

fn without_bar(screen: &str) -> bool {
    !screen.contains("rendering ")
}

#[test]
fn fn_render_on_a_terminal_finishes_and_draws_the_progress_bar() {
    // 40 packages × 50 ms of sleep: well past the bar's first tick.
    let work = scratch(40, "sh -c 'sleep 0.05; sed s/PLACEHOLDER/value/'");
    let mut terminal = work.render_on_terminal();
    assert_eq!(terminal.exit_code(), 0, "{}", terminal.screen());
    let screen = terminal.screen();
    assert!(screen.contains("rendering "), "no progress bar:\n{screen}");
    assert!(
        screen.contains("Successfully executed 41 function(s) in 41 package(s)."),
        "{screen}"
    );
    let rendered = std::fs::read_to_string(work.pkg.join("child-007/cm.yaml")).expect("read");
    assert!(rendered.contains("value: value"), "{rendered}");
}

#[test]
fn fn_render_unwrap_piped_into_another_program_finishes() {
    let work = scratch(30, "sh -c 'sleep 0.05; cat'");
    let krender = env!("CARGO_BIN_EXE_krender");
    let line = format!(
        "{krender:?} fn render --allow-exec --no-cache -o unwrap {:?} | grep -c '^kind: ConfigMap'",
        work.pkg
    );
    let mut terminal = Terminal::spawn("sh", &["-c", &line], &work.pkg, &work.cache);
    assert_eq!(terminal.exit_code(), 0, "{}", terminal.screen());
    terminal.wait_for_line("31");
}

#[test]
fn fn_eval_on_a_terminal_finishes() {
    let work = scratch(3, "cat");
    let pkg = work.pkg.to_str().expect("utf-8 path");
    let mut terminal = Terminal::krender(
        &[
            "fn",
            "eval",
            pkg,
            "--exec",
            "sh -c 'sleep 0.5; sed s/PLACEHOLDER/evaluated/'",
        ],
        &work.pkg,
        &work.cache,
    );
    assert_eq!(terminal.exit_code(), 0, "{}", terminal.screen());
    assert!(
        terminal.screen().contains("[PASS]"),
        "{}",
        terminal.screen()
    );
    let rendered = std::fs::read_to_string(work.pkg.join("child-002/cm.yaml")).expect("read");
    assert!(rendered.contains("value: evaluated"), "{rendered}");
}

/// Ctrl-C while functions run: the functions' processes are killed, the
/// command stops within a second, exits 130, says so, writes nothing and
/// leaves no lock behind.
#[test]
fn ctrl_c_stops_a_render_promptly_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pid_file = dir.path().join("pids");
    let function = format!("sh -c 'echo $$ >> {}; exec sleep 30'", pid_file.display());
    let work = scratch(4, &function);
    let before: BTreeMap<String, Vec<u8>> = snapshot(&work.pkg);
    let mut terminal = work.render_on_terminal();
    // Functions are running (as many as there are workers; the root's
    // waits for them).
    let started = Instant::now();
    while pids(&pid_file).is_empty() {
        assert!(started.elapsed() < DEADLINE, "functions never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pressed = Instant::now();
    terminal.press(b"\x03");
    let code = terminal.exit_code();
    let took = pressed.elapsed();
    let screen = terminal.screen();
    assert_eq!(code, 130, "{screen}");
    assert!(took < Duration::from_secs(1), "took {took:?} to stop");
    assert!(screen.contains("render interrupted (SIGINT)"), "{screen}");
    assert_eq!(snapshot(&work.pkg), before, "a file changed");
    for pid in pids(&pid_file) {
        assert!(!alive(pid), "function process {pid} outlived the render");
    }
}

#[test]
fn sigterm_stops_a_render_with_143() {
    let work = scratch(2, "sh -c 'sleep 30; cat'");
    let before = snapshot(&work.pkg);
    let mut terminal = work.render_on_terminal();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(terminal.pid(), libc::SIGTERM);
    }
    assert_eq!(terminal.exit_code(), 143, "{}", terminal.screen());
    assert!(terminal.screen().contains("render interrupted (SIGTERM)"));
    assert_eq!(snapshot(&work.pkg), before);
}

/// A render killed outright leaves its lock file; the next render finds its
/// holder gone, says so, and goes ahead.
#[test]
fn a_lock_left_by_a_killed_render_is_taken_over_with_a_message() {
    let work = scratch(1, "sh -c 'sleep 30; cat'");
    let mut killed = work.render_on_terminal();
    let lock = work.pkg.join(".krender-lock");
    let started = Instant::now();
    while !lock.exists() {
        assert!(started.elapsed() < DEADLINE, "no lock taken");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(killed.pid(), libc::SIGKILL);
    }
    killed.exit_code();
    assert!(lock.exists(), "SIGKILL leaves the lock file");
    let quick = "cat";
    package_tree(&work.pkg, 1, quick);
    let mut again = work.render_on_terminal();
    assert_eq!(again.exit_code(), 0, "{}", again.screen());
    assert!(
        again.screen().contains("took over the lock"),
        "{}",
        again.screen()
    );
    assert!(!lock.exists());
}

/// watch on a terminal: one rebuild at start, none for its own writes, one
/// per edit re-running only the edited package and its parent, and Ctrl-C
/// stops it with 130.
#[test]
fn watch_rebuilds_once_per_edit_and_stops_on_ctrl_c() {
    // The pattern does not match its own Kptfile line (which the function
    // sees and rewrites too, as kpt's would), so an edit renders again.
    let work = scratch(5, "sed s/PLACE[H]OLDER/value/");
    let mut terminal = work.watch_on_terminal("100");
    terminal.wait_for("[watch] rebuilt", 1);
    assert!(terminal.screen().contains("6 of 6 package(s) re-run"));
    // Its own writes (every cm.yaml, the Kptfile status) are no change.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        terminal.screen().matches("[watch] rebuilt").count(),
        1,
        "{}",
        terminal.screen()
    );

    let edited = work.pkg.join("child-003/cm.yaml");
    std::fs::write(
        &edited,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child-003\ndata:\n  value: PLACEHOLDER-again\n",
    )
    .expect("edit");
    terminal.wait_for("[watch] rebuilt", 2);
    std::thread::sleep(Duration::from_millis(1500));
    let screen = terminal.screen();
    assert_eq!(screen.matches("[watch] rebuilt").count(), 2, "{screen}");
    assert!(screen.contains("2 of 6 package(s) re-run"), "{screen}");
    let rendered = std::fs::read_to_string(&edited).expect("read");
    assert!(rendered.contains("value: value-again"), "{rendered}");

    let pressed = Instant::now();
    terminal.press(b"\x03");
    assert_eq!(terminal.exit_code(), 130, "{}", terminal.screen());
    assert!(pressed.elapsed() < Duration::from_secs(1));
    assert!(terminal.screen().contains("[watch] stopped"));
    assert!(without_bar(&terminal.screen()));
}

/// Ctrl-C during a watch rebuild: the rebuild's function is killed at once,
/// nothing is written, the exit code is 130.
#[test]
fn ctrl_c_during_a_watch_rebuild_stops_it_promptly() {
    // Slow only once a resource says SLOW (the bracket keeps the Kptfile's
    // own copy of the command, also in the input, from matching).
    let slow_on_demand = "sh -c 'input=$(cat); case \"$input\" in *SL[O]W*) sleep 30;; esac; printf \"%s\\n\" \"$input\"'";
    let work = scratch(2, slow_on_demand);
    let mut terminal = work.watch_on_terminal("50");
    terminal.wait_for("[watch] rebuilt", 1);
    std::thread::sleep(Duration::from_millis(500));
    let edited = work.pkg.join("child-001/cm.yaml");
    std::fs::write(
        &edited,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child-001\ndata:\n  value: SLOW\n",
    )
    .expect("edit");
    let before = snapshot(&work.pkg);
    // The debounce, then the slow function starts.
    std::thread::sleep(Duration::from_millis(800));
    let pressed = Instant::now();
    terminal.press(b"\x03");
    assert_eq!(terminal.exit_code(), 130, "{}", terminal.screen());
    assert!(
        pressed.elapsed() < Duration::from_secs(1),
        "took {:?}",
        pressed.elapsed()
    );
    let screen = terminal.screen();
    assert!(screen.contains("rebuild interrupted (SIGINT)"), "{screen}");
    assert!(!screen.contains("Exit code: -1"), "{screen}");
    assert_eq!(snapshot(&work.pkg), before, "the interrupted rebuild wrote");
}

/// On a terminal, a malformed YAML file gets kpt's line, then the place
/// and a snippet pointing at it.
#[test]
fn a_yaml_error_on_a_terminal_points_at_the_line() {
    let work = scratch(1, "cat");
    std::fs::write(
        work.pkg.join("bad.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: [1, 2\n  b: c\n",
    )
    .expect("write");
    let pkg = work.pkg.to_str().expect("utf-8 path");
    let mut terminal = Terminal::krender(&["fn", "render", pkg], &work.pkg, &work.cache);
    assert_eq!(terminal.exit_code(), 1, "{}", terminal.screen());
    let screen = terminal.screen();
    assert!(
        screen.contains(
            "bad.yaml: MalformedYAMLError: yaml: line 5: did not find expected ',' or ']'"
        ),
        "{screen}"
    );
    assert!(screen.contains("bad.yaml:7:4"), "{screen}");
    assert!(screen.contains("  b: c"), "{screen}");
}

/// On a terminal, a render that ran packages whose runs are kept says in
/// one line how many and why; piped, it prints kpt's output only.
#[test]
fn a_render_on_a_terminal_says_why_packages_ran() {
    let work = scratch(2, "unused");
    let kptfile = |name: &str| {
        format!(
            "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\npipeline:\n  mutators:\n    - image: ghcr.io/kptdev/krm-functions-catalog/set-labels:latest\n      configMap:\n        tier: {name}\n"
        )
    };
    for (dir, name) in [
        (work.pkg.clone(), "root"),
        (work.pkg.join("child-000"), "child-000"),
        (work.pkg.join("child-001"), "child-001"),
    ] {
        std::fs::write(dir.join("Kptfile"), kptfile(name)).expect("Kptfile");
    }
    let pkg = work.pkg.to_str().expect("utf-8 path");
    let mut first = Terminal::krender(&["fn", "render", pkg], &work.pkg, &work.cache);
    assert_eq!(first.exit_code(), 0, "{}", first.screen());
    assert!(
        plain_lines(&first.screen()).any(|line| line == "ran 3 of 3 packages (first run: 3)"),
        "{}",
        first.screen()
    );
    let file = work.pkg.join("child-001/cm.yaml");
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(&file, text.replace("PLACEHOLDER", "edited")).expect("edit");
    let mut second = Terminal::krender(&["fn", "render", pkg], &work.pkg, &work.cache);
    assert_eq!(second.exit_code(), 0, "{}", second.screen());
    assert!(
        plain_lines(&second.screen())
            .any(|line| line
                == "ran 2 of 3 packages (files changed: 1, subpackage output changed: 1)"),
        "{}",
        second.screen()
    );
    // Piped: kpt's output, no summary line.
    std::fs::write(&file, text.replace("PLACEHOLDER", "again")).expect("edit");
    let output = crate::support::krender_command()
        .args(["fn", "render", pkg])
        .env("KRENDER_CACHE_DIR", &work.cache)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("packages ("), "{stderr}");
}
