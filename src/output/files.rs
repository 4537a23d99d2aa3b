//! Writing a command's outputs: every file of a command appears together, or none does, and a
//! file that is not the command's to replace is never touched.
//!
//! An [`OutputSet`] is told what a command reads ([`OutputSet::input`],
//! [`OutputSet::scenario`]) and what it will write ([`OutputSet::output`]) before it runs.
//! [`OutputSet::check`] then refuses, before anything runs, a target
//!
//! - that exists and is not a regular file (a folder, device, FIFO or socket, or a symbolic
//!   link to one), or whose nearest existing folder is not a folder;
//! - that is one of the inputs (the scenario, a file it names, the baseline);
//! - that another output of the same command also names.
//!
//! Files are compared by identity (device and inode on Unix, the canonical path elsewhere; for
//! a file that does not exist yet, the canonical path of its nearest existing folder with the
//! rest appended), not by spelling.
//!
//! After the run, [`OutputSet::put`] gives each file its content and [`OutputSet::commit`]
//! writes them all:
//!
//! 1. in each target folder (created if missing) a fresh staging folder
//!    `.capsize-staging-<pid>-<random>-<n>` is created (never an existing name, so nothing planted
//!    there is followed), and every file is written into it (created new, then fsynced);
//! 2. every target is checked again by the rules above;
//! 3. each target that exists is kept aside in its staging folder and the new file renamed
//!    into place; if any step fails, every file already moved is put back;
//! 4. the staging folders are removed, and on failure so are the folders the commit created.
//!
//! Nothing temporary is left behind, on success or on failure, nor on SIGINT or SIGTERM
//! during the commit ([`signals`]): the commit stops between files, puts everything back and
//! returns the signal, for the command to exit 128 + it.

use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

mod paths;
mod signals;
use paths::{folder_of, identity, judge, normal, Identity};
use signals::{Guard, Mode};

/// A file that may not or could not be written: one line naming it and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputError {
    /// The file (or folder) concerned.
    pub path: PathBuf,
    /// The flag or role that names it (`--junit`, `--out`), if any.
    pub what: String,
    /// Why, in a few words.
    pub why: String,
    /// Found by [`OutputSet::check`], before anything ran or was written (bad input), rather
    /// than while writing.
    pub refused: bool,
    /// The signal (SIGINT, SIGTERM) that stopped the commit: nothing was written.
    pub signal: Option<i32>,
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verb = if self.refused {
            "refusing to write"
        } else {
            "cannot write"
        };
        write!(f, "{verb} {}", self.path.display())?;
        if !self.what.is_empty() {
            write!(f, " ({})", self.what)?;
        }
        write!(f, ": {}", self.why)
    }
}

impl std::error::Error for OutputError {}

/// Draws a file at the path it is given (for writers that need a path, such as a PNG encoder).
type Render<'a> = Box<dyn FnOnce(&Path) -> Result<(), String> + 'a>;

enum Content<'a> {
    Bytes(Vec<u8>),
    Render(Render<'a>),
}

/// A file the command will write.
struct Target<'a> {
    path: PathBuf,
    what: String,
    content: Option<Content<'a>>,
}

/// The files one command writes: declared before it runs, written together after.
#[derive(Default)]
pub struct OutputSet<'a> {
    inputs: Vec<(PathBuf, String)>,
    targets: Vec<Target<'a>>,
}

