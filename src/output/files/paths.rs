//! Which file a path names, whatever its spelling, and the rules a command's outputs are
//! judged by (see the module above): what [`super::OutputSet::check`] and the commit apply.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use capsize_files::file_kind;

use super::{failed, OutputError};

/// Applies the rules to `targets` (path, what) given the `inputs`.
pub(super) fn judge(
    inputs: &[(PathBuf, String)],
    targets: &[(&Path, &str)],
) -> Result<(), OutputError> {
    let read: Vec<(Identity, &str)> = inputs
        .iter()
        .filter_map(|(p, what)| identity(&normal(p)).ok().map(|id| (id, what.as_str())))
        .collect();
    let mut seen: Vec<(Identity, &str)> = Vec::new();
    for &(path, what) in targets {
        let refuse = |why: String| failed(path, what, why);
        let real = normal(path);
        if let Some(why) = unwritable(&real) {
            return Err(refuse(why));
        }
        let id = identity(&real).map_err(|e| refuse(format!("cannot tell what it is: {e}")))?;
        if let Some((_, input)) = read.iter().find(|(i, _)| *i == id) {
            return Err(refuse(format!("it is {input}, which this run reads")));
        }
        if let Some((_, other)) = seen.iter().find(|(i, _)| *i == id) {
            let other = if other.is_empty() {
                "another output"
            } else {
                other
            };
            return Err(refuse(format!("{other} names the same file")));
        }
        seen.push((id, what));
    }
    Ok(())
}

/// The folder `path` is written into.
pub(super) fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Why `path` may not be replaced by a new regular file, if it may not.
fn unwritable(path: &Path) -> Option<String> {
    let mut folder = Some(folder_of(path));
    while let Some(f) = folder {
        match fs::metadata(f) {
            Ok(m) if m.is_dir() => break,
            Ok(m) => {
                return Some(format!(
                    "{} is {}, not a folder",
                    f.display(),
                    file_kind(&m)
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => folder = f.parent(),
            Err(e) => return Some(format!("cannot inspect {}: {e}", f.display())),
        }
    }
    match fs::metadata(path) {
        Ok(m) if m.is_file() => None,
        Ok(m) => {
            let link = fs::symlink_metadata(path).is_ok_and(|l| l.file_type().is_symlink());
            let through = if link {
                " (through a symbolic link)"
            } else {
                ""
            };
            Some(format!(
                "it is {}{through}, not a regular file",
                file_kind(&m)
            ))
        }
        // Absent, or a dangling symbolic link: the link is replaced, never written through.
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => Some(format!("cannot inspect it: {e}")),
    }
}

/// Which file a path names, whatever its spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Identity {
    /// An existing file: its device and inode.
    #[cfg_attr(not(unix), allow(dead_code))]
    Inode(u64, u64),
    /// A canonical path (a file that does not exist yet, or any file where inodes are unknown).
    Path(PathBuf),
}

pub(super) fn identity(path: &Path) -> io::Result<Identity> {
    match fs::metadata(path) {
        #[cfg(unix)]
        Ok(m) => {
            use std::os::unix::fs::MetadataExt;
            Ok(Identity::Inode(m.dev(), m.ino()))
        }
        #[cfg(not(unix))]
        Ok(_) => fs::canonicalize(path).map(Identity::Path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => resolve(path).map(Identity::Path),
        Err(e) => Err(e),
    }
}

/// `path` with its folder made canonical (see [`resolve`]) and its file name as given (a
/// symbolic link there is judged, not followed away): what every check and write uses.
pub(super) fn normal(path: &Path) -> PathBuf {
    let real = match path.file_name() {
        Some(name) => resolve(folder_of(path)).map(|f| f.join(name)),
        None => resolve(path),
    };
    real.unwrap_or_else(|_| path.to_path_buf())
}

/// Where `path`, which may not exist, is: its nearest existing ancestor made canonical,
/// with the rest of its components appended (`.` dropped, `..` taking one off).
fn resolve(path: &Path) -> io::Result<PathBuf> {
    let absolute = std::path::absolute(path)?;
    let parts: Vec<Component> = absolute.components().collect();
    for k in (1..=parts.len()).rev() {
        let Ok(mut real) = fs::canonicalize(parts[..k].iter().collect::<PathBuf>()) else {
            continue;
        };
        for part in &parts[k..] {
            match part {
                Component::ParentDir => {
                    real.pop();
                }
                Component::Normal(name) => real.push(name),
                _ => {}
            }
        }
        return Ok(real);
    }
    Ok(absolute)
}
