//! Names the commit a `capsize` binary was built from, for `capsize --version`:
//! `CAPSIZE_COMMIT` from the environment (a build without the repository, such as a container
//! image's, passes it), else `git rev-parse` of the checkout, else `unknown`. It reruns when
//! the checkout's HEAD moves, so the name is never stale.

use std::path::PathBuf;
use std::process::Command;

/// `git ARGS` in the package's folder, its output trimmed, if git ran and succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=CAPSIZE_COMMIT");
    let commit = match std::env::var("CAPSIZE_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            // HEAD, and the branch it names (a loose ref or packed-refs), move with each commit.
            if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]).map(PathBuf::from) {
                let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
                    .map_or_else(|| dir.clone(), PathBuf::from);
                let mut watched = vec![dir.join("HEAD"), common.join("packed-refs")];
                if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    watched.push(common.join(branch));
                }
                for path in watched.iter().filter(|p| p.exists()) {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    println!("cargo:rustc-env=CAPSIZE_COMMIT={commit}");
}