impl<'a> OutputSet<'a> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a file the command reads (`what` says which, e.g. "the baseline"): no output may
    /// be it.
    pub fn input(&mut self, path: impl Into<PathBuf>, what: impl Into<String>) -> &mut Self {
        self.inputs.push((path.into(), what.into()));
        self
    }

    /// Records a scenario file and every file it names (each `file = "..."` key, such as an
    /// empirical latency file, in the file or after a `--set`) as inputs.
    pub fn scenario(&mut self, path: &Path, sets: &[String]) -> &mut Self {
        use crate::engine::scenario::identity::{file_path, files_read};
        self.input(path, "the scenario");
        let Ok(text) = crate::engine::scenario::read(path) else {
            return self;
        };
        let mut named = files_read(&text, &[], &[]);
        named.extend(files_read(&text, sets, &[]));
        for file in named {
            self.input(file_path(path, &file), "a file the scenario reads");
        }
        self
    }

    /// Declares a file the command will write (`what`: the flag that names it, e.g. `--junit`).
    pub fn output(&mut self, path: impl Into<PathBuf>, what: impl Into<String>) -> &mut Self {
        self.targets.push(Target {
            path: path.into(),
            what: what.into(),
            content: None,
        });
        self
    }

    /// Gives `path` its content (declaring it if it was not).
    pub fn put(&mut self, path: impl Into<PathBuf>, bytes: impl Into<Vec<u8>>) -> &mut Self {
        self.fill(path.into(), Content::Bytes(bytes.into()))
    }

    /// Gives `path` content that `render` writes to the (staging) path it is given, for writers
    /// that need a file rather than bytes; the file name is the target's, so an encoder that
    /// goes by the extension picks the right one.
    pub fn put_with(
        &mut self,
        path: impl Into<PathBuf>,
        render: impl FnOnce(&Path) -> Result<(), String> + 'a,
    ) -> &mut Self {
        self.fill(path.into(), Content::Render(Box::new(render)))
    }

    fn fill(&mut self, path: PathBuf, content: Content<'a>) -> &mut Self {
        match self
            .targets
            .iter_mut()
            .find(|t| t.path == path && t.content.is_none())
        {
            Some(t) => t.content = Some(content),
            None => self.targets.push(Target {
                path,
                what: String::new(),
                content: Some(content),
            }),
        }
        self
    }

    /// Refuses, before the command runs, any declared output the rules (see the module) do not
    /// allow. The error is bad input.
    pub fn check(&self) -> Result<(), OutputError> {
        let targets: Vec<(&Path, &str)> = self
            .targets
            .iter()
            .map(|t| (t.path.as_path(), t.what.as_str()))
            .collect();
        judge(&self.inputs, &targets).map_err(|mut e| {
            e.refused = true;
            e
        })
    }

    /// Writes every file that was given content, all or none (see the module). Declared files
    /// given no content are left as they are. SIGINT or SIGTERM on the way stops it: every
    /// file as it was, and the error names the signal.
    pub fn commit(self) -> Result<(), OutputError> {
        self.commit_in(Mode::Abort)
    }

    /// As [`OutputSet::commit`], but a SIGINT or SIGTERM on the way is delivered once every
    /// file is written (for a command that answers signals itself by writing what it has).
    pub fn commit_through_signals(self) -> Result<(), OutputError> {
        self.commit_in(Mode::Finish)
    }

    fn commit_in(self, mode: Mode) -> Result<(), OutputError> {
        let mut work = Work {
            guard: Some((Guard::hold(), mode)),
            ..Work::default()
        };
        match work.write(self) {
            Ok(()) => work.finish(),
            Err(e) => {
                work.undo();
                Err(e)
            }
        }
    }
}

/// The error for `path`, found while writing.
fn failed(path: &Path, what: &str, why: impl std::fmt::Display) -> OutputError {
    OutputError {
        path: path.to_path_buf(),
        what: what.to_string(),
        why: why.to_string(),
        refused: false,
        signal: None,
    }
}

/// A fresh folder in `folder`, never an existing name.
fn fresh_dir(folder: &Path) -> io::Result<PathBuf> {
    use std::hash::{BuildHasher, Hasher};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Random per process (std seeds it from the OS), so the names cannot be guessed ahead.
    let nonce = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    for _ in 0..1000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!(".capsize-staging-{}-{nonce:x}-{n}", std::process::id());
        let dir = folder.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free name for a staging folder",
    ))
}

/// Creates `path` and fsyncs it; it must not exist (a name planted there is not followed).
/// Written a MiB at a time, stopping (with `Interrupted`) where `stopped` says.
fn write_new(path: &Path, bytes: &[u8], stopped: &mut dyn FnMut() -> bool) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    for chunk in bytes.chunks(1 << 20) {
        if stopped() {
            return Err(io::ErrorKind::Interrupted.into());
        }
        file.write_all(chunk)?;
    }
    file.sync_all()
}

/// Flushes a folder's entries to disk (best effort: not every platform can open a folder).
fn sync_folder(folder: &Path) {
    if let Ok(f) = fs::File::open(folder) {
        let _ = f.sync_all();
    }
}

/// One file staged: its target as given and as written, the new file, and where the previous
/// one is kept until the end.
struct Staged {
    path: PathBuf,
    target: PathBuf,
    what: String,
    new: PathBuf,
    old: PathBuf,
}

/// What a commit has done so far, to finish or to undo.
#[derive(Default)]
struct Work {
    /// The signals held while it runs, and what it does with one.
    guard: Option<(Guard, Mode)>,
    /// Folders the commit created, outermost first.
    created: Vec<PathBuf>,
    /// Per target folder: its identity and its staging folder.
    staging: Vec<(Identity, PathBuf)>,
    /// Targets renamed into place, with where their previous file was kept.
    swapped: Vec<(PathBuf, Option<PathBuf>)>,
}

impl Work {
    /// The signal that stops the commit here, if one was caught (and it stops for one).
    fn stopped(&mut self) -> Option<i32> {
        match &mut self.guard {
            Some((guard, Mode::Abort)) => guard.caught(true),
            _ => None,
        }
    }

    /// The error of a commit stopped by `signal` while writing into `folder`.
    fn interrupted(signal: i32, folder: &Path) -> OutputError {
        let why = format!(
            "interrupted by {}: nothing written, every file as it was",
            signals::name(signal)
        );
        OutputError {
            signal: Some(signal),
            ..failed(folder, "", why)
        }
    }

