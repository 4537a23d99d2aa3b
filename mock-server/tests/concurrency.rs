//! Thousands of requests from 64 concurrent workers (on keep-alive connections) are all
//! answered by the model: none lost, none refused, every one counted.

#![allow(clippy::disallowed_methods)] // runs on tokio's clock on purpose

mod common;

use std::sync::Arc;

use common::{chat_body, start};
use tokio::sync::Mutex;

const WORKERS: u64 = 64;
const PER_WORKER: u64 = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_all_reach_the_model() {
    let m = start("").await;
    let per_worker = PER_WORKER;
    let sent = per_worker * WORKERS;
    let client = reqwest::Client::new();
    let statuses = Arc::new(Mutex::new(std::collections::BTreeMap::<u16, u64>::new()));
    let body = chat_body("hello there", 5);
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let (client, statuses, body) = (client.clone(), statuses.clone(), body.clone());
        let base = m.uri();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_worker {
                let r = if (w + i) % 2 == 0 {
                    client
                        .post(format!("{base}/v1/chat/completions"))
                        .json(&body)
                } else {
                    client
                        .post(format!("{base}/tools/lookup"))
                        .body("{\"q\":1}")
                }
                .send()
                .await
                .expect("every request is answered");
                *statuses
                    .lock()
                    .await
                    .entry(r.status().as_u16())
                    .or_default() += 1;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let statuses = statuses.lock().await.clone();
    assert_eq!(statuses.into_iter().collect::<Vec<_>>(), vec![(200, sent)]);
    let c = m.counters();
    assert_eq!((c.received, c.served), (sent, sent));
}
