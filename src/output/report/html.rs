//! A report's Markdown as one self-contained HTML page: rendered by pulldown-cmark (CommonMark
//! with tables), with a small embedded stylesheet, an anchor on every heading, each `##`
//! section in its own `<section>` (the one named in [`Page::boxed`] drawn as a box), tables
//! that scroll sideways on a phone, and charts inlined as SVG in place of their image lines.
//!
//! The Markdown is the one document model: `report.md` is it, `report.html` is it rendered.
//! Scenario strings reach it already escaped ([`super::escape::markdown`]); any raw HTML that
//! still got through is shown as text, never passed on as markup.

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::escape;

/// The page's stylesheet: readable on a phone, numbers right-aligned (pulldown-cmark aligns
/// the cells of a `---:` column), printable.
const STYLE: &str = "\
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--accent:#0969da;--box:#f0f6ff}
*{box-sizing:border-box}
body{font:16px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--fg);max-width:1000px;margin:0 auto;padding:1em}
h1{font-size:1.7em;margin:.2em 0 .4em}
h2{font-size:1.3em;border-bottom:1px solid var(--line);padding-bottom:.2em;margin-top:1.6em}
h2 a.anchor,h3 a.anchor{color:var(--line);text-decoration:none;margin-left:.3em;font-weight:normal}
h2:hover a.anchor,h3:hover a.anchor{color:var(--accent)}
nav{font-size:.9em;color:var(--muted)}
nav a{color:var(--accent);margin-right:.8em;text-decoration:none}
section.box{background:var(--box);border:1px solid var(--accent);border-radius:8px;padding:.2em 1.2em .8em;margin:1em 0}
section.box h2{border:0;margin-top:.6em}
td code{white-space:nowrap}
.table{overflow-x:auto;margin:.8em 0}
table{border-collapse:collapse;font-size:.92em}
th,td{border-bottom:1px solid var(--line);padding:.3em .6em;vertical-align:top}
th{background:#f6f8fa;text-align:left;white-space:nowrap}
td[style*=right],th[style*=right]{font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:nth-child(even){background:#fafbfc}
code{background:#f6f8fa;border-radius:4px;padding:.05em .3em;font-size:.92em}
figure{margin:1em 0}
figure svg{width:100%;height:auto;border:1px solid var(--line);border-radius:6px}
@media (max-width:600px){body{padding:.6em;font-size:15px}section.box{padding:.1em .8em .6em}}
@media print{body{max-width:none;font-size:11pt}nav,a.anchor{display:none}section,figure,tr{break-inside:avoid}section.box{border-color:#000}}
";

/// What a page is made of besides its Markdown.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The `<title>`, as written (escaped here).
    pub title: &'a str,
    /// The `##` heading whose section is drawn as a box (the answer), if any.
    pub boxed: Option<&'a str>,
    /// Charts to inline: an image line whose destination is `STEM.png` is replaced by the SVG
    /// of the chart named `STEM`.
    pub charts: &'a [(&'a str, String)],
}

/// The anchor of a heading: its text in lower case, runs of anything but letters and digits as
/// one `-`.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The Markdown `md` as a whole HTML page.
pub fn page(md: &str, page: &Page) -> String {
    let mut body = String::new();
    let mut nav = Vec::new();
    let mut sections = split(md).into_iter();
    if let Some(head) = sections.next() {
        body.push_str(&render(head, page));
    }
    for section in sections {
        let heading = section
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("## ");
        let text = escape::unmarkdown(heading);
        let id = slug(&text);
        let class = if page.boxed == Some(heading) {
            " class=\"box\""
        } else {
            ""
        };
        nav.push(format!("<a href=\"#{id}\">{}</a>", escape::html(&text)));
        body.push_str(&format!(
            "<section{class}>\n{}</section>\n",
            render(section, page)
        ));
    }
    let mut html = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    html.push_str(&format!(
        "<title>{}</title>\n<style>\n{STYLE}</style>\n</head><body>\n",
        escape::html(page.title)
    ));
    // The navigation goes after the title (the first heading of the head).
    let nav = format!("<nav>{}</nav>\n", nav.join(""));
    match body.find("</h1>\n") {
        Some(i) => {
            let at = i + "</h1>\n".len();
            html.push_str(&body[..at]);
            html.push_str(&nav);
            html.push_str(&body[at..]);
        }
        None => {
            html.push_str(&nav);
            html.push_str(&body);
        }
    }
    html.push_str("</body></html>\n");
    html
}

/// `md` cut before each `## ` heading: the part before the first, then each section.
fn split(md: &str) -> Vec<&str> {
    let mut starts = vec![0];
    let mut at = 0;
    for line in md.split_inclusive('\n') {
        if line.starts_with("## ") && at > 0 {
            starts.push(at);
        }
        at += line.len();
    }
    starts.push(md.len());
    starts.windows(2).map(|w| &md[w[0]..w[1]]).collect()
}

/// One part of the Markdown as HTML: headings with anchors, tables in a scrolling box, chart
/// images as inline SVG, raw HTML as text.
fn render(md: &str, page: &Page) -> String {
    let mut events = Vec::new();
    let mut in_image = false;
    let mut heading: Option<(HeadingLevel, Vec<Event>)> = None;
    for event in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Image { ref dest_url, .. }) => match chart(page, dest_url) {
                Some(svg) => {
                    events.push(Event::Html(CowStr::from(format!("<figure>{svg}</figure>"))));
                    in_image = true;
                }
                None => events.push(event.clone()),
            },
            Event::End(TagEnd::Image) if in_image => in_image = false,
            _ if in_image => {}
            Event::Start(Tag::Heading { level, .. }) => heading = Some((level, Vec::new())),
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, inner)) = heading.take() {
                    events.extend(anchored(level, inner));
                }
            }
            Event::Html(raw) | Event::InlineHtml(raw) => {
                push(&mut events, &mut heading, Event::Text(raw));
            }
            Event::Start(Tag::Table(_)) => {
                events.push(Event::Html("<div class=\"table\">".into()));
                events.push(event);
            }
            Event::End(TagEnd::Table) => {
                events.push(event);
                events.push(Event::Html("</div>\n".into()));
            }
            e => push(&mut events, &mut heading, e),
        }
    }
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, events.into_iter());
    out
}

