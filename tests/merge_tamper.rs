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

mod common;
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

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).expect("read")
}

fn lines(p: &Path) -> Vec<String> {
    read(p).lines().map(str::to_string).collect()
}

fn write_lines(p: &Path, lines: &[String]) {
    std::fs::write(p, lines.join("\n") + "\n").expect("write");
}

fn runs(p: &Path) -> Vec<Value> {
    lines(p)
        .iter()
        .map(|l| serde_json::from_str(l).expect("a run line"))
        .collect()
}

fn write_runs(p: &Path, runs: &[Value]) {
    let lines: Vec<String> = runs.iter().map(Value::to_string).collect();
    write_lines(p, &lines);
}

/// Edits the runs of `p` in place.
fn edit_runs(p: &Path, f: impl FnOnce(&mut Vec<Value>)) {
    let mut r = runs(p);
    f(&mut r);
    write_runs(p, &r);
}

/// Edits the manifest of `p` in place.
fn edit_manifest(p: &Path, f: impl FnOnce(&mut Value)) {
    let mut m: Value = serde_json::from_str(&read(p)).expect("a manifest");
    f(&mut m);
    std::fs::write(p, m.to_string()).expect("write");
}

/// A shard's file: `shard(t, 1, "runs.jsonl")`.
fn shard(t: &Path, i: u32, file: &str) -> PathBuf {
    t.join(format!("shard-{i}-of-3")).join(file)
}

/// A tampering of the shards folder `t` (the scenario at `scenario`, another sweep's shard
/// folder `other`).
type Edit = fn(&Path, &Path, &Path);

