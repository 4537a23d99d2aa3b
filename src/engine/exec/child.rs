//! The agent's process: started in a process group with the mock's address in its environment
//! and arguments, signalled as a group, its exit noticed without collecting it, then collected.
//!
//! The group is led by a watchdog, a fork of capsize that runs no code of ours but a `read`:
//! it holds the read end of a pipe whose write end only capsize holds, so when capsize is gone,
//! however it went (SIGKILL included), the read returns and the watchdog kills the whole group
//! with SIGKILL, itself with it. While the watchdog is not collected, the group's id (its pid)
//! cannot be reused, so signalling the group can never reach anyone else. The agent itself also
//! gets SIGKILL when capsize dies (`PR_SET_PDEATHSIG`, on Linux).

use std::io::IsTerminal;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};

use tokio::sync::oneshot;

use super::{ExecError, ExecRequest, ADDRESS, DUMMY_KEY};

/// The agent's process, in the group its [`Watchdog`] leads.
pub(super) struct Agent {
    child: Child,
    /// Its pid.
    pid: libc::pid_t,
    /// Its exit has been collected.
    reaped: bool,
    /// The group's leader (dropped after the fields above: killed and collected last).
    watchdog: Watchdog,
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

/// The leader of the agent's process group: it kills the group when capsize is gone.
struct Watchdog {
    /// Its pid, which is also the group's id.
    pid: libc::pid_t,
    /// The write end of its lifeline: closed (by capsize's exit) it wakes the watchdog.
    _lifeline: OwnedFd,
}

impl Drop for Watchdog {
    /// Killed (if it is not already) and collected.
    fn drop(&mut self) {
        // SAFETY: kill only sends a signal; the pid is our child's, not yet collected, so it
        // is no one else's. waitpid collects that child only.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            loop {
                let r = libc::waitpid(self.pid, std::ptr::null_mut(), 0);
                if r >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break;
                }
            }
        }
    }
}

/// `r < 0` as the OS error it means.
fn check(r: libc::c_int) -> std::io::Result<libc::c_int> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The lowest file descriptor the watchdog keeps, its end of the lifeline.
const LIFELINE_FD: libc::c_int = 3;

