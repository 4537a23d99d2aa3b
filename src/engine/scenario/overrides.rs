//! `--set key.path=value`: each argument read (its key's segments and a TOML value), placed in
//! the scenario's table, and the table read again after each one, so that every refusal names
//! the `--set` and the key it could not place. Every shape of argument, of value and of
//! scenario ends in a scenario or in one of those refusals.

use super::raw::RawScenario;

/// The dotted key a `--set key=value` argument names (`None`: no `=`; parsing reports that).
pub fn set_key(set: &str) -> Option<&str> {
    set.split_once('=').map(|(k, _)| k.trim())
}

/// Whether the dotted `key` is `prefix` or lies under it (`scheduler.retry.max_retries` lies
/// under `scheduler.retry`, not under `scheduler.ret`): so a `--set` of `prefix` decides it.
pub fn key_within(key: &str, prefix: &str) -> bool {
    key == prefix
        || key
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// A `--set key.path=value` argument as its key's segments and its TOML value (a value that is
/// not TOML is a string, unless it holds an integer TOML cannot: see [`toml_value`]).
pub fn parse_override(set: &str) -> Result<(Vec<String>, toml::Value), String> {
    let (path, value) = set
        .split_once('=')
        .ok_or_else(|| format!("--set {set:?}: expected key.path=value"))?;
    let path: Vec<String> = path.trim().split('.').map(str::to_string).collect();
    if path.iter().any(String::is_empty) {
        return Err(format!("--set {set:?}: empty key segment"));
    }
    let value = value.trim();
    let parsed = toml_value(&path.join("."), value)
        .map_err(|m| format!("--set {set}: {m}"))?
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    Ok((path, parsed))
}

/// `text` read as one TOML value for `key`: `Ok(None)` when it is not TOML (a caller takes it
/// as a word), `Err` naming the key when it holds an integer outside TOML's signed 64 bits,
/// which would otherwise become a string and be refused as one ("invalid type: string").
pub fn toml_value(key: &str, text: &str) -> Result<Option<toml::Value>, String> {
    if let Ok(mut t) = toml::from_str::<toml::Table>(&format!("v = {text}")) {
        return Ok(t.remove("v"));
    }
    match wide_integer(text) {
        Some((inner, n)) => {
            let at = if inner.is_empty() {
                key.to_string()
            } else {
                format!("{key}.{}", inner.join("."))
            };
            Err(format!(
                "{at}: {n} is out of range (at most {}, TOML's largest integer)",
                i64::MAX
            ))
        }
        None => Ok(None),
    }
}

/// The first integer in TOML value `text` that does not fit an `i64`, outside strings: the
/// keys of the inline tables it lies in, and its digits.
fn wide_integer(text: &str) -> Option<(Vec<String>, String)> {
    let chars: Vec<char> = text.chars().collect();
    // The key each open inline table is at (`None`: an array's entry, or not yet known).
    let mut keys: Vec<Option<String>> = Vec::new();
    let mut word = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => {
                i = string_end(&chars, i);
                continue;
            }
            '{' | '[' => keys.push(None),
            '}' | ']' => {
                keys.pop();
            }
            '=' => {
                if let Some(top) = keys.last_mut() {
                    *top = Some(word.trim().trim_matches(['"', '\'']).to_string());
                }
            }
            _ if c.is_ascii_digit()
                || "+-".contains(c) && chars.get(i + 1).is_some_and(char::is_ascii_digit) =>
            {
                let end = (i..chars.len())
                    .find(|&j| !(chars[j].is_ascii_alphanumeric() || "_+-.:".contains(chars[j])))
                    .unwrap_or(chars.len());
                let token: String = chars[i..end].iter().collect();
                if out_of_range(&token) {
                    return Some((keys.iter().flatten().cloned().collect(), token));
                }
                i = end;
                continue;
            }
            _ => {}
        }
        if matches!(c, ',' | '{' | '[' | '}' | ']' | '=') {
            word.clear();
        } else {
            word.push(c);
        }
        i += 1;
    }
    None
}

