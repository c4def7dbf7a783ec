//! Rollback, fork and reset: after accepting k tokens and rolling back j, the matcher is
//! indistinguishable (mask, completion, jump-forward) from a fresh matcher fed the first k − j tokens;
//! forks are independent; a stop token can be rolled back; rolling back too far is an error.

mod common;

use std::sync::Arc;

use common::{encode, engine_mask, load_cases, shared_dir, Rng};
use structgen::{compile, ebnf, GrammarMatcher, Limits, MatcherError, TokenId};

fn state(m: &mut GrammarMatcher) -> (Vec<u32>, bool, bool, Vec<u8>) {
    (
        engine_mask(m),
        m.is_completed(),
        m.is_terminated(),
        m.find_jump_forward_bytes(),
    )
}

#[test]
fn rollback_equals_fresh_prefix() {
    let Some(_) = shared_dir("rollback_equals_fresh_prefix") else {
        return;
    };
    let loaded = common::smollm2().expect("SmolLM2 tokenizer");
    let vocab = Arc::new(loaded.vocab.clone());
    let limits = Limits::default();
    let mut rng = Rng::new(42);
    let mut checked = 0;
    for case in load_cases() {
        let g = ebnf::parse(&case.grammar, "root", &limits).expect("case parses");
        let compiled = compile(&g, Arc::clone(&vocab), &limits).expect("case compiles");
        for s in &case.accept {
            let mut tokens = encode(&loaded, s);
            tokens.extend(vocab.stop_tokens().first().copied());
            let n = tokens.len();
            for _ in 0..3 {
                let k = 1 + rng.below(n);
                let j = rng.below(k + 1);
                let mut m = GrammarMatcher::new(Arc::clone(&compiled));
                for &t in &tokens[..k] {
                    assert!(m.accept_token(t), "{}: {s:?}", case.name);
                }
                m.rollback(j).expect("j <= k");
                let mut fresh = GrammarMatcher::new(Arc::clone(&compiled));
                for &t in &tokens[..k - j] {
                    assert!(fresh.accept_token(t));
                }
                assert_eq!(
                    state(&mut m),
                    state(&mut fresh),
                    "{}: {s:?} k={k} j={j}",
                    case.name
                );
                // Going forward again after the rollback reaches the same end state.
                for &t in &tokens[k - j..] {
                    assert!(
                        m.accept_token(t),
                        "{}: {s:?} replay after rollback",
                        case.name
                    );
                }
                assert!(m.is_terminated());
                checked += 1;
            }
        }
    }
    println!("rollback comparisons: {checked}");
    assert!(checked >= 100);
}

#[test]
fn fork_is_independent_and_reset_restarts() {
    let Some(_) = shared_dir("fork_is_independent_and_reset_restarts") else {
        return;
    };
    let loaded = common::smollm2().expect("SmolLM2 tokenizer");
    let limits = Limits::default();
    let src = common::read("grammars/json.ebnf");
    let g = ebnf::parse(&src, "root", &limits).expect("json grammar");
    let compiled = compile(&g, Arc::new(loaded.vocab.clone()), &limits).expect("compiles");
    let tokens = encode(&loaded, r#"{"key": [1, 2, {"x": "y"}], "ok": true}"#);
    let mut m = GrammarMatcher::new(Arc::clone(&compiled));
    for &t in &tokens[..5] {
        assert!(m.accept_token(t));
    }
    let before = state(&mut m);
    let mut f = m.fork();
    for &t in &tokens[5..] {
        assert!(f.accept_token(t));
    }
    assert!(f.is_completed());
    assert_eq!(
        state(&mut m),
        before,
        "advancing a fork changed the original"
    );
    m.reset();
    assert_eq!(m.num_steps(), 0);
    assert_eq!(state(&mut m), state(&mut GrammarMatcher::new(compiled)));
    assert_eq!(
        m.rollback(1),
        Err(MatcherError::RollbackTooFar {
            requested: 1,
            available: 0
        })
    );
    let stop = loaded.vocab.stop_tokens()[0];
    assert!(
        !m.accept_token(stop),
        "stop token before the JSON value is complete"
    );
    assert!(!m.accept_token(TokenId(u32::MAX)), "out-of-range id");
}
