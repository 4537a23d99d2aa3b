//! A `redis-server` for the shared limiter's tests: started on a free port (or a given one),
//! signalled, killed and restarted empty, stopped when dropped.
#![allow(dead_code)]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // real time and a real server

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` on a port (no persistence: a restart comes back empty), stopped when dropped.
pub struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    /// Starts one on a free port, trying another if a server of another test took the port
    /// between its pick and this server's bind.
    pub fn start() -> Redis {
        loop {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            if let Some(redis) = Redis::try_on(port) {
                return redis;
            }
        }
    }

    /// Starts one on `port`.
    pub fn on(port: u16) -> Redis {
        Redis::try_on(port).unwrap_or_else(|| panic!("redis-server could not take port {port}"))
    }

    /// Starts one on `port` and waits until it answers as itself (its `INFO`'s `process_id`:
    /// a connection alone may reach another test's server); `None` if it exits first (the port
    /// was taken).
    fn try_on(port: u16) -> Option<Redis> {
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server runs (Debian: apt-get install redis-server; scripts/test.sh installs it)");
        let started = Instant::now();
        loop {
            if child.try_wait().ok().flatten().is_some() {
                return None;
            }
            if serving_pid(port) == Some(child.id()) {
                return Some(Redis { child, port });
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends `signal` (`STOP`, `CONT`) to the server.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal}");
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `SIGKILL`, waited for: the server is gone (its port free for [`Redis::on`]).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `SIGKILL`, and a new server on the same port after `down`: empty.
    pub fn kill_and_restart(&mut self, down: Duration) {
        self.kill();
        std::thread::sleep(down);
        let port = self.port;
        drop(std::mem::replace(self, Redis::on(port)));
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The process id of the Redis server answering on `port` (`INFO server`), if one answers.
fn serving_pid(port: u16) -> Option<u32> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(b"INFO server\r\n").ok()?;
    let mut text = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        text.extend_from_slice(&chunk[..n]);
        let reply = String::from_utf8_lossy(&text);
        if let Some(rest) = reply.split("process_id:").nth(1) {
            if let Some((pid, _)) = rest.split_once("\r\n") {
                return pid.trim().parse().ok();
            }
        }
    }
}
