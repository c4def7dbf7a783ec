//! Repetition compression keeps the language and every mask: counted rules against the same
//! grammar with every repetition unrolled, on random walks over a vocabulary of runs that cross
//! iteration and bound boundaries inside one token.

use std::sync::Arc;

use structgen::engine::{
    CompileOptions, CompiledGrammar, GrammarCompiler, GrammarMatcher, Precompute,
};
use structgen::grammar::ebnf;
use structgen::util::{Limits, RuleId, TokenBitmask, TokenId};
use structgen::vocab::{TokenKind, Vocab};

const GRAMMARS: &[&str] = &[
    r#"root ::= "x" ("a" | "b"){3,40} "y""#,
    r#"root ::= "x" "a"{5,37} "y""#,
    r#"root ::= "q" ("a"? "b"?){3,50} "y""#,
    r#"root ::= ("[" [ab]{0,40} "]"){2,36}"#,
    "root ::= item{4,100} \"y\"\nitem ::= \"a\" | \"bb\"",
    r#"root ::= "x" "a"{34,} "y""#,
    r#"root ::= ("x" | "a"{0,60}) ("y" | "ba"{40})"#,
];

fn vocab() -> Arc<Vocab> {
    let mut pieces: Vec<String> = [
        "x", "q", "y", "b", "bb", "ab", "ba", "ay", "by", "[", "]", "][",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for n in [1, 2, 3, 4, 5, 7, 8, 16, 33] {
        pieces.push("a".repeat(n));
        pieces.push(format!("{}y", "a".repeat(n)));
        pieces.push(format!("{}]", "a".repeat(n)));
        pieces.push(format!("b{}", "a".repeat(n)));
    }
    let mut entries: Vec<(u32, Vec<u8>, TokenKind)> = pieces
        .into_iter()
        .enumerate()
        .map(|(i, p)| (i as u32, p.into_bytes(), TokenKind::Normal))
        .collect();
    let stop = entries.len() as u32;
    entries.push((stop, b"</s>".to_vec(), TokenKind::Special));
    Arc::new(Vocab::new(entries.len(), entries, vec![TokenId(stop)]))
}

fn compile(src: &str, threshold: Option<u32>) -> Arc<CompiledGrammar> {
    let g = ebnf::parse(src, "root", &Limits::default()).expect("grammar parses");
    let options = CompileOptions {
        precompute: Precompute::Top(0),
        repetition_threshold: threshold,
        ..CompileOptions::default()
    };
    GrammarCompiler::new(vocab(), Limits::default(), options)
        .compile(&g)
        .expect("grammar compiles")
}

fn has_counted(g: &CompiledGrammar) -> bool {
    let a = g.automaton();
    (0..a.grammar().rules().len()).any(|r| a.counted(RuleId(r as u32)).is_some())
}

#[test]
fn counted_masks_equal_unrolled_masks() {
    for src in GRAMMARS {
        let counted = compile(src, Some(2));
        let unrolled = compile(src, None);
        assert!(has_counted(&counted), "{src}: nothing was compressed");
        assert!(!has_counted(&unrolled));
        let size = counted.vocab().size();
        let mut steps = 0;
        for seed in 0..40u64 {
            let mut a = GrammarMatcher::new(Arc::clone(&counted));
            let mut b = GrammarMatcher::new(Arc::clone(&unrolled));
            let mut rng = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for _ in 0..150 {
                let (mut cached, mut uncached, mut reference) = (
                    TokenBitmask::new(size),
                    TokenBitmask::new(size),
                    TokenBitmask::new(size),
                );
                a.fill_next_token_bitmask(&mut cached);
                a.fill_next_token_bitmask_uncached(&mut uncached);
                b.fill_next_token_bitmask_uncached(&mut reference);
                assert_eq!(
                    cached.allowed_ids(),
                    reference.allowed_ids(),
                    "{src}, seed {seed}"
                );
                assert_eq!(
                    uncached.allowed_ids(),
                    reference.allowed_ids(),
                    "{src}, seed {seed}"
                );
                assert_eq!(a.is_completed(), b.is_completed(), "{src}, seed {seed}");
                let allowed = reference.allowed_ids();
                if allowed.is_empty() {
                    break;
                }
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let token = TokenId(allowed[(rng >> 33) as usize % allowed.len()]);
                assert!(a.accept_token(token) && b.accept_token(token));
                steps += 1;
                if a.is_terminated() {
                    break;
                }
            }
        }
        assert!(steps > 100, "{src}: only {steps} steps walked");
    }
}

#[test]
fn counted_bounds_are_exact() {
    let g = compile(r#"root ::= "x" "a"{5,40} "y""#, Some(4));
    assert!(has_counted(&g));
    for n in 0..45 {
        let mut m = GrammarMatcher::new(Arc::clone(&g));
        let text = format!("x{}y", "a".repeat(n));
        let ok = m.accept_string(&text) && m.is_completed();
        assert_eq!(ok, (5..=40).contains(&n), "{n} repetitions");
    }
}

#[test]
fn huge_bounds_stay_small() {
    let g = compile(r#"root ::= "x" [ab]{0,10000} "y""#, Some(32));
    assert!(
        g.automaton().fsm().num_states() < 16,
        "{} states",
        g.automaton().fsm().num_states()
    );
    let mut m = GrammarMatcher::new(Arc::clone(&g));
    assert!(m.accept_string("x"));
    assert!(m.accept_string(&"ab".repeat(5_000)));
    assert!(!m.accept_string("a"), "the 10001st repetition is refused");
    assert!(m.accept_string("y") && m.is_completed());
}

#[test]
fn nested_bounds_under_the_threshold_are_compressed_when_unrolling_them_is_too_large() {
    // Each bound is under the default threshold; unrolled, the three together would need eight
    // million automaton states, past `max_nfa_states_per_rule`.
    let threshold = structgen::engine::automaton::REPETITION_THRESHOLD;
    assert!(threshold >= 200);
    let g = compile(
        r#"root ::= (("a" "b"{0,200}){0,200}){0,200} "y""#,
        Some(threshold),
    );
    assert!(has_counted(&g));
    let mut m = GrammarMatcher::new(Arc::clone(&g));
    assert!(m.accept_string(&"ab".repeat(300)));
    assert!(m.accept_string(&"b".repeat(199)));
    assert!(!m.accept_string("b"), "the 201st b in a row is refused");
    assert!(m.accept_string("y") && m.is_completed());
    // A single bounded run under the threshold stays unrolled: its positions are plain states.
    let run = compile(r#"root ::= "x" [ab]{0,200} "y""#, Some(threshold));
    assert!(!has_counted(&run));
}
