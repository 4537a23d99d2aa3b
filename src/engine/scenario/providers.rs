//! The providers of a scenario and where each kind of call goes: `[provider]` (one, named
//! `provider`) or `[providers.NAME]` (several), `workload.provider` (where tool calls go),
//! `workload.model_turn.provider`, and `workload.tools` (kinds of tool call, each with its own
//! provider, latency, error rate and tokens, drawn by weight).

use std::collections::BTreeMap;
use std::path::Path;

use capsize_mock::RawProvider;

use super::bounds::{self, bad, Invalid};
use super::raw::{RawScenario, RawTool, RawWorkload};
use super::{NamedProvider, Target, ToolClass};

/// The name a call gives to go to no provider: a local tool, with no rate limit.
pub const NONE: &str = "none";

/// The name of the one provider of the `[provider]` form.
pub const ONE: &str = "provider";

/// The longest name of a provider or a tool.
pub const MAX_NAME: usize = 64;

/// Whether `c` may be in the name of a provider or a tool.
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether `name` can name a provider or a tool: it appears in summary.json keys, dotted key
/// paths and URL paths.
pub fn good_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME && name.chars().all(name_char)
}

/// `said` made a name by the rule of [`good_name`] (empty only if `said` is): each character
/// outside it becomes `_`, and the first [`MAX_NAME`] are kept. A name already good is kept
/// as it is. For names read from someone else's records (calibrate's providers and tools).
pub fn fit_name(said: &str) -> String {
    said.chars()
        .take(MAX_NAME)
        .map(|c| if name_char(c) { c } else { '_' })
        .collect()
}

fn name_rule(what: &str, name: &str) -> String {
    format!("a {what} name is 1 to {MAX_NAME} letters, digits, '_' or '-', got {name:?}")
}

/// The scenario's providers, in name order, and whether they are named (`[providers.NAME]`).
pub(super) fn providers(
    raw: &RawScenario,
    base: &Path,
) -> Result<(Vec<NamedProvider>, bool), Invalid> {
    match (&raw.provider, &raw.providers) {
        (Some(_), Some(_)) => Err(bad(
            "providers",
            "give one [provider] table or [providers.NAME] tables, not both",
        )),
        (None, None) => Err(bad(
            "provider",
            "missing: a [provider] table, or [providers.NAME] tables for several",
        )),
        (Some(one), None) => Ok((
            vec![NamedProvider {
                name: ONE.into(),
                config: one.build(base).map_err(Invalid::from)?,
            }],
            false,
        )),
        (None, Some(named)) => Ok((several(named, base)?, true)),
    }
}

fn several(
    named: &BTreeMap<String, RawProvider>,
    base: &Path,
) -> Result<Vec<NamedProvider>, Invalid> {
    if named.is_empty() {
        return Err(bad("providers", "names no provider: add [providers.NAME]"));
    }
    named
        .iter()
        .map(|(name, table)| {
            let key = format!("providers.{name}");
            if !good_name(name) || name == NONE {
                let mut message = name_rule("provider", name);
                if name == NONE {
                    message = format!("{NONE:?} is taken: it sends a call to no provider");
                }
                return Err(bad(&key, message));
            }
            // The model names its keys `provider.*`: name this provider's table instead.
            let config = table.build(base).map_err(|e| {
                let rest = e.key.strip_prefix("provider").unwrap_or(&e.key);
                bad(&format!("{key}{rest}"), e.message)
            })?;
            Ok(NamedProvider {
                name: name.clone(),
                config,
            })
        })
        .collect()
}

/// Where the calls of `key` go: the provider `name` names, else `default`; an error names
/// `key` when neither says.
fn target(
    key: &str,
    name: Option<&str>,
    default: Option<Target>,
    providers: &[NamedProvider],
) -> Result<Target, Invalid> {
    let Some(name) = name else {
        return default.ok_or_else(|| {
            let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
            bad(
                key,
                format!(
                    "is required with several providers (or set workload.provider): one of {}, or {NONE:?}",
                    names.join(", ")
                ),
            )
        });
    };
    if name == NONE {
        return Ok(Target::Unlimited);
    }
    match providers.iter().position(|p| p.name == name) {
        Some(i) => Ok(Target::Provider(i)),
        None => {
            let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
            Err(bad(
                key,
                format!(
                    "no provider is named {name:?}: the scenario has {}, or {NONE:?} for none",
                    names.join(", ")
                ),
            ))
        }
    }
}

