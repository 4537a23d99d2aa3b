//! `capsize merge` against tampered shards (the third robustness round's matrix,
//! merge-tamper-matrix.py): 40 edits of shard.json, runs.jsonl and the folders. Every edit that
//! changes what was run or what it measured is refused in one line, exit 2, nothing written in
//! --out; the benign ones (CRLF, blank lines, an extra field on a line, a renamed folder, links
//! that hold no shard) merge into the unsharded sweep byte for byte. Also: a file the scenario
//! reads that changed (W3), and a runs.jsonl that is a device or a FIFO (H3).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a real process, on the real clock

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

#[path = "merge_tamper/cases.rs"]
mod cases;
mod common;
use cases::{cases, read, says};
use common::temp::Temp;
use common::{capsize, root, stderr};

const SMALL: &str = "tests/data/repro/round3/merge-small.toml";
const EMPIRICAL: &str = "tests/data/repro/round3/merge-empirical.toml";

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn ok(o: Output) -> Output {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    o
}

/// Every file under `dir` (not in folders), by name, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("read a folder")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("read a file"))
        })
        .collect();
    all.sort();
    all
}

/// The scenario in `t` (ra.toml), swept whole into `full`, as 3 shards into `sh`, and shard
/// 1/3 of another seed into `other`.
fn sweeps(t: &Temp) -> (PathBuf, PathBuf, PathBuf) {
    let scenario = t.write("ra.toml", &read(Path::new(&root(SMALL))));
    let sweep = |out: &Path, extra: &[&str]| {
        let mut args = vec!["sweep", s(&scenario), "--repeats", "2", "--out", s(out)];
        args.extend_from_slice(extra);
        ok(capsize(&args));
    };
    let (full, sh, other) = (t.path("full"), t.path("sh"), t.path("other"));
    sweep(&full, &[]);
    for i in 1..=3 {
        sweep(&sh, &["--shard", &format!("{i}/3")]);
    }
    sweep(&other, &["--shard", "1/3", "--seed", "7"]);
    (full, sh, other)
}

/// Copies every file under `from` into `to` (links kept as links).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read a folder") {
        let p = e.expect("an entry").path();
        let dest = to.join(p.file_name().expect("a name"));
        if p.is_dir() {
            copy_tree(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).expect("copy");
        }
    }
}

#[cfg(unix)]
#[test]
fn every_tampering_of_the_matrix_is_refused_and_every_benign_edit_merges_exactly() {
    let t = Temp::new("merge-tamper", "matrix");
    let (full, sh, other) = sweeps(&t);
    let expected = files(&full);
    assert!(expected.len() > 10, "{expected:?}");
    let cases = cases();
    assert_eq!(cases.len(), 40);
    let scenario = t.path("ra.toml");
    let pristine = read(&scenario);
    for (name, edit, benign) in cases {
        let tampered = t.path("T");
        let out = t.path("MO");
        let _ = std::fs::remove_dir_all(&tampered);
        let _ = std::fs::remove_dir_all(&out);
        std::fs::write(&scenario, &pristine).expect("the scenario again");
        copy_tree(&sh, &tampered);
        edit(&tampered, &scenario, &other);
        let o = capsize(&["merge", s(&tampered), "--out", s(&out)]);
        let err = stderr(&o);
        if benign {
            assert_eq!(o.status.code(), Some(0), "{name}: {err}");
            assert!(files(&out) == expected, "{name}: not the unsharded sweep");
            continue;
        }
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.contains(says(name)), "{name}: {err}");
        assert!(!out.exists(), "{name}: nothing written");
    }
}

/// A merge of `dir` into `out` (with `extra` flags): its exit and its stderr.
fn merge(dir: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["merge", s(dir), "--out", s(out)];
    args.extend_from_slice(extra);
    let o = capsize(&args);
    (o.status.code(), stderr(&o))
}

