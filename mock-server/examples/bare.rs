//! A bare HTTP/1.1 server answering every request with `200 OK` and a small JSON body: the floor
//! that `scripts/mock-bench.sh` puts the mock's requests/s beside. Like the mock, it serves on
//! one thread (a current-thread runtime), and reads each request's body before answering.
//!
//! Usage: `bare [PORT]` (0 or absent = any free port); prints `http://127.0.0.1:PORT` first.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::convert::Infallible;
use std::io::Write;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // Read the body, as any server of a POST API must.
    let _ = req.into_body().collect().await;
    let mut r = Response::new(Full::new(Bytes::from_static(br#"{"ok":true}"#)));
    r.headers_mut().insert(
        "content-type",
        "application/json".parse().expect("a header"),
    );
    Ok(r)
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .map_or(Ok(0), |p| p.parse())
        .map_err(|e| std::io::Error::other(format!("bad port: {e}")))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "http://{}", listener.local_addr()?)?;
        out.flush()?;
        drop(out);
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(answer))
                    .await;
            });
        }
    })
}