/// The index just past the string that opens at `chars[start]` (a quote), escapes skipped.
fn string_end(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote == '"' => i += 1,
            c if c == quote => return i + 1,
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

/// Whether `token` is a TOML integer (decimal, `0x`, `0o` or `0b`; `_` between digits) too
/// large for an `i64`.
fn out_of_range(token: &str) -> bool {
    let (negative, rest) = match token.as_bytes().first() {
        Some(b'-') => (true, &token[1..]),
        Some(b'+') => (false, &token[1..]),
        _ => (false, token),
    };
    let (radix, digits) = match rest.get(..2) {
        Some("0x") => (16, &rest[2..]),
        Some("0o") => (8, &rest[2..]),
        Some("0b") => (2, &rest[2..]),
        _ => (10, rest),
    };
    let digits = digits.replace('_', "");
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return false;
    }
    let Ok(n) = i128::from_str_radix(&digits, radix) else {
        return true; // wider than an i128: wider than an i64
    };
    let n = if negative { -n } else { n };
    i64::try_from(n).is_err()
}

/// Puts `value` at `path` in `table`, making the tables on the way; `Err` names a segment that
/// is not a table.
pub(super) fn apply_override(
    table: &mut toml::Table,
    path: &[String],
    value: toml::Value,
) -> Result<(), String> {
    let (last, parents) = path.split_last().ok_or("empty key")?;
    let mut t = table;
    for (i, p) in parents.iter().enumerate() {
        let entry = t
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let at = parents[..=i].join(".");
        let next = &path[i + 1];
        t = match entry {
            toml::Value::Table(t) => t,
            toml::Value::Array(_) => {
                return Err(format!(
                    "{at} is a list, and a --set cannot reach into one (no {at}.{next}): give the whole list, {at}=[...]"
                ))
            }
            _ => return Err(format!("{at} is not a table, so it has no key {next}")),
        };
    }
    t.insert(last.clone(), value);
    Ok(())
}

/// Each `--set`'s dotted key, with its argument.
pub(super) type SetKeys<'a> = Vec<(String, &'a String)>;

/// Why `--set` arguments give no scenario.
#[derive(Debug)]
pub(super) enum Refused {
    /// A `--set` at fault: the key it names (none when it has no key) and why, one line.
    Set(Option<String>, String),
    /// The file itself lacks a key, which no `--set` gave: the deserialiser's words for it.
    StillMissing(String),
}

/// The scenario of the file's `table` with `sets` applied in order, and each `--set`'s dotted
/// key with its argument; `file_missing` says whether the file alone lacks a key.
pub(super) fn apply(
    mut table: toml::Table,
    sets: &[String],
    file_missing: bool,
) -> Result<(RawScenario, SetKeys<'_>), Refused> {
    let original = table.clone();
    let mut keys = Vec::new();
    // Each --set's path, and whether it gave a whole table.
    let mut given: Vec<(Vec<String>, bool)> = Vec::new();
    let mut missing = Ok(None);
    for set in sets {
        let (path, value) = parse_override(set).map_err(|m| Refused::Set(None, m))?;
        let dotted = path.join(".");
        let whole = value.is_table();
        apply_override(&mut table, &path, value)
            .map_err(|m| Refused::Set(Some(dotted.clone()), format!("--set {set}: {m}")))?;
        // Read after each one, so an error names the --set that caused it (a key still
        // missing may come from a later one).
        missing = match toml::Value::Table(table.clone()).try_into::<RawScenario>() {
            Ok(r) => Ok(Some(r)),
            Err(e) if is_missing(e.message()) => Err(one_line(e.message())),
            Err(e) => {
                let m = format!("--set {set}: {}", one_line(e.message()));
                return Err(Refused::Set(Some(dotted), m));
            }
        };
        keys.push((dotted, set));
        given.push((path, whole));
    }
    let now = match missing {
        Ok(Some(raw)) => return Ok((raw, keys)),
        Ok(None) => return Err(Refused::StillMissing("no --set given".into())),
        Err(now) => now,
    };
    // The --set that left a table without the key: one that made a table the file does not
    // have, or gave one whole. None did: the file lacks it.
    let field = now
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next());
    let culprit = field.and_then(|field| {
        given.iter().zip(&keys).find_map(|((path, whole), (dotted, set))| {
            let made = (1..=path.len()).find(|&n| lookup(&original, &path[..n]).is_none());
            let ends = made.unwrap_or(path.len())..=path.len();
            let lacks = ends
                .filter(|&n| n < path.len() || *whole)
                .any(|n| lookup(&table, &path[..n]).is_some_and(|t| !t.contains_key(field)));
            lacks.then(|| {
                let why = match made {
                    Some(_) => placement(&original, path, &now),
                    None => format!(
                        "{now}: a table given to --set replaces [{dotted}] whole; set one key with {dotted}.KEY=VALUE"
                    ),
                };
                Refused::Set(Some(dotted.clone()), format!("--set {set}: {why}"))
            })
        })
    });
    Err(match (culprit, keys.last()) {
        (Some(refused), _) => refused,
        (None, Some((dotted, set))) if !file_missing => {
            Refused::Set(Some(dotted.clone()), format!("--set {set}: {now}"))
        }
        (None, _) => Refused::StillMissing(now),
    })
}

