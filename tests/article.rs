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
        "reports/article/README.md is stale: run `capsize article`"
    );
    for stem in ["quotes-sequential", "tpm-burst-no-bucket", "orphans-leave"] {
        let a = std::fs::read(dir.join(stem).join("summary.json")).expect("summary written");
        let b = std::fs::read(committed.join(stem).join("summary.json")).expect("summary kept");
        assert!(a == b, "reports/article/{stem}/summary.json is stale");
    }
    // The claims the article's arithmetic makes hold in simulation.
    for row in [
        "| 10 quotes x 350 ms, sequential |",
        "| 600 RPM, 8 calls/query, 70 % headroom |",
        "| 8 calls x U[200, 900] ms in parallel |",
    ] {
        let line = fresh
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{row}"));
        assert!(line.contains("| matches"), "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
