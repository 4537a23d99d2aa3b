//! A sweep split into shards (`capsize sweep --shard I/N`) and put back together
//! (`capsize merge`): the same files as the unsharded sweep, byte for byte, for any number of
//! shards merged in any order; and a merge of anything but every shard of one sweep refused in
//! one line, exit 2, nothing written.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::temp::Temp;
use common::{capsize, stderr};

const SCENARIO: &str = "scenarios/agent.toml";
/// Two axes (14 points), two repeats each: 28 runs, some points with repeats in two shards.
const GRID: &[&str] = &[
    "--set",
    "workload.duration_s=300",
    "--sweep",
    "scheduler.max_concurrency=8,16",
    "--repeats",
    "2",
];

fn run(args: &[&str]) -> Output {
    capsize(args)
}

fn ok(o: Output) -> Output {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    o
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// `capsize sweep SCENARIO GRID --out out [extra]`.
fn sweep(out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["sweep", SCENARIO, "--out", s(out)];
    args.extend_from_slice(GRID);
    args.extend_from_slice(extra);
    run(&args)
}

/// Every file under `dir`, by path relative to it, with its bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read a folder") {
            let p = e.expect("an entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).expect("read a file");
                all.push((p.strip_prefix(dir).expect("under dir").to_path_buf(), bytes));
            }
        }
    }
    all.sort();
    all
}

#[test]
fn shards_merged_in_any_order_write_the_unsharded_sweep_byte_for_byte() {
    let t = Temp::new("shard", "bytes");
    let whole = t.path("whole");
    ok(sweep(&whole, &[]));
    let expected = files(&whole);
    assert!(expected.len() > 10, "{expected:?}");
    for n in [1u32, 2, 3, 7] {
        let shards = t.path(&format!("shards-{n}"));
        for i in 1..=n {
            let o = ok(sweep(&shards, &["--shard", &format!("{i}/{n}")]));
            let said = String::from_utf8_lossy(&o.stdout).into_owned();
            assert!(said.starts_with(&format!("shard {i}/{n}: ")), "{said}");
        }
        // Each shard ran its share: 28 runs dealt round the shards.
        let mut runs = 0;
        for i in 1..=n {
            let lines = std::fs::read_to_string(
                shards.join(format!("shard-{i}-of-{n}")).join("runs.jsonl"),
            )
            .expect("runs.jsonl");
            let here = lines.lines().count();
            assert_eq!(here, (28 + n as usize - i as usize) / n as usize, "{i}/{n}");
            runs += here;
        }
        assert_eq!(runs, 28);
        // Merged in reverse order, shard folders named one by one.
        let merged = t.path(&format!("merged-{n}"));
        let mut args = vec!["merge".to_string(), "--out".into(), s(&merged).into()];
        for i in (1..=n).rev() {
            args.push(s(&shards.join(format!("shard-{i}-of-{n}"))).into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = ok(run(&args));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).lines().next(),
            Some("14 points x 2 runs of agent")
        );
        let got = files(&merged);
        assert_eq!(
            got.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            expected.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            "{n} shards: the same files"
        );
        for ((path, a), (_, b)) in expected.iter().zip(&got) {
            assert!(a == b, "{n} shards: {} differs", path.display());
        }
    }
    // The folder holding the shards is taken whole: the same again.
    let merged = t.path("merged-folder");
    ok(run(&["merge", s(&t.path("shards-3")), "--out", s(&merged)]));
    assert_eq!(files(&merged), expected);
}

#[test]
fn a_merge_of_anything_but_every_shard_of_one_sweep_is_refused_in_one_line() {
    let t = Temp::new("shard", "refused");
    let shards = t.path("shards");
    for i in 1..=3 {
        ok(sweep(&shards, &["--shard", &format!("{i}/3")]));
    }
    let other = t.path("other");
    ok(sweep(&other, &["--shard", "2/3", "--seed", "5"]));
    let shard = |i: u32| s(&shards.join(format!("shard-{i}-of-3"))).to_string();
    let out = t.path("out");
    let refused = |args: &[&str], says: &str| {
        let mut all = vec!["merge", "--out", s(&out)];
        all.extend_from_slice(args);
        let o = run(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: nothing written");
    };
    refused(&[&shard(1), &shard(3)], "1 of 3 shards missing: 2/3");
    refused(
        &[&shard(1), &shard(2), &shard(2), &shard(3)],
        "shard 2/3 is given twice",
    );
    let other2 = s(&other.join("shard-2-of-3")).to_string();
    refused(
        &[&shard(1), &other2, &shard(3)],
        "shards of different sweeps: --set arguments",
    );
    refused(&[s(t.dir())], "no shard.json");
    // A shard cut short (a lost line of runs.jsonl).
    let cut = t.path("cut");
    std::fs::create_dir_all(&cut).expect("mkdir");
    let runs = std::fs::read_to_string(shards.join("shard-1-of-3/runs.jsonl")).expect("runs");
    let kept: Vec<&str> = runs.lines().skip(1).collect();
    std::fs::write(cut.join("runs.jsonl"), kept.join("\n") + "\n").expect("write");
    std::fs::copy(
        shards.join("shard-1-of-3/shard.json"),
        cut.join("shard.json"),
    )
    .expect("copy");
    refused(
        &[s(&cut), &shard(2), &shard(3)],
        "shard 1/3 holds 9 runs (its manifest says 10), a whole one 10",
    );
    // A scenario other than the shards'.
    let changed = t.write(
        "agent.toml",
        &(std::fs::read_to_string(SCENARIO).expect("scenario") + "\n# changed\n"),
    );
    refused(
        &["--scenario", s(&changed), &shard(1), &shard(2), &shard(3)],
        "not the scenario the shards ran",
    );
}

#[test]
fn a_shard_flag_that_cannot_be_a_shard_is_refused() {
    let t = Temp::new("shard", "flags");
    let out = t.path("out");
    for (extra, says) in [
        (&["--shard", "4/3"][..], "--shard \"4/3\""),
        (&["--shard", "two"][..], "expected i/n"),
        (&["--shards", "3"][..], "give --shard I/3"),
        (
            &["--shard", "1/2", "--mode", "realtime"][..],
            "virtual time only",
        ),
    ] {
        let o = sweep(&out, extra);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
        assert!(!out.exists(), "{extra:?}: nothing written");
    }
}
