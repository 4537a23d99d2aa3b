//! The docs, run: every `capsize` command and every scenario in README.md, CONTRIBUTING.md and
//! docs/*.md is extracted and run against the binary, so the docs cannot go stale (as
//! turmoil's README doctest does for its code).
//!
//! What is run, by the fenced block's info string (CONTRIBUTING.md, "The docs test"):
//!
//! - ```` ```sh ```` (or `console`, `bash`, `shell`): each line that starts with `capsize ` or
//!   `cargo run --release -- ` (after a `$ ` prompt, with `\` continuations joined) is run as
//!   a capsize invocation, split as a shell would (quotes, `#` comments), and must exit 0, or
//!   the code the info string gives (` ```sh exit-3 `). Other lines (`scripts/test.sh`,
//!   `python3 ...`) are not run. ` ```sh no-run ` skips the block's commands: each is counted,
//!   and the test fails if fewer than [`MIN_RUN_SHARE`] of all commands ran.
//! - ` ```toml scenario `: a whole scenario, written to a file and run (`capsize run FILE`).
//! - ` ```toml fragment `: a few keys, spliced into [`BASE`] (a small scenario) and run.
//! - ` ```toml no-run `: shown, not run (counted). Any other ` ```toml ` block fails the test:
//!   a TOML block must say what it is.
//! - ` ```rust `: only in README.md, whose Rust blocks `cargo test` compiles and runs as
//!   doctests (src/lib.rs includes it); anywhere else it would go unchecked, so it fails here.
//!
//! Every link between the docs (a file, and a heading's anchor) must resolve too.
//!
//! Commands run in a sandbox per file: a temp folder whose entries link to the repository's
//! (scenarios/, tests/, scripts/, ...; reports/ is a real folder of links), so paths read as
//! from the repository root while every output (`capsize-out/`, `--out`, `--junit`) lands in
//! the sandbox. The commands of one file share its sandbox, in document order.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a real process, on the real clock

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

mod common;
use common::temp::Temp;

/// The least share of the docs' capsize commands that must run (the rest are `no-run`).
const MIN_RUN_SHARE: f64 = 0.8;

/// The longest one command may take.
const TIMEOUT: Duration = Duration::from_secs(90);

/// The scenario a ` ```toml fragment ` is spliced into: small, so it runs in milliseconds.
const BASE: &str = r#"
name = "docs-fragment"
seed = 1
[provider]
rpm = 600
latency = { dist = "uniform", min_ms = 200, max_ms = 900 }
[workload]
queries = 20
calls_per_query = 4
tokens_per_call = 500
[scheduler]
max_concurrency = 4
"#;

/// A fenced code block: where it is, its info string and its text.
struct Block {
    at: String,
    lang: String,
    flags: Vec<String>,
    text: String,
}

