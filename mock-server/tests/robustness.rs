//! No request, however malformed, panics the mock or goes unanswered in a broken way. A few
//! hundred deterministic malformed requests go over raw TCP to a mock on 127.0.0.1 (bad methods
//! and paths; missing, invalid and huge Content-Length; truncated, oversized and chunked-garbage
//! bodies; invalid JSON, wrong JSON types, non-UTF-8; huge headers; bad `x-capsize-tokens`
//! values); each gets exactly the status pinned for it, as a well-formed response (our JSON error
//! in the route's shape, or hyper's empty-bodied 400/431 for a head that does not parse), or the
//! connection closes without a byte where no answer is possible. Afterwards `/healthz` still
//! answers, `/stats` counts exactly the requests that reached the model, and its identity
//! (received = served + rate_limited + errored + timed_out) holds. A panic hook counts panics in
//! this process, where the server runs on a thread of its own: there must be none (a truncated
//! body used to panic wiremock's server thread).

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;
use std::time::Duration;

use tokio::time::Instant;

use capsize_mock::limits::{MAX_BODY_BYTES, MAX_HEAD_BYTES};
use common::raw::{exchange, post, post_chunked, Answer, End, Raw};
use common::{counts, start, stats};

/// Panics anywhere in this process since the hook was installed: on the server's thread, on
/// any thread a server of another design would use, or in a test (which fails then anyway).
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

/// What a case must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Our JSON error with this status, in OpenAI's shape.
    OpenAi(u16),
    /// Our JSON error with this status, in Anthropic's shape.
    Anthropic(u16),
    /// hyper's own answer to a head that does not parse: this status, an empty body.
    Hyper(u16),
    /// The connection closes without a byte (nothing can be answered).
    Closed,
}

struct Case {
    name: String,
    bytes: Vec<u8>,
    end: End,
    want: Want,
}

fn case(name: impl Into<String>, bytes: impl Into<Vec<u8>>, end: End, want: Want) -> Case {
    Case {
        name: name.into(),
        bytes: bytes.into(),
        end,
        want,
    }
}

const CHAT: &str = "/v1/chat/completions";
const MESSAGES: &str = "/v1/messages";
const TOOL: &str = "/tools/t";
const CHAT_BODY: &[u8] =
    br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}"#;
const MESSAGES_BODY: &[u8] = br#"{"model":"m","messages":[],"max_tokens":1}"#;

/// A model-facing route: path, a valid body, and the shape of its errors.
type Route = (&'static str, &'static [u8], fn(u16) -> Want);

/// The model-facing routes.
fn routes() -> [Route; 3] {
    [
        (CHAT, CHAT_BODY, Want::OpenAi),
        (MESSAGES, MESSAGES_BODY, Want::Anthropic),
        (TOOL, b"{}", Want::OpenAi),
    ]
}

/// A small deterministic generator (xorshift64*), for garbage bytes.
struct Garbage(u64);

impl Garbage {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next().to_le_bytes()[0]).collect()
    }
}

fn methods_and_paths(cases: &mut Vec<Case>) {
    use Want::OpenAi;
    for method in [
        "GET", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO", "post",
    ] {
        for (path, _, shape) in routes() {
            let req = format!("{method} {path} HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n");
            cases.push(case(format!("{method} {path}"), req, End::Open, shape(405)));
        }
    }
    for (method, path) in [
        ("POST", "/stats"),
        ("POST", "/healthz"),
        ("DELETE", "/stats"),
    ] {
        let req = format!("{method} {path} HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n");
        cases.push(case(
            format!("{method} {path}"),
            req,
            End::Open,
            OpenAi(405),
        ));
    }
    for path in [
        "/",
        "/nowhere",
        "/tools/",
        "/tools/a/b",
        "/v1/chat/completions/",
        "/V1/MESSAGES",
        "/%00",
        "//v1/messages",
        "/healthz/x",
        "*",
    ] {
        for method in ["GET", "POST"] {
            let req = format!(
                "{method} {path} HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\
                 Content-Length: 2\r\n\r\n{{}}"
            );
            cases.push(case(
                format!("{method} {path}"),
                req,
                End::Open,
                OpenAi(404),
            ));
        }
    }
}

