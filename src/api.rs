//! The library's face: what Rust code outside the command line (capsize's integration tests
//! and benches) may use. Read a scenario, run it in virtual or real time, read its record
//! (summary.json), the closed forms it is set beside, and draw a chart. Everything else in the
//! crate is private to the command line and may change; the scheduler an agent embeds is
//! [`crate::scheduler`].

/// Scenario files: read, validated, overridden.
pub mod scenario {
    pub use crate::engine::scenario::{load, parse, Arrivals, Count, Scenario, Stop, Target};
}

/// One run of a scenario, in virtual time ([`run`](sim::run)) or real time
/// ([`run_realtime`](sim::run_realtime)), and the mock a real-time run serves.
pub mod sim {
    pub use crate::engine::recorder::Recording;
    pub use crate::engine::sim::{
        mock_config, run, run_realtime, RealtimeOptions, SimError, SimOutcome,
    };
}

/// A run's record, summary.json, and the dotted paths of its metrics.
pub mod summary {
    pub use crate::engine::summary::slo::metric_paths;
    pub use crate::engine::summary::{ProviderCounts, Summary};
}

/// The closed-form rate-limit arithmetic (`capsize plan`) and the number formatter every
/// table uses.
pub mod plan {
    pub use crate::analysis::plan::{
        expected_max_ms, plan, plan_scenario, render, Advice, Ceiling, Demand, LimitKind,
        PlanInput, Row,
    };
    pub use crate::fmt::fmt_num;
}

/// Charts as capsize draws them: SVG text, or SVG and PNG files.
pub mod charts {
    pub use crate::output::report::charts::{
        svg, texts, write, Chart, Panel, Reference, Series, TimeUnit, XAxis,
    };
}
