//! A TOML document written for people: tables in a set order, each key on its line with a
//! comment saying where its value came from, and `--set` arguments applied on top (marked as
//! given). Values are `toml::Value`s, written inline.

use crate::engine::scenario::parse_override;

/// One `key = value  # comment` line (a comment alone when `value` is `None`).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key (dotted within its table, if need be).
    pub key: String,
    /// Its value; `None`: a comment line.
    pub value: Option<toml::Value>,
    /// What it says about the value.
    pub comment: String,
    /// Array elements on lines of their own, each with its comment.
    pub items: Vec<(toml::Value, String)>,
}

/// A table: `[header]` (none: the top level) and its entries.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Its dotted name.
    pub header: Option<String>,
    /// A comment under the header.
    pub note: Vec<String>,
    /// Its lines.
    pub entries: Vec<Entry>,
}

impl Table {
    /// A table named `header`.
    pub fn new(header: Option<&str>) -> Self {
        Table {
            header: header.map(str::to_owned),
            ..Table::default()
        }
    }

    /// Adds `key = value  # comment`.
    pub fn put(&mut self, key: &str, value: impl Into<toml::Value>, comment: impl Into<String>) {
        self.entries.push(Entry {
            key: key.into(),
            value: Some(value.into()),
            comment: comment.into(),
            items: Vec::new(),
        });
    }

    /// Adds `key = [` one element a line, each with its comment `]`.
    pub fn put_items(&mut self, key: &str, items: Vec<(toml::Value, String)>) {
        self.entries.push(Entry {
            key: key.into(),
            value: None,
            comment: String::new(),
            items,
        });
    }

    /// Adds a comment line.
    pub fn say(&mut self, comment: impl Into<String>) {
        self.entries.push(Entry {
            key: String::new(),
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
    /// Applies `--set key.path=value`: the value replaces the key where the document has it,
    /// or is added to the deepest table holding it (a new table if none does), marked as
    /// given. An argument that is not `key=value` is an error.
    pub fn apply_set(&mut self, set: &str) -> Result<(), String> {
        let (path, value) = parse_override(set)?;
        let mut best: Option<(usize, usize)> = None; // (table, segments it covers)
        for (i, t) in self.tables.iter().enumerate() {
            let covers = match &t.header {
                None => 0,
                Some(h) => {
                    let h: Vec<&str> = h.split('.').collect();
                    if h.len() < path.len() && h.iter().zip(&path).all(|(a, b)| a == b) {
                        h.len()
                    } else {
                        continue;
                    }
                }
            };
            if best.is_none_or(|(_, c)| covers > c) {
                best = Some((i, covers));
            }
        }
        let comment = format!("given: --set {}", set.trim());
        let (i, covers) = match best {
            Some((i, c)) if c > 0 || path.len() == 1 => (i, c),
            _ => {
                self.tables.push(Table::new(Some(&path[0])));
                (self.tables.len() - 1, 1)
            }
        };
        let key = path[covers..].join(".");
        let table = &mut self.tables[i];
        match table.entries.iter_mut().find(|e| e.key == key) {
            Some(e) => {
                e.value = Some(value);
                e.items.clear();
                e.comment = comment;
            }
            None => table.put(&key, value, comment),
        }
        Ok(())
    }

    /// The document's text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for line in &self.head {
            push_comment(&mut out, "", line);
        }
        for t in &self.tables {
            if let Some(h) = &t.header {
                out.push('\n');
                out.push_str(&format!("[{h}]\n"));
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
    if !e.items.is_empty() || e.value.is_none() {
        out.push_str(&format!("{} = [\n", e.key));
        for (v, c) in &e.items {
            let line = format!("  {},", inline(v));
            push_with_comment(out, &line, c);
        }
        out.push_str("]\n");
        return;
    }
    let line = format!(
        "{} = {}",
        e.key,
        inline(e.value.as_ref().expect("checked above"))
    );
    push_with_comment(out, &line, &e.comment);
}

/// `line`, then its comment after two spaces; a comment too long for that goes on its own
/// lines above the line (so it is read with the value it describes).
fn push_with_comment(out: &mut String, line: &str, comment: &str) {
    if comment.is_empty() {
        out.push_str(line);
        out.push('\n');
    } else if line.len() + comment.len() + 4 <= 100 {
        out.push_str(&format!("{line}  # {comment}\n"));
    } else {
        let indent: String = line.chars().take_while(|c| *c == ' ').collect();
        push_comment(out, &indent, comment);
        out.push_str(line);
        out.push('\n');
    }
}

/// `# comment`, wrapped at 100 columns.
fn push_comment(out: &mut String, indent: &str, comment: &str) {
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
        other => other.to_string(),
    }
}

/// A key, quoted when it is not bare.
fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        toml::Value::String(k.to_string()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_replaces_a_key_or_joins_the_deepest_table_holding_it() {
        let mut doc = Doc::default();
        let mut top = Table::new(None);
        top.put("name", "x", "");
        let mut p = Table::new(Some("providers.llm"));
        p.put("rpm", 10, "fitted");
        doc.tables = vec![top, p, Table::new(Some("scheduler"))];
        doc.apply_set("providers.llm.rpm=500").unwrap();
        doc.apply_set("providers.llm.tpm=9000").unwrap();
        doc.apply_set("scheduler.retry.max_retries=3").unwrap();
        doc.apply_set("fleet.replicas=2").unwrap();
        let text = doc.render();
        assert!(
            text.contains("rpm = 500  # given: --set providers.llm.rpm=500"),
            "{text}"
        );
        assert!(text.contains("tpm = 9000  # given"), "{text}");
        assert!(
            text.contains("[scheduler]\nretry.max_retries = 3"),
            "{text}"
        );
        assert!(text.contains("[fleet]\nreplicas = 2"), "{text}");
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(parsed["providers"]["llm"]["rpm"].as_integer(), Some(500));
    }
}
