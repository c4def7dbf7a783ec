//! Corrupted grammars never panic: every case grammar is mutated many times (characters that matter
//! to the EBNF syntax inserted, deleted or replaced) and pushed through parse → compile → a few mask
//! fills and accepts. Each attempt must end in a value or an error.

mod common;

use common::{byte_vocab, load_cases, Rng};
use structgen::{compile, ebnf, GrammarMatcher, Limits, TokenBitmask, TokenId};

const PIECES: &[&str] = &[
    "(", ")", "[", "]", "{", "}", "|", "*", "+", "?", "\"", "\\", "^", "-", ",", ":", "::=", "(=",
    "#", "\n", " ", "0", "7", "{2,5}", "{,}", "x", "root", "é", "😀", "\\u00", "\\x4", "[^]",
    "\u{0}",
];

fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut chars: Vec<char> = src.chars().collect();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(chars.len() + 1);
        match rng.below(3) {
            0 if at < chars.len() => {
                chars.remove(at);
            }
            1 if at < chars.len() => {
                let piece: Vec<char> = PIECES[rng.below(PIECES.len())].chars().collect();
                chars.splice(at..at + 1, piece);
            }
            _ => {
                let piece: Vec<char> = PIECES[rng.below(PIECES.len())].chars().collect();
                chars.splice(at..at, piece);
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn mutated_grammars_end_in_a_value_or_an_error() {
    let limits = Limits::default();
    let mut rng = Rng::new(2026);
    let (mut parsed, mut compiled, mut total) = (0, 0, 0);
    for case in load_cases() {
        for _ in 0..40 {
            total += 1;
            let src = mutate(&case.grammar, &mut rng);
            let Ok(g) = ebnf::parse(&src, "root", &limits) else {
                continue;
            };
            parsed += 1;
            let Ok(cg) = compile(&g, byte_vocab(), &limits) else {
                continue;
            };
            compiled += 1;
            let mut m = GrammarMatcher::new(cg);
            let mut mask = TokenBitmask::new(257);
            for _ in 0..6 {
                m.fill_next_token_bitmask(&mut mask);
                let allowed = mask.allowed_ids();
                if allowed.is_empty() {
                    break;
                }
                let t = allowed[rng.below(allowed.len())];
                assert!(
                    m.accept_token(TokenId(t)),
                    "allowed token {t} refused in:\n{src}"
                );
                let _ = m.find_jump_forward_bytes();
            }
        }
    }
    println!("mutated grammars: {total}, parsed {parsed}, compiled {compiled}");
    assert!(parsed > total / 10 && compiled > 0);
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let limits = Limits::default();
    for src in [
        format!("root ::= \"a\"{}", "?".repeat(100_000)),
        format!(
            "root ::= {}\"a\"{}",
            "(".repeat(100_000),
            ")".repeat(100_000)
        ),
        format!("root ::= \"a\"{}", "{1,2}".repeat(10_000)),
    ] {
        let err = ebnf::parse(&src, "root", &limits).expect_err("too deep");
        assert!(
            err.to_string().contains("nested deeper than the limit"),
            "{err}"
        );
    }
}

#[test]
fn large_bounded_repetitions_compile() {
    let limits = Limits::default();
    for src in [
        "root ::= [0-9]{0,10000}",
        "root ::= [^\"\\\\]{0,10000}",
        "root ::= (\"ab\" | [c-z]){3,5000}",
    ] {
        let g = ebnf::parse(src, "root", &limits).expect("parses");
        let cg = compile(&g, byte_vocab(), &limits).expect("compiles");
        let mut m = GrammarMatcher::new(cg);
        assert!(
            m.accept_string(&"7".repeat(3))
                || m.accept_string("\u{e9}\u{e9}\u{e9}")
                || m.accept_string("abab")
        );
    }
}
