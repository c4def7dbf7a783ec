//! The Lark front end: the grammars of tests/data/lark/core.toml accept their `accept` strings and
//! refuse their `reject` strings (whole and byte by byte through the mask, and again after the
//! grammar is printed as EBNF and read back); the sources of errors.toml are refused with their
//! message at their line and column; special tokens, `@name` grammars and a tool call with `%json`
//! are masked exactly like the brute-force mask on a real tokenizer.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use common::{brute_force_mask, byte_vocab, encode, engine_mask, repo, shared_dir, Rng};
use serde::Deserialize;
use structgen::frontend::lark::{lark_grammar, LarkError, LarkOptions, NamedGrammar};
use structgen::grammar::print::print_grammar;
use structgen::vocab::{TokenKind, Vocab};
use structgen::{compile, ebnf, Grammar, GrammarMatcher, Limits, TokenBitmask, TokenId};

#[derive(Deserialize)]
struct Case {
    name: String,
    grammar: String,
    #[serde(default)]
    accept: Vec<String>,
    #[serde(default)]
    reject: Vec<String>,
}

#[derive(Deserialize)]
struct ErrorCase {
    name: String,
    grammar: String,
    message: String,
    line: u32,
    col: Option<u32>,
}

#[derive(Deserialize)]
struct CaseFile {
    #[serde(default)]
    case: Vec<Case>,
    #[serde(default)]
    error: Vec<ErrorCase>,
}

