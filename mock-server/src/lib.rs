//! capsize-mock: the provider side of capsize.
//!
//! This crate will own the clockless provider model (latency distributions, RPM/TPM limits,
//! 429s with Retry-After, rate-limit headers, errors) and its wiremock HTTP face. It is empty
//! until the provider-model issue lands; the root crate depends on it so the workspace shape is
//! fixed from the start.
