//! What the commands write, from the outside: a command never replaces a file that is not a
//! regular file, nor one of its own inputs, nor the same file twice (refused before the run:
//! exit 2, one line naming the path, nothing written); and its outputs appear together or not
//! at all (exit 5 leaves every previous output as it was), with nothing temporary left behind.
#![cfg(unix)]

use std::collections::BTreeMap;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::temp::Temp;
use common::{capsize, capsize_limited};

/// A small scenario (5 queries): runs in milliseconds. Its latencies come from `lat.csv`.
const SMALL: &str = r#"name = "outputs-test"
seed = 1

[provider]
rpm = 600
latency = { dist = "empirical", file = "lat.csv" }

[workload]
queries = 5
calls_per_query = 2
tokens_per_call = 10

[scheduler]
max_concurrency = 2

[sweep]
"scheduler.max_concurrency" = [1, 2]

[slo]
"latency_ms.query.p95" = "< 5000"
"#;

/// The scenario and its latency file in `t`; returns the scenario's path.
fn scenario(t: &Temp) -> PathBuf {
    t.write("lat.csv", "ms\n120\n250\n400\n");
    t.write("small.toml", SMALL)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every entry under `dir` (hidden ones too): its bytes, a symbolic link's target, or a
/// folder's marker; `None` if `dir` does not exist.
fn snapshot(dir: &Path) -> Option<BTreeMap<String, String>> {
    let mut all = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).ok()? {
            let path = e.unwrap().path();
            let name = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let what = if meta.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                todo.push(path);
                "folder".into()
            } else if meta.is_file() {
                String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()
            } else {
                "special".into()
            };
            all.insert(name, what);
        }
    }
    Some(all)
}

/// Asserts exit 2 with one stderr line that names `path`, and nothing on stdout.
fn assert_refused(o: &Output, path: &Path) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("capsize: "), "{err}");
    assert!(
        err.contains(s(path)),
        "{err:?} does not name {}",
        path.display()
    );
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

/// A character device like /dev/null at `path`, if this process may create one (root).
fn mknod_null(path: &Path) -> bool {
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: a valid NUL-terminated path; geteuid has no preconditions.
    unsafe {
        libc::geteuid() == 0
            && libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) == 0
    }
}

