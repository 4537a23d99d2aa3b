//! Showing untrusted text (a scenario's name and description, its keys, file paths) as
//! written: the one escaping routine for Markdown, HTML, XML and the terminal.
//!
//! Every form removes or shows visibly what could act instead of being read: newlines, tabs
//! and carriage returns become spaces (the text stays on one line); other control characters
//! (C0 such as ESC, DEL, C1) and the bidirectional overrides become visible symbols (␛, ␡,
//! U+FFFD). Markdown, HTML and XML also get `&`, `<` and `>` as entities, so no tag or entity
//! can be written through them. Ordinary text (letters, digits, `[200, 900]`, `max_concurrency`)
//! passes through unchanged, so the committed reports read as they did.

/// What a control character becomes: `None` for an ordinary character.
fn control(ch: char) -> Option<char> {
    match ch {
        '\n' | '\r' | '\t' => Some(' '),
        // C0 as the Control Pictures block shows them (ESC: ␛).
        c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32),
        '\u{7f}' => Some('\u{2421}'),
        // C1, and the bidirectional embeddings, overrides and isolates that reorder a line.
        '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => Some('\u{fffd}'),
        _ => None,
    }
}

/// `s` with control characters replaced, `&`, `<` and `>` as entities when `entities`, and
/// every other character through `other` (given the characters before and after it).
fn escape(
    s: &str,
    entities: bool,
    other: impl Fn(Option<char>, char, Option<char>, &mut String),
) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, &ch) in chars.iter().enumerate() {
        if let Some(shown) = control(ch) {
            out.push(shown);
            continue;
        }
        match ch {
            '&' if entities => out.push_str("&amp;"),
            '<' if entities => out.push_str("&lt;"),
            '>' if entities => out.push_str("&gt;"),
            c => {
                let before = i.checked_sub(1).map(|j| chars[j]);
                other(before, c, chars.get(i + 1).copied(), &mut out);
            }
        }
    }
    out
}

/// Text for a terminal line: control characters shown visibly (an ESC cannot start an escape
/// sequence), everything else as written.
pub fn terminal(s: &str) -> String {
    escape(s, false, |_, c, _, out| out.push(c))
}

/// Text for HTML (element content or a quoted attribute value).
pub fn html(s: &str) -> String {
    escape(s, true, |_, c, _, out| match c {
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&#39;"),
        c => out.push(c),
    })
}

/// Text for XML 1.0 (element content or a quoted attribute value).
pub fn xml(s: &str) -> String {
    escape(s, true, |_, c, _, out| match c {
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&apos;"),
        c => out.push(c),
    })
}

/// Text that Markdown (CommonMark and GitHub's) shows as written, on one line, wherever it is
/// placed: a paragraph, a heading, a table cell.
///
/// Backslash-escaped: `\`, `` ` ``, `*`, `|`, `#`, `~`, `$` always; `_` unless between two
/// letters or digits (where it cannot emphasise: `max_concurrency` stays as written); `]`
/// before `(`, `[`, `:` or at the end (no link, image or link definition can form); and what
/// would open a block at the start of a line (see `block_marker`).
pub fn markdown(s: &str) -> String {
    let mut out = escape(s, true, |before, c, after, out| {
        let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        let special = match c {
            '\\' | '`' | '*' | '|' | '#' | '~' | '$' => true,
            '_' => !(word(before) && word(after)),
            ']' => matches!(after, None | Some('(' | '[' | ':')),
            _ => false,
        };
        if special {
            out.push('\\');
        }
        out.push(c);
    });
    if let Some(i) = block_marker(s) {
        // Only spaces and digits come before it, which escaping leaves as they are.
        out.insert(i, '\\');
    }
    out
}