fn headers(cases: &mut Vec<Case>) {
    let bad_tokens: [&[u8]; 16] = [
        b"-1",
        b"1e308",
        b"NaN",
        b"18446744073709551616",
        b"99999999999999999999999999",
        b"",
        b"0x10",
        b"1_000",
        b"1.0",
        b"inf",
        b"+-1",
        b"1 2",
        "\u{ff11}".as_bytes(),
        b"\xff\xfe",
        b"\x7f",
        b"1,2",
    ];
    for (path, body, shape) in routes() {
        for v in bad_tokens {
            let mut extra = b"x-capsize-tokens: ".to_vec();
            extra.extend_from_slice(v);
            extra.extend_from_slice(b"\r\n");
            let extra = String::from_utf8_lossy(&extra).into_owned();
            // Raw bytes: non-UTF-8 values go as they are.
            let mut req =
                format!("POST {path} HTTP/1.1\r\nHost: m\r\nConnection: close\r\n").into_bytes();
            req.extend_from_slice(b"x-capsize-tokens: ");
            req.extend_from_slice(v);
            req.extend_from_slice(format!("\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes());
            req.extend_from_slice(body);
            // DEL is not allowed in a header value: hyper refuses the head.
            let want = if v == b"\x7f" {
                Want::Hyper(400)
            } else {
                shape(400)
            };
            cases.push(case(
                format!("tokens {extra:?} {path}"),
                req,
                End::Open,
                want,
            ));
        }
        let req = post(path, "x-capsize-latency: nope\r\n", body);
        cases.push(case(
            format!("latency nope {path}"),
            req,
            End::Open,
            shape(400),
        ));
    }
    let huge = "a".repeat(MAX_HEAD_BYTES + 1);
    let many: String = (0..150).map(|i| format!("x-h{i}: v\r\n")).collect();
    for (name, req) in [
        (
            "huge header value",
            post(TOOL, &format!("x-big: {huge}\r\n"), b"{}"),
        ),
        ("150 headers", post(TOOL, &many, b"{}")),
        (
            "huge path",
            format!("GET /{huge} HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n").into_bytes(),
        ),
    ] {
        cases.push(case(name, req, End::Open, Want::Hyper(431)));
    }
}

fn bodies(cases: &mut Vec<Case>) {
    let deep = "[".repeat(100_000);
    let bad: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"{".to_vec(),
        b"}".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"42".to_vec(),
        b"\"text\"".to_vec(),
        br#"{"model":1,"messages":[],"max_tokens":1}"#.to_vec(),
        br#"{"model":"m","messages":{},"max_tokens":1}"#.to_vec(),
        br#"{"model":"m","messages":[1],"max_tokens":1}"#.to_vec(),
        br#"{"model":"m","messages":[{"content":5}],"max_tokens":1}"#.to_vec(),
        br#"{"model":"m","messages":[{"content":[{"text":7}]}],"max_tokens":1}"#.to_vec(),
        br#"{"model":"m","messages":[],"max_tokens":-1}"#.to_vec(),
        br#"{"model":"m","messages":[],"max_tokens":1e308}"#.to_vec(),
        br#"{"model":"m","messages":[],"max_tokens":"5"}"#.to_vec(),
        br#"{"model":"m","messages":[],"max_tokens":18446744073709551616}"#.to_vec(),
        br#"{"model":"m","messages":[],"max_tokens":1} trailing"#.to_vec(),
        br#"{"model":"\ud800","messages":[],"max_tokens":1}"#.to_vec(),
        b"{\"model\":\"\xff\",\"messages\":[],\"max_tokens\":1}".to_vec(),
        b"\xef\xbb\xbf{\"model\":\"m\",\"messages\":[],\"max_tokens\":1}".to_vec(),
        b"\xff\xfe\xfd\x00".to_vec(),
        deep.into_bytes(),
        br#"{"model":"m","messages":[],"max_tokens":1,"model":"again"}"#.to_vec(),
        br#"{"model":null,"messages":[],"max_tokens":1}"#.to_vec(),
    ];
    for (path, shape) in [
        (CHAT, Want::OpenAi as fn(u16) -> Want),
        (MESSAGES, Want::Anthropic),
    ] {
        for (i, body) in bad.iter().enumerate() {
            cases.push(case(
                format!("body {i} {path}"),
                post(path, "", body),
                End::Open,
                shape(400),
            ));
        }
        // HTTP/1.0 without a length: an empty body (answered in HTTP/1.0, then closed).
        let req = format!("POST {path} HTTP/1.0\r\nHost: m\r\n\r\n");
        cases.push(case(
            format!("1.0 no length {path}"),
            req,
            End::Open,
            shape(400),
        ));
    }
}

fn framing(cases: &mut Vec<Case>) {
    for (path, body, shape) in routes() {
        let head = |fields: &str| {
            format!("POST {path} HTTP/1.1\r\nHost: m\r\nConnection: close\r\n{fields}\r\n")
                .into_bytes()
        };
        for cl in ["abc", "-1", "99999999999999999999999", "1 2", "0x10", ""] {
            let req = head(&format!("Content-Length: {cl}\r\n"));
            cases.push(case(
                format!("length {cl:?} {path}"),
                req,
                End::Open,
                Want::Hyper(400),
            ));
        }
        let req = head("Content-Length: 2\r\nContent-Length: 3\r\n");
        cases.push(case(
            format!("two lengths {path}"),
            req,
            End::Open,
            Want::Hyper(400),
        ));
        let req = head("Transfer-Encoding: gzip\r\n");
        cases.push(case(
            format!("gzip only {path}"),
            req,
            End::Open,
            Want::Hyper(400),
        ));
        // Over the limit: declared (only the head is sent), chunked.
        let req = head(&format!("Content-Length: {}\r\n", MAX_BODY_BYTES + 1));
        cases.push(case(
            format!("declared over {path}"),
            req,
            End::Open,
            shape(413),
        ));
        let over = vec![b'x'; MAX_BODY_BYTES + 1];
        cases.push(case(
            format!("chunked over {path}"),
            post_chunked(path, &over),
            End::Open,
            shape(413),
        ));
        // Cut short: fewer bytes than declared (by a length, a chunk, a huge chunk size), then
        // the client shuts its side: a 400 on the half that is still open.
        let mut req = head("Content-Length: 1000\r\n");
        req.extend_from_slice(&body[..body.len().min(9)]);
        cases.push(case(
            format!("truncated {path}"),
            req,
            End::HalfClose,
            shape(400),
        ));
        let mut req = head("Transfer-Encoding: chunked\r\n");
        req.extend_from_slice(b"10\r\nabc");
        cases.push(case(
            format!("truncated chunk {path}"),
            req,
            End::HalfClose,
            shape(400),
        ));
        let mut req = head("Transfer-Encoding: chunked\r\n");
        req.extend_from_slice(b"FFFFFFFFFFFFFFF\r\nxx");
        cases.push(case(
            format!("huge chunk {path}"),
            req,
            End::HalfClose,
            shape(400),
        ));
        // Chunked garbage: not a size, a size that overflows, data longer than its size.
        for (i, garbage) in [
            &b"ZZZ\r\n\r\n"[..],
            b"FFFFFFFFFFFFFFFFFFFF\r\n",
            b"3\r\nabcdef\r\n0\r\n\r\n",
            b"-1\r\n\r\n",
        ]
        .into_iter()
        .enumerate()
        {
            let mut req = head("Transfer-Encoding: chunked\r\n");
            req.extend_from_slice(garbage);
            cases.push(case(
                format!("chunk garbage {i} {path}"),
                req,
                End::HalfClose,
                shape(400),
            ));
        }
        // Both framings: chunked wins (RFC 9112), and this body is not chunked.
        let mut req = head(&format!(
            "Content-Length: {}\r\nTransfer-Encoding: chunked\r\n",
            body.len()
        ));
        req.extend_from_slice(body);
        cases.push(case(
            format!("length and chunked {path}"),
            req,
            End::Open,
            shape(400),
        ));
    }
}

fn garbage(cases: &mut Vec<Case>) {
    let fixed: [(&str, &[u8]); 12] = [
        ("no colon", b"GET /healthz HTTP/1.1\r\nHost m\r\n\r\n"),
        (
            "space in name",
            b"GET /healthz HTTP/1.1\r\nBad Name: x\r\n\r\n",
        ),
        ("version 2", b"GET /healthz HTTP/2.0\r\n\r\n"),
        ("version x", b"GET /healthz HTTP/x\r\n\r\n"),
        ("no version", b"GET /healthz\r\n\r\n"),
        ("space in path", b"GET /a b HTTP/1.1\r\n\r\n"),
        ("method @", b"G@T /healthz HTTP/1.1\r\n\r\n"),
        ("nul", b"\0\0\0\0\r\n\r\n"),
        ("h2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        (
            "tls hello",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
        ),
        ("only crlf", b"\r\n\r\n"),
        ("control in path", b"GET /\x01 HTTP/1.1\r\n\r\n"),
    ];
    for (name, bytes) in fixed {
        // hyper closes at an HTTP/2 preface (it serves HTTP/1 only), and at end-of-file before
        // any request.
        let want = if name == "only crlf" || name == "h2 preface" {
            Want::Closed
        } else {
            Want::Hyper(400)
        };
        cases.push(case(name, bytes, End::HalfClose, want));
    }
    let mut g = Garbage(0x5EED_CAFE_F00D_BEEF);
    for i in 0..80 {
        let n = 1 + (g.next() % 300) as usize;
        let mut bytes = g.bytes(n);
        // Half end in a blank line (a complete, unparseable head), half stop anywhere.
        if i % 2 == 0 {
            bytes.extend_from_slice(b"\r\n\r\n");
        }
        cases.push(case(
            format!("garbage {i}"),
            bytes,
            End::HalfClose,
            Want::Hyper(400),
        ));
    }
}

/// Valid requests the model refuses with a 429 "Request too large": more tokens than the whole
/// `tpm`.
fn too_large(cases: &mut Vec<Case>) {
    for (path, body, shape) in routes() {
        for tokens in ["1001", "18446744073709551615"] {
            let req = post(path, &format!("x-capsize-tokens: {tokens}\r\n"), body);
            cases.push(case(
                format!("{tokens} tokens {path}"),
                req,
                End::Open,
                shape(429),
            ));
        }
    }
}

/// Whether `raw` is exactly what `want` asks for.
fn check(name: &str, raw: &Raw, want: Want) {
    let json_error = |status: u16, anthropic: bool| {
        assert_eq!(
            raw.status,
            status,
            "{name}: {:?}",
            String::from_utf8_lossy(&raw.body)
        );
        assert_eq!(
            raw.header("content-type"),
            Some("application/json"),
            "{name}"
        );
        let v = raw.json();
        let message = v["error"]["message"].as_str().unwrap_or("");
        assert!(
            !message.is_empty() && !message.contains('\n'),
            "{name}: {v}"
        );
        if anthropic {
            assert_eq!(v["type"], "error", "{name}: {v}");
            assert!(v["error"]["type"].is_string(), "{name}: {v}");
        } else {
            assert!(v["error"]["type"].is_string(), "{name}: {v}");
            assert!(v["error"].get("code").is_some(), "{name}: {v}");
        }
        assert_eq!(raw.header("x-capsize-charged"), Some("false"), "{name}");
        assert_eq!(raw.header("retry-after"), None, "{name}");
    };
    match want {
        Want::OpenAi(s) => json_error(s, false),
        Want::Anthropic(s) => json_error(s, true),
        Want::Hyper(s) => {
            assert_eq!(raw.status, s, "{name}");
            assert!(raw.body.is_empty(), "{name}: {:?}", raw.body);
        }
        Want::Closed => panic!("{name}: wanted a closed connection, got {raw:?}"),
    }
}

#[tokio::test]
async fn hundreds_of_malformed_requests_each_get_their_4xx_and_the_server_keeps_serving() {
    count_panics();
    let m = start("tpm = 1000").await;
    let mut cases = Vec::new();
    methods_and_paths(&mut cases);
    headers(&mut cases);
    bodies(&mut cases);
    framing(&mut cases);
    garbage(&mut cases);
    too_large(&mut cases);
    assert_eq!(cases.len(), 303);
    let t0 = Instant::now();
    for c in &cases {
        let a = exchange(m.address(), &c.bytes, c.end);
        match a {
            Answer::Response(raw) => check(&c.name, &raw, c.want),
            Answer::Closed => assert_eq!(c.want, Want::Closed, "{}: closed", c.name),
            Answer::Malformed(why) => panic!("{}: malformed response: {why}", c.name),
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    let r = exchange(
        m.address(),
        b"GET /healthz HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n",
        End::Open,
    )
    .response();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
    // Only the six "too large" 429s from the model reached it.
    let s = stats(&m).await;
    let c = counts(
        &s,
        &["received", "served", "rate_limited", "errored", "timed_out"],
    );
    assert_eq!(c, [6, 0, 6, 0, 0]);
    assert_eq!(c[0], c[1] + c[2] + c[3] + c[4]);
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
}

/// mock-repro.py M1: a declared length of 1000, nine bytes, and the client goes away.
#[tokio::test]
async fn a_truncated_body_then_a_closed_connection_panics_nothing() {
    count_panics();
    let m = start("").await;
    for _ in 0..3 {
        let mut s = TcpStream::connect(m.address()).unwrap();
        s.write_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\
              Content-Length: 1000\r\n\r\n{\"model\":",
        )
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
    assert_eq!(PANICS.load(Ordering::SeqCst), 0);
}
