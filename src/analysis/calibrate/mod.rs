//! Calibration (`capsize calibrate`): a scenario measured from what the user's own system was
//! seen doing, not guessed. Spans stream into a [`Collector`] (bounded memory: samples of at
//! most 20,000 values, open traces only); [`calibrate`] fits each quantity (the family by its
//! Kolmogorov–Smirnov distance, [`fit`]), the query's shape and the arrival process; and
//! [`check`] runs the calibrated scenario under the observed conditions and sets its
//! predictions beside the observations. Where the provider's record and the agent's spans are
//! both read, [`client::fit`] fits the client's own time from the difference.

pub mod check;
pub mod client;
pub mod collect;
pub mod fit;
pub mod fold;
pub mod model;
pub mod sample;
pub mod seen;
pub mod traces;
mod tree;

pub use check::{check, FitCheck};
pub use client::ClientFit;
pub use collect::{Collector, Shape, View};
pub use model::{calibrate, Arrival, Calibration, Fitted, ProviderFit};
