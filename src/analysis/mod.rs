//! Analysis: what the numbers mean. [`plan`] is the closed-form rate-limit arithmetic a run is
//! set beside; `check` is the CI gate (`capsize check`), a run against its objectives and a
//! baseline; `compare` two runs or two sweeps side by side (`capsize compare`).

pub(crate) mod calibrate;
pub(crate) mod check;
pub(crate) mod compare;
pub mod plan;
pub(crate) mod sweep;