impl Watchdog {
    /// Forks the watchdog, the leader of a new process group.
    fn start() -> std::io::Result<Watchdog> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`, which we then own.
        check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
        // SAFETY: both were just opened, by us, and are owned once each.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // The most descriptors the child may have to close (if close_range is missing).
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into `limit`.
        let max_fd = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
            0 => libc::c_int::try_from(limit.rlim_cur.min(1 << 16)).unwrap_or(1 << 16),
            _ => 1 << 16,
        };
        // SAFETY: all-zero sigset_t values are valid; sigfillset and pthread_sigmask only write
        // into them. Signals are blocked across the fork so that none runs one of capsize's
        // handlers in the child before it has ignored them.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        let mut before: libc::sigset_t = unsafe { std::mem::zeroed() };
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
        }
        // SAFETY: the child runs only `watch`, which makes async-signal-safe calls alone (the
        // parent has other threads: no allocation, no lock) and never returns.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: in the child, with the descriptors just made.
            unsafe { watch(read.as_raw_fd(), write.as_raw_fd(), max_fd) }
        }
        let forked = std::io::Error::last_os_error();
        // SAFETY: restores this thread's signal mask.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        }
        if pid < 0 {
            return Err(forked);
        }
        drop(read);
        let watchdog = Watchdog {
            pid,
            _lifeline: write,
        };
        // The child does the same: whichever is first, the group exists before the agent
        // joins it.
        // SAFETY: setpgid on our own child, which has not called exec.
        check(unsafe { libc::setpgid(pid, pid) })?;
        Ok(watchdog)
    }
}

/// The watchdog: ignores every signal but SIGKILL, closes every descriptor but its end of the
/// lifeline, leads a group of its own, waits until the lifeline's write end is closed (capsize
/// is gone), then kills its group.
///
/// # Safety
///
/// To be called only in a child just forked, with `read` and `write` the lifeline's ends and
/// `max_fd` above every open descriptor. Only async-signal-safe calls.
unsafe fn watch(read: libc::c_int, write: libc::c_int, max_fd: libc::c_int) -> ! {
    for sig in 1..65 {
        // Faults keep their default; SIGKILL and SIGSTOP cannot be changed (EINVAL, ignored).
        let fault = [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGABRT,
            libc::SIGTRAP,
            libc::SIGSYS,
        ]
        .contains(&sig);
        libc::signal(sig, if fault { libc::SIG_DFL } else { libc::SIG_IGN });
    }
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    libc::setpgid(0, 0);
    #[cfg(target_os = "linux")]
    libc::prctl(libc::PR_SET_NAME, c"capsize-watch".as_ptr());
    // Nothing of capsize's kept open: its sockets, its pipes, its terminal.
    libc::close(write);
    if read != LIFELINE_FD && libc::dup2(read, LIFELINE_FD) < 0 {
        libc::_exit(1);
    }
    for fd in 0..LIFELINE_FD {
        libc::close(fd);
    }
    #[cfg(target_os = "linux")]
    let closed = libc::syscall(libc::SYS_close_range, LIFELINE_FD + 1, libc::c_uint::MAX, 0) == 0;
    #[cfg(not(target_os = "linux"))]
    let closed = false;
    if !closed {
        for fd in LIFELINE_FD + 1..max_fd {
            libc::close(fd);
        }
    }
    let mut byte = 0u8;
    loop {
        let n = libc::read(LIFELINE_FD, (&mut byte as *mut u8).cast(), 1);
        // (last_os_error only reads errno: no allocation.)
        let interrupted = || std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
        if n == 0 || (n < 0 && !interrupted()) {
            break;
        }
    }
    // capsize is gone: the group goes, this process with it.
    libc::kill(0, libc::SIGKILL);
    libc::_exit(0)
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

/// `127.0.0.1,localhost`, the mock's `host` if it is another, then what `name` held, if
/// anything.
fn no_proxy(name: &str, host: &str) -> String {
    let mut hosts = String::from("127.0.0.1,localhost");
    if host != "127.0.0.1" && host != "localhost" {
        hosts.push(',');
        hosts.push_str(host);
    }
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => format!("{hosts},{v}"),
        _ => hosts,
    }
}

impl Agent {
    /// Starts the agent against the mock at `address` (`HOST:PORT`); with `traces`, its OTLP
    /// exports go to the mock too.
    pub(super) fn spawn(
        request: &ExecRequest,
        address: &str,
        traces: bool,
    ) -> Result<Agent, ExecError> {
        let watchdog = Watchdog::start().map_err(|e| {
            ExecError::System(format!("cannot start the agent's process group: {e}"))
        })?;
        let uri = format!("http://{address}");
        // The mock's host goes straight to it, never through a proxy.
        let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
        let mut cmd = Command::new(&request.program);
        cmd.args(request.args.iter().map(|a| with_address(a, address)))
            .env("OPENAI_BASE_URL", format!("{uri}/v1"))
            .env("ANTHROPIC_BASE_URL", &uri)
            .env("CAPSIZE_MOCK_URL", &uri)
            .env("OPENAI_API_KEY", DUMMY_KEY)
            .env("ANTHROPIC_API_KEY", DUMMY_KEY)
            .env("NO_PROXY", no_proxy("NO_PROXY", host))
            .env("no_proxy", no_proxy("no_proxy", host))
            .process_group(watchdog.pid);
        if traces {
            // An instrumented agent exports its spans to the mock, which records them: every
            // variable the SDKs read for where traces go points there (`otel.rs`).
            let (vars, _) = super::otel::otel_env(&uri, &super::otel::environment);
            cmd.envs(vars);
        }
        // SAFETY: the closure makes only async-signal-safe calls (prctl, getppid) and allocates
        // nothing, as code between fork and exec must.
        #[cfg(target_os = "linux")]
        unsafe {
            // The thread that forks is the agent's parent for PR_SET_PDEATHSIG: this one, which
            // runs the whole exec (a current-thread runtime on capsize's main thread).
            let parent = libc::getpid();
            cmd.pre_exec(move || {
                check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
                // capsize died before the line above: no signal will come, so go now.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
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
            watchdog,
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
        // SAFETY: killpg only sends a signal. The group is the agent's own: its leader, the
        // watchdog, has not been collected, so its id cannot belong to anyone else. The watchdog
        // ignores all but SIGKILL.
        unsafe {
            libc::killpg(self.watchdog.pid, sig);
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
