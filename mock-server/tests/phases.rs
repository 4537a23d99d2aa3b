//! Incidents (`[[provider.phases]]`): each request is decided by the phase in force at its
//! arrival. Pinned request by request: a limit cut in half (what the window counted stays
//! counted), a token bucket cut (its balance shrinks with it), an outage of 503s and one of no
//! answer, a latency spike that slows even calls with a latency of their own, a 529 storm, the
//! counters of each phase, and bad phases refused naming the key.

use std::path::Path;
use std::time::Duration;

use capsize_mock::{ConfigError, Counters, Latency, Outcome, ProviderModel, RawProvider, Service};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn config(table: &str) -> Result<capsize_mock::ProviderConfig, ConfigError> {
    let table = format!("latency = {{ dist = \"constant\", ms = 100 }}\n{table}");
    let raw: RawProvider =
        toml::from_str(&table).map_err(|e| ConfigError::new("toml", e.to_string()))?;
    raw.build(Path::new("."))
}

fn model(table: &str) -> ProviderModel {
    ProviderModel::new(config(table).expect("the table builds"), 1)
}

/// One request a second for `n` seconds; each second's outcome.
fn every_second(m: &mut ProviderModel, n: u64) -> Vec<Outcome> {
    (0..n).map(|t| m.on_request(secs(t), 10).outcome).collect()
}

#[test]
fn a_limit_cut_in_half_counts_what_the_window_already_holds() {
    let mut m = model("rpm = 60\n[[phases]]\nfrom_s = 60\nto_s = 120\nrpm = 30\n");
    let out = every_second(&mut m, 60);
    assert!(
        out.iter().all(|o| *o == Outcome::Served),
        "60 in the first minute"
    );
    // At 60 s the sliding window holds the 59 requests of 1..59 s: 30 of them must leave
    // before one more fits under 30, the 30th (sent at 30 s) at 90 s.
    let d = m.on_request(secs(60), 10);
    assert_eq!(d.outcome, Outcome::RateLimited);
    assert_eq!(d.retry_after, Some(secs(30)));
    assert_eq!(
        d.requests.map(|u| u.limit),
        Some(30.0),
        "the headers say the new limit"
    );
    let during: Vec<Outcome> = (61..120)
        .map(|t| m.on_request(secs(t), 10).outcome)
        .collect();
    assert!(
        during[..29].iter().all(|o| *o == Outcome::RateLimited),
        "61..89 s refused"
    );
    assert!(
        during[29..].iter().all(|o| *o == Outcome::Served),
        "90..119 s served"
    );
    let d = m.on_request(secs(120), 10);
    assert_eq!(d.outcome, Outcome::Served);
    assert_eq!(
        d.requests.map(|u| u.limit),
        Some(60.0),
        "the provider's own limit is back"
    );
    assert_eq!(
        m.phase_counters(),
        &[Counters {
            received: 60,
            served: 30,
            rate_limited: 30,
            errored: 0,
            timed_out: 0,
            tokens_charged: 300,
            billed: Default::default(),
        }]
    );
    assert_eq!(m.counters().received, 121);
    assert_eq!(m.counters().served, 91);
}

#[test]
fn a_bucket_cut_keeps_no_more_than_its_new_size() {
    let mut m = model("rpm = 60\nwindow = \"token_bucket\"\n[[phases]]\nat_s = 1\nrpm = 6\n");
    // A full bucket of 60 at 1 s, cut to 6: six requests go, the seventh waits 10 s (6 a minute).
    let out: Vec<_> = (0..7).map(|_| m.on_request(secs(1), 1)).collect();
    assert!(out[..6].iter().all(|d| d.outcome == Outcome::Served));
    assert_eq!(out[6].outcome, Outcome::RateLimited);
    assert_eq!(out[6].retry_after, Some(secs(10)));
}

#[test]
fn an_outage_refuses_every_request_of_its_phase_uncharged() {
    let mut m = model("rpm = 1000\n[[phases]]\nfrom_s = 10\nto_s = 20\noutage = \"503\"\n");
    let ds: Vec<_> = (0..30).map(|t| m.on_request(secs(t), 10)).collect();
    for (t, d) in ds.iter().enumerate() {
        if (10..20).contains(&t) {
            assert_eq!(d.outcome, Outcome::Error(503), "at {t} s");
            assert_eq!((d.charged, d.retry_after), (false, None), "at {t} s");
            assert_eq!(d.latency, Some(Duration::ZERO), "refused at once");
        } else {
            assert_eq!(d.outcome, Outcome::Served, "at {t} s");
        }
    }
    let c = m.counters();
    assert_eq!((c.served, c.errored, c.tokens_charged), (20, 10, 200));
}

#[test]
fn an_outage_of_no_answer_leaves_every_request_to_the_clients_timeout() {
    let mut m = model("[[phases]]\nat_s = 5\noutage = \"no_answer\"\n");
    let out = every_second(&mut m, 10);
    assert_eq!(out.iter().filter(|o| **o == Outcome::Served).count(), 5);
    let d = m.on_request(secs(10), 10);
    assert_eq!(
        (d.outcome, d.latency, d.charged),
        (Outcome::Timeout, None, false)
    );
    assert_eq!(m.counters().timed_out, 6);
}