/// The table at `path` in `table`, if there is one.
fn lookup<'t>(table: &'t toml::Table, path: &[String]) -> Option<&'t toml::Table> {
    path.iter()
        .try_fold(table, |t, seg| t.get(seg).and_then(toml::Value::as_table))
}

/// Why a `--set` of `path` left the scenario lacking a key (`missing`, the deserialiser's
/// words): the table it made that the scenario does not have, and what the scenario has
/// instead (`[provider]` beside `[providers.NAME]`).
fn placement(original: &toml::Table, path: &[String], missing: &str) -> String {
    let has = |k: &str| original.contains_key(k);
    // `table` and the rest of the path from segment `from`.
    let under = |table: &str, from: usize| match path.get(from..) {
        Some(rest) if !rest.is_empty() => format!("{table}.{}", rest.join(".")),
        _ => table.to_string(),
    };
    match path.first().map(String::as_str) {
        Some("provider") if has("providers") && !has("provider") => {
            let names: Vec<&String> = original
                .get("providers")
                .and_then(toml::Value::as_table)
                .map(|t| t.keys().collect())
                .unwrap_or_default();
            let first = names.first().map_or("NAME", |n| n.as_str());
            let listed: Vec<String> = names.iter().map(|n| format!("[providers.{n}]")).collect();
            format!(
                "this scenario has no [provider]: its providers are {}; set {} (or another provider's)",
                listed.join(", "),
                under(&format!("providers.{first}"), 1)
            )
        }
        Some("providers") if has("provider") && !has("providers") => format!(
            "this scenario has no [providers.NAME] tables: its one provider is [provider]; set {}",
            under("provider", 2)
        ),
        _ => {
            // The first table on the path the file does not have, made by this --set.
            let mut t = original;
            for (i, seg) in path.iter().enumerate().take(path.len().saturating_sub(1)) {
                match t.get(seg).and_then(toml::Value::as_table) {
                    Some(inner) => t = inner,
                    None => {
                        return format!(
                            "the scenario has no [{}], and the one this --set makes lacks a key ({missing})",
                            path[..=i].join(".")
                        )
                    }
                }
            }
            missing.to_string()
        }
    }
}

/// Whether a deserialiser's `message` says a key is missing.
pub(super) fn is_missing(message: &str) -> bool {
    message.starts_with("missing field")
}

/// A deserialiser's message on one line.
pub(super) fn one_line(message: &str) -> String {
    message.trim().replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_integer_past_i64_is_named_by_its_key_wherever_it_is() {
        let wide = "18446744073709551615";
        for (key, text, at) in [
            (
                "scheduler.client",
                format!("{{ preset = \"openai-python\", keepalive = {wide} }}"),
                "scheduler.client.keepalive",
            ),
            ("workload.queries", wide.to_string(), "workload.queries"),
            (
                "workload.queries",
                "-9_223_372_036_854_775_809".to_string(),
                "workload.queries",
            ),
            (
                "a",
                format!("[1, {{ b = {{ c = 0x{:x} }} }}]", u64::MAX),
                "a.b.c",
            ),
            ("a", format!("{{ \"x y\" = 1, z = {wide}9 }}"), "a.z"),
        ] {
            let err = toml_value(key, &text).unwrap_err();
            assert!(err.starts_with(&format!("{at}: ")), "{text}: {err}");
            assert!(
                err.ends_with(
                    "is out of range (at most 9223372036854775807, TOML's largest integer)"
                ),
                "{err}"
            );
        }
        // In a string, or a word that is not TOML: not an integer.
        assert_eq!(
            toml_value("k", &format!("\"{wide}\"")),
            Ok(Some(toml::Value::String(wide.into())))
        );
        assert_eq!(toml_value("k", "openai-python"), Ok(None));
        assert_eq!(toml_value("k", &format!("'{wide}' x")), Ok(None));
        assert_eq!(toml_value("k", "1st"), Ok(None));
        assert_eq!(
            toml_value("k", &i64::MAX.to_string()),
            Ok(Some(toml::Value::Integer(i64::MAX)))
        );
        assert_eq!(
            parse_override(&format!("scheduler.client.keepalive={wide}")),
            Err(format!("--set scheduler.client.keepalive={wide}: scheduler.client.keepalive: {wide} is out of range (at most 9223372036854775807, TOML's largest integer)"))
        );
    }
}
