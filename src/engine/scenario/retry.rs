//! `[scheduler.retry]`: the client's retry rules. A preset (`capsize`, `openai-python`,
//! `anthropic-python`) first, then every key given beside it overriding its setting.

use super::bounds;
use super::bounds::{bad, count as within, millis, Invalid};
use super::raw::RawRetry;
use crate::scheduler::{Jitter, RetryAfterMode, RetryPolicy, RetryPreset};

/// The client model `scheduler.retry.preset` names (capsize's own when none is given).
pub(super) fn preset(r: Option<&RawRetry>) -> Result<RetryPreset, Invalid> {
    match r.and_then(|r| r.preset.as_ref()) {
        Some(name) => {
            RetryPreset::from_name(name).map_err(|e| bad("scheduler.retry.preset", e.to_string()))
        }
        None => Ok(RetryPreset::Capsize),
    }
}

/// The validated policy (capsize's own when the table is absent).
pub(super) fn retry(r: Option<&RawRetry>) -> Result<RetryPolicy, Invalid> {
    let Some(r) = r else {
        return Ok(RetryPolicy::default());
    };
    // The preset first: every field given beside it overrides it.
    let mut p = preset(Some(r))?.policy();
    if let Some(n) = r.max_retries {
        let key = "scheduler.retry.max_retries";
        p.max_retries = within(key, u64::from(n), 0, bounds::MAX_RETRIES)? as u32;
    }
    if let Some(ms) = r.base_ms {
        p.base = millis("scheduler.retry.base_ms", ms)?;
    }
    if let Some(ms) = r.cap_ms {
        p.cap = millis("scheduler.retry.cap_ms", ms)?;
    }
    if p.cap < p.base {
        return Err(bad("scheduler.retry.cap_ms", "must be at least base_ms"));
    }
    if let Some(j) = &r.jitter {
        p.jitter = Jitter::from_name(j).ok_or_else(|| {
            bad(
                "scheduler.retry.jitter",
                format!("must be \"full\", \"equal\", \"none\" or \"reduce\", got {j:?}"),
            )
        })?;
    }
    if let Some(h) = r.honor_retry_after {
        p.honor_retry_after = h;
    }
    if let Some(m) = &r.retry_after {
        p.retry_after_mode = RetryAfterMode::from_name(m).ok_or_else(|| {
            bad(
                "scheduler.retry.retry_after",
                format!("must be \"at_least\" or \"instead\", got {m:?}"),
            )
        })?;
    }
    if let Some(ms) = r.retry_after_cap_ms {
        p.retry_after_cap = millis("scheduler.retry.retry_after_cap_ms", ms)?;
    }
    if let Some(ms) = r.retry_after_max_ms {
        p.retry_after_max = Some(millis("scheduler.retry.retry_after_max_ms", ms)?);
    }
    if let Some(b) = r.pause_limiter {
        p.pause_limiter = b;
    }
    if let Some(b) = r.retries_through_limiter {
        p.retries_through_limiter = b;
    }
    if let Some(b) = r.retries_jump_queue {
        p.retries_jump_queue = b;
    }
    if p.retries_jump_queue && !p.retries_through_limiter {
        return Err(bad(
            "scheduler.retry.retries_jump_queue",
            "jumps the client limiter's queue, so it needs retries_through_limiter = true",
        ));
    }
    if let Some(on) = &r.retry_on {
        if let Some(bad_code) = on.iter().find(|c| !(100..=599).contains(*c)) {
            return Err(bad(
                "scheduler.retry.retry_on",
                format!("HTTP statuses are from 100 to 599, got {bad_code}"),
            ));
        }
        p.retry_on = on.clone();
    }
    if let Some(t) = r.retry_timeouts {
        p.retry_timeouts = t;
    }
    if let Some(w) = r.retry_after_whole_seconds {
        p.retry_after_whole_seconds = w;
    }
    Ok(p)
}