fn load(file: &str) -> CaseFile {
    let path: PathBuf = repo().join("tests/data/lark").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn lark(src: &str, vocab: Option<&Vocab>, named: &BTreeMap<String, NamedGrammar>) -> Grammar {
    let limits = Limits::default();
    let options = LarkOptions {
        vocab,
        named,
        limits: &limits,
    };
    lark_grammar(src, &options)
        .unwrap_or_else(|e| panic!("{src}\n{e}"))
        .grammar
}

fn lark_err(src: &str, vocab: Option<&Vocab>, named: &BTreeMap<String, NamedGrammar>) -> LarkError {
    let limits = Limits::default();
    let options = LarkOptions {
        vocab,
        named,
        limits: &limits,
    };
    match lark_grammar(src, &options) {
        Ok(g) => panic!("{src}: accepted\n{}", print_grammar(&g.grammar)),
        Err(e) => e,
    }
}

/// Whether `s` is a complete match, fed whole and fed byte by byte with each byte checked
/// against the mask first; panics where the two ways disagree.
fn matches(g: &Grammar, s: &str, what: &str) -> bool {
    let limits = Limits::default();
    let compiled = compile(g, byte_vocab(), &limits).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut whole = GrammarMatcher::new(compiled.clone());
    let whole = (s.is_empty() || whole.accept_string(s)) && whole.is_completed();
    let mut m = GrammarMatcher::new(compiled);
    let mut mask = TokenBitmask::new(257);
    let mut bytewise = true;
    for &b in s.as_bytes() {
        m.fill_next_token_bitmask(&mut mask);
        let allowed = mask.is_allowed(TokenId(u32::from(b)));
        let accepted = m.accept_token(TokenId(u32::from(b)));
        assert_eq!(
            allowed, accepted,
            "{what}: mask and accept disagree on {b:#04x} of {s:?}"
        );
        if !accepted {
            bytewise = false;
            break;
        }
    }
    if bytewise {
        m.fill_next_token_bitmask(&mut mask);
        bytewise = m.is_completed();
        assert_eq!(
            mask.is_allowed(TokenId(256)),
            bytewise,
            "{what}: stop vs complete on {s:?}"
        );
    }
    assert_eq!(
        whole, bytewise,
        "{what}: whole and byte-wise disagree on {s:?}"
    );
    whole
}

#[test]
fn lark_cases_accept_and_reject() {
    let file = load("core.toml");
    assert!(file.case.len() >= 20, "core.toml has its cases");
    let named = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &file.case {
        let g = lark(&case.grammar, None, &named);
        let printed = print_grammar(&g);
        let reread = ebnf::parse(&printed, "root", &Limits::default()).unwrap_or_else(|e| {
            panic!("{}: printed EBNF does not parse: {e}\n{printed}", case.name)
        });
        for (grammar, how) in [(&g, "lark"), (&reread, "printed")] {
            for s in &case.accept {
                if !matches(grammar, s, &case.name) {
                    failures.push(format!("{} ({how}): should accept {s:?}", case.name));
                }
            }
            for s in &case.reject {
                if matches(grammar, s, &case.name) {
                    failures.push(format!("{} ({how}): should reject {s:?}", case.name));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn lark_errors_name_line_and_column() {
    let file = load("errors.toml");
    assert!(file.error.len() >= 20, "errors.toml has its cases");
    let named = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &file.error {
        let err = lark_err(&case.grammar, None, &named);
        let text = err.to_string();
        let LarkError::Source { line, col, .. } = &err else {
            failures.push(format!("{}: not a source error: {text}", case.name));
            continue;
        };
        if !text.contains(&case.message) {
            failures.push(format!(
                "{}: message lacks {:?}: {text}",
                case.name, case.message
            ));
        }
        if *line != case.line || case.col.is_some_and(|c| c != *col) {
            failures.push(format!(
                "{}: at {line}:{col}, expected {}:{:?}: {text}",
                case.name, case.line, case.col
            ));
        }
        if !text.contains(&format!("line {line}, column {col}")) || !text.contains('^') {
            failures.push(format!("{}: no place and caret in {text}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn named_grammars_and_their_cycles() {
    let limits = Limits::default();
    let digits = ebnf::parse("root ::= [0-9]+", "root", &limits).expect("EBNF");
    let mut named = BTreeMap::new();
    named.insert("num".to_string(), NamedGrammar::Grammar(Arc::new(digits)));
    named.insert(
        "pair".to_string(),
        NamedGrammar::Source("start: @num \"-\" @num".to_string()),
    );
    let g = lark("start: \"(\" @pair \")\" | @num", None, &named);
    for s in ["(1-23)", "7"] {
        assert!(matches(&g, s, "named"), "accepts {s:?}");
    }
    for s in ["(1)", "(-1)", "x"] {
        assert!(!matches(&g, s, "named"), "rejects {s:?}");
    }
    let mut cyclic = BTreeMap::new();
    cyclic.insert(
        "a".to_string(),
        NamedGrammar::Source("start: \"x\" @b".to_string()),
    );
    cyclic.insert(
        "b".to_string(),
        NamedGrammar::Source("start: \"y\" @a".to_string()),
    );
    let err = lark_err("start: @a", None, &cyclic).to_string();
    assert!(err.contains("cycl") || err.contains("circular"), "{err}");
    let mut bad = BTreeMap::new();
    bad.insert(
        "no space".to_string(),
        NamedGrammar::Source("start: \"x\"".to_string()),
    );
    let err = lark_err("start: \"x\"", None, &bad).to_string();
    assert!(err.contains("Invalid named grammar name"), "{err}");
}

/// A vocabulary of the 256 bytes, three special tokens and a stop token.
fn special_vocab() -> Vocab {
    let entries = (0..=255u8).map(|b| (u32::from(b), vec![b], TokenKind::Normal));
    let specials = [
        (256, b"<|tool|>".to_vec(), TokenKind::Special),
        (257, b"<|end|>".to_vec(), TokenKind::Special),
        (258, b"<|other|>".to_vec(), TokenKind::Special),
        (259, b"<eos>".to_vec(), TokenKind::Special),
    ];
    Vocab::new(260, entries.chain(specials), vec![TokenId(259)])
}

/// The ids `m` allows, checked against the brute-force mask.
fn exact_mask(m: &mut GrammarMatcher, what: &str) -> Vec<u32> {
    let engine = engine_mask(m);
    assert_eq!(
        engine,
        brute_force_mask(m),
        "{what}: engine mask differs from brute force"
    );
    engine
}

#[test]
fn special_tokens_are_whole_tokens() {
    let vocab = special_vocab();
    let named = BTreeMap::new();
    let limits = Limits::default();
    let g = lark(
        "start: \"a\" <|tool|> BODY <[257]> <[^256-258]> <[*]>\nBODY: /[0-9]+/",
        Some(&vocab),
        &named,
    );
    let mut m =
        GrammarMatcher::new(compile(&g, Arc::new(vocab.clone()), &limits).expect("compiles"));
    assert_eq!(exact_mask(&mut m, "start"), vec![u32::from(b'a')]);
    assert!(m.accept_token(TokenId(u32::from(b'a'))));
    assert_eq!(
        exact_mask(&mut m, "before tool"),
        vec![256],
        "the text `<|tool|>` is not the token"
    );
    assert!(m.accept_token(TokenId(256)));
    assert!(m.accept_token(TokenId(u32::from(b'4'))));
    let mask = exact_mask(&mut m, "in BODY");
    assert!(mask.contains(&257) && !mask.contains(&256), "{mask:?}");
    assert!(m.accept_token(TokenId(257)));
    let mask = exact_mask(&mut m, "negated");
    assert_eq!(mask.len(), 256, "any byte, no special, no stop: {mask:?}");
    assert!(m.accept_token(TokenId(u32::from(b'z'))));
    let mask = exact_mask(&mut m, "any");
    assert!(mask.contains(&258) && mask.contains(&0), "{mask:?}");
    assert!(m.accept_token(TokenId(258)));
    assert!(m.is_completed());
    let err = lark_err("start: <|missing|>", Some(&vocab), &named).to_string();
    assert!(
        err.contains("<|missing|>") && err.contains("line 1, column 8"),
        "{err}"
    );
}

#[test]
fn lark_tool_call_masks_like_brute_force_on_a_real_tokenizer() {
    let Some(_) = shared_dir("lark_tool_call_masks_like_brute_force_on_a_real_tokenizer") else {
        return;
    };
    let loaded = common::smollm2().expect("../shared/tokenizers has SmolLM2");
    let limits = Limits::default();
    let named = BTreeMap::new();
    let src = r#"
start: TEXT? call+
call: "<tool_call>" %json {"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}, "required": ["name", "arguments"]} "</tool_call>" "\n"?
TEXT: /[^<]+/
"#;
    let g = lark(src, Some(&loaded.vocab), &named);
    let compiled = compile(&g, Arc::new(loaded.vocab.clone()), &limits).expect("compiles");
    let mut m = GrammarMatcher::new(compiled);
    let text = "Let me check.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
    let tokens = encode(&loaded, text);
    let mut masks = 0;
    for (k, &t) in tokens.iter().enumerate() {
        let mask = exact_mask(&mut m, &format!("call step {k}"));
        masks += 1;
        assert!(mask.contains(&t.0), "token {k} not allowed");
        assert!(m.accept_token(t), "token {k} refused");
        if k % 4 == 0 {
            let mut rng = Rng::new(k as u64);
            let mut walk = m.fork();
            for step in 0..6 {
                let mask = exact_mask(&mut walk, &format!("walk from {k}, step {step}"));
                masks += 1;
                let free: Vec<u32> = mask
                    .into_iter()
                    .filter(|t| !walk.stop_tokens().contains(&TokenId(*t)))
                    .collect();
                if free.is_empty() {
                    break;
                }
                assert!(walk.accept_token(TokenId(free[rng.below(free.len())])));
            }
        }
    }
    exact_mask(&mut m, "end");
    assert!(m.is_completed());
    assert!(masks > 40, "{masks} masks compared");
}

const PIECES: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "|",
    "*",
    "+",
    "?",
    "\"",
    "/",
    "\\",
    "~",
    "..",
    ":",
    "->",
    "%",
    "%ignore ",
    "%import common.",
    "%json ",
    "%lark {",
    "<",
    ">",
    "<[",
    "^",
    "-",
    ",",
    "#",
    "//",
    "\n",
    "\r\n",
    " ",
    "0",
    "7",
    "{2,5}",
    "x",
    "X",
    "start",
    "é",
    "😀",
    "\\u00",
    "\\x4",
    "i",
    "s",
    "[lazy]",
    "@",
    "\u{0}",
];

fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut chars: Vec<char> = src.chars().collect();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(chars.len() + 1);
        let piece: Vec<char> = PIECES[rng.below(PIECES.len())].chars().collect();
        match rng.below(3) {
            0 if at < chars.len() => {
                chars.remove(at);
            }
            1 if at < chars.len() => {
                chars.splice(at..at + 1, piece);
            }
            _ => {
                chars.splice(at..at, piece);
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn mutated_lark_grammars_end_in_a_value_or_an_error() {
    let limits = Limits::default();
    let named = BTreeMap::new();
    let vocab = special_vocab();
    let mut rng = Rng::new(54);
    let (mut lowered, mut total) = (0, 0);
    let sources: Vec<String> = load("core.toml")
        .case
        .into_iter()
        .map(|c| c.grammar)
        .chain(load("errors.toml").error.into_iter().map(|c| c.grammar))
        .collect();
    for src in &sources {
        for _ in 0..30 {
            total += 1;
            let text = mutate(src, &mut rng);
            let options = LarkOptions {
                vocab: Some(&vocab),
                named: &named,
                limits: &limits,
            };
            let Ok(g) = lark_grammar(&text, &options) else {
                continue;
            };
            lowered += 1;
            let Ok(cg) = compile(&g.grammar, Arc::new(vocab.clone()), &limits) else {
                continue;
            };
            let mut m = GrammarMatcher::new(cg);
            for _ in 0..6 {
                let allowed = engine_mask(&mut m);
                if allowed.is_empty() {
                    break;
                }
                let t = allowed[rng.below(allowed.len())];
                assert!(
                    m.accept_token(TokenId(t)),
                    "allowed {t} refused in:\n{text}"
                );
            }
        }
    }
    println!("mutated Lark grammars: {total}, lowered {lowered}");
    assert!(lowered > total / 20, "{lowered} of {total} lowered");
}

#[test]
fn deep_lark_nesting_is_an_error_not_a_stack_overflow() {
    let named = BTreeMap::new();
    let deep_group = format!("start: {}\"a\"{}", "(".repeat(100_000), ")".repeat(100_000));
    let deep_optional = format!("start: {}\"a\"{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_lark = format!(
        "start: {}\"a\"{}",
        "%lark {\nstart: ".repeat(5_000),
        "\n}".repeat(5_000)
    );
    for src in [deep_group, deep_optional, deep_lark] {
        let err = lark_err(&src, None, &named).to_string();
        assert!(
            err.contains("nested deeper than the limit"),
            "{}",
            &err[..err.len().min(300)]
        );
    }
    let chain: String = (0..100_000)
        .map(|i| format!("T{i}: T{}\n", i + 1))
        .chain(["T100000: \"x\"\nstart: T0\n".to_string()])
        .collect();
    let err = lark_err(&chain, None, &named).to_string();
    assert!(
        err.contains("terminals nested deeper"),
        "{}",
        &err[..err.len().min(300)]
    );
    let rules: String = (0..20_000)
        .map(|i| format!("r{i}: r{} \"a\"\n", i + 1))
        .chain(["r20000: \"x\"\nstart: r0\n".to_string()])
        .collect();
    let g = lark(&rules, None, &named);
    assert!(g.rules().len() > 20_000, "a long chain of rules lowers");
}

#[test]
fn special_token_triggers_dispatch_whole_tokens() {
    let vocab = special_vocab();
    let named = BTreeMap::new();
    let limits = Limits::default();
    let g = lark(
        "start: call* tail\ntail: TEXT\ncall: TEXT <|tool|> /[0-9]+/ <|end|>\nhead[lazy]: TEXT <|other|>\nTEXT: /(\\n|.)*/",
        Some(&vocab),
        &named,
    );
    let compiled = compile(&g, Arc::new(vocab.clone()), &limits).expect("compiles");
    let mut m = GrammarMatcher::new(compiled);
    let free = exact_mask(&mut m, "free");
    assert!(
        free.contains(&256) && free.contains(&u32::from(b'x')) && free.contains(&259),
        "{free:?}"
    );
    for b in *b"hi" {
        assert!(m.accept_token(TokenId(u32::from(b))), "free token {b}");
    }
    assert!(m.accept_token(TokenId(256)));
    let after = exact_mask(&mut m, "after trigger");
    assert_eq!(
        after,
        (u32::from(b'0')..=u32::from(b'9')).collect::<Vec<_>>()
    );
    assert!(m.accept_token(TokenId(u32::from(b'7'))));
    assert!(exact_mask(&mut m, "in digits").contains(&257));
    assert!(m.accept_token(TokenId(257)));
    assert!(m.is_completed(), "free text again after the call");
    exact_mask(&mut m, "after the call");
    let head = lark(
        "start: head \"!\"\nhead[lazy]: TEXT <|other|>\nTEXT: /(\\n|.)*/",
        Some(&vocab),
        &named,
    );
    let mut m = GrammarMatcher::new(compile(&head, Arc::new(vocab), &limits).expect("compiles"));
    for b in *b"text" {
        assert!(m.accept_token(TokenId(u32::from(b))), "free token {b}");
    }
    assert!(exact_mask(&mut m, "lazy head").contains(&258));
    assert!(!m.is_completed(), "the head needs its trigger token");
    assert!(m.accept_token(TokenId(258)));
    assert_eq!(exact_mask(&mut m, "after the head"), vec![u32::from(b'!')]);
}
