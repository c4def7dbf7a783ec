//! String length bounds: counted rules whose masks are exact at every count (cached, uncached and
//! every token tried agree), what cannot be counted written out exactly, and several string
//! keywords on one string enforced together (a combination too large to build names every keyword
//! it leaves out).

use std::sync::Arc;

use super::{check, common::schema_matcher, options};
use serde_json::json;
use structgen_engine::frontend::json_schema::json_schema_grammar;
use structgen_engine::fuzzing::check_state;
use structgen_engine::grammar::{ebnf, print::print_grammar};
use structgen_engine::{compile, GrammarMatcher, Limits, TokenId, TokenKind, Vocab};

fn quoted(body: &str) -> String {
    format!("\"{body}\"")
}

#[test]
fn a_long_length_bound_holds_beside_a_pattern() {
    let schema =
        json!({"type": "string", "pattern": "^[a-z ]+$", "minLength": 3, "maxLength": 300});
    let longest = quoted(&"ab ".repeat(100));
    let too_long = quoted(&format!("{}x", "ab ".repeat(100)));
    let uppercase = quoted(&format!("{}A", "ab ".repeat(50)));
    check(
        &options(),
        schema,
        &[&longest, "\"abc\"", "\"a b\""],
        &[&too_long, "\"ab\"", &uppercase, "\"\""],
    );
}

#[test]
fn a_combination_too_large_names_each_keyword_left_out() {
    // Each pattern alone is small; their product with the length bound is not.
    let schema = json!({
        "type": "string",
        "pattern": "^(a|b)*a(a|b){11}$",
        "allOf": [{"pattern": "^(a|b)*b(a|b){11}$"}, {"maxLength": 300}]
    });
    let (_, warnings) = schema_matcher(&schema, &options());
    for keyword in ["/allOf/0/pattern", "/maxLength"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&format!("{keyword}: "))),
            "no warning at {keyword}: {warnings:?}"
        );
    }
}

/// A vocabulary whose tokens cross quotes, escapes and characters, with a few longer than the
/// bounds below (the counted masks narrow by bitsets for short counts and by lists past them).
fn crossing_vocab() -> Arc<Vocab> {
    let mut texts: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    for piece in [
        "\"",
        "\",",
        "\"}",
        "\":",
        "{\"",
        "abc",
        "ab\"",
        "x\"}",
        "\"ab",
        "the quick brown fox jumps",
        "\\n",
        "\\u00e9",
        "\\u",
        "é",
        "€x",
        "\\\"",
        "q\\\"z",
    ] {
        texts.push(piece.as_bytes().to_vec());
    }
    texts.push(" ".repeat(20).into_bytes());
    texts.push(format!("{}\"", "a".repeat(20)).into_bytes());
    texts.push(vec![0xE2, 0x82]);
    texts.push(vec![0xAC]);
    let stop = texts.len() as u32;
    let entries = texts
        .into_iter()
        .enumerate()
        .map(|(i, b)| (i as u32, b, TokenKind::Normal))
        .chain([(stop, b"</s>".to_vec(), TokenKind::Special)]);
    Arc::new(Vocab::new(stop as usize + 1, entries, vec![TokenId(stop)]))
}

/// Feeds `text` to `schema`'s matcher, longest allowed token first, checking every mask (cached
/// against uncached and against every token tried on a fork, [`check_state`]); returns whether the
/// whole text was taken and the matcher may stop.
fn walk(schema: &serde_json::Value, text: &str) -> bool {
    let limits = Limits::default();
    let out = json_schema_grammar(schema, &options(), &limits).expect("converts");
    assert!(out.warnings.is_empty(), "{schema}: {:?}", out.warnings);
    let printed = print_grammar(&out.grammar);
    assert!(
        printed.contains("JsonLength("),
        "{schema} is not counted: {printed}"
    );
    let vocab = crossing_vocab();
    let compiled = compile(&out.grammar, Arc::clone(&vocab), &limits).expect("compiles");
    let mut m = GrammarMatcher::new(compiled);
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        let allowed = check_state(
            &mut m,
            &format!("{schema} before {:?}", String::from_utf8_lossy(rest)),
        );
        let best = allowed
            .into_iter()
            .filter(|&t| {
                rest.starts_with(vocab.token_bytes(TokenId(t)))
                    && !vocab.token_bytes(TokenId(t)).is_empty()
            })
            .max_by_key(|&t| vocab.token_bytes(TokenId(t)).len());
        let Some(t) = best else { return false };
        assert!(m.accept_token(TokenId(t)));
        rest = &rest[vocab.token_bytes(TokenId(t)).len()..];
    }
    check_state(&mut m, &format!("{schema} at the end"));
    m.is_completed()
}

