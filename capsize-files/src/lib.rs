//! Reading the files a user names (scenarios, latency samples, the mock's config) without
//! hanging or running out of memory: only a regular file, only up to a limit, checked before
//! and after opening. Shared by the mock and the command line, which import nothing of each
//! other.

use std::io::Read;
use std::path::Path;

mod lines;

pub use lines::{read_regular_lines, Lines};

/// Reads the regular file at `path`, refusing anything else (a device, a FIFO, a folder) before
/// opening it, and a file over `limit` bytes before and while reading it (so a file that grows
/// is still cut off). The error is one line, without the path.
pub fn read_regular_file(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = open_regular_file(path, limit)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit, &format!("more than {limit}")));
    }
    Ok(bytes)
}

/// The error for a file of `size` bytes, over `limit`.
fn too_large(limit: u64, size: &dyn std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("file is {size} bytes, over the limit of {limit} bytes"),
    )
}

/// Opens the regular file at `path` for reading, refusing anything else (checked before
/// opening, since opening a FIFO blocks, and again on what was opened) and a file over `limit`
/// bytes. The caller reads no more than `limit` from it.
fn open_regular_file(path: &Path, limit: u64) -> std::io::Result<std::fs::File> {
    use std::io::{Error, ErrorKind};
    let not_regular = |meta: &std::fs::Metadata| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("not a regular file ({})", file_kind(meta)),
        )
    };
    // Checked before opening: opening a FIFO would block, reading a device might never end.
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    if meta.len() > limit {
        return Err(too_large(limit, &meta.len()));
    }
    let file = std::fs::File::open(path)?;
    // The path may have been replaced since: check what was opened.
    let opened = file.metadata()?;
    if !opened.is_file() {
        return Err(not_regular(&opened));
    }
    Ok(file)
}

/// What a file is, in words ("a folder", "a FIFO", "a regular file", ...), for errors that
/// refuse anything but a regular file.
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let e = read_regular_file(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a character device)");
        let e = read_regular_file(Path::new("/"), 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a folder)");
        let dir = std::env::temp_dir().join(format!("capsize-mock-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ten");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_regular_file(&f, 10).unwrap(), b"0123456789");
        let e = read_regular_file(&f, 9).unwrap_err();
        assert_eq!(e.to_string(), "file is 10 bytes, over the limit of 9 bytes");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