/// The 40 cases: name, edit, and whether the merge must still equal the unsharded sweep.
fn cases() -> Vec<(&'static str, Edit, bool)> {
    vec![
        (
            "edit_number",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"]["throughput"]["queries_per_s"] = 99.0.into()
                })
            },
            false,
        ),
        (
            "edit_all_p95",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r.iter_mut()
                        .for_each(|x| x["summary"]["latency_ms"]["query"]["p95"] = 1.0.into())
                })
            },
            false,
        ),
        (
            "dup_line",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                let mut l = lines(&p);
                l[1] = l[0].clone();
                write_lines(&p, &l)
            },
            false,
        ),
        (
            "dup_extra",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                let mut l = lines(&p);
                l.push(l[0].clone());
                write_lines(&p, &l)
            },
            false,
        ),
        (
            "trunc_last",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                let x = read(&p);
                std::fs::write(&p, &x[..x.len() - 200]).expect("write")
            },
            false,
        ),
        (
            "trunc_last_nl",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                let mut l = lines(&p);
                let last = l.pop().expect("a line");
                l.push(last[..last.len() - 50].to_string());
                write_lines(&p, &l)
            },
            false,
        ),
        (
            "drop_line",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                let mut l = lines(&p);
                l.pop();
                write_lines(&p, &l)
            },
            false,
        ),
        (
            "swap_summaries",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    let a = r[0]["summary"].take();
                    r[0]["summary"] = r[1]["summary"].take();
                    r[1]["summary"] = a
                })
            },
            false,
        ),
        (
            "foreign_summary",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    let x = &mut r[0]["summary"];
                    x["scenario"] = "another".into();
                    x["seed"] = 1.into();
                    x["mode"] = "realtime".into()
                })
            },
            false,
        ),
        (
            "summary_empty",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"] = serde_json::json!({})
                })
            },
            false,
        ),
        (
            "summary_missing_latency",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"]
                        .as_object_mut()
                        .expect("an object")
                        .remove("latency_ms");
                })
            },
            false,
        ),
        (
            "summary_strings",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"]["throughput"]["queries_per_s"] = "fast".into()
                })
            },
            false,
        ),
        (
            "summary_null",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"]["latency_ms"]["query"]["p95"] = Value::Null
                })
            },
            false,
        ),
        (
            "summary_huge",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"]["latency_ms"]["query"]["p95"] = 1e308.into();
                    r[0]["summary"]["throughput"]["queries_per_s"] = (-1e308).into()
                })
            },
            false,
        ),
        (
            "summary_negative",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r.iter_mut()
                        .for_each(|x| x["summary"]["provider"]["rate_limited"] = (-5).into())
                })
            },
            false,
        ),
        (
            "summary_schema",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"]["schema_version"] = 99.into();
                    r[0]["summary"]["capsize_version"] = "9.9.9".into()
                })
            },
            false,
        ),
        (
            "summary_array",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"] = serde_json::json!([1, 2, 3])
                })
            },
            false,
        ),
        (
            "seed_edit",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["seed"] = (r[0]["seed"].as_u64().expect("a seed") + 1).into()
                })
            },
            false,
        ),
        (
            "run_from_other_sweep",
            |t, _, other| {
                let theirs = runs(&shard(other, 1, "runs.jsonl"));
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"] = theirs[0]["summary"].clone()
                })
            },
            false,
        ),
        (
            "manifest_version",
            |t, _, _| {
                edit_manifest(&shard(t, 1, "shard.json"), |m| {
                    m["capsize"] = "0.0.9".into()
                })
            },
            false,
        ),
        (
            "manifest_runs",
            |t, _, _| edit_manifest(&shard(t, 1, "shard.json"), |m| m["runs"] = 1.into()),
            false,
        ),
        (
            "manifest_repeats_all",
            |t, _, _| {
                (1..=3).for_each(|i| {
                    edit_manifest(&shard(t, i, "shard.json"), |m| m["repeats"] = 1.into())
                })
            },
            false,
        ),
        (
            "manifest_scenario_path",
            |t, _, _| {
                edit_manifest(&shard(t, 1, "shard.json"), |m| {
                    m["scenario"] = "/etc/passwd".into()
                })
            },
            false,
        ),
        (
            "manifest_sets_all",
            |t, _, _| {
                (1..=3).for_each(|i| {
                    edit_manifest(&shard(t, i, "shard.json"), |m| {
                        m["sets"] = serde_json::json!(["workload.queries=5"])
                    })
                })
            },
            false,
        ),
        (
            "manifest_index_dup",
            |t, _, _| {
                edit_manifest(&shard(t, 2, "shard.json"), |m| {
                    m["shard"]["index"] = 1.into()
                })
            },
            false,
        ),
        (
            "manifest_huge_count",
            |t, _, _| {
                (1..=3).for_each(|i| {
                    edit_manifest(&shard(t, i, "shard.json"), |m| {
                        m["shard"]["count"] = 100_000.into()
                    })
                })
            },
            false,
        ),
        (
            "manifest_trailing",
            |t, _, _| {
                let p = shard(t, 1, "shard.json");
                std::fs::write(&p, read(&p) + "garbage").expect("write")
            },
            false,
        ),
        (
            "runs_devzero",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                std::fs::remove_file(&p).expect("rm");
                std::os::unix::fs::symlink("/dev/zero", &p).expect("ln")
            },
            false,
        ),
        (
            "runs_dir",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                std::fs::remove_file(&p).expect("rm");
                std::fs::create_dir(&p).expect("mkdir")
            },
            false,
        ),
        (
            "runs_bigline",
            |t, _, _| {
                edit_runs(&shard(t, 1, "runs.jsonl"), |r| {
                    r[0]["summary"]["pad"] = "x".repeat(50 << 20).into()
                })
            },
            false,
        ),
        (
            "runs_extra_field",
            |t, _, _| edit_runs(&shard(t, 1, "runs.jsonl"), |r| r[0]["extra"] = 1.into()),
            true,
        ),
        (
            "runs_deep",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                let mut l = lines(&p);
                let open = &l[0][..l[0].len() - 1];
                l[0] = format!(
                    "{open},\"deep\":{}{}}}",
                    "[".repeat(100_000),
                    "]".repeat(100_000)
                );
                write_lines(&p, &l)
            },
            true,
        ),
        (
            "shard_symlink_loop",
            |t, _, _| std::os::unix::fs::symlink("shard-loop", t.join("shard-loop")).expect("ln"),
            true,
        ),
        (
            "shard_symlink_self",
            |t, _, _| std::os::unix::fs::symlink(".", t.join("shard-self")).expect("ln"),
            true,
        ),
        (
            "renamed_folder",
            |t, _, _| std::fs::rename(t.join("shard-1-of-3"), t.join("shard-9-of-9")).expect("mv"),
            true,
        ),
        (
            "scenario_changed",
            |_, scenario, _| {
                std::fs::write(scenario, read(scenario) + "\n# changed\n").expect("write")
            },
            false,
        ),
        (
            "points_edit_all",
            |t, _, _| {
                (1..=3).for_each(|i| {
                    edit_manifest(&shard(t, i, "shard.json"), |m| {
                        m["points"][0] =
                            "scheduler.max_concurrency=1 scheduler.headroom=0.55".into()
                    })
                })
            },
            false,
        ),
        (
            "nonutf8_runs",
            |t, _, _| {
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(shard(t, 1, "runs.jsonl"))
                    .and_then(|mut f| f.write_all(b"\xff\xfe\n"))
                    .expect("append")
            },
            false,
        ),
        (
            "empty_lines",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                let l = lines(&p);
                let mut out = vec![String::new(), l[0].clone(), "   ".into()];
                out.extend(l[1..].iter().cloned());
                write_lines(&p, &out)
            },
            true,
        ),
        (
            "crlf",
            |t, _, _| {
                let p = shard(t, 1, "runs.jsonl");
                std::fs::write(&p, read(&p).replace('\n', "\r\n")).expect("write")
            },
            true,
        ),
    ]
}