impl Block {
    fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// The exit code its commands must give (`exit-N`, else 0).
    fn exit(&self) -> i32 {
        self.flags
            .iter()
            .find_map(|f| f.strip_prefix("exit-"))
            .map_or(0, |n| {
                n.parse()
                    .unwrap_or_else(|_| panic!("{}: exit-{n}", self.at))
            })
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, CONTRIBUTING.md and every docs/*.md, in that order.
fn doc_files() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut files = vec![repo().join("README.md"), repo().join("CONTRIBUTING.md")];
    files.extend(docs);
    files
}

/// Every fenced code block of `file`.
fn blocks(file: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(file).expect("a doc file");
    let name = file
        .strip_prefix(repo())
        .unwrap_or(file)
        .display()
        .to_string();
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (event, range) in Parser::new(&text).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let line = text[..range.start].matches('\n').count() + 1;
                let mut words = info.split_whitespace().map(str::to_string);
                open = Some(Block {
                    at: format!("{name}:{line}"),
                    lang: words.next().unwrap_or_default(),
                    flags: words.collect(),
                    text: String::new(),
                });
            }
            Event::Text(t) => {
                if let Some(b) = open.as_mut() {
                    b.text.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(open.take()),
            _ => {}
        }
    }
    out
}

/// Splits a command line as a shell would: whitespace, '...' and "..." quotes, backslash
/// escapes, and a `#` comment from the start of a word.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '#' if word.is_none() => break,
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                w.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => w.extend(chars.next()),
                        c => w.push(c),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// The capsize invocations of a shell block: the arguments after `capsize` or
/// `cargo run --release --`, one per (joined) line.
fn commands(block: &Block) -> Vec<Vec<String>> {
    let joined = block.text.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        let words = shell_words(line);
        let args = match words
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["capsize", ..] => words[1..].to_vec(),
            ["cargo", "run", "--release", "--", ..] => words[4..].to_vec(),
            _ => continue,
        };
        let shell = ["|", "&&", "||", ";", ">", ">>", "<", "&"];
        if let Some(op) = args.iter().find(|a| shell.contains(&a.as_str())) {
            panic!("{}: {line:?} uses the shell ({op}): keep a command plain, or mark the block no-run", block.at);
        }
        out.push(args);
    }
    out
}

/// A sandbox for one file's commands: links to the repository's entries, reports/ a folder of
/// links, so that reads find the repository's files and writes land here.
fn sandbox(temp: &Temp) -> PathBuf {
    let dir = temp.path("repo");
    std::fs::create_dir_all(&dir).expect("the sandbox");
    for entry in std::fs::read_dir(repo()).expect("the repository") {
        let entry = entry.expect("an entry");
        let name = entry.file_name();
        if [".git", "target", "capsize-out"].iter().any(|n| name == *n) {
            continue;
        }
        if name == "reports" {
            std::fs::create_dir_all(dir.join("reports")).expect("reports/");
            for r in std::fs::read_dir(entry.path()).expect("reports/") {
                let r = r.expect("an entry");
                link(&r.path(), &dir.join("reports").join(r.file_name()));
            }
            continue;
        }
        link(&entry.path(), &dir.join(&name));
    }
    dir
}

fn link(from: &Path, to: &Path) {
    std::os::unix::fs::symlink(from, to).expect("a link in the sandbox");
}

/// Runs capsize with `args` in `cwd`; returns its exit code and stderr.
fn capsize(args: &[String], cwd: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the capsize binary runs");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).ok();
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let err = reader.join().unwrap_or_default();
    match status {
        Some(s) => (s.code(), err),
        None => (None, format!("{err}\n(stopped after {TIMEOUT:?})")),
    }
}

/// `fragment` spliced into [`BASE`]: tables merged key by key, the fragment's keys winning;
/// keys of the base that would conflict with the fragment's are dropped first (the one
/// provider beside named ones, a query count beside another stop, sessions in open mode).
fn splice(fragment: &toml::Table) -> toml::Table {
    let mut base: toml::Table = toml::from_str(BASE).expect("the base scenario");
    if fragment.contains_key("providers") {
        base.remove("provider");
    }
    if let Some(w) = fragment.get("workload").and_then(toml::Value::as_table) {
        let base_w = base["workload"].as_table_mut().expect("[workload]");
        if w.contains_key("duration_s") || w.contains_key("queries_per_session") {
            base_w.remove("queries");
        }
        if w.get("mode").and_then(toml::Value::as_str) == Some("open") {
            base_w.remove("sessions");
        }
    }
    merge(&mut base, fragment);
    base
}

fn merge(into: &mut toml::Table, from: &toml::Table) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            _ => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

#[derive(Default)]
struct Tally {
    commands_run: usize,
    commands_skipped: usize,
    scenarios_run: usize,
    scenarios_skipped: usize,
    failures: Vec<String>,
}

fn run_file(file: &Path, tally: &mut Tally) {
    let stem = file
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    let temp = Temp::new("docs", &stem);
    let cwd = sandbox(&temp);
    for (i, block) in blocks(file).iter().enumerate() {
        match block.lang.as_str() {
            "sh" | "console" | "bash" | "shell" => {
                for args in commands(block) {
                    if block.has("no-run") {
                        tally.commands_skipped += 1;
                        continue;
                    }
                    tally.commands_run += 1;
                    let (code, err) = capsize(&args, &cwd);
                    if code != Some(block.exit()) {
                        tally.failures.push(format!(
                            "{}: capsize {}: exit {code:?}, the docs say {}: {err}",
                            block.at,
                            args.join(" "),
                            block.exit()
                        ));
                    }
                }
            }
            "toml" => {
                let kind = ["scenario", "fragment", "no-run"]
                    .into_iter()
                    .find(|k| block.has(k));
                let text = match kind {
                    None => {
                        tally.failures.push(format!(
                            "{}: a ```toml block says what it is: scenario, fragment or no-run",
                            block.at
                        ));
                        continue;
                    }
                    Some("no-run") => {
                        tally.scenarios_skipped += 1;
                        continue;
                    }
                    Some("scenario") => block.text.clone(),
                    Some(_) => match toml::from_str::<toml::Table>(&block.text) {
                        Ok(f) => toml::to_string(&splice(&f)).expect("a table serializes"),
                        Err(e) => {
                            tally.failures.push(format!("{}: not TOML: {e}", block.at));
                            continue;
                        }
                    },
                };
                tally.scenarios_run += 1;
                let path = temp.write(&format!("block-{i}.toml"), &text);
                let out = temp.path(&format!("block-{i}-out"));
                let args: Vec<String> = [
                    "run",
                    path.to_str().unwrap(),
                    "--out",
                    out.to_str().unwrap(),
                ]
                .map(String::from)
                .to_vec();
                let (code, err) = capsize(&args, &cwd);
                if code != Some(block.exit()) {
                    tally.failures.push(format!(
                        "{}: the scenario ran with exit {code:?}, the docs say {}: {err}\n{text}",
                        block.at,
                        block.exit()
                    ));
                }
            }
            "rust" if !file.ends_with("README.md") => tally.failures.push(format!(
                "{}: a ```rust block outside README.md is never compiled: make it an example",
                block.at
            )),
            _ => {}
        }
    }
}

/// The repository's own files, as git sees them: a command must never write there.
fn git_status() -> Option<String> {
    let o = Command::new("git")
        .args([
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--",
            "reports",
            "scenarios",
        ])
        .current_dir(repo())
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn every_command_and_scenario_in_the_docs_runs() {
    let before = git_status();
    let mut tally = Tally::default();
    for file in doc_files() {
        run_file(&file, &mut tally);
    }
    assert_eq!(
        git_status(),
        before,
        "a docs command wrote into the repository"
    );
    eprintln!(
        "docs: ran {} capsize commands ({} marked no-run) and {} scenario blocks ({} no-run)",
        tally.commands_run, tally.commands_skipped, tally.scenarios_run, tally.scenarios_skipped
    );
    assert!(tally.failures.is_empty(), "{}", tally.failures.join("\n\n"));
    let total = tally.commands_run + tally.commands_skipped;
    assert!(
        tally.commands_run as f64 >= MIN_RUN_SHARE * total as f64,
        "only {} of {total} capsize commands in the docs run: mark fewer no-run",
        tally.commands_run
    );
    assert!(
        tally.scenarios_run > 0 && tally.commands_run > 0,
        "the docs hold nothing to run"
    );
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings, and its links (destination, where).
fn anchors_and_links(file: &Path) -> (Vec<String>, Vec<(String, String)>) {
    let text = std::fs::read_to_string(file).expect("a doc file");
    let name = file
        .strip_prefix(repo())
        .unwrap_or(file)
        .display()
        .to_string();
    let (mut anchors, mut links) = (Vec::new(), Vec::new());
    let mut heading: Option<String> = None;
    for (event, range) in Parser::new(&text).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => anchors.extend(heading.take().map(|h| slug(&h))),
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                let line = text[..range.start].matches('\n').count() + 1;
                links.push((dest_url.to_string(), format!("{name}:{line}")));
            }
            _ => {}
        }
    }
    (anchors, links)
}

#[test]
fn every_link_between_the_docs_resolves() {
    let mut broken = Vec::new();
    for file in doc_files() {
        let (own, links) = anchors_and_links(&file);
        for (dest, at) in links {
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = dest.split_once('#').unwrap_or((&dest, ""));
            let target = match path {
                "" => file.clone(),
                p => file.parent().expect("a folder").join(p),
            };
            if !target.exists() {
                broken.push(format!("{at}: {dest}: no such file"));
                continue;
            }
            let anchors = match path {
                "" => own.clone(),
                _ if target.extension().is_some_and(|e| e == "md") => anchors_and_links(&target).0,
                _ => continue,
            };
            if !anchor.is_empty() && !anchors.iter().any(|a| a == anchor) {
                broken.push(format!("{at}: {dest}: no heading has the anchor #{anchor}"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn shell_words_split_as_a_shell_does() {
    let words = shell_words(
        r#"capsize run x.toml --set 'provider.latency={ dist = "c" }' a\ b "q\"" # note"#,
    );
    assert_eq!(
        words,
        [
            "capsize",
            "run",
            "x.toml",
            "--set",
            r#"provider.latency={ dist = "c" }"#,
            "a b",
            "q\""
        ]
    );
    let b = Block {
        at: "t".into(),
        lang: "sh".into(),
        flags: vec![],
        text: "$ capsize plan \\\n  --rpm 600\nscripts/test.sh\ncargo run --release -- demo\n"
            .into(),
    };
    assert_eq!(
        commands(&b),
        vec![vec!["plan", "--rpm", "600"], vec!["demo"]]
    );
}