/// Adds `event` to the heading being read, if any, else to the page.
fn push<'a>(
    events: &mut Vec<Event<'a>>,
    heading: &mut Option<(HeadingLevel, Vec<Event<'a>>)>,
    event: Event<'a>,
) {
    match heading {
        Some((_, inner)) => inner.push(event),
        None => events.push(event),
    }
}

/// A heading with its anchor: `id` from its text, and a `#` link to it after the text.
fn anchored(level: HeadingLevel, inner: Vec<Event>) -> Vec<Event> {
    let text: String = inner
        .iter()
        .filter_map(|e| match e {
            Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
            _ => None,
        })
        .collect();
    let id = slug(&text);
    let mut out = vec![Event::Start(Tag::Heading {
        level,
        id: Some(CowStr::from(id.clone())),
        classes: Vec::new(),
        attrs: Vec::new(),
    })];
    out.extend(inner);
    if level != HeadingLevel::H1 {
        out.push(Event::Html(CowStr::from(format!(
            "<a class=\"anchor\" href=\"#{id}\" aria-label=\"link to this section\">#</a>"
        ))));
    }
    out.push(Event::End(TagEnd::Heading(level)));
    out
}

/// The SVG of the chart an image destination `STEM.png` names, if `page` has it.
fn chart<'p>(page: &'p Page, dest: &str) -> Option<&'p str> {
    let stem = dest.strip_suffix(".png")?;
    page.charts
        .iter()
        .find(|(s, _)| *s == stem)
        .map(|(_, svg)| svg.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_of(md: &str) -> String {
        page(
            md,
            &Page {
                title: "t",
                boxed: Some("Answer"),
                charts: &[("c", "<svg id=\"c\"></svg>".to_string())],
            },
        )
    }

    #[test]
    fn a_table_is_one_table_with_right_aligned_numbers() {
        let html = page_of("# T\n\n## Answer\n\n| a | n |\n|---|---:|\n| x | 1 |\n| y | 2 |\n");
        assert_eq!(html.matches("<table>").count(), 1);
        assert_eq!(html.matches("<tr>").count(), 3);
        assert!(
            html.contains("<td style=\"text-align: right\">2</td>"),
            "{html}"
        );
        assert!(html.contains("<section class=\"box\">"), "{html}");
    }

    #[test]
    fn headings_get_anchors_and_the_nav_links_them() {
        let html = page_of("# Report: x\n\nintro\n\n## Why nothing passes\n\ntext\n");
        assert!(html.contains("<h2 id=\"why-nothing-passes\">"), "{html}");
        assert!(html.contains("<nav><a href=\"#why-nothing-passes\">Why nothing passes</a></nav>"));
        assert!(html.find("<nav>") > html.find("</h1>"));
    }

    #[test]
    fn chart_images_become_inline_svg_and_other_images_stay() {
        let html = page_of("![c](c.png)\n\n![d](d.png)\n");
        assert!(
            html.contains("<figure><svg id=\"c\"></svg></figure>"),
            "{html}"
        );
        assert!(html.contains("<img src=\"d.png\" alt=\"d\""), "{html}");
    }

    #[test]
    fn raw_html_is_shown_as_text() {
        let html = page_of("a <script>x</script> b\n\n<div>block</div>\n");
        assert!(
            !html.contains("<script>") && !html.contains("<div>block"),
            "{html}"
        );
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }

    #[test]
    fn slugs_are_lower_case_words_joined_by_dashes() {
        assert_eq!(
            slug("Arithmetic beside the simulation"),
            "arithmetic-beside-the-simulation"
        );
        assert_eq!(slug("Capacity report: a/b (x)"), "capacity-report-a-b-x");
    }
}
