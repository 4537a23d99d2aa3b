//! What a run of a scenario file is, as the pieces of a run split over processes (a sweep's
//! shards, a fleet's replicas) and their merge compare it: the file's bytes, the bytes of every
//! file it reads (each `file = "..."` key: an empirical latency file), and the `--set`
//! arguments (a `--seed` among them). A piece records it when it starts; a replica agrees on it
//! with the others at the start line; a merge computes it again from the files it is given and
//! refuses any difference, naming the file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::overrides::apply_override;
use super::{bounds, parse_override};

/// FNV-1a (64-bit) of a file's `bytes`, as 16 hex digits: how the pieces of a run split over
/// processes tell they read the same files.
pub fn fnv1a_hex(bytes: &[u8]) -> String {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{h:016x}")
}

/// A file a scenario reads, as the scenario names it, with the FNV-1a of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    /// As a `file` key names it (relative to the scenario's folder, unless absolute).
    pub file: String,
    /// FNV-1a (64-bit, hex) of its bytes.
    pub fnv1a: String,
}

/// A scenario file, every file it reads, and the `--set` arguments it ran with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// FNV-1a (64-bit, hex) of the scenario file's bytes.
    pub scenario_fnv1a: String,
    /// Every file it reads with those arguments, by name.
    pub files: Vec<FileDigest>,
    /// The `--set` arguments (a `--seed` among them, as `seed=N`).
    pub sets: Vec<String>,
}

/// Every string under a `file` key of `value`.
fn named_files(value: &toml::Value, out: &mut BTreeSet<String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                match v {
                    toml::Value::String(s) if k == "file" => {
                        out.insert(s.clone());
                    }
                    v => named_files(v, out),
                }
            }
        }
        toml::Value::Array(a) => a.iter().for_each(|v| named_files(v, out)),
        _ => {}
    }
}

/// The files scenario `text` reads with `sets` applied, and with each of `more` (a sweep's
/// points' overrides) on top: sorted, each once, as named. A text that is not TOML names none
/// (it is refused when it is loaded).
pub fn files_read(text: &str, sets: &[String], more: &[Vec<String>]) -> Vec<String> {
    let mut found = BTreeSet::new();
    if let Ok(mut table) = toml::from_str::<toml::Table>(text) {
        for set in sets {
            if let Ok((key, value)) = parse_override(set) {
                let _ = apply_override(&mut table, &key, value);
            }
        }
        named_files(&toml::Value::Table(table), &mut found);
    }
    // A point's override replaces one key: the files it names are in its value (or are its
    // value, under a `file` key).
    for set in more.iter().flatten() {
        if let Ok((key, value)) = parse_override(set) {
            match value {
                toml::Value::String(s) if key.last().is_some_and(|k| k == "file") => {
                    found.insert(s);
                }
                v => named_files(&v, &mut found),
            }
        }
    }
    found.into_iter().collect()
}

/// Where the scenario at `scenario` reads `file` from: its folder, unless `file` is absolute.
pub fn file_path(scenario: &Path, file: &str) -> PathBuf {
    scenario.parent().unwrap_or(Path::new("")).join(file)
}

/// The FNV-1a of the scenario file at `path` (read as a scenario is: a regular file within the
/// bound); `Err` names it.
pub fn scenario_fnv1a(path: &Path) -> Result<(String, String), String> {
    let bytes = capsize_files::read_regular_file(path, bounds::MAX_SCENARIO_BYTES)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let hash = fnv1a_hex(&bytes);
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("{}: cannot read: not UTF-8 text", path.display()))?;
    Ok((hash, text))
}

impl Identity {
    /// The identity of the scenario file at `path` run with `sets` (and each of `more`, a
    /// sweep's points): its bytes and those of every file it reads, each read as a run reads
    /// it (a regular file within its bound). `Err` names the file that cannot be read.
    pub fn of(path: &Path, sets: &[String], more: &[Vec<String>]) -> Result<Identity, String> {
        let (scenario_fnv1a, text) = scenario_fnv1a(path)?;
        let mut files = Vec::new();
        for file in files_read(&text, sets, more) {
            let at = file_path(path, &file);
            let bytes = capsize_files::read_regular_file(&at, capsize_mock::limits::MAX_FILE_BYTES)
                .map_err(|e| {
                    format!(
                        "{}: cannot read (a file the scenario reads): {e}",
                        at.display()
                    )
                })?;
            files.push(FileDigest {
                fnv1a: fnv1a_hex(&bytes),
                file,
            });
        }
        Ok(Identity {
            scenario_fnv1a,
            files,
            sets: sets.to_vec(),
        })
    }