#[test]
fn a_fifo_or_a_device_as_an_output_is_refused_and_left_as_it_was() {
    let t = Temp::new("outputs", "special");
    let scenario = scenario(&t);
    let fifo = t.path("fifo");
    mkfifo(&fifo);
    let device = t.path("null");
    let mut specials = vec![fifo.clone()];
    if mknod_null(&device) {
        specials.push(device);
    } else {
        eprintln!("not root: the character device case is covered by the FIFO alone");
    }
    let link = t.path("link-to-fifo");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    specials.push(link);
    let out = t.path("out");
    for special in &specials {
        for flag in ["--junit", "--summary-md"] {
            let o = capsize(&["check", s(&scenario), "--out", s(&out), flag, s(special)]);
            assert_refused(&o, special);
            assert!(!out.exists(), "--out written on a refusal");
        }
        let o = capsize(&["baseline", s(&scenario), "--out", s(special)]);
        assert_refused(&o, special);
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    if specials.len() == 3 {
        assert!(std::fs::metadata(t.path("null"))
            .unwrap()
            .file_type()
            .is_char_device());
    }
    // --out naming a FIFO: its files cannot go in it.
    let o = capsize(&["run", s(&scenario), "--out", s(&fifo)]);
    assert_refused(&o, &fifo);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn an_output_that_is_an_input_is_refused_whatever_its_spelling() {
    let t = Temp::new("outputs", "inputs");
    let scenario = scenario(&t);
    let base = t.path("base.json");
    let o = capsize(&["baseline", s(&scenario), "--out", s(&base)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = snapshot(t.dir()).unwrap();
    let out = t.path("out");
    let dot = t.dir().join(".").join("base.json");
    let up = t.dir().join("nowhere").join("..").join("base.json");
    let linked = t.path("hard-link.json");
    std::fs::hard_link(&base, &linked).unwrap();
    let before_with_link = snapshot(t.dir()).unwrap();
    for junit in [&base, &dot, &up, &linked] {
        let args = [
            "check",
            s(&scenario),
            "--baseline",
            s(&base),
            "--out",
            s(&out),
        ];
        let o = capsize(&[&args[..], &["--junit", s(junit)]].concat());
        assert_refused(&o, junit);
        assert!(stderr(&o).contains("the baseline"), "{}", stderr(&o));
    }
    assert_eq!(
        snapshot(t.dir()).unwrap(),
        before_with_link,
        "nothing written"
    );
    std::fs::remove_file(&linked).unwrap();
    assert_eq!(snapshot(t.dir()).unwrap(), before);
    // The scenario and the latency file it reads are inputs too.
    for input in [scenario.clone(), t.path("lat.csv")] {
        let o = capsize(&[
            "check",
            s(&scenario),
            "--out",
            s(&out),
            "--summary-md",
            s(&input),
        ]);
        assert_refused(&o, &input);
        let o = capsize(&["baseline", s(&scenario), "--out", s(&input)]);
        assert_refused(&o, &input);
    }
    assert_eq!(snapshot(t.dir()).unwrap(), before, "nothing written");
}

#[test]
fn two_outputs_naming_one_file_are_refused() {
    let t = Temp::new("outputs", "twice");
    let scenario = scenario(&t);
    let out = t.path("out");
    let before = snapshot(t.dir()).unwrap();
    let cases = [
        (t.path("ci/check.md"), t.path("ci/x/../check.md")),
        (t.path("check.md"), t.dir().join(".").join("check.md")),
        (out.join("summary.json"), t.path("ci/summary.md")),
    ];
    for (junit, md) in &cases {
        let o = capsize(&[
            "check",
            s(&scenario),
            "--out",
            s(&out),
            "--junit",
            s(junit),
            "--summary-md",
            s(md),
        ]);
        // The second of the two is named: --summary-md, or --junit against --out's file.
        let named = if junit.starts_with(&out) { junit } else { md };
        assert_refused(&o, named);
        assert!(stderr(&o).contains("names the same file"), "{}", stderr(&o));
        assert_eq!(snapshot(t.dir()).unwrap(), before, "nothing written");
    }
}

#[test]
fn a_planted_temporary_name_is_not_followed() {
    let t = Temp::new("outputs", "planted");
    let scenario = scenario(&t);
    let out = t.path("od");
    let o = capsize(&["run", s(&scenario), "--seed", "7", "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for name in [".call_latency.hgrm.tmp", ".summary.json.tmp"] {
        std::os::unix::fs::symlink("/dev/full", out.join(name)).unwrap();
    }
    let before = snapshot(&out).unwrap();
    let o = capsize(&["run", s(&scenario), "--out", s(&out)]);
    let after = snapshot(&out).unwrap();
    if o.status.code() == Some(0) {
        // Succeeded cleanly: the three new files, the planted links untouched, nothing else.
        let fresh = t.path("fresh");
        let f = capsize(&["run", s(&scenario), "--out", s(&fresh)]);
        assert_eq!(f.status.code(), Some(0), "{}", stderr(&f));
        let mut expected = snapshot(&fresh).unwrap();
        for name in [".call_latency.hgrm.tmp", ".summary.json.tmp"] {
            expected.insert(name.into(), before[name].clone());
        }
        assert_eq!(after, expected);
    } else {
        assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
        assert_eq!(after, before, "an exit 5 changed the folder");
    }
}

#[test]
fn a_target_that_is_a_folder_is_refused_before_the_run() {
    let t = Temp::new("outputs", "folder");
    let scenario = scenario(&t);
    let out = t.path("od");
    let o = capsize(&["run", s(&scenario), "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::remove_file(out.join("call_latency.hgrm")).unwrap();
    std::fs::create_dir(out.join("call_latency.hgrm")).unwrap();
    let before = snapshot(&out).unwrap();
    let o = capsize(&["run", s(&scenario), "--seed", "9", "--out", s(&out)]);
    assert_refused(&o, &out.join("call_latency.hgrm"));
    assert_eq!(snapshot(&out).unwrap(), before, "previous outputs changed");
}

/// `capsize sweep` with the size of any file it writes limited to `limit` bytes.
fn sweep_limited(scenario: &Path, out: &Path, seed: &str, limit: u64) -> Output {
    let args = [
        "sweep",
        s(scenario),
        "--jobs",
        "1",
        "--seed",
        seed,
        "--out",
        s(out),
    ];
    capsize_limited(&args, limit)
}

#[test]
fn a_write_failing_mid_way_leaves_the_previous_outputs_and_no_staging() {
    let t = Temp::new("outputs", "midway");
    let scenario = scenario(&t);
    let out = t.path("report");
    let o = sweep_limited(&scenario, &out, "3", u64::MAX);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = snapshot(&out).unwrap();
    // How big each file of the next sweep is: room for the CSV and report.md, not report.html.
    let probe = t.path("probe");
    let o = sweep_limited(&scenario, &probe, "4", u64::MAX);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let size = |name: &str| std::fs::metadata(probe.join(name)).unwrap().len();
    let limit = size("sweep.csv").max(size("report.md"));
    assert!(size("report.html") > limit, "report.html must not fit");
    assert_ne!(
        snapshot(&probe).unwrap(),
        before,
        "the new outputs must differ"
    );

    let o = sweep_limited(&scenario, &out, "4", limit);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(5), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("capsize: cannot write "), "{err}");
    assert!(last.contains(s(&out.join("report.html"))), "{err}");
    assert_eq!(
        snapshot(&out).unwrap(),
        before,
        "previous outputs changed or staging left"
    );
    // Into a folder that did not exist: it is not left behind either.
    let new = t.path("new/report");
    let o = sweep_limited(&scenario, &new, "4", limit);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(!t.path("new").exists(), "a created folder was left behind");
}

#[test]
fn without_out_a_run_writes_under_capsize_out_in_the_working_directory() {
    let t = Temp::new("outputs", "default-out");
    let scenario = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/research-agent.toml"),
    )
    .expect("the research agent");
    let file = t.write("agent.toml", &scenario);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args([
            "run",
            file.to_str().unwrap(),
            "--set",
            "workload.queries=20",
        ])
        .current_dir(t.dir())
        .output()
        .expect("capsize runs");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = t.dir().join("capsize-out/research-agent");
    for f in ["summary.json", "query_latency.hgrm", "call_latency.hgrm"] {
        assert!(dir.join(f).is_file(), "{f} not in {}", dir.display());
    }
    assert!(!t.dir().join("reports").exists(), "wrote into reports/");
}
