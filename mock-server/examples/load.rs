//! A closed-loop load generator that sends exactly N requests: C keep-alive HTTP/1.1
//! connections, each sending its next POST as soon as the previous answer is read, until N
//! tickets are taken. Used by `scripts/mock-soak.sh`, which needs an exact count of requests
//! sent (wrk runs for a duration, not a count).
//!
//! Usage: `load URI N C [PATH] [BODY]`; prints one line:
//! `sent=N errors=E elapsed_s=T rps=R status_200=.. status_429=..` (one key per status seen).

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

type Tally = BTreeMap<u16, u64>;

struct Plan {
    authority: String,
    path: String,
    body: Bytes,
    total: u64,
    tickets: AtomicU64,
}

/// One connection's loop; reconnects after an error (which is counted).
async fn worker(plan: Arc<Plan>) -> (Tally, u64) {
    let (mut tally, mut errors) = (Tally::new(), 0);
    'connect: loop {
        let Ok(stream) = TcpStream::connect(&plan.authority).await else {
            errors += 1;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let Ok((mut sender, conn)) = http1::handshake(TokioIo::new(stream)).await else {
            errors += 1;
            continue;
        };
        tokio::spawn(conn);
        loop {
            if plan.tickets.fetch_add(1, Ordering::Relaxed) >= plan.total {
                return (tally, errors);
            }
            let req = Request::post(plan.path.as_str())
                .header("host", plan.authority.as_str())
                .header("content-type", "application/json")
                .body(Full::new(plan.body.clone()))
                .expect("a request");
            let answered = match sender.send_request(req).await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    resp.into_body().collect().await.map(|_| status)
                }
                Err(e) => Err(e),
            };
            match answered {
                Ok(status) => *tally.entry(status).or_default() += 1,
                Err(_) => {
                    errors += 1;
                    continue 'connect;
                }
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: load URI N C [PATH] [BODY]".into());
    }
    let authority = args[1].trim_start_matches("http://").trim_end_matches('/');
    let plan = Arc::new(Plan {
        authority: authority.to_string(),
        total: args[2].parse()?,
        path: args
            .get(4)
            .cloned()
            .unwrap_or_else(|| "/v1/chat/completions".into()),
        body: Bytes::from(args.get(5).cloned().unwrap_or_else(|| {
            r#"{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":8}"#.into()
        })),
        tickets: AtomicU64::new(0),
    });
    let connections: usize = args[3].parse()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (tally, errors, elapsed) = rt.block_on(async {
        let t0 = tokio::time::Instant::now();
        let tasks: Vec<_> = (0..connections)
            .map(|_| tokio::spawn(worker(Arc::clone(&plan))))
            .collect();
        let (mut tally, mut errors) = (Tally::new(), 0);
        for t in tasks {
            let (t, e) = t.await.expect("a worker");
            for (s, n) in t {
                *tally.entry(s).or_default() += n;
            }
            errors += e;
        }
        (tally, errors, t0.elapsed())
    });
    let sent: u64 = tally.values().sum::<u64>();
    let secs = elapsed.as_secs_f64();
    let mut line = format!(
        "sent={sent} errors={errors} elapsed_s={secs:.2} rps={:.0}",
        sent as f64 / secs
    );
    for (s, n) in tally {
        line.push_str(&format!(" status_{s}={n}"));
    }
    println!("{line}");
    Ok(())
}