/// Where each kind of call of `w` goes: (plain tool calls, model turns, each tool class).
/// A kind that never happens is given `Unlimited` without being asked about.
pub(super) fn targets(
    w: &RawWorkload,
    providers: &[NamedProvider],
    base: &Path,
) -> Result<(Target, Target, Vec<ToolClass>), Invalid> {
    let only = (providers.len() == 1).then_some(Target::Provider(0));
    let default = match &w.provider {
        Some(name) => Some(target("workload.provider", Some(name), None, providers)?),
        None => only,
    };
    let tools = match &w.tools {
        None => Vec::new(),
        Some(list) => tools(list, default, providers, base)?,
    };
    let tool_target = match tools.is_empty() {
        true => target("workload.provider", None, default, providers)?,
        false => default.unwrap_or(Target::Unlimited),
    };
    let turn_provider = w.model_turn.as_ref().and_then(|t| t.provider.as_deref());
    let models =
        w.model_turn.is_some() || w.subagents.as_ref().is_some_and(|s| s.synthesis_tokens > 0);
    let model_target = match models {
        true => target(
            "workload.model_turn.provider",
            turn_provider,
            default,
            providers,
        )?,
        false => Target::Unlimited,
    };
    // A generating provider times its model calls itself: a latency of their own would be
    // ignored, so it is refused rather than silently dropped.
    if let (Target::Provider(i), Some(turn)) = (model_target, &w.model_turn) {
        let generates = providers[i].config.generation.is_some();
        if generates && turn.latency.is_some() {
            return Err(bad(
                "workload.model_turn.latency",
                format!(
                    "the model turns' provider {:?} generates its answers (output_tokens, \
                     ttft, tpot): a model turn lasts ttft + (output tokens - 1) x tpot; remove \
                     this latency, or those keys",
                    providers[i].name
                ),
            ));
        }
    }
    Ok((tool_target, model_target, tools))
}

fn tools(
    list: &[RawTool],
    default: Option<Target>,
    providers: &[NamedProvider],
    base: &Path,
) -> Result<Vec<ToolClass>, Invalid> {
    if list.is_empty() {
        return Err(bad(
            "workload.tools",
            "is empty: list at least one tool, or leave it out",
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let key = |field: &str| format!("workload.tools[{i}].{field}");
            if !good_name(&t.name) {
                return Err(bad(&key("name"), name_rule("tool", &t.name)));
            }
            if seen.contains(&t.name.as_str()) {
                return Err(bad(&key("name"), format!("{:?} is listed twice", t.name)));
            }
            seen.push(&t.name);
            let weight = t.weight.unwrap_or(1.0);
            if !(weight.is_finite() && weight > 0.0) {
                return Err(bad(&key("weight"), format!("must be a number above 0, got {weight}")));
            }
            let target = target(&key("provider"), t.provider.as_deref(), default, providers)?;
            let latency = t
                .latency
                .as_ref()
                .map(|l| l.build(&key("latency"), base).map_err(Invalid::from))
                .transpose()?;
            if target == Target::Unlimited && latency.is_none() {
                return Err(bad(
                    &key("latency"),
                    format!("is required for a tool with provider = {NONE:?}: no provider serves it"),
                ));
            }
            let timeout_rate = match target {
                Target::Provider(p) => providers[p].config.timeout_rate,
                Target::Unlimited => 0.0,
            };
            let error_rate = t
                .error_rate
                .map(|r| {
                    if (0.0..=1.0).contains(&r) && r + timeout_rate <= 1.0 {
                        Ok(r)
                    } else {
                        Err(bad(
                            &key("error_rate"),
                            format!("must be in [0, 1] and, with its provider's timeout_rate ({timeout_rate}), at most 1; got {r}"),
                        ))
                    }
                })
                .transpose()?;
            let tokens = t
                .tokens
                .as_ref()
                .map(|c| super::validate::count(&key("tokens"), c, 0, bounds::MAX_TOKENS))
                .transpose()?;
            Ok(ToolClass {
                name: t.name.clone(),
                weight,
                target,
                latency,
                error_rate,
                tokens,
            })
        })
        .collect()
}

/// Refuses a phase that starts when the run is over: at or after `workload.duration_s` (no
/// query starts after it) or `workload.stop_at_s`. A run that stops after a number of queries
/// has no end known in advance: its summary counts what each phase saw.
pub(super) fn phases_in_run(
    w: &super::Workload,
    providers: &[NamedProvider],
    named: bool,
) -> Result<(), Invalid> {
    let duration = match w.stop {
        super::Stop::Duration(d) => Some((d, "workload.duration_s")),
        super::Stop::Queries(_) => None,
    };
    let stop_at = w.stop_at.map(|d| (d, "workload.stop_at_s"));
    let end = match (duration, stop_at) {
        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
        (a, b) => a.or(b),
    };
    let Some((end, end_key)) = end else {
        return Ok(());
    };
    for p in providers {
        let table = if named {
            format!("providers.{}", p.name)
        } else {
            ONE.to_string()
        };
        for (i, phase) in p.config.phases.iter().enumerate() {
            if phase.from >= end {
                return Err(bad(
                    &format!("{table}.phases[{i}]"),
                    format!(
                        "starts at {} s, when the run is over ({end_key} = {} s)",
                        phase.from.as_secs_f64(),
                        end.as_secs_f64()
                    ),
                ));
            }
        }
    }
    Ok(())
}
