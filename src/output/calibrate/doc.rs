//! A TOML document written for people: tables in a set order, each key on its line with a
//! comment saying where its value came from, and `--set` arguments applied on top (marked as
//! given). Values are `toml::Value`s, written inline.
//!
//! Everything is written through the functions at the bottom, and they cannot write
//! structure: a key or a table's name segment by segment (bare where it can be, else quoted),
//! a string as one basic string, and a comment through [`comment_text`]; each escapes every
//! control character and line separator. So a name read from traces, whatever it holds (a
//! newline, `"""`, `#`, `[`, `=`), is text in one value or one comment on one line, never a
//! key. (toml's own writer would write a string with a newline over several lines, and leave
//! U+0085 and U+2028 as they are.)

use crate::engine::scenario::parse_override;

/// One `key = value  # comment` line (a comment alone when `value` is `None`).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key, a segment a part (dotted within its table, if more than one).
    pub key: Vec<String>,
    /// Its value; `None`: a comment line.
    pub value: Option<toml::Value>,
    /// What it says about the value.
    pub comment: String,
    /// Array elements on lines of their own, each with its comment.
    pub items: Vec<(toml::Value, String)>,
}

/// A table: `[path]` (empty: the top level) and its entries.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Its name, a segment a part (`["providers", "openai"]`).
    pub path: Vec<String>,
    /// A comment under the header.
    pub note: Vec<String>,
    /// Its lines.
    pub entries: Vec<Entry>,
}

impl Table {
    /// The table `path` (`&[]`: the top level).
    pub fn new(path: &[&str]) -> Self {
        Table {
            path: path.iter().map(|s| s.to_string()).collect(),
            ..Table::default()
        }
    }

    /// Adds `key = value  # comment`.
    pub fn put(&mut self, key: &str, value: impl Into<toml::Value>, comment: impl Into<String>) {
        self.entries.push(Entry {
            key: vec![key.into()],
            value: Some(value.into()),
            comment: comment.into(),
            items: Vec::new(),
        });
    }

    /// Adds `key = [` one element a line, each with its comment `]`.
    pub fn put_items(&mut self, key: &str, items: Vec<(toml::Value, String)>) {
        self.entries.push(Entry {
            key: vec![key.into()],
            value: None,
            comment: String::new(),
            items,
        });
    }

    /// Adds a comment line.
    pub fn say(&mut self, comment: impl Into<String>) {
        self.entries.push(Entry {
            key: Vec::new(),
            value: None,
            comment: comment.into(),
            items: Vec::new(),
        });
    }
}

/// A whole document.
#[derive(Debug, Clone, Default)]
pub struct Doc {
    /// Comment lines at its head.
    pub head: Vec<String>,
    /// Its tables, the top level first.
    pub tables: Vec<Table>,
}

impl Doc {
    /// The table `path`, if the document has it.
    pub fn table_mut(&mut self, path: &[&str]) -> Option<&mut Table> {
        self.tables.iter_mut().find(|t| t.path == path)
    }

    /// Applies `--set key.path=value`: the value replaces the key where the document has it,
    /// or is added to the deepest table holding it (a new table if none does), marked as
    /// given. An argument that is not `key=value` is an error.
    pub fn apply_set(&mut self, set: &str) -> Result<(), String> {
        let (path, value) = parse_override(set)?;
        let mut best: Option<(usize, usize)> = None; // (table, segments it covers)
        for (i, t) in self.tables.iter().enumerate() {
            let covers = t.path.len();
            if covers >= path.len() || t.path.iter().zip(&path).any(|(a, b)| a != b) {
                continue;
            }
            if best.is_none_or(|(_, c)| covers > c) {
                best = Some((i, covers));
            }
        }
        let comment = format!("given: --set {}", set.trim());
        let (i, covers) = match best {
            Some((i, c)) if c > 0 || path.len() == 1 => (i, c),
            _ => {
                self.tables.push(Table::new(&[path[0].as_str()]));
                (self.tables.len() - 1, 1)
            }
        };
        let key = path[covers..].to_vec();
        let table = &mut self.tables[i];
        match table.entries.iter_mut().find(|e| e.key == key) {
            Some(e) => {
                e.value = Some(value);
                e.items.clear();
                e.comment = comment;
            }
            None => table.entries.push(Entry {
                key,
                value: Some(value),
                comment,
                items: Vec::new(),
            }),
        }
        Ok(())
    }

    /// What the document says about the value at the dotted `key` (as a scenario error names
    /// it: `workload.tools[1].name`): the comment of the entry holding it, or of its element.
    pub fn comment_at(&self, key: &str) -> Option<&str> {
        let mut best: Option<(usize, &str)> = None;
        for t in &self.tables {
            for e in t.entries.iter().filter(|e| !e.key.is_empty()) {
                let full: Vec<&str> = t.path.iter().chain(&e.key).map(String::as_str).collect();
                let full = full.join(".");
                let Some(rest) = key.strip_prefix(&full) else {
                    continue;
                };
                let comment = match rest.strip_prefix('[') {
                    Some(index) => index
                        .split(']')
                        .next()
                        .and_then(|i| i.parse::<usize>().ok())
                        .and_then(|i| e.items.get(i))
                        .map_or(e.comment.as_str(), |(_, c)| c.as_str()),
                    None if rest.is_empty() || rest.starts_with('.') => e.comment.as_str(),
                    None => continue,
                };
                if best.is_none_or(|(n, _)| full.len() > n) {
                    best = Some((full.len(), comment));
                }
            }
        }
        best.map(|(_, c)| c).filter(|c| !c.is_empty())
    }