/// Where `s` starts a list item, a rule or a heading underline at the start of a line: the
/// byte offset of the character to escape (`-`, `+` or `=`; the `.` or `)` of `1.`).
fn block_marker(s: &str) -> Option<usize> {
    let lead = s.len() - s.trim_start_matches(' ').len();
    let rest = &s[lead..];
    let only = |set: &[char]| rest.chars().all(|c| set.contains(&c));
    let spaced = |t: &str| t.is_empty() || t.starts_with([' ', '\t', '\n', '\r']);
    match rest.chars().next()? {
        '-' | '+' if spaced(&rest[1..]) => Some(lead),
        '-' if only(&['-', ' ']) => Some(lead),
        '=' if only(&['=', ' ']) => Some(lead),
        _ => {
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let after = &rest[digits..];
            let numbered = (1..=9).contains(&digits) && after.starts_with(['.', ')']);
            (numbered && spaced(&after[1..])).then_some(lead + digits)
        }
    }
}

/// The text `markdown` escaped, for rendering Markdown lines as HTML: the backslash escapes of
/// ASCII punctuation and the `&amp;`, `&lt;` and `&gt;` entities undone, in one pass.
pub fn unmarkdown(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut rest = md;
    while let Some(c) = rest.chars().next() {
        let next = rest[c.len_utf8()..].chars().next();
        if c == '\\' && next.is_some_and(|n| n.is_ascii_punctuation()) {
            out.extend(next);
            rest = &rest[2..];
            continue;
        }
        if let Some((entity, ch)) = [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')]
            .into_iter()
            .find(|(e, _)| rest.starts_with(e))
        {
            out.push(ch);
            rest = &rest[entity.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "<script>x</script> | `a` *b* _c_ [l](javascript:y) ![i](u) \
                           [r]: u\n# H\r\u{1b}[31m\u{7f}\u{9b}\u{202e} ~~s~~ ${{ x }} &amp; \\";

    #[test]
    fn markdown_leaves_no_tag_syntax_or_control_character() {
        let md = markdown(HOSTILE);
        assert!(!md.contains(['<', '>', '\n', '\r', '\u{1b}', '\u{7f}', '\u{9b}', '\u{202e}']));
        for inert in [
            "&lt;script&gt;",
            "\\|",
            "\\`a\\`",
            "\\*b\\*",
            "\\_c\\_",
            "[l\\](",
            "[i\\](",
            "[r\\]:",
            " \\# H",
            "\u{241b}[31m\u{2421}\u{fffd}\u{fffd}",
            "\\~\\~s",
            "\\${{",
            "&amp;amp;",
            "\\\\",
        ] {
            assert!(md.contains(inert), "{inert:?} not in {md:?}");
        }
        assert_eq!(
            unmarkdown(&md),
            HOSTILE
                .replace(['\n', '\r'], " ")
                .replace('\u{1b}', "\u{241b}")
                .replace('\u{7f}', "\u{2421}")
                .replace(['\u{9b}', '\u{202e}'], "\u{fffd}")
        );
    }

    #[test]
    fn markdown_escapes_what_would_start_a_block_and_nothing_else() {
        for (text, shown) in [
            ("- a", "\\- a"),
            ("  + a", "  \\+ a"),
            ("-", "\\-"),
            ("- - -", "\\- - -"),
            ("===", "\\==="),
            ("12. a", "12\\. a"),
            ("3)", "3\\)"),
            ("# a", "\\# a"),
            ("> a", "&gt; a"),
            ("-3", "-3"),
            ("864.8", "864.8"),
            ("== 0", "== 0"),
            ("1,2", "1,2"),
        ] {
            assert_eq!(markdown(text), shown, "{text:?}");
        }
    }

    #[test]
    fn ordinary_text_is_unchanged() {
        for s in [
            "research-agent",
            "8 sources per query, U[200, 900] ms each, 600 RPM, max_concurrency 4 at 70 % headroom",
            "12 queries",
        ] {
            assert_eq!(markdown(s), s);
            assert_eq!(html(s), s);
            assert_eq!(terminal(s), s);
            assert_eq!(unmarkdown(s), s);
        }
    }

    #[test]
    fn html_xml_and_terminal_forms() {
        assert_eq!(
            html("<a href=\"x\">&'\u{1b}"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\u{241b}"
        );
        assert_eq!(
            xml("<a href=\"x\">&'\u{0}"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&apos;\u{2400}"
        );
        assert_eq!(terminal("a\u{1b}[2Jb\nc<"), "a\u{241b}[2Jb c<");
    }
}
