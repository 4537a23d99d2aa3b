//! Raw HTTP/1.1 over TCP on loopback, for requests no client library would send, and a strict
//! reader of what comes back.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// How long a raw exchange waits for the server (connect, write, and the whole answer).
pub const WAIT: Duration = Duration::from_secs(10);

/// A response as read off the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Raw {
    /// The status code.
    pub status: u16,
    /// Headers, names in lower case, in order.
    pub headers: Vec<(String, String)>,
    /// The body (exactly `content-length` bytes).
    pub body: Vec<u8>,
}

impl Raw {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    /// The error message of a JSON error body in either provider's shape.
    pub fn error_message(&self) -> String {
        let v = self.json();
        v["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no error.message in {v}"))
            .to_string()
    }
}

/// What the server did with a raw request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A complete, well-formed response.
    Response(Raw),
    /// The connection closed without a byte.
    Closed,
    /// Bytes that are not a well-formed HTTP/1.1 response: what is wrong.
    Malformed(String),
}

impl Answer {
    /// The response (panics on anything else).
    pub fn response(self) -> Raw {
        match self {
            Answer::Response(r) => r,
            other => panic!("expected a response, got {other:?}"),
        }
    }
}

/// How the client ends its side once the request is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Keeps it open (the request says `Connection: close`, or the server closes).
    Open,
    /// Shuts down its write half: the server reads end-of-file after the request.
    HalfClose,
}

/// Sends `request` on a new connection, ends as `end` says, and reads until the server closes.
pub fn exchange(addr: SocketAddr, request: &[u8], end: End) -> Answer {
    let mut s = TcpStream::connect_timeout(&addr, WAIT).expect("connect to the mock");
    s.set_read_timeout(Some(WAIT)).expect("read timeout");
    s.set_write_timeout(Some(WAIT)).expect("write timeout");
    // The server may answer and close before the whole request is written (a body over the
    // limit): a failed write is not a failure, what comes back decides.
    let _ = s.write_all(request);
    if end == End::HalfClose {
        let _ = s.shutdown(Shutdown::Write);
    }
    let mut buf = Vec::new();
    if let Err(e) = s.read_to_end(&mut buf) {
        use std::io::ErrorKind::{TimedOut, WouldBlock};
        assert!(
            !matches!(e.kind(), TimedOut | WouldBlock),
            "no answer within {WAIT:?} (read so far: {:?})",
            String::from_utf8_lossy(&buf)
        );
        // A reset after the answer: what was read stands.
    }
    if buf.is_empty() {
        return Answer::Closed;
    }
    parse(&buf)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Parses one response (after any `100 Continue`), requiring `HTTP/1.x`, a status, well-formed
/// header lines, a `content-length` and exactly that many bytes after the head.
pub fn parse(mut buf: &[u8]) -> Answer {
    loop {
        let Some(end) = find(buf, b"\r\n\r\n") else {
            return Answer::Malformed(format!(
                "no end of head: {:?}",
                String::from_utf8_lossy(buf)
            ));
        };
        let Ok(head) = std::str::from_utf8(&buf[..end]) else {
            return Answer::Malformed("head not UTF-8".into());
        };
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        // HTTP/1.1, or HTTP/1.0 in answer to an HTTP/1.0 request.
        if !matches!(parts.next(), Some("HTTP/1.1" | "HTTP/1.0")) {
            return Answer::Malformed(format!("status line {status_line:?}"));
        }
        let Some(status) = parts.next().and_then(|s| s.parse::<u16>().ok()) else {
            return Answer::Malformed(format!("status line {status_line:?}"));
        };
        let mut headers = Vec::new();
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                return Answer::Malformed(format!("header line {line:?}"));
            };
            headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
        }
        let rest = &buf[end + 4..];
        if status == 100 {
            buf = rest;
            continue;
        }
        let raw = Raw {
            status,
            headers,
            body: Vec::new(),
        };
        let Some(length) = raw
            .header("content-length")
            .and_then(|v| v.parse::<usize>().ok())
        else {
            return Answer::Malformed(format!("no content-length: {:?}", raw.headers));
        };
        if rest.len() != length {
            return Answer::Malformed(format!(
                "content-length {length}, {} bytes follow",
                rest.len()
            ));
        }
        return Answer::Response(Raw {
            body: rest.to_vec(),
            ..raw
        });
    }
}

/// A POST of `body` to `path` with extra header lines (each ending in CRLF), closing after.
pub fn post(path: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: mock\r\nConnection: close\r\n\
         {extra}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// A chunked POST of `body` (as one chunk, then the last chunk) to `path`, closing after.
pub fn post_chunked(path: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: mock\r\nConnection: close\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r.extend_from_slice(b"\r\n0\r\n\r\n");
    r
}
