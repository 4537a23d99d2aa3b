//! What an installed capsize carries and says about itself: `capsize examples` lists and writes
//! the built-in example scenarios (the repository's own, byte for byte, never over a file
//! without `--force`); `capsize --version` names the commit; summary.json and reports name
//! the version that wrote them, and `check` says when a baseline's is another.

#![allow(clippy::disallowed_methods)] // git, to know the commit the binary was built from

mod common;

use common::temp::Temp;
use common::{capsize, root, stderr};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn examples_are_listed_and_written_as_they_ship() {
    let o = capsize(&["examples"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let listed = stdout(&o);
    assert!(
        listed
            .lines()
            .any(|l| l.trim_start().starts_with("research-agent ") && l.contains("600 RPM")),
        "{listed}"
    );
    assert!(
        listed.lines().any(|l| l.trim_start().starts_with("cost ")),
        "{listed}"
    );

    let t = Temp::new("versions", "examples");
    let dir = t.path("here");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let shipped = std::fs::read(root("scenarios/research-agent.toml")).unwrap();
    // Into a folder: NAME.toml there, the repository's file byte for byte, and it runs.
    let o = capsize(&["examples", "research-agent", "--out", d]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let written = dir.join("research-agent.toml");
    assert_eq!(std::fs::read(&written).unwrap(), shipped);
    assert!(stdout(&o).contains("capsize run "), "{}", stdout(&o));
    let out = t.path("run");
    let run = capsize(&[
        "run",
        written.to_str().unwrap(),
        "--set",
        "workload.queries=20",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    // Never over a file without --force: one line, exit 2, the file as it was.
    std::fs::write(&written, "# mine\n").unwrap();
    let o = capsize(&["examples", "research-agent.toml", "--out", d]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("is already there: give --force to replace it"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).trim_end().lines().count(), 1);
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "# mine\n");
    let o = capsize(&["examples", "research-agent", "--out", d, "--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&written).unwrap(), shipped);
    // To a file of another name.
    let named = dir.join("mine.toml");
    let o = capsize(&["examples", "cost", "--out", named.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&named).unwrap(),
        std::fs::read(root("scenarios/cost.toml")).unwrap()
    );
    // An example that does not exist: named, with the ones that do.
    let o = capsize(&["examples", "nope", "--out", d]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no example \"nope\": one of adaptive, adaptive-steady, agent, cost"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("nope.toml").exists());
}

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let o = capsize(&["--version"]);
    assert_eq!(o.status.code(), Some(0));
    let said = stdout(&o);
    // build.rs: `git rev-parse --short=12 HEAD` of this checkout (or CAPSIZE_COMMIT if the
    // build was given one, or `unknown` outside a checkout).
    let commit = std::env::var("CAPSIZE_COMMIT").ok().or_else(|| {
        let git = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()?;
        git.status
            .success()
            .then(|| String::from_utf8_lossy(&git.stdout).trim().to_string())
    });
    let commit = commit.unwrap_or_else(|| "unknown".into());
    assert_eq!(said.trim(), format!("capsize {VERSION} (commit {commit})"));
}

#[test]
fn summaries_and_reports_name_the_version_and_check_says_when_a_baseline_is_another() {
    let t = Temp::new("versions", "check");
    let scenario = root("scenarios/research-agent.toml");
    let baseline = t.path("baseline.json");
    let b = baseline.to_str().unwrap();
    let small = ["--set", "workload.queries=40"];
    let mut args = vec!["baseline", scenario.as_str(), "--out", b];
    args.extend(small);
    let o = capsize(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&baseline).unwrap()).unwrap();
    assert_eq!(json["capsize_version"], VERSION);

    let check = |file: &str| {
        let out = t.path("check");
        let mut args = vec![
            "check",
            scenario.as_str(),
            "--baseline",
            file,
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(small);
        let o = capsize(&args);
        assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
        stdout(&o).lines().next().unwrap_or_default().to_string()
    };
    // This version's baseline: nothing to say.
    let title = check(b);
    assert!(title.contains("(seed 42) at 5 % tolerance"), "{title}");
    // Another version's, and one from before versions were named: said beside its seed.
    let mut other = json.clone();
    other["capsize_version"] = "0.0.1".into();
    let older = t.write("older.json", &other.to_string());
    let title = check(older.to_str().unwrap());
    assert!(
        title.contains(&format!(
            "(seed 42; written by capsize 0.0.1, this is {VERSION})"
        )),
        "{title}"
    );
    other.as_object_mut().unwrap().remove("capsize_version");
    let unnamed = t.write("unnamed.json", &other.to_string());
    let title = check(unnamed.to_str().unwrap());
    assert!(
        title.contains("written by a capsize before 0.1.0, which named no version"),
        "{title}"
    );

    // A sweep's report names it too.
    let out = t.path("sweep");
    let o = capsize(&[
        "sweep",
        scenario.as_str(),
        "--sweep",
        "scheduler.max_concurrency=2,4",
        "--set",
        "workload.queries=40",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains(&format!("_Written by capsize {VERSION}._")),
        "{md}"
    );
}
