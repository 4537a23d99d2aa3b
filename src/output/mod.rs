//! Outputs: what a command writes. [`report`] turns one run into summary.json, HDR histograms
//! and charts; `sweep` runs a grid of points and writes its CSV, charts and capacity report;
//! `article` and `demo` reproduce the source article's figures; `files` writes a
//! command's files all together or not at all.

pub(crate) mod article;
pub(crate) mod demo;
pub(crate) mod files;
pub mod report;
pub(crate) mod sweep;
