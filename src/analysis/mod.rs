//! Analysis: what the numbers mean. [`plan`] is the closed-form rate-limit arithmetic a run is
//! set beside; `check` is the CI gate (`capsize check`), a run against its objectives and a
//! baseline.

pub(crate) mod check;
pub mod plan;
pub(crate) mod sweep;