#[test]
fn a_latency_spike_slows_even_calls_with_a_latency_of_their_own() {
    let mut m =
        model("[[phases]]\nfrom_s = 10\nto_s = 20\nlatency = { dist = \"constant\", ms = 5000 }\n");
    let own = Latency::Constant(250.0);
    let asked = Service::latency(Some(&own));
    let at = |m: &mut ProviderModel, t: u64| m.on_request_with(secs(t), 1, asked).latency;
    assert_eq!(at(&mut m, 9), Some(Duration::from_millis(250)));
    assert_eq!(at(&mut m, 10), Some(secs(5)));
    assert_eq!(m.on_request(secs(11), 1).latency, Some(secs(5)));
    assert_eq!(at(&mut m, 20), Some(Duration::from_millis(250)));
}

#[test]
fn a_529_storm_fails_what_it_charges() {
    let mut m = model(
        "[[phases]]\nat_s = 0\nerror_rate = 1.0\nerror_mix = { \"529\" = 1 }\n[[phases]]\nat_s = 60\n",
    );
    let out = every_second(&mut m, 120);
    assert!(out[..60].iter().all(|o| *o == Outcome::Error(529)));
    assert!(
        out[60..].iter().all(|o| *o == Outcome::Served),
        "an empty phase is the provider"
    );
    assert_eq!(m.phase_counters()[0].errored, 60);
    assert_eq!(
        m.phase_counters()[0].tokens_charged,
        600,
        "a 529 is charged"
    );
    assert_eq!(m.phase_counters()[1].served, 60);
}

#[test]
fn a_phases_error_rate_holds_even_for_calls_with_their_own() {
    let mut m = model(
        "[[phases]]\nfrom_s = 10\nto_s = 20\nerror_rate = 1.0\nerror_mix = { \"500\" = 1 }\n",
    );
    let asked = Service {
        latency: None,
        error_rate: Some(0.0),
        ..Service::default()
    };
    let at = |m: &mut ProviderModel, t: u64| m.on_request_with(secs(t), 1, asked).outcome;
    assert_eq!(at(&mut m, 9), Outcome::Served);
    assert_eq!(at(&mut m, 10), Outcome::Error(500));
    assert_eq!(at(&mut m, 20), Outcome::Served);
}

#[test]
fn a_bucket_refills_at_the_old_rate_only_until_the_phase_began() {
    // 60 a minute, emptied at 0 s; the cut to 6 begins at 30 s, the first request after it
    // comes at 90 s. Until 30 s the bucket refills 30; from 30 s, at most 6 (the cut's size).
    let mut m = model(
        "rpm = 60\nwindow = \"token_bucket\"\n[[phases]]\nfrom_s = 30\nto_s = 100\nrpm = 6\n",
    );
    for _ in 0..60 {
        assert_eq!(m.on_request(secs(0), 1).outcome, Outcome::Served);
    }
    let burst = |m: &mut ProviderModel, t: u64, n: usize| {
        (0..n)
            .filter(|_| m.on_request(secs(t), 1).outcome == Outcome::Served)
            .count()
    };
    assert_eq!(burst(&mut m, 90, 10), 6);
    // Empty at 90 s: 1 more at 6 a minute until the cut ends at 100 s, then 10 at 60 a
    // minute by 110 s (without the phase's end, 2 at the cut's rate).
    assert_eq!(burst(&mut m, 110, 20), 11);
}

#[test]
fn bad_phases_are_refused_naming_the_key() {
    let err = |t: &str| config(t).expect_err(t).to_string();
    let cases = [
        ("[[phases]]\nrpm = 5\n", "provider.phases[0]: needs a start"),
        (
            "[[phases]]\nat_s = 1\nfrom_s = 2\nto_s = 3\n",
            "provider.phases[0]: has both",
        ),
        (
            "[[phases]]\nfrom_s = 10\n",
            "provider.phases[0].to_s: is missing",
        ),
        (
            "[[phases]]\nat_s = 10\nto_s = 20\n",
            "provider.phases[0].to_s: goes with from_s",
        ),
        (
            "[[phases]]\nfrom_s = 10\nto_s = 10\n",
            "provider.phases[0].to_s: must be after",
        ),
        (
            "[[phases]]\nat_s = -1\n",
            "provider.phases[0].at_s: must be seconds",
        ),
        (
            "[[phases]]\nfrom_s = 10\nto_s = 30\n[[phases]]\nat_s = 20\n",
            "provider.phases[1]: starts at 20 s, before phases[0] ends (30 s)",
        ),
        (
            "[[phases]]\nat_s = 20\n[[phases]]\nat_s = 10\n",
            "provider.phases[1]: starts at 10 s, before phases[0] starts (20 s)",
        ),
        (
            "[[phases]]\nat_s = 1\nrpm = 0.5\n",
            "provider.phases[0].rpm: must be a number",
        ),
        (
            "[[phases]]\nat_s = 1\nerror_rate = 2\n",
            "provider.phases[0].error_rate: must be in",
        ),
    ];
    for (table, want) in cases {
        let got = err(table);
        assert!(got.starts_with(want), "{table:?}: {got}");
    }
    let unknown = err("[[phases]]\nat_s = 1\nwindow = \"fixed\"\n");
    assert!(unknown.contains("unknown field `window`"), "{unknown}");
    let outage = err("[[phases]]\nat_s = 1\noutage = \"500\"\n");
    assert!(outage.contains("unknown variant `500`"), "{outage}");
}
