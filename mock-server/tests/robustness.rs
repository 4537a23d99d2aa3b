//! No request, however malformed, panics the mock. A panic hook counts panics on the server's
//! thread (named `capsize-mock`): there must be none. mock-repro.py M1 used to print a panic
//! backtrace there (wiremock's `expect("Failed to read request body.")`) for a body shorter than
//! its Content-Length whose client went away.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;
use std::time::Duration;

use common::raw::{exchange, End};
use common::{counts, start, stats};

/// Panics on the server's thread (named `capsize-mock`) since the hook was installed.
static SERVER_PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_server_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some("capsize-mock") {
                SERVER_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
    });
}

/// mock-repro.py M1: a declared length of 1000, nine bytes, and the client goes away.
#[tokio::test]
async fn a_truncated_body_then_a_closed_connection_panics_nothing() {
    count_server_panics();
    let m = start("").await;
    for _ in 0..3 {
        let mut s = TcpStream::connect(m.address()).unwrap();
        s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\":")
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(s);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = exchange(
        m.address(),
        b"GET /healthz HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n",
        End::Open,
    )
    .response();
    assert_eq!(r.status, 200);
    assert_eq!(counts(&stats(&m).await, &["received"]), [0]);
    assert_eq!(SERVER_PANICS.load(Ordering::SeqCst), 0);
}
