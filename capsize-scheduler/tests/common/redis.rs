//! A `redis-server` for the shared limiter's tests: started on a free port (or a given one),
//! signalled, killed and restarted empty, stopped when dropped.
#![allow(dead_code)]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // real time and a real server

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` on a port (no persistence: a restart comes back empty), stopped when dropped.
pub struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    pub fn start() -> Redis {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        Redis::on(port)
    }

    pub fn on(port: u16) -> Redis {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server runs (Debian: apt-get install redis-server; scripts/test.sh installs it)");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        Redis { child, port }
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

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("a connection")
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
