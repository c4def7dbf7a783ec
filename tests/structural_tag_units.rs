//! Structural tags in detail: malformed tags give errors with their JSON path; every format type and
//! XML argument style converts and accepts what it should; a literal that is a
//! special token's text matches the token by id (not its text); TagDispatch's automaton grows
//! linearly with the total length of its tags.

mod common;

use std::sync::Arc;

use serde_json::{json, Value};
use structgen::frontend::json_schema::JsonSchemaOptions;
use structgen::frontend::structural_tag::structural_tag_grammar;
use structgen::grammar::dispatch::text_pattern;
use structgen::grammar::fsm::Dfa;
use structgen::grammar::{Expr, TagDispatch};
use structgen::{compile, GrammarMatcher, Limits, RuleId, TokenBitmask, TokenId};

fn convert(tag: &Value) -> Result<structgen::Grammar, String> {
    structural_tag_grammar(tag, None, &JsonSchemaOptions::default(), &Limits::default())
        .map(|g| g.grammar)
        .map_err(|e| e.to_string())
}

fn st(format: Value) -> Value {
    json!({"type": "structural_tag", "format": format})
}

#[test]
fn malformed_tags_name_their_json_path() {
    let tag = |begin: &str| json!({"type": "tag", "begin": begin, "content": {"type": "any_text"}, "end": "</f>"});
    let cases: Vec<(Value, &str)> = vec![
        (json!([1]), "/: a structural tag must be a JSON object"),
        (
            json!({"type": "structural_tag"}),
            "/: missing field `format`",
        ),
        (
            st(json!({"type": "bogus"})),
            "/format/type: unknown format type \"bogus\"",
        ),
        (
            st(json!({"type": "const_string"})),
            "/format: missing field `value`",
        ),
        (
            st(json!({"type": "const_string", "value": 3})),
            "/format/value: expected a string",
        ),
        (
            st(json!({"type": "sequence", "elements": []})),
            "/format/elements: must not be empty",
        ),
        (
            st(
                json!({"type": "json_schema", "style": "cohere_xml", "json_schema": {
                "type": "object", "properties": {"a": {"$ref": "#/$defs/loop"}},
                "$defs": {"loop": {"anyOf": [{"$ref": "#/$defs/loop"}, {"type": "string"}]}}}}),
            ),
            "/format/json_schema/$defs/loop: cohere_xml values nest deeper than 128 schemas",
        ),
        (
            st(
                json!({"type": "json_schema", "style": "cohere_xml", "json_schema": {
                "type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}}}),
            ),
            "/format/json_schema/properties/a/$ref: \"#/$defs/none\" names no schema",
        ),
        (
            st(
                json!({"type": "json_schema", "style": "cohere_xml", "json_schema": {
                "type": "object", "properties": {"a": {"type": "array", "prefixItems": [true]}}}}),
            ),
            "/format/json_schema/properties/a/prefixItems: prefixItems is not supported",
        ),
        (
            st(json!({"type": "or", "elements": [{"type": "regex", "pattern": "(a"}]})),
            "/format/elements/0/pattern: regex",
        ),
        (
            st(json!({"type": "grammar", "grammar": "root ::= ("})),
            "/format/grammar: 1:",
        ),
        (
            st(
                json!({"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"$ref": "#/nope"}}}}),
            ),
            "/format/json_schema/properties/a",
        ),
        (
            st(json!({"type": "json_schema", "json_schema": "object"})),
            "/format/json_schema: expected a JSON Schema",
        ),
        (
            st(json!({"type": "json_schema", "json_schema": {}, "style": "yaml"})),
            "/format/style",
        ),
        (
            st(json!({"type": "tag", "begin": "<a>", "content": {"type": "any_text"}})),
            "/format: missing field `end`",
        ),
        (
            st(json!({"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": []})),
            "/format/end: must not be empty",
        ),
        (
            st(json!({"type": "triggered_tags", "triggers": ["<g"], "tags": [tag("<f=a>")]})),
            "/format/tags/0/begin: begin \"<f=a>\" does not start with any trigger",
        ),
        (
            st(
                json!({"type": "triggered_tags", "triggers": ["<f", "<f="], "tags": [tag("<f=a>")]}),
            ),
            "/format/tags/0/begin: begin \"<f=a>\" starts with several triggers",
        ),
        (
            st(
                json!({"type": "triggered_tags", "triggers": ["<f=", "<x"], "tags": [tag("<f=a>")]}),
            ),
            "/format/triggers/1: trigger \"<x\" starts no tag",
        ),
        (
            st(json!({"type": "triggered_tags", "triggers": [""], "tags": [tag("<f=a>")]})),
            "/format/triggers/0: must not be empty",
        ),
        (
            st(
                json!({"type": "triggered_tags", "triggers": ["<f="], "tags": [tag("<f=a>")], "at_least_one": "yes"}),
            ),
            "/format/at_least_one: expected true or false",
        ),
        (
            st(json!({"type": "repeat", "min": 3, "max": 2, "content": {"type": "any_text"}})),
            "/format: `min` is larger than `max`",
        ),
        (
            st(
                json!({"type": "repeat", "min": 0, "max": 1_000_000, "content": {"type": "const_string", "value": "a"}}),
            ),
            "/format: repetition bound above the limit",
        ),
        (
            st(json!({"type": "dispatch", "rules": [["", {"type": "any_text"}]]})),
            "/format/rules/0: expected a [pattern, format] pair",
        ),
        (
            st(json!({"type": "token", "token": -1})),
            "/format/token: a token id must be a non-negative integer",
        ),
        (
            st(json!({"type": "token", "token": "<|eot_id|>"})),
            "/format/token: token \"<|eot_id|>\" is named by text: give a tokenizer",
        ),
        (
            st(
                json!({"type": "token_triggered_tags", "trigger_tokens": [5], "tags": [tag("<f=a>")]}),
            ),
            "/format/tags/0/begin: tags of token_triggered_tags must begin with",
        ),
        (
            st(json!({"type": "optional"})),
            "/format: missing field `content`",
        ),
        (
            st(json!({"type": "token", "token": 16_777_217})),
            "/format/token: token id 16777217 is not below 16777216",
        ),
    ];
    for (tag, expected) in &cases {
        let err = convert(tag).expect_err(&tag.to_string());
        assert!(
            err.starts_with(expected),
            "{tag}:\n  got      {err}\n  expected {expected}…"
        );
    }
}

#[test]
fn every_format_type_converts() {
    let any = json!({"type": "any_text"});
    let t = |b: &str, e: &str| json!({"type": "tag", "begin": b, "content": {"type": "const_string", "value": "x"}, "end": e});
    let formats = vec![
        json!({"type": "const_string", "value": "hi"}),
        json!({"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}, "style": "qwen_xml"}),
        json!({"type": "qwen_xml_parameter", "json_schema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        json!({"type": "grammar", "grammar": "root ::= \"g\"+"}),
        json!({"type": "regex", "pattern": "[0-9]{2}"}),
        json!({"type": "any_text", "excludes": ["stop"]}),
        json!({"type": "sequence", "elements": [{"type": "const_string", "value": "a"}, any]}),
        json!({"type": "or", "elements": [t("<a>", "</a>"), t("<b>", "</b>")]}),
        json!({"type": "tag", "begin": "<a>", "content": any, "end": ["</a>", "</A>"]}),
        json!({"type": "tags_with_separator", "tags": [t("<a>", "</a>")], "separator": ",", "at_least_one": true}),
        json!({"type": "optional", "content": t("<a>", "</a>")}),
        json!({"type": "plus", "content": t("<a>", "</a>")}),
        json!({"type": "star", "content": t("<a>", "</a>")}),
        json!({"type": "repeat", "min": 1, "max": 3, "content": t("<a>", "</a>")}),
        json!({"type": "dispatch", "rules": [["<go>", {"type": "const_string", "value": "!"}]], "loop": false}),
        json!({"type": "token", "token": 7}),
        json!({"type": "exclude_token", "exclude_tokens": [1, 2]}),
        json!({"type": "any_tokens", "exclude_tokens": [3]}),
        json!({"type": "token_triggered_tags", "trigger_tokens": [9], "tags": [{"begin": {"type": "token", "token": 9}, "content": any, "end": {"type": "token", "token": 10}}]}),
    ];
    for f in formats {
        convert(&st(f.clone())).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    let check = |format: Value, good: &[&str], bad: &[&str]| {
        let g = convert(&st(format.clone())).expect("converts");
        let compiled = compile(&g, common::byte_vocab(), &Limits::default()).expect("compiles");
        for (text, want) in good
            .iter()
            .map(|t| (t, true))
            .chain(bad.iter().map(|t| (t, false)))
        {
            let mut m = GrammarMatcher::new(Arc::clone(&compiled));
            let ok = m.accept_string(text) && m.is_completed();
            assert_eq!(ok, want, "{format}: {text:?}");
        }
    };
    check(
        json!({"type": "tag", "begin": "<r>", "content": {"type": "any_text"}, "end": "</r>"}),
        &["<r></r>", "<r>a < b</r>"],
        &["<r>a</r>b</r>", "<r>"],
    );
    check(
        json!({"type": "json_schema", "json_schema": {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}, "required": ["city"]}, "style": "qwen_xml"}),
        &[
            "<parameter=city>\nLyon, \"FR\" <x>\n</parameter>\n",
            "<parameter=city>a</parameter><parameter=n>12</parameter>",
        ],
        &[
            "<parameter=n>1</parameter>",
            "<parameter=city>a</parameter><parameter=n>x</parameter>",
            "<parameter=zip>1</parameter>",
        ],
    );
    let city = json!({"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}, "required": ["city"]});
    check(
        json!({"type": "json_schema", "json_schema": city, "style": "minimax_xml"}),
        &["<parameter name=\"city\">Lyon</parameter>\n<parameter name=\"n\">2</parameter>"],
        &[
            "<parameter=city>Lyon</parameter>",
            "<parameter name=\"n\">2</parameter>",
        ],
    );
    check(
        json!({"type": "json_schema", "json_schema": city, "style": "deepseek_xml"}),
        &["<｜DSML｜parameter name=\"city\" string=\"true\">Lyon</｜DSML｜parameter><｜DSML｜parameter name=\"n\" string=\"false\">2</｜DSML｜parameter>"],
        &["<｜DSML｜parameter name=\"city\" string=\"false\">Lyon</｜DSML｜parameter>", "<｜DSML｜parameter name=\"city\" string=\"true\">a</｜DSML｜parameter><｜DSML｜parameter name=\"n\" string=\"true\">2</｜DSML｜parameter>"],
    );
    check(
        json!({"type": "json_schema", "json_schema": city, "style": "glm_xml"}),
        &["<arg_key>city</arg_key>\n<arg_value>Lyon</arg_value><arg_key>n</arg_key><arg_value>2</arg_value>"],
        &["<arg_key>city</arg_key><arg_value>a</arg_value></arg_value>", "<arg_key>n</arg_key><arg_value>2</arg_value>"],
    );
    check(
        json!({"type": "json_schema", "json_schema": city, "style": "kimi_k3_xml"}),
        &["<|open|>argument key=\"city\" type=\"string\"<|sep|>Ly<|close|>on<|close|>argument<|sep|><|open|>argument key=\"n\" type=\"number\"<|sep|>2<|close|>argument<|sep|>"],
        &[
            "<|open|>argument key=\"city\" type=\"object\"<|sep|>{}<|close|>argument<|sep|>",
            "<|open|>argument key=\"city\" type=\"string\"<|sep|>a<|close|>argument<|sep|><|open|>argument key=\"n\" type=\"integer\"<|sep|>2<|close|>argument<|sep|>",
        ],
    );
    // Cohere: strings raw, objects and arrays as nested elements (items without names), other
    // values JSON; a recursive `$ref` is one rule.
    let nested = json!({"type": "object", "properties": {
        "where": {"type": "object", "properties": {"city": {"type": "string"}, "ok": {"type": "boolean"}}, "required": ["city"]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "n": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["many"]}]},
        "tree": {"$ref": "#/$defs/node"}},
        "required": ["where"],
        "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "additionalProperties": false}}});
    check(
        json!({"type": "json_schema", "json_schema": nested, "style": "cohere_xml"}),
        &[
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"city\" type=\"raw\">Oslo \"N\"</cofl:value></cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\">\n <cofl:value name=\"city\" type=\"raw\">a</cofl:value><cofl:value name=\"ok\" type=\"json\"> true </cofl:value></cofl:value><cofl:value name=\"tags\" type=\"list\"><cofl:value type=\"raw\">x</cofl:value><cofl:value type=\"raw\">y</cofl:value></cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"city\" type=\"raw\">a</cofl:value></cofl:value><cofl:value name=\"n\" type=\"raw\">many</cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"city\" type=\"raw\">a</cofl:value></cofl:value><cofl:value name=\"n\" type=\"json\">12</cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"city\" type=\"raw\">a</cofl:value></cofl:value><cofl:value name=\"tree\" type=\"dict\"><cofl:value name=\"kids\" type=\"list\"><cofl:value type=\"dict\"></cofl:value></cofl:value></cofl:value>",
        ],
        &[
            "<cofl:value name=\"where\" type=\"raw\">Oslo</cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"ok\" type=\"json\">true</cofl:value></cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"city\" type=\"json\">\"a\"</cofl:value></cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"city\" type=\"raw\">a</cofl:value></cofl:value><cofl:value name=\"tags\" type=\"list\"></cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"city\" type=\"raw\">a</cofl:value></cofl:value><cofl:value name=\"tags\" type=\"list\"><cofl:value name=\"0\" type=\"raw\">x</cofl:value></cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"city\" type=\"raw\">a</cofl:value></cofl:value><cofl:value name=\"n\" type=\"raw\">12</cofl:value>",
            "<cofl:value name=\"where\" type=\"dict\"><cofl:value name=\"city\" type=\"raw\">a</cofl:value></cofl:value><cofl:value name=\"tree\" type=\"dict\"><cofl:value name=\"x\" type=\"json\">1</cofl:value></cofl:value>",
        ],
    );
    // any_order: members in any order, each listed one at most once and the required ones all,
    // in JSON (nested objects too) and in the XML styles.
    let pair = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
        "o": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"]}},
        "required": ["a", "b"], "additionalProperties": false});
    check(
        json!({"type": "json_schema", "json_schema": pair, "any_order": true}),
        &[
            "{\"b\": \"x\", \"a\": 1}",
            "{\"a\": 1, \"o\": {\"y\": 2, \"x\": 1}, \"b\": \"x\"}",
        ],
        &[
            "{\"b\": \"x\"}",
            "{\"b\": \"x\", \"a\": 1, \"a\": 2}",
            "{\"a\": 1, \"b\": \"x\", \"c\": 1}",
        ],
    );
    check(
        json!({"type": "json_schema", "json_schema": pair, "any_order": false}),
        &["{\"a\": 1, \"b\": \"x\"}"],
        &["{\"b\": \"x\", \"a\": 1}"],
    );
    check(
        json!({"type": "json_schema", "json_schema": pair, "style": "qwen_xml", "any_order": true}),
        &["<parameter=b>x</parameter><parameter=a>1</parameter>", "<parameter=o>{\"y\": 1, \"x\": 2}</parameter><parameter=a>1</parameter><parameter=b>x</parameter>"],
        &["<parameter=b>x</parameter>", "<parameter=a>1</parameter><parameter=b>x</parameter><parameter=a>1</parameter>"],
    );
    check(
        json!({"type": "json_schema", "json_schema": pair, "style": "cohere_xml", "any_order": true}),
        &["<cofl:value name=\"b\" type=\"raw\">x</cofl:value><cofl:value name=\"a\" type=\"json\">1</cofl:value>"],
        &["<cofl:value name=\"b\" type=\"raw\">x</cofl:value><cofl:value name=\"b\" type=\"raw\">x</cofl:value><cofl:value name=\"a\" type=\"json\">1</cofl:value>"],
    );
    // Without a parameters schema any members are taken, raw or JSON.
    check(
        json!({"type": "json_schema", "json_schema": true, "style": "cohere_xml"}),
        &["<cofl:value name=\"q\" type=\"json\">[1, 2]</cofl:value><cofl:value name=\"s\" type=\"raw\">x</cofl:value>"],
        &["<cofl:value name=\"q\" type=\"json\">[1,</cofl:value>", "<cofl:value type=\"raw\">x</cofl:value>"],
    );
    // A schema that admits any keys: free arguments, each value of the type its attribute names.
    check(
        json!({"type": "json_schema", "json_schema": true, "style": "kimi_k3_xml"}),
        &["<|open|>argument key=\"k\" type=\"boolean\"<|sep|>true<|close|>argument<|sep|><|open|>argument key=\"s\" type=\"string\"<|sep|>x<|close|>argument<|sep|>"],
        &["<|open|>argument key=\"k\" type=\"boolean\"<|sep|>yes<|close|>argument<|sep|>"],
    );
    check(
        json!({"type": "json_schema", "json_schema": true, "style": "qwen_xml"}),
        &["<parameter=q>{\"type\": \"string\"}</parameter>"],
        &["<parameter=1q>x</parameter>"],
    );
    check(
        json!({"type": "triggered_tags", "triggers": ["<f"], "tags": [t("<f1>", "</f>")], "at_least_one": true, "stop_after_first": true}),
        &["<f1>x</f>"],
        &["", "hi <f1>x</f>", "<f1>x</f> bye"],
    );
}

#[test]
fn special_token_literals_match_the_token() {
    let Some(_) = common::shared_dir("special_token_literals_match_the_token") else {
        return;
    };
    let loaded = common::llama3().expect("llama3");
    let tag = st(
        json!({"type": "tag", "begin": "<|python_tag|>", "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}, "end": "<|eom_id|>"}),
    );
    let limits = Limits::default();
    let g = structural_tag_grammar(
        &tag,
        Some(&loaded.vocab),
        &JsonSchemaOptions::default(),
        &limits,
    )
    .expect("converts");
    let compiled = compile(&g.grammar, Arc::new(loaded.vocab.clone()), &limits).expect("compiles");
    let python_tag = TokenId(128_010);
    let mut m = GrammarMatcher::new(Arc::clone(&compiled));
    let mut mask = TokenBitmask::new(loaded.vocab.size());
    m.fill_next_token_bitmask(&mut mask);
    assert!(mask.is_allowed(python_tag));
    assert_eq!(mask.count_allowed(), 1, "only the special token may start");
    let text_start = common::encode(&loaded, "<|");
    assert!(!m.fork().accept_token(text_start[0]), "its text is refused");
    assert!(m.accept_token(python_tag));
    for t in common::encode(&loaded, r#"{"n": 3}"#) {
        assert!(m.accept_token(t));
    }
    assert!(!m.is_completed());
    assert!(m.accept_token(TokenId(128_008)), "<|eom_id|> by id");
    assert!(m.is_completed());
}

/// States and edges of one TagDispatch with `n` tags of 10 bytes.
fn dispatch_size(n: usize) -> (usize, usize, usize) {
    let tags: Vec<_> = (0..n)
        .map(|i| {
            // "<" + 8 pseudo-random lowercase letters + ">": 10 bytes, little shared prefix
            let name: String = (0..8u64)
                .map(|k| {
                    let h = (i as u64 * 0x9E37_79B9 + k * 0x85EB_CA6B) ^ (k << 29);
                    char::from(b'a' + (h % 26) as u8)
                })
                .collect();
            (text_pattern(&format!("<{name}>")), RuleId(i as u32))
        })
        .collect();
    let bytes = tags.iter().map(|(p, _)| p.len()).sum();
    let d = TagDispatch {
        tags,
        stop_eos: true,
        stop_str: Vec::new(),
        loop_after_dispatch: true,
        excludes: Vec::new(),
    };
    let dfa = Dfa::from_expr(&Expr::Dispatch(Box::new(d)), "dispatch", 1_000_000).expect("builds");
    let edges = dfa
        .states
        .iter()
        .map(|s| s.bytes.len() + s.refs.len())
        .sum();
    (bytes, dfa.states.len(), edges)
}

#[test]
fn dispatch_automaton_is_linear_in_tag_length() {
    let sizes: Vec<_> = [25, 50, 100, 200]
        .iter()
        .map(|&n| (n, dispatch_size(n)))
        .collect();
    for (n, (bytes, states, edges)) in &sizes {
        println!("{n} tags, {bytes} bytes: {states} states, {edges} edges");
        assert!(
            *states <= bytes + 16,
            "{n} tags: {states} states for {bytes} bytes"
        );
        assert!(
            *edges <= 16 * states,
            "{n} tags: {edges} edges for {states} states"
        );
    }
    let (_, (_, s100, e100)) = sizes[2];
    let (_, (_, s200, e200)) = sizes[3];
    assert!(
        s200 <= 2 * s100 + 16 && e200 <= 2 * e100 + 64,
        "doubling the tags at most doubles the automaton"
    );
}

#[test]
fn ebnf_dispatch_and_token_errors() {
    let limits = Limits::default();
    for (src, expected) in [
        (
            "root ::= TagDispatch((\"a\", r), stop_str=(\"\"))\nr ::= \"x\"",
            "an empty string in `stop_str`",
        ),
        (
            "root ::= TagDispatch((\"a\", r), excludes=(\"\"))\nr ::= \"x\"",
            "an empty string in `excludes`",
        ),
        (
            "root ::= TagDispatch((\"\", r))\nr ::= \"x\"",
            "a tag is empty",
        ),
        (
            "root ::= TagDispatch((\"a\", r), bogus=true)\nr ::= \"x\"",
            "unknown argument `bogus`",
        ),
        (
            "root ::= <[16777216]>",
            "token id 16777216 is not below 16777216",
        ),
        ("root ::= <[1, x]>", "unexpected 'x'"),
        ("root ::= <[]>", "no token ids"),
    ] {
        let err = structgen::ebnf::parse(src, "root", &limits)
            .expect_err(src)
            .to_string();
        assert!(err.contains(expected), "{src}: {err}");
    }
}
