//! Helpers shared by the command-line integration tests (each test file uses a subset).
#![allow(dead_code)]

pub mod calib;
pub mod otel;
#[path = "../../capsize-scheduler/tests/common/redis.rs"]
pub mod redis;
pub mod temp;

/// The `capsize` binary with `args`, run to the end.
pub fn capsize(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_capsize"))
        .args(args)
        .output()
        .expect("the capsize binary runs")
}

/// The Python of the SDK venv (`CAPSIZE_SDK_PYTHON`, which `scripts/test.sh` sets).
pub fn python() -> String {
    std::env::var("CAPSIZE_SDK_PYTHON").expect(
        "CAPSIZE_SDK_PYTHON names the SDK venv's python: run these tests through scripts/test.sh",
    )
}

/// `rel`, a path in the repository, made absolute.
pub fn root(rel: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// What a run printed on stderr.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The `capsize` binary with `args`, every file it writes limited to `limit` bytes (a write
/// past it fails with EFBIG instead of the process being killed).
#[cfg(unix)]
pub fn capsize_limited(args: &[&str], limit: u64) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_capsize"));
    cmd.args(args);
    // SAFETY: signal and setrlimit are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("the capsize binary runs")
}

/// Starts `capsize mock --scenario SCENARIO --time-scale SCALE` on a free port; returns it and
/// the address it printed first.
pub fn spawn_mock(scenario: &std::path::Path, scale: &str) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut mock = std::process::Command::new(env!("CARGO_BIN_EXE_capsize"))
        .arg("mock")
        .arg("--scenario")
        .arg(scenario)
        .args(["--time-scale", scale])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("capsize mock starts");
    let mut first = String::new();
    std::io::BufReader::new(mock.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("the address line");
    (mock, first.trim().to_string())
}

/// The JSON file at `path`.
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("JSON")
}

/// `GET path` from the mock at `base` (http://host:port), its JSON body: plain HTTP/1.1 over a
/// socket.
pub fn get_json(base: &str, path: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).expect("the mock listens");
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut text = String::new();
    conn.read_to_string(&mut text).expect("an answer");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {text}"))
}

/// `capsize merge` of a copy of the replicas folder `out` (`replica-I-of-K/replica.json`
/// each) in which `edit` has changed the records of the replicas `which`: its output, and
/// the folder it was told to write (which a refused merge leaves absent).
pub fn merge_tampered(
    out: &std::path::Path,
    which: &[&str],
    edit: impl Fn(&mut serde_json::Value),
) -> (std::process::Output, std::path::PathBuf) {
    let copy = out.with_file_name("tampered");
    let merged = out.with_file_name("tampered-merged");
    let _ = std::fs::remove_dir_all(&copy);
    let _ = std::fs::remove_dir_all(&merged);
    for e in std::fs::read_dir(out).expect("the replicas' folder") {
        let dir = e.expect("an entry").path();
        let name = dir.file_name().expect("a name").to_owned();
        std::fs::create_dir_all(copy.join(&name)).expect("mkdir");
        let record = dir.join("replica.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&record).expect("a record"))
                .expect("JSON");
        if which
            .iter()
            .any(|w| name.to_string_lossy() == format!("replica-{w}"))
        {
            edit(&mut v);
        }
        std::fs::write(copy.join(&name).join("replica.json"), v.to_string()).expect("write");
    }
    let o = capsize(&[
        "merge",
        copy.to_str().expect("UTF-8"),
        "--out",
        merged.to_str().expect("UTF-8"),
    ]);
    (o, merged)
}
