//! The matrix's 40 tamperings of a sweep's 3 shards, and what each refusal says.

use std::path::{Path, PathBuf};

use serde_json::Value;

pub fn read(p: &Path) -> String {
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
pub type Edit = fn(&Path, &Path, &Path);

/// The 40 cases: name, edit, and whether the merge must still equal the unsharded sweep.
pub fn cases() -> Vec<(&'static str, Edit, bool)> {
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
pub fn says(name: &str) -> &'static str {
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
