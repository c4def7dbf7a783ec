//! Malformed grammars from tests/data/malformed.toml: each must fail with the expected line:col and
//! message, and none may panic.

mod common;

use serde::Deserialize;
use structgen::{ebnf, Limits};

#[derive(Deserialize)]
struct Case {
    name: String,
    grammar: String,
    line: usize,
    col: usize,
    message: String,
}

#[derive(Deserialize)]
struct File {
    case: Vec<Case>,
}

#[test]
fn malformed_grammars_report_position_and_reason() {
    let file: File =
        toml::from_str(&common::read("tests/data/malformed.toml")).expect("valid TOML");
    let mut failures = Vec::new();
    for case in &file.case {
        match ebnf::parse(&case.grammar, "root", &Limits::default()) {
            Ok(_) => failures.push(format!("{}: parsed without error", case.name)),
            Err(e) => {
                let text = e.to_string();
                if (e.line, e.col) != (case.line, case.col) || !text.contains(&case.message) {
                    failures.push(format!(
                        "{}: got {text:?}, expected {}:{} containing {:?}",
                        case.name, case.line, case.col, case.message
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        file.case.len() >= 25,
        "only {} malformed grammars",
        file.case.len()
    );
}
