//! Data-driven acceptance: every grammar in tests/data/cases accepts its `accept` strings completely
//! and does not fully match its `reject` strings, both fed at once and byte by byte through the mask.

mod common;

use std::collections::BTreeMap;

use common::{byte_vocab, load_cases};
use structgen::{compile, ebnf, GrammarMatcher, Limits, TokenBitmask, TokenId};

fn matcher(src: &str, name: &str) -> GrammarMatcher {
    let limits = Limits::default();
    let g = ebnf::parse(src, "root", &limits).unwrap_or_else(|e| panic!("{name}: {e}"));
    GrammarMatcher::new(
        compile(&g, byte_vocab(), &limits).unwrap_or_else(|e| panic!("{name}: {e}")),
    )
}

/// Feeds `s` one byte-token at a time, checking each byte is in the mask first. Returns whether the
/// whole string is a complete match (then the stop token must be allowed and terminate).
fn run_bytes(m: &mut GrammarMatcher, s: &str) -> bool {
    let mut mask = TokenBitmask::new(257);
    for &b in s.as_bytes() {
        m.fill_next_token_bitmask(&mut mask);
        let allowed = mask.is_allowed(TokenId(u32::from(b)));
        let accepted = m.accept_token(TokenId(u32::from(b)));
        assert_eq!(
            allowed, accepted,
            "mask and accept disagree on byte {b:#04x} of {s:?}"
        );
        if !accepted {
            return false;
        }
    }
    m.fill_next_token_bitmask(&mut mask);
    let complete = m.is_completed();
    assert_eq!(
        mask.is_allowed(TokenId(256)),
        complete,
        "stop token vs is_completed on {s:?}"
    );
    if complete {
        assert!(m.accept_token(TokenId(256)) && m.is_terminated());
    }
    complete
}

#[test]
fn cases_accept_and_reject() {
    let cases = load_cases();
    let mut per_file: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &cases {
        *per_file.entry(case.file.clone()).or_default() += 1;
        for s in &case.accept {
            let whole = {
                let mut m = matcher(&case.grammar, &case.name);
                (s.is_empty() || m.accept_string(s)) && m.is_completed()
            };
            let bytewise = run_bytes(&mut matcher(&case.grammar, &case.name), s);
            if !(whole && bytewise) {
                failures.push(format!("{}: should accept {s:?}", case.name));
            }
        }
        for s in &case.reject {
            let mut m = matcher(&case.grammar, &case.name);
            let whole = (s.is_empty() || m.accept_string(s)) && m.is_completed();
            let bytewise = run_bytes(&mut matcher(&case.grammar, &case.name), s);
            if whole || bytewise {
                failures.push(format!("{}: should reject {s:?}", case.name));
            }
        }
    }
    println!(
        "grammar cases per file: {per_file:?}, total {}",
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases.len() >= 40, "only {} grammar cases", cases.len());
}

#[test]
fn refused_input_leaves_state_unchanged() {
    for case in load_cases() {
        for s in case.accept.iter().filter(|s| !s.is_empty()) {
            let mut m = matcher(&case.grammar, &case.name);
            let half = &s[..s
                .char_indices()
                .nth(s.chars().count() / 2)
                .map_or(0, |(i, _)| i)];
            assert!(
                half.is_empty() || m.accept_string(half),
                "{}: prefix {half:?}",
                case.name
            );
            let mut mask = TokenBitmask::new(257);
            m.fill_next_token_bitmask(&mut mask);
            let before = (mask.clone(), m.is_completed(), m.num_steps());
            for junk in ["\u{0}\u{7f}", "}}}", "zzzz", "\u{1F600}!", "\"\"\""] {
                if m.accept_string(junk) {
                    m.rollback(1).expect("one step");
                }
                m.fill_next_token_bitmask(&mut mask);
                let after = (mask.clone(), m.is_completed(), m.num_steps());
                assert!(
                    after == before,
                    "{}: {junk:?} after {half:?} changed the state",
                    case.name
                );
            }
            let rest = &s[half.len()..];
            assert!(
                rest.is_empty() || m.accept_string(rest),
                "{}: rest {rest:?}",
                case.name
            );
            assert!(
                m.is_completed(),
                "{}: {s:?} after refused strings",
                case.name
            );
        }
    }
}

/// A stop token that is also a text token is only ever a stop token: the mask allows it exactly
/// when the input is complete, as `accept_token` does.
#[test]
fn stop_token_that_is_also_text() {
    let limits = Limits::default();
    let g = ebnf::parse("root ::= \"a\" [a-z]*", "root", &limits).expect("parses");
    let cg = compile(&g, byte_vocab(), &limits).expect("compiles");
    let z = TokenId(u32::from(b'z'));
    let mut m = GrammarMatcher::with_stop_tokens(cg, vec![z]);
    let mut mask = TokenBitmask::new(257);
    m.fill_next_token_bitmask(&mut mask);
    assert!(
        !mask.is_allowed(z) && !m.fork().accept_token(z),
        "not complete yet"
    );
    assert!(m.accept_token(TokenId(u32::from(b'a'))));
    m.fill_next_token_bitmask(&mut mask);
    assert!(mask.is_allowed(z), "complete after \"a\"");
    assert!(m.accept_token(z) && m.is_terminated());
}