    fn write(&mut self, set: OutputSet<'_>) -> Result<(), OutputError> {
        let mut staged = Vec::new();
        for t in set.targets {
            let Some(content) = t.content else { continue };
            if let Some(signal) = self.stopped() {
                return Err(Self::interrupted(signal, folder_of(&t.path)));
            }
            let fail = |why: String| failed(&t.path, &t.what, why);
            let real = normal(&t.path);
            let name = real
                .file_name()
                .ok_or_else(|| fail("it names no file".into()))?;
            let dir = self.staging_for(folder_of(&real)).map_err(fail)?;
            let new = dir.join("new").join(name);
            let mut signal = None;
            let mut stopped = || {
                signal = signal.or_else(|| self.stopped());
                signal.is_some()
            };
            let written = match content {
                Content::Bytes(bytes) => {
                    write_new(&new, &bytes, &mut stopped).map_err(|e| e.to_string())
                }
                Content::Render(render) => render(&new).and_then(|()| {
                    let file = fs::File::open(&new).map_err(|e| e.to_string())?;
                    file.sync_all().map_err(|e| e.to_string())
                }),
            };
            if let Some(signal) = signal {
                return Err(Self::interrupted(signal, folder_of(&t.path)));
            }
            written.map_err(fail)?;
            let old = dir.join("old").join(name);
            staged.push(Staged {
                path: t.path,
                target: real,
                what: t.what,
                new,
                old,
            });
        }
        let targets: Vec<(&Path, &str)> = staged
            .iter()
            .map(|s| (s.path.as_path(), s.what.as_str()))
            .collect();
        judge(&set.inputs, &targets)?;
        for s in &staged {
            if let Some(signal) = self.stopped() {
                return Err(Self::interrupted(signal, folder_of(&s.path)));
            }
            self.swap(s)
                .map_err(|e| failed(&s.path, &s.what, format!("cannot move it into place: {e}")))?;
        }
        Ok(())
    }

    /// The staging folder of `folder` (created, with the folder, the first time).
    fn staging_for(&mut self, folder: &Path) -> Result<PathBuf, String> {
        self.create_folder(folder)
            .map_err(|e| format!("cannot create the folder {}: {e}", folder.display()))?;
        let id =
            identity(folder).map_err(|e| format!("cannot inspect {}: {e}", folder.display()))?;
        if let Some((_, dir)) = self.staging.iter().find(|(i, _)| *i == id) {
            return Ok(dir.clone());
        }
        let dir = fresh_dir(folder).map_err(|e| {
            format!(
                "cannot create a staging folder in {}: {e}",
                folder.display()
            )
        })?;
        self.staging.push((id, dir.clone()));
        for sub in ["new", "old"] {
            fs::create_dir(dir.join(sub))
                .map_err(|e| format!("cannot create {}: {e}", dir.join(sub).display()))?;
        }
        Ok(dir)
    }

    /// Creates `folder` and its missing parents, remembering which it created.
    fn create_folder(&mut self, folder: &Path) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut next = Some(folder);
        while let Some(f) = next {
            if f.as_os_str().is_empty() || fs::symlink_metadata(f).is_ok() {
                break;
            }
            missing.push(f.to_path_buf());
            next = f.parent();
        }
        for f in missing.into_iter().rev() {
            match fs::create_dir(&f) {
                Ok(()) => self.created.push(f),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && f.is_dir() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Keeps the previous file aside (a hard link, or moved where links are not available)
    /// and renames the new one into place; on failure the previous file is back.
    fn swap(&mut self, s: &Staged) -> io::Result<()> {
        let kept = match fs::symlink_metadata(&s.target) {
            Ok(_) => {
                if fs::hard_link(&s.target, &s.old).is_err() {
                    fs::rename(&s.target, &s.old)?;
                }
                Some(s.old.clone())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if let Err(e) = fs::rename(&s.new, &s.target) {
            if let Some(old) = &kept {
                let _ = fs::rename(old, &s.target);
            }
            return Err(e);
        }
        self.swapped.push((s.target.clone(), kept));
        Ok(())
    }

    /// After every file is in place: flush the folders, remove the staging folders.
    fn finish(self) -> Result<(), OutputError> {
        for (_, dir) in &self.staging {
            sync_folder(folder_of(dir));
            fs::remove_dir_all(dir).map_err(|e| {
                let why = format!(
                    "the outputs are in place, but this staging folder could not be removed: {e}"
                );
                failed(dir, "", why)
            })?;
        }
        Ok(())
    }

    /// After a failure: every target back as it was, nothing of the commit left (best effort:
    /// an undo that fails has nothing better to fall back on).
    fn undo(self) {
        for (target, kept) in self.swapped.iter().rev() {
            let _ = match kept {
                Some(old) => fs::rename(old, target),
                None => fs::remove_file(target),
            };
        }
        for (_, dir) in &self.staging {
            let _ = fs::remove_dir_all(dir);
        }
        for folder in self.created.iter().rev() {
            let _ = fs::remove_dir(folder);
        }
    }
}

#[cfg(all(test, unix))]
mod tests;
