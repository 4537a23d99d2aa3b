//! The committed `reports/article/` is exactly what `capsize article` writes, and its table
//! keeps the verdicts the reproduction stands on.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_committed_article_reproduction_is_what_the_command_writes() {
    let dir = std::env::temp_dir().join(format!("capsize-article-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args(["article", "--out"])
        .arg(&dir)
        .output()
        .expect("the capsize binary runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = PathBuf::from("reports/article");
    let fresh = std::fs::read_to_string(dir.join("README.md")).expect("README.md written");
    let kept = std::fs::read_to_string(committed.join("README.md")).expect("committed README.md");
    assert!(
        fresh == kept,
        "reports/article/README.md is stale: run scripts/regenerate-reports.sh"
    );
    for stem in [
        "quotes-sequential",
        "tpm-burst-no-bucket",
        "orphans-leave",
        "budgets-greedy",
    ] {
        let a = std::fs::read(dir.join(stem).join("summary.json")).expect("summary written");
        let b = std::fs::read(committed.join(stem).join("summary.json")).expect("summary kept");
        assert!(a == b, "reports/article/{stem}/summary.json is stale");
    }
    // No row may contradict its closed form: every claim with one matches it or keeps its bound.
    for line in fresh
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| claim"))
    {
        assert!(
            !line.contains("differs from the closed form")
                && !line.contains("breaks the bound")
                && !line.contains("no closed form for this scenario")
                && !line.contains("not measured"),
            "{line}"
        );
    }
    // The verdicts the reproduction stands on.
    for (row, verdict) in [
        ("| 10 quotes x 350 ms, sequential |", "| matches |"),
        (
            "| 600 RPM, 8 calls/query, 70 % headroom: throughput |",
            "| matches; the article rounds: 420 / 8 = 52.5",
        ),
        (
            "| 8 calls x U[200, 900] ms in parallel |",
            "| matches; the article rounds: 822 ms",
        ),
        (
            "| 8 calls, latency read as",
            "| matches; the article is inconsistent:",
        ),
        (
            "| semaphore(4) over the 8 calls |",
            "| under the bound (-10.",
        ),
        (
            "| 85 % accuracy per step, 10 steps |",
            "| matches; the article rounds: 19.7 %",
        ),
        (
            "| 100 sessions x 8 calls, 5 s parent timeout,",
            "| 98.3 % | matches; the article's figure does not follow",
        ),
        (
            "| one hallucinated 30-call turn",
            "| 0 429s | matches; the article is inconsistent:",
        ),
        ("| orchestrator 50k, 3 subagents x 15k", "| matches |"),
        (
            "| the same with subagents wanting up to 20k each",
            "| 0 syntheses | matches |",
        ),
        (
            "| the same: fewest tokens left at a synthesis |",
            "| over the bound",
        ),
    ] {
        let line = fresh
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row}"));
        assert!(line.contains(verdict), "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
