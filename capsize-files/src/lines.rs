//! A regular file read a line at a time, each line within a bound, the whole within a limit:
//! a file of records (one JSON document a line) that may be long, read without holding it
//! whole and without a line that never ends growing memory.

use std::io::{BufRead, BufReader, Error, ErrorKind, Read, Take};
use std::path::Path;

/// The lines of a regular file ([`read_regular_lines`]), each without its `\n` or `\r\n`, as
/// UTF-8 text. An item's error is one line, without the path (the caller knows it and the line
/// number: the count of items before it, plus one).
pub struct Lines {
    reader: BufReader<Take<std::fs::File>>,
    limit: u64,
    line_limit: u64,
    done: bool,
}

/// Opens the regular file at `path` to be read a line at a time, refusing anything but a
/// regular file, and a file over `limit` bytes before and while it is read; a line longer than
/// `line_limit` bytes is an error when it is reached (as is one that is not UTF-8).
pub fn read_regular_lines(path: &Path, limit: u64, line_limit: u64) -> std::io::Result<Lines> {
    let file = super::open_regular_file(path, limit)?;
    Ok(Lines {
        reader: BufReader::new(file.take(limit.saturating_add(1))),
        limit,
        line_limit,
        done: false,
    })
}

impl Lines {
    fn next_line(&mut self) -> std::io::Result<Option<String>> {
        let mut bytes = Vec::new();
        let read = (&mut self.reader)
            .take(self.line_limit.saturating_add(2))
            .read_until(b'\n', &mut bytes)?;
        if read == 0 {
            return Ok(None);
        }
        if self.reader.get_ref().limit() == 0 {
            return Err(super::too_large(
                self.limit,
                &format!("more than {}", self.limit),
            ));
        }
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        if bytes.len() as u64 > self.line_limit {
            return Err(Error::new(
                ErrorKind::InvalidData,
                format!("a line over the limit of {} bytes", self.line_limit),
            ));
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| Error::new(ErrorKind::InvalidData, "not UTF-8 text"))
    }
}

impl Iterator for Lines {
    type Item = std::io::Result<String>;

    /// The next line; after an error, none.
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.next_line().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[u8], limit: u64, line_limit: u64) -> Vec<Result<String, String>> {
        let dir = std::env::temp_dir().join(format!(
            "capsize-files-lines-{}-{}",
            std::process::id(),
            text.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("lines");
        std::fs::write(&f, text).unwrap();
        let got = match read_regular_lines(&f, limit, line_limit) {
            Ok(l) => l.map(|r| r.map_err(|e| e.to_string())).collect(),
            Err(e) => vec![Err(e.to_string())],
        };
        std::fs::remove_dir_all(&dir).unwrap();
        got
    }

    #[test]
    fn lines_are_read_within_their_bounds() {
        let ok = |s: &str| Ok(s.to_string());
        assert_eq!(
            lines(b"a\r\n\nbc\nd", 100, 2),
            [ok("a"), ok(""), ok("bc"), ok("d")]
        );
        assert_eq!(
            lines(b"a\nbcd\ne\n", 100, 2),
            [ok("a"), Err("a line over the limit of 2 bytes".into())]
        );
        assert_eq!(
            lines(b"a\n\xff\n", 100, 2),
            [ok("a"), Err("not UTF-8 text".into())]
        );
        assert_eq!(
            lines(b"0123456789\n", 5, 100),
            [Err("file is 11 bytes, over the limit of 5 bytes".into())]
        );
    }

    #[cfg(unix)]
    #[test]
    fn only_a_regular_file_is_opened() {
        let e = read_regular_lines(Path::new("/dev/zero"), 1 << 20, 10).err();
        assert_eq!(
            e.map(|e| e.to_string()),
            Some("not a regular file (a character device)".into())
        );
    }
}
