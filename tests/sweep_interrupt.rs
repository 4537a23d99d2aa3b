//! Ctrl-C in `capsize sweep` against the binary: SIGINT (or SIGTERM) keeps the points that
//! finished (sweep.csv their rows, byte for byte those of the full sweep; the report marked
//! partial) and exits 130 (143); before any point finished it writes nothing and says so; a
//! second signal exits at once without writing.
//!
//! The grid's first point is light (2,000 queries, milliseconds) and the others heavy (300,000
//! queries, seconds each, `--jobs 1`): a signal sent when the progress says the first run is
//! done reaches the sweep while the second is still running.

#![cfg(target_os = "linux")]
#![allow(clippy::disallowed_methods)] // polls a real process on the real clock

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod common;
use common::temp::Temp;

const AGENT: &str = "scenarios/research-agent.toml";
/// One light point, then two heavy ones.
const GRID: &str = "workload.queries=2000,300000,300001";
/// Only heavy points.
const HEAVY: &str = "workload.queries=300000,300001";

fn args<'a>(out: &'a Path, queries: &'a str) -> Vec<&'a str> {
    vec![
        "sweep",
        AGENT,
        "--out",
        out.to_str().expect("UTF-8 path"),
        "--jobs",
        "1",
        "--sweep",
        queries,
        "--sweep",
        "scheduler.max_concurrency=4",
        "--sweep",
        "scheduler.headroom=0.7",
    ]
}

/// A sweep started, its stderr lines on a channel as they come (and kept for the end).
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(out: &Path, queries: &str) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_capsize"))
            .args(args(out, queries))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("capsize starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a stderr line containing `text`.
    fn wait_for(&mut self, text: &str) {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(120)) {
                Ok(line) => {
                    let found = line.contains(text);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => panic!("no {text:?} on stderr; saw {:?}", self.seen),
            }
        }
    }

    /// Waits until the process catches SIGINT and SIGTERM (its handler is installed).
    fn wait_for_handler(&self) {
        let wanted = (1u64 << (libc::SIGINT - 1)) | (1u64 << (libc::SIGTERM - 1));
        for _ in 0..12_000 {
            let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
                .unwrap_or_default();
            let caught = status
                .lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
                .unwrap_or(0);
            if caught & wanted == wanted {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the sweep never caught SIGINT and SIGTERM");
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill only sends a signal to the capsize process this test started.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    /// Waits for the end: the output, and every stderr line.
    fn end(mut self) -> (Output, String) {
        let o = self.child.wait_with_output().expect("capsize ends");
        self.seen.extend(self.lines.iter());
        (o, self.seen.join("\n"))
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn sigint_keeps_the_finished_points_as_the_full_sweep_has_them() {
    let t = Temp::new("interrupt", "kept");
    let (partial, full) = (t.path("partial"), t.path("full"));
    let mut run = Running::start(&partial, GRID);
    run.wait_for("capsize sweep: 1/3 runs");
    run.signal(libc::SIGINT);
    let (o, err) = run.end();
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(
        err.contains("Ctrl-C again to quit without writing"),
        "{err}"
    );
    let csv = read(&partial.join("sweep.csv"));
    let kept = csv.lines().count() - 1;
    assert!((1..3).contains(&kept), "{kept} points kept: {csv}");
    let where_ = format!(
        "capsize sweep: interrupted: kept {kept} of 3 points in {}/ (marked partial); rerun to complete",
        partial.display()
    );
    assert!(err.contains(&where_), "{err}");
    let report = read(&partial.join("report.md"));
    assert!(
        report.contains(&format!(
            "**Partial sweep**: interrupted after {kept} of 3 points; the recommendation is among the points that finished."
        )),
        "{report}"
    );
    assert!(read(&partial.join("report.html")).contains("Partial sweep"));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with(&format!("{kept} of 3 points")));

    // The full sweep: its first rows are the partial sweep's, byte for byte.
    let o = common::capsize(&args(&full, GRID));
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let whole = read(&full.join("sweep.csv"));
    assert_eq!(whole.lines().count(), 1 + 3);
    let prefix: Vec<&str> = whole.lines().take(1 + kept).collect();
    assert_eq!(csv.lines().collect::<Vec<_>>(), prefix);
    assert!(!read(&full.join("report.md")).contains("Partial sweep"));
}

#[test]
fn a_signal_before_any_point_finished_writes_nothing() {
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let t = Temp::new("interrupt", &format!("nothing-{sig}"));
        let out = t.path("out");
        let run = Running::start(&out, HEAVY);
        run.wait_for_handler();
        run.signal(sig);
        let (o, err) = run.end();
        assert_eq!(o.status.code(), Some(code), "{err}");
        assert!(
            err.contains("capsize sweep: interrupted before any point finished: nothing written"),
            "{err}"
        );
        assert!(!out.exists(), "nothing is written");
    }
}

#[test]
fn a_second_signal_exits_at_once_without_writing() {
    let t = Temp::new("interrupt", "second");
    let out = t.path("out");
    let mut run = Running::start(&out, GRID);
    run.wait_for("capsize sweep: 1/3 runs");
    // Two signals, one of each (two of the same may merge while pending): the first stops the
    // sweep, the second ends it before anything is written.
    run.signal(libc::SIGINT);
    run.signal(libc::SIGTERM);
    let (o, err) = run.end();
    let code = o.status.code();
    assert!(code == Some(130) || code == Some(143), "{code:?}: {err}");
    assert!(!err.contains("kept"), "{err}");
    assert!(!out.exists(), "nothing is written");
}