    /// What differs between two pieces' identities, in a few words (`None`: the same).
    pub fn differs(&self, other: &Identity) -> Option<String> {
        if self.scenario_fnv1a != other.scenario_fnv1a {
            return Some(format!(
                "scenario files (FNV-1a) {:?} and {:?}",
                self.scenario_fnv1a, other.scenario_fnv1a
            ));
        }
        if self.sets != other.sets {
            return Some(format!(
                "--set arguments {:?} and {:?}",
                self.sets, other.sets
            ));
        }
        if let Some((a, b)) = self.files.iter().zip(&other.files).find(|(a, b)| a != b) {
            return Some(match a.file == b.file {
                true => format!(
                    "{:?}, a file the scenario reads (FNV-1a {:?} and {:?})",
                    a.file, a.fnv1a, b.fnv1a
                ),
                false => format!("files the scenario reads {:?} and {:?}", a.file, b.file),
            });
        }
        if self.files.len() != other.files.len() {
            let names = |i: &Identity| i.files.iter().map(|f| f.file.clone()).collect::<Vec<_>>();
            return Some(format!(
                "files the scenario reads {:?} and {:?}",
                names(self),
                names(other)
            ));
        }
        None
    }

    /// Checks that `now`, the identity of the scenario at `path` computed again, is this one
    /// (recorded by the `what` that ran it: "shards", "replicas"); `Err` is one line naming the
    /// file that changed.
    pub fn recheck(&self, now: &Identity, path: &Path, what: &str) -> Result<(), String> {
        let changed = |at: &Path, mine: &str, theirs: &str, noun: &str| {
            Err(format!(
                "{}: not the {noun} the {what} {} (FNV-1a {mine}, theirs {theirs}): it changed since, or is another file",
                at.display(),
                if noun == "scenario" { "ran" } else { "read" }
            ))
        };
        if now.scenario_fnv1a != self.scenario_fnv1a {
            return changed(path, &now.scenario_fnv1a, &self.scenario_fnv1a, "scenario");
        }
        for theirs in &self.files {
            let at = file_path(path, &theirs.file);
            match now.files.iter().find(|f| f.file == theirs.file) {
                Some(mine) if mine.fnv1a == theirs.fnv1a => {}
                Some(mine) => return changed(&at, &mine.fnv1a, &theirs.fnv1a, "file"),
                None => {
                    return Err(format!(
                        "{}: the {what}' scenario read {:?}, which it does not read now",
                        path.display(),
                        theirs.file
                    ))
                }
            }
        }
        if let Some(extra) = now
            .files
            .iter()
            .find(|f| !self.files.iter().any(|t| t.file == f.file))
        {
            return Err(format!(
                "{}: the scenario reads {:?}, which the {what} did not read",
                path.display(),
                extra.file
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_a_scenario_reads_are_found_with_its_overrides() {
        let text = r#"
            [provider]
            latency = { dist = "empirical", file = "a.csv" }
            [[tools]]
            name = "t"
            latency = { dist = "mixture", components = [{ weight = 1, dist = { dist = "empirical", file = "b.csv" } }] }
        "#;
        assert_eq!(files_read(text, &[], &[]), ["a.csv", "b.csv"]);
        // A --set replaces a file; a point of a sweep adds one, as a value or under `file`.
        let sets = ["provider.latency.file=c.csv".to_string()];
        assert_eq!(files_read(text, &sets, &[]), ["b.csv", "c.csv"]);
        let points = [
            vec!["provider.latency.file=\"d.csv\"".to_string()],
            vec![r#"provider.latency={ dist = "empirical", file = "e.csv" }"#.to_string()],
        ];
        assert_eq!(
            files_read(text, &[], &points),
            ["a.csv", "b.csv", "d.csv", "e.csv"]
        );
        assert!(files_read("not toml [", &[], &[]).is_empty());
        assert_eq!(
            file_path(Path::new("x/s.toml"), "a.csv"),
            Path::new("x/a.csv")
        );
        assert_eq!(
            file_path(Path::new("s.toml"), "/abs.csv"),
            Path::new("/abs.csv")
        );
    }
}