/// What each refused case's one line must say.
fn says(name: &str) -> &'static str {
    match name {
        "edit_number" => "line 1: summary: throughput.queries_per_s 99.0 is not queries",
        "edit_all_p95" => "line 1: summary: latency_ms.query: p95 1.0 is below the percentile before it",
        "dup_line" => "line 2: run 0 is given twice",
        "dup_extra" => "shard 1/3 holds 4 runs (its manifest says 3), a whole one 3",
        "trunc_last" | "trunc_last_nl" => "runs.jsonl: line 3: EOF while parsing",
        "drop_line" => "shard 1/3 holds 2 runs (its manifest says 3), a whole one 3",
        "swap_summaries" | "run_from_other_sweep" => "line 1: summary: seed ",
        "foreign_summary" => "line 1: summary: mode \"realtime\": a sweep's runs are virtual",
        "summary_empty" => "line 1: summary: not a summary.json of this capsize: missing field `schema_version`",
        "summary_missing_latency" => "not a summary.json of this capsize: missing field `latency_ms`",
        "summary_strings" => "not a summary.json of this capsize: invalid type: string \"fast\", expected f64",
        "summary_null" => "not a summary.json of this capsize: invalid type: null, expected f64",
        "summary_huge" => "latency_ms.query: p99 ",
        "summary_negative" => "not a summary.json of this capsize: invalid value: integer `-5`, expected u64",
        "summary_schema" => "line 1: summary: schema_version 99: this capsize writes 1",
        "summary_array" => "line 1: summary: not a summary.json of this capsize: an array, not an object",
        "seed_edit" => "line 1: run 0 is point 0 repeat 0 seed ",
        "manifest_version" => "shard.json: written by capsize \"0.0.9\"",
        "manifest_runs" => "shard 1/3 holds 3 runs (its manifest says 1)",
        "manifest_repeats_all" => "shard 1/3 holds 3 runs (its manifest says 3), a whole one 2",
        "manifest_scenario_path" => "/etc/passwd: not the scenario the shards ran",
        "manifest_sets_all" => "line 1: summary: queries_started 40, more than the scenario's 5 queries: the run of another scenario",
        "manifest_index_dup" => "shard 1/3 is given twice",
        "manifest_huge_count" => "99997 of 100000 shards missing",
        "manifest_trailing" => "shard.json: trailing characters",
        "runs_devzero" => "runs.jsonl: cannot read: not a regular file (a character device)",
        "runs_dir" => "runs.jsonl: cannot read: not a regular file (a folder)",
        "runs_bigline" => "runs.jsonl: line 1: a line over the limit of 16777216 bytes",
        "scenario_changed" => "ra.toml: not the scenario the shards ran",
        "points_edit_all" => "the scenario or its files changed since it ran",
        "nonutf8_runs" => "runs.jsonl: line 4: not UTF-8 text",
        _ => panic!("no message for {name}"),
    }
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
