//! The official SDKs' streaming helpers against the mock's Server-Sent Events: the openai
//! client's `chat.completions.stream` and the anthropic client's `messages.stream`, unmodified
//! (pinned in `scripts/clients/requirements.txt`), read a generating provider's answer token by
//! token and assemble the final message the mock meant: its text, the output tokens its usage
//! reports (the tokens drawn, not `max_tokens`), its stop reason, and the first token no
//! earlier than the provider's time to first token.
//!
//! Needs the SDK venv: run through `scripts/test.sh`, which provisions it and sets
//! `CAPSIZE_SDK_PYTHON`; ignored by a bare `cargo test`.

mod common;

use std::path::Path;
use std::process::Command;

use common::temp::Temp;

/// 20 output tokens, the first after 200 ms, the others 10 ms apart.
const GENERATING: &str = r#"
name = "sse"
[provider]
latency = { dist = "constant", ms = 1 }
output_tokens = 20
ttft = { dist = "constant", ms = 200 }
tpot = { dist = "constant", ms = 10 }
[workload]
queries = 1
"#;

/// What `scripts/clients/sdk_stream.py SDK URL MAX_TOKENS` saw.
fn streamed(sdk: &str, url: &str, max_tokens: u64) -> serde_json::Value {
    let python = std::env::var("CAPSIZE_SDK_PYTHON").expect(
        "CAPSIZE_SDK_PYTHON names the SDK venv's python: run these tests through scripts/test.sh",
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/clients/sdk_stream.py");
    let out = Command::new(python)
        .arg(script)
        .args([sdk, url, &max_tokens.to_string()])
        .output()
        .expect("the client runs");
    assert!(
        out.status.success(),
        "{sdk}: the client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

fn check(sdk: &str, cut_reason: &str, done_reason: &str) {
    let t = Temp::new("sdk_streaming", sdk);
    let scenario = t.write("scenario.toml", GENERATING);
    let (mut mock, url) = common::spawn_mock(&scenario, "1");
    // Under a cap of 100, the provider's own 20 tokens, one text event each.
    let whole = streamed(sdk, &url, 100);
    // Cut by max_tokens at 5: the SDK sees the cut in the stop reason.
    let cut = streamed(sdk, &url, 5);
    let _ = mock.kill();
    let _ = mock.wait();
    eprintln!("{sdk}: {whole}\n{sdk}: {cut}");
    assert_eq!(whole["text"], "tok ".repeat(20));
    assert_eq!(whole["output_tokens"], 20);
    assert_eq!(whole["events"], 20);
    assert_eq!(whole["stop"], done_reason);
    assert_eq!(cut["text"], "tok ".repeat(5));
    assert_eq!(cut["output_tokens"], 5);
    assert_eq!(cut["stop"], cut_reason);
    // Paced: the first text no earlier than 200 ms, the end no earlier than 390 ms.
    let (first, total) = (
        whole["first_s"].as_f64().unwrap(),
        whole["total_s"].as_f64().unwrap(),
    );
    assert!(first >= 0.2, "first token after {first} s");
    assert!(total >= 0.39, "whole answer after {total} s");
}

#[test]
#[ignore = "needs the SDK venv: scripts/test.sh"]
fn the_openai_sdks_stream_helper_reads_the_mocks_events() {
    check("openai", "length", "stop");
}

#[test]
#[ignore = "needs the SDK venv: scripts/test.sh"]
fn the_anthropic_sdks_stream_helper_reads_the_mocks_events() {
    check("anthropic", "max_tokens", "end_turn");
}
