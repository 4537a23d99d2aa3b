//! The agent's process: started in a process group of its own with the mock's address in its
//! environment and arguments, signalled as a group, its exit noticed without collecting it (so
//! its group can still be killed safely), then collected.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};

use tokio::sync::oneshot;

use super::{ExecError, ExecRequest, ADDRESS, DUMMY_KEY};

/// The agent's process, the leader of its own process group.
pub(super) struct Agent {
    child: Child,
    /// Its pid, which is also its group's id.
    pid: libc::pid_t,
    /// Its exit has been collected.
    reaped: bool,
}

impl Drop for Agent {
    /// An agent left behind by an error is killed with its group, and collected.
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
            let _ = self.child.wait();
        }
    }
}

/// `arg` with every [`ADDRESS`] replaced by `host:port`.
fn with_address(arg: &std::ffi::OsStr, address: &str) -> std::ffi::OsString {
    let bytes = arg.as_bytes();
    let needle = ADDRESS.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(needle) {
            out.extend_from_slice(address.as_bytes());
            i += needle.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    std::ffi::OsStr::from_bytes(&out).to_os_string()
}

/// `127.0.0.1,localhost`, then what `name` held, if anything.
fn no_proxy(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => format!("127.0.0.1,localhost,{v}"),
        _ => "127.0.0.1,localhost".into(),
    }
}

impl Agent {
    /// Starts the agent against the mock at `address`.
    pub(super) fn spawn(request: &ExecRequest, address: SocketAddr) -> Result<Agent, ExecError> {
        let host = address.to_string();
        let uri = format!("http://{host}");
        let mut cmd = Command::new(&request.program);
        cmd.args(request.args.iter().map(|a| with_address(a, &host)))
            .env("OPENAI_BASE_URL", format!("{uri}/v1"))
            .env("ANTHROPIC_BASE_URL", &uri)
            .env("CAPSIZE_MOCK_URL", &uri)
            .env("OPENAI_API_KEY", DUMMY_KEY)
            .env("ANTHROPIC_API_KEY", DUMMY_KEY)
            .env("NO_PROXY", no_proxy("NO_PROXY"))
            .env("no_proxy", no_proxy("no_proxy"))
            .process_group(0);
        // In a group of its own the agent is not in the terminal's foreground: reading the
        // terminal would stop it (SIGTTIN). A pipe or file is passed on.
        if std::io::stdin().is_terminal() {
            cmd.stdin(Stdio::null());
        }
        let program = request.program.to_string_lossy().into_owned();
        let child = cmd.spawn().map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                ExecError::NotFound(program.clone())
            } else {
                ExecError::Spawn { program, source }
            }
        })?;
        let pid = libc::pid_t::try_from(child.id())
            .map_err(|_| ExecError::System("the agent's pid does not fit a pid_t".into()))?;
        Ok(Agent {
            child,
            pid,
            reaped: false,
        })
    }

    /// Resolves when the agent has exited, without collecting its exit (it stays a zombie,
    /// holding its pid and its group's id, until [`Agent::reap`]).
    pub(super) fn exited(
        &self,
    ) -> impl std::future::Future<Output = Result<(), std::io::Error>> + 'static {
        let pid = self.pid;
        let (tx, rx) = oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("capsize-exec-wait".into())
            .spawn(move || {
                let _ = tx.send(wait_exited(pid));
            });
        async move {
            spawned?;
            rx.await
                .map_err(|_| std::io::Error::other("the waiting thread ended"))?
        }
    }

    /// SIGTERM to the agent's group.
    pub(super) fn terminate(&self) {
        self.signal(libc::SIGTERM);
        // A stopped process (a background job that touched the terminal) only acts on its
        // SIGTERM once it runs again.
        self.signal(libc::SIGCONT);
    }

    /// SIGKILL to the agent's group.
    pub(super) fn kill(&self) {
        self.signal(libc::SIGKILL);
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: killpg only sends a signal. The group is the agent's own: its leader has not
        // been collected, so its id cannot belong to anyone else. ESRCH (nothing left) is fine.
        unsafe {
            libc::killpg(self.pid, sig);
        }
    }

    /// Collects the agent's exit: its code, or the signal it died of.
    pub(super) fn reap(&mut self) -> std::io::Result<(Option<i32>, Option<i32>)> {
        let status = self.child.wait()?;
        self.reaped = true;
        Ok((status.code(), status.signal()))
    }
}

/// Blocks until process `pid` has exited, leaving it to be collected.
fn wait_exited(pid: libc::pid_t) -> std::io::Result<()> {
    let id = libc::id_t::try_from(pid).map_err(|_| std::io::Error::other("negative pid"))?;
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value, and waitid only writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child; WNOWAIT leaves it to be collected by `Child::wait`.
        let r = unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_placeholder_is_replaced_everywhere() {
        let a = with_address(
            std::ffi::OsStr::new("http://{address}/v1,{address}"),
            "127.0.0.1:9",
        );
        assert_eq!(a, "http://127.0.0.1:9/v1,127.0.0.1:9");
        assert_eq!(with_address(std::ffi::OsStr::new("{addr}"), "x"), "{addr}");
    }
}