#[test]
fn a_file_the_scenario_reads_that_changed_since_the_shards_ran_is_refused() {
    let t = Temp::new("merge-tamper", "empirical");
    let lat = |ms: u32| {
        (0..200)
            .map(|i| format!("{}\n", ms + i * 3))
            .collect::<String>()
    };
    t.write("lat.csv", &lat(200));
    let scenario = t.write("emp.toml", &read(Path::new(&root(EMPIRICAL))));
    let sweep = |out: &Path, shard: &str| {
        ok(capsize(&[
            "sweep",
            s(&scenario),
            "--out",
            s(out),
            "--shard",
            shard,
        ]));
    };
    let (sh, out) = (t.path("sh"), t.path("merged"));
    sweep(&sh, "1/2");
    sweep(&sh, "2/2");
    let manifest: Value =
        serde_json::from_str(&read(&sh.join("shard-1-of-2/shard.json"))).expect("a manifest");
    assert_eq!(manifest["files"][0]["file"], "lat.csv");
    // The file rewritten after the shards ran: named, exit 2, nothing written.
    t.write("lat.csv", &lat(5000));
    let (code, err) = merge(&sh, &out, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let named = format!(
        "{}: not the file the shards read (FNV-1a ",
        s(&t.path("lat.csv"))
    );
    assert!(err.starts_with(&format!("capsize: {named}")), "{err}");
    assert!(
        err.ends_with("it changed since, or is another file\n"),
        "{err}"
    );
    assert!(!out.exists());
    // --scenario naming a copy elsewhere: its own lat.csv is the one checked.
    let elsewhere = t.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    std::fs::copy(&scenario, elsewhere.join("emp.toml")).expect("copy");
    std::fs::write(elsewhere.join("lat.csv"), lat(900)).expect("write");
    let copy = elsewhere.join("emp.toml");
    let (code, err) = merge(&sh, &out, &["--scenario", s(&copy)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: not the file the shards read",
            s(&elsewhere.join("lat.csv"))
        )),
        "{err}"
    );
    std::fs::remove_file(elsewhere.join("lat.csv")).expect("rm");
    let (code, err) = merge(&sh, &out, &["--scenario", s(&copy)]);
    assert_eq!(code, Some(2), "{err}");
    // Missing there: the scenario itself says it cannot read it.
    let missing = format!(
        "cannot read {}: No such file",
        s(&elsewhere.join("lat.csv"))
    );
    assert!(err.contains(&missing), "{err}");
    assert!(!out.exists());
    // The same file there: merged.
    std::fs::write(elsewhere.join("lat.csv"), lat(200)).expect("write");
    let (code, err) = merge(&sh, &out, &["--scenario", s(&copy)]);
    assert_eq!(code, Some(0), "{err}");
    // A file that changed between the shards: shards of different sweeps.
    let (sh2, out2) = (t.path("sh2"), t.path("merged2"));
    t.write("lat.csv", &lat(200));
    sweep(&sh2, "1/2");
    t.write("lat.csv", &lat(300));
    sweep(&sh2, "2/2");
    let (code, err) = merge(&sh2, &out2, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "are shards of different sweeps: \"lat.csv\", a file the scenario reads (FNV-1a "
        ),
        "{err}"
    );
    assert!(!out2.exists());
}

#[cfg(unix)]
#[test]
fn a_runs_file_that_is_a_fifo_is_refused_at_once() {
    let t = Temp::new("merge-tamper", "fifo");
    let scenario = t.write("ra.toml", &read(Path::new(&root(SMALL))));
    let sh = t.path("sh");
    for i in 1..=2 {
        let shard = format!("{i}/2");
        ok(capsize(&[
            "sweep",
            s(&scenario),
            "--out",
            s(&sh),
            "--shard",
            &shard,
        ]));
    }
    let runs = sh.join("shard-1-of-2/runs.jsonl");
    std::fs::remove_file(&runs).expect("rm");
    let made = std::process::Command::new("mkfifo").arg(&runs).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    // It used to block for ever on the open: a generous bound, then killed.
    let out = t.path("m");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args(["merge", s(&sh), "--out", s(&out)])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("capsize runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("merge blocked on a FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().expect("its output");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        format!(
            "capsize: {}: cannot read: not a regular file (a FIFO)\n",
            s(&runs)
        )
    );
    assert!(!out.exists());
}
