//! Where a key is in a scenario's text: the line and column, and the dotted key, that an error
//! names, found from the parser's byte spans or by reading the text for a key.

/// 1-based line and column of byte `offset` in `text`.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |nl| before.len() - nl - 1)
        + 1;
    (line, col)
}

/// Best effort: where `key` (dotted, e.g. `provider.latency.p95_ms`) is written in `text`.
pub(super) fn locate(text: &str, key: &str) -> Option<(usize, usize)> {
    // A quoted last key (`slo.tolerance."latency_ms.query.p95"`) is found whole.
    let last = match key.strip_suffix('"').and_then(|k| k.rfind('"')) {
        Some(open) => &key[open..],
        None => key.rsplit('.').next()?.split('[').next()?,
    };
    // The innermost `[table]` header the key is under (`[slo.tolerance]` before `[slo]`).
    let header = (1..key.len())
        .rev()
        .filter(|&i| key.as_bytes()[i] == b'.')
        .find_map(|i| text.find(&format!("[{}]", &key[..i])));
    let start = array_table(text, key).or(header).unwrap_or(0);
    let mut from = start;
    while let Some(i) = text[from..].find(last) {
        let at = from + i;
        let rest = text[at + last.len()..].trim_start();
        let boundary = at == 0
            || !text.as_bytes()[at - 1].is_ascii_alphanumeric() && text.as_bytes()[at - 1] != b'_';
        if boundary && rest.starts_with('=') {
            return Some(line_col(text, at));
        }
        from = at + last.len();
    }
    None
}

/// Where the table a key like `provider.phases[2].rpm` is in starts: the third
/// `[[provider.phases]]` header, if the file writes that array as tables.
fn array_table(text: &str, key: &str) -> Option<usize> {
    let (array, rest) = key.split_once('[')?;
    let index: usize = rest.split(']').next()?.parse().ok()?;
    let mut offset = 0;
    let mut seen = 0;
    for line in text.split_inclusive('\n') {
        if table_header(line.trim()).is_some_and(|(name, many)| many && name == array) {
            if seen == index {
                return Some(offset);
            }
            seen += 1;
        }
        offset += line.len();
    }
    None
}

/// A `[table]` or `[[array.of.tables]]` header line: its name, and whether it is an array's.
fn table_header(line: &str) -> Option<(&str, bool)> {
    let many = line.starts_with("[[");
    let inner = line.strip_prefix(if many { "[[" } else { "[" })?;
    Some((inner.split(']').next()?.trim(), many))
}

/// The dotted key a TOML error at `span` is about: the span is either a key (followed by `=`)
/// or a value (preceded by `key =`). Enclosing inline tables on the same line and the
/// `[section]` above are prefixed. Best effort: `None` when it cannot tell.
/// The `[table]` header (not an array of tables) in force at byte `at` of `text` (on its line
/// or above): its line (1-based) and dotted name; `None` at the top level.
pub(super) fn table_at(text: &str, at: usize) -> Option<(usize, String)> {
    let end = text.get(at..)?.find('\n').map_or(text.len(), |i| at + i);
    let before = &text[..end];
    let (i, header) = before
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with('['))
        .last()?;
    let name = header.trim().strip_prefix('[')?.split(']').next()?.trim();
    if name.starts_with('[') || name.is_empty() {
        return None;
    }
    Some((i + 1, name.to_string()))
}

pub(super) fn key_of(text: &str, span: std::ops::Range<usize>) -> Option<String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let name = if text.get(span.end..)?.trim_start().starts_with('=') {
        text.get(span.clone())?.trim().trim_matches('"').to_string()
    } else {
        let before = text
            .get(..span.start)?
            .trim_end()
            .strip_suffix('=')?
            .trim_end();
        let start = before.rfind(|c: char| !is_name(c)).map_or(0, |i| i + 1);
        before[start..].to_string()
    };
    if name.is_empty() || !name.chars().all(is_name) {
        return None;
    }
    let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    // Inline tables opened earlier on this line: `latency = { dist = ..., min_ms = <span>`.
    let mut open: Vec<String> = Vec::new();
    let (mut ident, mut pending, mut quoted) = (String::new(), String::new(), false);
    for c in text[line_start..span.start].chars() {
        match c {
            '"' => quoted = !quoted,
            _ if quoted => {}
            c if is_name(c) => ident.push(c),
            '=' => pending = std::mem::take(&mut ident),
            '{' => open.push(std::mem::take(&mut pending)),
            '}' => {
                open.pop();
            }
            _ if c.is_whitespace() => {}
            _ => ident.clear(),
        }
    }
    let before: Vec<&str> = text[..line_start].lines().map(str::trim).collect();
    // An inline table that opens its line is an element of an array opened on a line above
    // (`phases = [` then `{ at_s = 10, ... },` lines): named with the array and its index.
    if open.first().is_some_and(String::is_empty) {
        open[0] = array_element(&before)?;
    }
    // The table the key is in; an array of tables (`[[provider.phases]]`) with its index.
    let section = before
        .iter()
        .rposition(|l| l.starts_with('['))
        .and_then(|i| {
            let (name, many) = table_header(before[i])?;
            if !many {
                return Some(name.to_string());
            }
            let index = before[..i]
                .iter()
                .filter(|l| table_header(l) == Some((name, true)))
                .count();
            Some(format!("{name}[{index}]"))
        });
    let parts: Vec<String> = section.into_iter().chain(open).chain([name]).collect();
    Some(parts.join("."))
}

/// The array element a line opening with `{` is, from the lines above it (trimmed): the
/// nearest `NAME = [` line, and how many lines opening with `{` lie between it and this one
/// (`phases[2]`). Best effort, like [`key_of`]: one element per line.
fn array_element(before: &[&str]) -> Option<String> {
    let opened = before.iter().rposition(|l| {
        l.strip_suffix('[')
            .is_some_and(|l| l.trim_end().ends_with('='))
    })?;
    let name = before[opened]
        .split('=')
        .next()?
        .trim()
        .trim_matches('"')
        .to_string();
    let index = before[opened + 1..]
        .iter()
        .filter(|l| l.starts_with('{'))
        .count();
    Some(format!("{name}[{index}]"))
}
