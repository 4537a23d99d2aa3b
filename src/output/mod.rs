//! Outputs: what a command writes. [`report`] turns one run into summary.json, HDR histograms
//! and charts; `sweep` runs a grid of points and writes its CSV, charts and capacity report;
//! `check` writes the CI gate's checks
//! (a table, Markdown, JUnit); `compare` two runs or sweeps side by side (a table, JSON); `article` and `demo` reproduce the source article's figures; [`exec`] writes what the mock
//! saw of someone else's agent; `files` writes a command's files all together or not at all;
//! [`timeseries`] writes a run's per-second series as CSV.

pub(crate) mod article;
pub(crate) mod calibrate;
pub(crate) mod check;
pub(crate) mod compare;
pub(crate) mod demo;
pub mod exec;
pub(crate) mod files;
pub mod report;
pub(crate) mod sweep;
pub mod timeseries;
