//! A closed-loop load generator that sends exactly N requests: C keep-alive HTTP/1.1
//! connections, each sending its next POST as soon as the previous answer is read, until N
//! tickets are taken. Used by `scripts/mock-soak.sh`, which needs an exact count of requests
//! sent (wrk runs for a duration, not a count).
//!
//! Usage: `load URI N C [PATH] [BODY] [BIG_EVERY BIG_BYTES]`; prints one line:
//! `sent=N errors=E big=B big_cut=X elapsed_s=T rps=R status_200=.. status_429=..` (one key per
//! status seen). With `BIG_EVERY` K > 0, every K-th request instead carries a body of
//! `BIG_BYTES` (one buffer, shared): a server that refuses it answers 413 (counted by status)
//! or closes the connection while it is still being sent (counted in `big_cut`, not an error:
//! the worker reconnects).

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
    /// Every `big_every`-th request carries `big` instead of `body` (0: none does).
    big_every: u64,
    big: Bytes,
}

/// What one connection's worker counted.
#[derive(Default)]
struct Counts {
    tally: Tally,
    errors: u64,
    big: u64,
    big_cut: u64,
}

/// One connection's loop; reconnects after an error (which is counted).
async fn worker(plan: Arc<Plan>) -> Counts {
    let mut c = Counts::default();
    'connect: loop {
        let Ok(stream) = TcpStream::connect(&plan.authority).await else {
            c.errors += 1;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let Ok((mut sender, conn)) = http1::handshake(TokioIo::new(stream)).await else {
            c.errors += 1;
            continue;
        };
        tokio::spawn(conn);
        loop {
            let ticket = plan.tickets.fetch_add(1, Ordering::Relaxed);
            if ticket >= plan.total {
                return c;
            }
            let big = plan.big_every > 0 && ticket % plan.big_every == plan.big_every - 1;
            let body = if big { &plan.big } else { &plan.body };
            c.big += u64::from(big);
            let req = Request::post(plan.path.as_str())
                .header("host", plan.authority.as_str())
                .header("content-type", "application/json")
                .body(Full::new(body.clone()))
                .expect("a request");
            let answered = match sender.send_request(req).await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    resp.into_body().collect().await.map(|_| status)
                }
                Err(e) => Err(e),
            };
            match answered {
                Ok(status) => {
                    *c.tally.entry(status).or_default() += 1;
                    // A server that refused the body unread cannot read on: it closes.
                    if big {
                        continue 'connect;
                    }
                }
                Err(_) if big => {
                    c.big_cut += 1;
                    continue 'connect;
                }
                Err(_) => {
                    c.errors += 1;
                    continue 'connect;
                }
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: load URI N C [PATH] [BODY] [BIG_EVERY BIG_BYTES]".into());
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
        big_every: args.get(6).map_or(Ok(0), |a| a.parse())?,
        big: Bytes::from(vec![b'x'; args.get(7).map_or(Ok(0), |a| a.parse())?]),
    });
    let connections: usize = args[3].parse()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (all, elapsed) = rt.block_on(async {
        let t0 = tokio::time::Instant::now();
        let tasks: Vec<_> = (0..connections)
            .map(|_| tokio::spawn(worker(Arc::clone(&plan))))
            .collect();
        let mut all = Counts::default();
        for t in tasks {
            let c = t.await.expect("a worker");
            for (s, n) in c.tally {
                *all.tally.entry(s).or_default() += n;
            }
            all.errors += c.errors;
            all.big += c.big;
            all.big_cut += c.big_cut;
        }
        (all, t0.elapsed())
    });
    // Answered, plus the large requests whose connection the server closed.
    let sent: u64 = all.tally.values().sum::<u64>() + all.big_cut;
    let secs = elapsed.as_secs_f64();
    let mut line = format!(
        "sent={sent} errors={} big={} big_cut={} elapsed_s={secs:.2} rps={:.0}",
        all.errors,
        all.big,
        all.big_cut,
        sent as f64 / secs
    );
    for (s, n) in all.tally {
        line.push_str(&format!(" status_{s}={n}"));
    }
    println!("{line}");
    Ok(())
}