    /// The document's text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for line in &self.head {
            push_comment(&mut out, "", line);
        }
        for t in &self.tables {
            if !t.path.is_empty() {
                out.push('\n');
                out.push_str(&format!("[{}]\n", key_path(&t.path)));
            } else if !self.head.is_empty() {
                out.push('\n');
            }
            for line in &t.note {
                push_comment(&mut out, "", line);
            }
            for e in &t.entries {
                render_entry(&mut out, e);
            }
        }
        out
    }
}

fn render_entry(out: &mut String, e: &Entry) {
    if e.key.is_empty() {
        push_comment(out, "", &e.comment);
        return;
    }
    let key = key_path(&e.key);
    let Some(value) = e.value.as_ref().filter(|_| e.items.is_empty()) else {
        out.push_str(&format!("{key} = [\n"));
        for (v, c) in &e.items {
            let line = format!("  {},", inline(v));
            push_with_comment(out, &line, c);
        }
        out.push_str("]\n");
        return;
    };
    push_with_comment(out, &format!("{key} = {}", inline(value)), &e.comment);
}

/// `line`, then its comment after two spaces; a comment too long for that goes on its own
/// lines above the line (so it is read with the value it describes).
fn push_with_comment(out: &mut String, line: &str, comment: &str) {
    let comment = comment_text(comment);
    if comment.is_empty() {
        out.push_str(line);
        out.push('\n');
    } else if line.len() + comment.len() + 4 <= 100 {
        out.push_str(&format!("{line}  # {comment}\n"));
    } else {
        let indent: String = line.chars().take_while(|c| *c == ' ').collect();
        push_comment(out, &indent, &comment);
        out.push_str(line);
        out.push('\n');
    }
}

/// `# comment`, wrapped at 100 columns.
fn push_comment(out: &mut String, indent: &str, comment: &str) {
    let comment = comment_text(comment);
    let mut line = format!("{indent}#");
    for word in comment.split(' ') {
        if line.len() + word.len() + 1 > 100 && line.len() > indent.len() + 2 {
            out.push_str(&line);
            out.push('\n');
            line = format!("{indent}#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// A value written inline: tables as `{ k = v, ... }`, arrays as `[a, b]` (long arrays of
/// numbers wrapped, ten a line).
pub fn inline(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let parts: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", key(k), inline(v)))
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
        toml::Value::Array(a) if a.len() > 10 => {
            let rows: Vec<String> = a
                .chunks(10)
                .map(|c| {
                    let parts: Vec<String> = c.iter().map(inline).collect();
                    format!("    {},", parts.join(", "))
                })
                .collect();
            format!("[\n{}\n  ]", rows.join("\n"))
        }
        toml::Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(inline).collect();
            format!("[{}]", parts.join(", "))
        }
        toml::Value::String(s) => basic_string(s),
        other => other.to_string(),
    }
}

/// A dotted key or table name: each segment bare where it can be, else quoted.
fn key_path(path: &[String]) -> String {
    let parts: Vec<String> = path.iter().map(|k| key(k)).collect();
    parts.join(".")
}

/// A key: bare when it is letters, digits, `_` and `-`, else a basic string.
fn key(k: &str) -> String {
    let bare = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !k.is_empty() && k.chars().all(bare) {
        k.to_string()
    } else {
        basic_string(k)
    }
}

/// `s` as a TOML basic string, on one line: `"` and `\` escaped, and every character
/// [`comment_text`] escapes written as an escape TOML reads (`\n`, `\u001B`).
fn basic_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => escape_char(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// `c`, or its escape where it is a control character or breaks a line.
fn escape_char(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_control() || invisible_break(c) => {
            out.push_str(&format!("\\u{:04X}", u32::from(c)));
        }
        c => out.push(c),
    }
}

/// `text` as it may stand in a comment: on one line, whatever it holds. Each control character
/// (`\n`, `\r`, `\t`, NUL, ESC, DEL, the C1 controls), line and paragraph separator (U+2028,
/// U+2029) and bidirectional control is written as an escape (`\n`, `\u001B`); TOML allows
/// none of the control characters in a comment, and the others would show the line as two or
/// reorder it.
pub fn comment_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        escape_char(&mut out, c);
    }
    out
}

/// A character that is not a control character and still breaks or reorders a line as shown.
fn invisible_break(c: char) -> bool {
    matches!(
        c,
        '\u{2028}' | '\u{2029}' | '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}' | '\u{FEFF}'
    )
}

#[cfg(test)]
mod tests;