#[test]
fn counted_lengths_mask_exactly_at_every_count() {
    let a20 = format!("\"{}\"", "a".repeat(20));
    let a31 = format!("\"{}\"", "a".repeat(31));
    let spaces = format!("\"{}\"", " ".repeat(20));
    let cases = [
        (
            json!({"type": "string", "maxLength": 5}),
            vec!["\"\"", "\"abcde\"", "\"é€xab\"", "\"\\n\\u00e9\\\"ab\""],
            vec!["\"abcdef\"", "\"the quick\""],
        ),
        (
            json!({"type": "string", "minLength": 3, "maxLength": 8}),
            vec!["\"abc\"", "\"ab\\u00e9\"", "\"q\\\"zabcd\""],
            vec!["\"ab\"", "\"\"", "\"abcdefghi\""],
        ),
        (
            json!({"type": "string", "minLength": 4}),
            vec!["\"abcd\"", "\"the quick brown fox jumps\"", &a20],
            vec!["\"abc\"", "\"\\n\\n\\n\""],
        ),
        (
            json!({"type": "string", "pattern": "^[a-z ]+$", "minLength": 2, "maxLength": 30}),
            vec!["\"ab\"", "\"the quick brown fox jumps\"", &spaces],
            vec!["\"a\"", "\"aB\"", &a31],
        ),
        (
            json!({"type": "string", "minLength": 2, "maxLength": 2}),
            vec!["\"é€\"", "\"\\n.\""],
            vec!["\"abc\"", "\"a\""],
        ),
        (
            json!({"type": "string", "maxLength": 0}),
            vec!["\"\""],
            vec!["\"a\""],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "string", "minLength": 2}}, "required": ["a", "b"]}),
            vec![
                "{\"a\":\"abc\",\"b\":\"xy\"}",
                "{\"a\":\"\",\"b\":\"the quick brown fox jumps\"}",
            ],
            vec![
                "{\"a\":\"abcd\",\"b\":\"xy\"}",
                "{\"a\":\"ab\",\"b\":\"x\"}",
            ],
        ),
    ];
    for (schema, good, bad) in cases {
        for text in good {
            assert!(walk(&schema, text), "{schema} refuses {text}");
        }
        for text in bad {
            assert!(!walk(&schema, text), "{schema} accepts {text}");
        }
    }
}

#[test]
fn json_length_reads_back_and_writes_out_what_it_cannot_count() {
    let limits = Limits::default();
    // Counted: prints as JsonLength and parses back to the same grammar.
    let out = json_schema_grammar(
        &json!({"type": "string", "maxLength": 4}),
        &options(),
        &limits,
    )
    .expect("converts");
    let printed = print_grammar(&out.grammar);
    let again = ebnf::parse(
        &printed,
        &out.grammar.rule(out.grammar.root()).name,
        &limits,
    )
    .expect("parses back");
    assert_eq!(print_grammar(&again), printed);
    // A pattern after which the string cannot always close stays written out, and exact.
    let schema = json!({"type": "string", "pattern": "^[a-z]+x$", "maxLength": 4});
    let out = json_schema_grammar(&schema, &options(), &limits).expect("converts");
    assert!(!print_grammar(&out.grammar).contains("JsonLength("));
    check(
        &options(),
        schema,
        &["\"abx\"", "\"aaax\""],
        &["\"aaaax\"", "\"ab\""],
    );
    // From EBNF, such a body is written out by the compiler, exactly.
    let g = ebnf::parse(
        r#"root ::= JsonLength("\"" [a-z]+ "x\"", 0, 3)"#,
        "root",
        &limits,
    )
    .expect("parses");
    let compiled = compile(&g, crossing_vocab(), &limits).expect("compiles");
    let m = GrammarMatcher::new(compiled);
    for (text, ok) in [("\"ax\"", true), ("\"aax\"", true), ("\"aaax\"", false)] {
        let mut f = m.fork();
        assert_eq!(f.accept_string(text) && f.is_completed(), ok, "{text}");
    }
    // Bad JsonLength arguments are errors.
    for bad in [
        r#"root ::= JsonLength("\"" r "\"", 1, 2) r ::= "a""#,
        r#"root ::= JsonLength("\"a\"", 3, 2)"#,
    ] {
        assert!(ebnf::parse(bad, "root", &limits).is_err(), "{bad}");
    }
}
