//! What does not grow with the input's names: the tools past the [`MAX_TOOLS`] most called
//! are fitted as one entry, [`FOLDED_TOOLS`], and the models not in the scenario past
//! [`MAX_OTHERS`] are listed as one, so the scenario, its charts and the reports hold a
//! bounded number of each however many names an input holds.

use crate::engine::observed::Tally;

use super::fit::Kind;
use super::model::{Fitted, ToolFit};
use super::sample::Sample;
use super::seen::{seed, ToolSeen};

/// The most tools fitted one by one: the others (fewest calls first) are folded into one
/// entry, [`FOLDED_TOOLS`], so that what is written and charted does not grow with the
/// input's names.
pub const MAX_TOOLS: usize = 50;
/// The name of the entry the tools past [`MAX_TOOLS`] are folded into.
pub const FOLDED_TOOLS: &str = "other_tools";
/// The most models not in the scenario listed one by one; the others are listed as one.
pub const MAX_OTHERS: usize = 50;

/// What the folded tools' entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Folded {
    /// Tool names folded.
    pub names: u64,
    /// Their calls.
    pub calls: u64,
    /// Whether calls to names first seen past the [`super::seen::MAX_NAMES`]th are among
    /// them (those names are not counted in `names`).
    pub more_names: bool,
}

/// Each tool's fit, the most called first: [`MAX_TOOLS`] of them, and the others (with the
/// calls to names past the cap, `beyond`) folded into one entry, counted in `skipped`.
pub(super) fn tools(
    seen: &[ToolSeen],
    beyond: Option<&ToolSeen>,
    skipped: &mut Tally,
) -> Vec<ToolFit> {
    // The most called, kept in the order first seen.
    let mut order: Vec<usize> = (0..seen.len()).collect();
    order.sort_by(|&a, &b| {
        (seen[b].calls.cmp(&seen[a].calls)).then_with(|| seen[a].name.cmp(&seen[b].name))
    });
    let mut keep = vec![false; seen.len()];
    for &i in order.iter().take(MAX_TOOLS) {
        keep[i] = true;
    }
    let kept: Vec<&ToolSeen> = seen
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(t, _)| t)
        .collect();
    let rest: Vec<&ToolSeen> = seen
        .iter()
        .zip(&keep)
        .filter(|(_, k)| !**k)
        .map(|(t, _)| t)
        .collect();
    let fit = |t: &ToolSeen, name: String, folded| ToolFit {
        name,
        provider: t.provider.clone(),
        calls: t.calls,
        errors: t.errors,
        latency: Fitted::of(&t.latency, Kind::Duration),
        folded,
    };
    let mut out: Vec<ToolFit> = kept.iter().map(|t| fit(t, t.name.clone(), None)).collect();
    let mut parts: Vec<&ToolSeen> = rest.clone();
    parts.extend(beyond);
    if parts.is_empty() {
        return out;
    }
    let samples: Vec<&Sample> = parts.iter().map(|t| &t.latency).collect();
    let mut all = ToolSeen::new(String::new(), None);
    all.latency = Sample::fold(&samples, seed("tool", FOLDED_TOOLS));
    all.calls = parts.iter().map(|t| t.calls).sum();
    all.errors = parts.iter().map(|t| t.errors).sum();
    let folded = Folded {
        names: rest.len() as u64,
        calls: all.calls,
        more_names: beyond.is_some(),
    };
    skipped.add_n(
        "a call to a tool past the 50 with the most calls: fitted with the others in one entry, other_tools",
        folded.calls,
        || {
            let more = if folded.more_names { " and more" } else { "" };
            format!("{} tool names{more}", folded.names)
        },
    );
    // A name of its own, should a tool already be called so.
    let mut name = FOLDED_TOOLS.to_string();
    let mut k = 1;
    while out.iter().any(|t| t.name == name) {
        k += 1;
        name = format!("{FOLDED_TOOLS}_{k}");
    }
    out.push(fit(&all, name, Some(folded)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, calls: u64, ms: f64) -> ToolSeen {
        let mut t = ToolSeen::new(name.into(), None);
        t.calls = calls;
        for _ in 0..calls {
            t.latency.add(ms);
        }
        t
    }

    #[test]
    fn the_tools_past_the_most_called_fifty_are_folded_into_one_entry() {
        // H2: 2,000 names of one call each, and 50 called more: 51 entries, not 2,050.
        let mut seen: Vec<ToolSeen> = (0..2_000)
            .map(|i| tool(&format!("t{i}"), 1, 100.0))
            .collect();
        seen.extend((0..50).map(|i| tool(&format!("hot{i}"), 10, 500.0)));
        // A tool already named as the folded entry would be.
        seen[49] = tool(FOLDED_TOOLS, 20, 500.0);
        let mut skipped = Tally::default();
        let fits = tools(&seen, None, &mut skipped);
        assert_eq!(fits.len(), MAX_TOOLS + 1);
        assert_eq!(fits[0].name, FOLDED_TOOLS, "kept in the order first seen");
        let last = fits.last().unwrap();
        assert_eq!(last.name, "other_tools_2");
        assert_eq!(
            last.folded,
            Some(Folded {
                names: 2_000 - 1 + 1,
                calls: 2_000 - 1 + 10,
                more_names: false
            })
        );
        assert_eq!(last.calls, 2_009);
        assert_eq!(last.latency.as_ref().map(|f| f.observed.n), Some(2_009));
        assert_eq!(
            skipped.iter().collect::<Vec<_>>(),
            [(
                "a call to a tool past the 50 with the most calls: fitted with the others in one entry, other_tools",
                2_009,
                "2000 tool names"
            )]
        );
        // Fifty or fewer, and none past the names told apart: each its own.
        let fits = tools(&seen[..50], None, &mut Tally::default());
        assert!(fits.len() == 50 && fits.iter().all(|t| t.folded.is_none()));
        // Calls to names past the cap are folded even when few names are told apart.
        let beyond = tool("", 7, 300.0);
        let fits = tools(&seen[..2], Some(&beyond), &mut Tally::default());
        assert_eq!(fits.len(), 3);
        assert_eq!(
            fits[2].folded,
            Some(Folded {
                names: 0,
                calls: 7,
                more_names: true
            })
        );
    }
}
