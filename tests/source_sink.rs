//! `krender fn source` and `krender fn sink` beyond kpt's recorded
//! `fn source PKG | fn sink OUT` output (every recorded case is a test of
//! its own, `kpt::source_sink` of the `cases` binary): an empty stream, and
//! `fn source`'s `-o unwrap` and `--fn-config`.

use crate::support::{krender_command, krender_sink as sink};

/// kpt's `fn sink DIR` creates DIR even when the stream holds no resources
/// (checked against kpt 1.0.0-beta.56: an empty list and an empty stdin).
#[test]
fn sink_of_an_empty_stream_creates_the_empty_directory() {
    let temp = tempfile::tempdir().unwrap();
    for (name, stream) in [
        (
            "list",
            &b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n"[..],
        ),
        ("nothing", &b""[..]),
    ] {
        let out = temp.path().join(name);
        sink(stream, &out).unwrap();
        assert!(out.is_dir(), "{name}: no directory");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "{name}");
    }
}

/// `fn source -o unwrap` prints the resources alone and `--fn-config FILE`
/// adds the file's resource as the list's `functionConfig`, annotated with
/// its file name; a bad `-o` is kpt's error (all checked against kpt
/// 1.0.0-beta.56).
#[test]
fn source_unwraps_and_takes_a_function_config() {
    let temp = tempfile::tempdir().unwrap();
    let pkg = temp.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("a.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n",
    )
    .unwrap();
    std::fs::create_dir(temp.path().join("cfg")).unwrap();
    std::fs::write(
        temp.path().join("cfg/fnc.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fnc\ndata:\n  x: y\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let output = krender_command()
            .args(["fn", "source", "pkg"])
            .args(args)
            .current_dir(temp.path())
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert_eq!(
        run(&["-o", "unwrap"]),
        (
            Some(0),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n".to_owned(),
            String::new()
        )
    );
    let (code, stdout, _) = run(&["--fn-config", "cfg/fnc.yaml"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.ends_with("functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fnc\n    annotations:\n      config.kubernetes.io/index: '0'\n      config.kubernetes.io/path: 'fnc.yaml'\n      internal.config.kubernetes.io/index: '0'\n      internal.config.kubernetes.io/path: 'fnc.yaml'\n      internal.config.kubernetes.io/seqindent: 'compact'\n  data:\n    x: y\n"),
        "{stdout}"
    );
    assert_eq!(
        run(&["-o", "bogus"]),
        (
            Some(1),
            String::new(),
            "error: invalid input for --output flag \"bogus\", must be \"stdout\" or \"unwrap\"\n"
                .to_owned()
        )
    );
}
