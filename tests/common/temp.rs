//! A fresh folder under the system temp dir for one test, removed when dropped.

use std::path::{Path, PathBuf};

/// A fresh folder under the system temp dir, removed on drop.
pub struct Temp(PathBuf);

impl Temp {
    /// `capsize-{suite}-{test}-{pid}`, emptied if it was left over.
    pub fn new(suite: &str, test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("capsize-{suite}-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the temp dir");
        Temp(dir)
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.0
    }

    /// `name` in the folder (not created).
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `text` to `name` in the folder and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write a test file");
        path
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
