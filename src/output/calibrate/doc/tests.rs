use super::*;

#[test]
fn a_set_replaces_a_key_or_joins_the_deepest_table_holding_it() {
    let mut doc = Doc::default();
    let mut top = Table::new(&[]);
    top.put("name", "x", "");
    let mut p = Table::new(&["providers", "llm"]);
    p.put("rpm", 10, "fitted");
    doc.tables = vec![top, p, Table::new(&["scheduler"])];
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

#[test]
fn a_comment_is_one_line_whatever_it_holds() {
    assert_eq!(
        comment_text("a\nb\rc\td\u{0}e\u{1b}f\u{7f}g\u{85}h\u{2028}i\u{202e}j"),
        "a\\nb\\rc\\td\\u0000e\\u001Bf\\u007Fg\\u0085h\\u2028i\\u202Ej"
    );
    assert_eq!(comment_text("ünï \"#[=]"), "ünï \"#[=]");
}

#[test]
fn the_comment_of_a_key_is_found_for_an_error_naming_it() {
    let mut doc = Doc::default();
    let mut w = Table::new(&["workload"]);
    w.put("duration_s", 5.0, "as long as the input");
    w.put_items(
        "tools",
        vec![
            (toml::Value::from(1), "first".into()),
            (toml::Value::from(2), "second".into()),
        ],
    );
    doc.tables.push(w);
    doc.apply_set("workload.rounds=3").unwrap();
    assert_eq!(
        doc.comment_at("workload.duration_s"),
        Some("as long as the input")
    );
    assert_eq!(doc.comment_at("workload.tools[1].name"), Some("second"));
    assert_eq!(
        doc.comment_at("workload.rounds"),
        Some("given: --set workload.rounds=3")
    );
    assert_eq!(doc.comment_at("workload.duration_sx"), None);
    assert_eq!(doc.comment_at("providers.x.rpm"), None);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Whatever the strings (keys, table names, values, comments), the text reads back as
    /// exactly the document: the writer cannot write structure.
    #[test]
    fn any_text_is_written_as_text(
        table in "\\PC*|[\\s\\S]*",
        key in "[\\s\\S]{1,12}",
        value in "[\\s\\S]*",
        comment in "[\\s\\S]*",
        item in "[\\s\\S]*",
    ) {
        let mut doc = Doc { head: vec![comment.clone()], tables: Vec::new() };
        let mut top = Table::new(&[]);
        top.put(&key, value.as_str(), comment.as_str());
        top.say(comment.clone());
        doc.tables.push(top);
        let mut t = Table::new(&["t", table.as_str()]);
        t.note.push(comment.clone());
        let mut inner = toml::Table::new();
        inner.insert(key.clone(), value.as_str().into());
        t.put("inline", toml::Value::Table(inner.clone()), comment.as_str());
        t.put_items("items", vec![(item.as_str().into(), comment.clone())]);
        doc.tables.push(t);
        let text = doc.render();
        let parsed: toml::Table = text.parse().map_err(|e| {
            proptest::test_runner::TestCaseError::fail(format!("{e}\n{text}"))
        })?;
        let mut expected = toml::Table::new();
        expected.insert(key.clone(), value.as_str().into());
        let mut t = toml::Table::new();
        t.insert("inline".into(), toml::Value::Table(inner));
        t.insert("items".into(), toml::Value::Array(vec![item.as_str().into()]));
        let mut under = toml::Table::new();
        under.insert(table.clone(), toml::Value::Table(t));
        expected.insert("t".into(), toml::Value::Table(under));
        proptest::prop_assert_eq!(parsed, expected);
        // No control character but the line ends: each line is one line.
        proptest::prop_assert!(!text.chars().any(|c| c != '\n' && c.is_control()), "{}", text);
    }
}
