//! Transport errors by class: an attempt of a real-time run that got no answer because the
//! connection failed, named by why, so that "86,583 failed for good" says what failed them
//! (the client out of file descriptors, the provider refusing or resetting connections).
//! Classified from the error's chain: the first `std::io::Error` in it, by its OS error
//! (`EMFILE`, `ENFILE`) or its kind; hyper's "connection closed before message completed",
//! which carries no I/O error, is a reset.

use serde::{Deserialize, Serialize};

/// Why an attempt's connection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportClass {
    /// Nothing listened: the connection was refused.
    ConnectionRefused,
    /// The peer reset or closed the connection before the answer.
    ConnectionReset,
    /// The process (`EMFILE`) or the system (`ENFILE`) had no file descriptor to spare.
    TooManyOpenFiles,
    /// The operating system gave up on the connection.
    TimedOut,
    /// Anything else.
    Other,
}

impl TransportClass {
    /// What the terminal's summary calls it.
    pub fn words(self) -> &'static str {
        match self {
            TransportClass::ConnectionRefused => "connection refused",
            TransportClass::ConnectionReset => "connection reset",
            TransportClass::TooManyOpenFiles => "too many open files",
            TransportClass::TimedOut => "timed out",
            TransportClass::Other => "other",
        }
    }
}

/// What hyper says of a connection closed under a request (its `IncompleteMessage`).
const CLOSED_EARLY: &str = "connection closed before message completed";

/// The class of transport error `e`, from its chain of sources.
pub fn classify(e: &(dyn std::error::Error + 'static)) -> TransportClass {
    let mut at = Some(e);
    while let Some(err) = at {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                return TransportClass::TooManyOpenFiles;
            }
            use std::io::ErrorKind as K;
            match io.kind() {
                K::ConnectionRefused => return TransportClass::ConnectionRefused,
                K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
                    return TransportClass::ConnectionReset
                }
                K::TimedOut => return TransportClass::TimedOut,
                _ => {}
            }
        }
        if err.to_string() == CLOSED_EARLY {
            return TransportClass::ConnectionReset;
        }
        at = err.source();
    }
    TransportClass::Other
}

/// Attempts that failed on their connection, by class (summary.json's `transport_errors`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportErrors {
    /// Refused: nothing listened.
    pub connection_refused: u64,
    /// Reset or closed by the peer before the answer.
    pub connection_reset: u64,
    /// No file descriptor to spare (`EMFILE`, `ENFILE`): the client's limit.
    pub too_many_open_files: u64,
    /// Given up on by the operating system.
    pub timed_out: u64,
    /// Anything else.
    pub other: u64,
}

impl TransportErrors {
    /// One more of `class`.
    pub fn add(&mut self, class: TransportClass) {
        let n = match class {
            TransportClass::ConnectionRefused => &mut self.connection_refused,
            TransportClass::ConnectionReset => &mut self.connection_reset,
            TransportClass::TooManyOpenFiles => &mut self.too_many_open_files,
            TransportClass::TimedOut => &mut self.timed_out,
            TransportClass::Other => &mut self.other,
        };
        *n += 1;
    }

    /// Both added.
    pub fn plus(self, o: TransportErrors) -> TransportErrors {
        TransportErrors {
            connection_refused: self.connection_refused + o.connection_refused,
            connection_reset: self.connection_reset + o.connection_reset,
            too_many_open_files: self.too_many_open_files + o.too_many_open_files,
            timed_out: self.timed_out + o.timed_out,
            other: self.other + o.other,
        }
    }

    /// Each class with its count, in summary.json's order.
    pub fn by_class(&self) -> [(TransportClass, u64); 5] {
        [
            (TransportClass::ConnectionRefused, self.connection_refused),
            (TransportClass::ConnectionReset, self.connection_reset),
            (TransportClass::TooManyOpenFiles, self.too_many_open_files),
            (TransportClass::TimedOut, self.timed_out),
            (TransportClass::Other, self.other),
        ]
    }

    /// Every one.
    pub fn total(&self) -> u64 {
        self.by_class().iter().map(|(_, n)| n).sum()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // real sockets on the real clock
    use super::*;

    /// The error reqwest gives for a POST to `url`.
    async fn error_of(url: &str) -> reqwest::Error {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(url)
            .body("{}")
            .send()
            .await
            .expect_err("no answer")
    }

    #[tokio::test]
    async fn a_refused_and_a_reset_connection_are_told_apart() {
        // A port nothing listens on: refused.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let e = error_of(&format!("http://127.0.0.1:{port}/x")).await;
        assert_eq!(classify(&e), TransportClass::ConnectionRefused, "{e:?}");
        // A server that takes each connection and drops it: closed before the answer.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                drop(s);
            }
        });
        let e = error_of(&format!("http://{addr}/x")).await;
        assert_eq!(classify(&e), TransportClass::ConnectionReset, "{e:?}");
    }

    #[test]
    fn out_of_descriptors_and_the_rest() {
        let io = |e: std::io::Error| classify(&e);
        assert_eq!(
            io(std::io::Error::from_raw_os_error(libc::EMFILE)),
            TransportClass::TooManyOpenFiles
        );
        assert_eq!(
            io(std::io::Error::from_raw_os_error(libc::ENFILE)),
            TransportClass::TooManyOpenFiles
        );
        assert_eq!(
            io(std::io::ErrorKind::TimedOut.into()),
            TransportClass::TimedOut
        );
        assert_eq!(io(std::io::Error::other("dns")), TransportClass::Other);
        let mut counts = TransportErrors::default();
        for c in [
            TransportClass::TooManyOpenFiles,
            TransportClass::TooManyOpenFiles,
            TransportClass::Other,
        ] {
            counts.add(c);
        }
        assert_eq!(counts.too_many_open_files, 2);
        assert_eq!(counts.plus(counts).total(), 6);
    }
}
