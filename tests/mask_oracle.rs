//! The oracle test: on every case grammar, with both shared tokenizers, along the tokenization of
//! every accepted string and along random walks through allowed tokens, the engine's mask equals the
//! brute-force reference (fork the matcher, try every token id). At least 2,000 masks are compared.
//! Every non-empty jump-forward string must also be accepted by a fork.

mod common;

use std::sync::Arc;

use common::{brute_force_mask, encode, engine_mask, load_cases, shared_dir, Case, Rng};
use structgen::vocab::LoadedVocab;
use structgen::{compile, ebnf, GrammarMatcher, Limits, TokenId};

/// Compares engine and reference masks at the matcher's current state.
fn check(m: &mut GrammarMatcher, what: &dyn Fn() -> String) -> Vec<u32> {
    let engine = engine_mask(m);
    let reference = brute_force_mask(m);
    if engine != reference {
        let extra: Vec<_> = engine
            .iter()
            .filter(|t| !reference.contains(t))
            .take(10)
            .collect();
        let missing: Vec<_> = reference
            .iter()
            .filter(|t| !engine.contains(t))
            .take(10)
            .collect();
        panic!(
            "{}: mask differs; engine-only {extra:?}, reference-only {missing:?}",
            what()
        );
    }
    let jf = m.find_jump_forward_bytes();
    if !jf.is_empty() {
        assert!(
            m.fork().accept_bytes(&jf),
            "{}: jump-forward {jf:?} refused",
            what()
        );
    }
    engine
}

/// Runs one case with one tokenizer; returns the number of masks compared.
fn run_case(
    case: &Case,
    loaded: &LoadedVocab,
    tok_name: &str,
    walks: usize,
    steps: usize,
) -> usize {
    let limits = Limits::default();
    let g = ebnf::parse(&case.grammar, "root", &limits)
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let compiled = compile(&g, Arc::new(loaded.vocab.clone()), &limits)
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let mut count = 0;
    for s in &case.accept {
        let tokens = encode(loaded, s);
        let mut m = GrammarMatcher::new(Arc::clone(&compiled));
        for (k, &t) in tokens.iter().enumerate() {
            let mask = check(&mut m, &|| {
                format!("{} [{tok_name}] {s:?} step {k}", case.name)
            });
            count += 1;
            assert!(
                mask.contains(&t.0),
                "{}: token {k} of {s:?} not in mask",
                case.name
            );
            assert!(m.accept_token(t));
        }
        check(&mut m, &|| format!("{} [{tok_name}] {s:?} end", case.name));
        count += 1;
        assert!(m.is_completed(), "{}: {s:?} not completed", case.name);
    }
    let mut rng = Rng::new(case.name.len() as u64 * 7919 + tok_name.len() as u64);
    for w in 0..walks {
        let mut m = GrammarMatcher::new(Arc::clone(&compiled));
        for k in 0..steps {
            let mask = check(&mut m, &|| {
                format!("{} [{tok_name}] walk {w} step {k}", case.name)
            });
            count += 1;
            let text: Vec<u32> = mask
                .iter()
                .copied()
                .filter(|t| !m.stop_tokens().contains(&TokenId(*t)))
                .collect();
            if text.is_empty() {
                break;
            }
            assert!(m.accept_token(TokenId(text[rng.below(text.len())])));
        }
    }
    count
}

#[test]
fn masks_equal_brute_force_on_both_tokenizers() {
    let Some(_) = shared_dir("masks_equal_brute_force_on_both_tokenizers") else {
        return;
    };
    let cases = load_cases();
    let (Some(small), Some(large)) = (common::smollm2(), common::llama3()) else {
        panic!("../shared/tokenizers is incomplete");
    };
    let half = cases.len() / 2;
    let (left, right) = cases.split_at(half);
    let run = |chunk: &[Case]| {
        chunk
            .iter()
            .map(|c| {
                (
                    run_case(c, &small, "smollm2", 3, 12),
                    run_case(c, &large, "llama3", 1, 8),
                )
            })
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    };
    let counts: Vec<(usize, usize)> = std::thread::scope(|s| {
        let a = s.spawn(|| run(left));
        let b = s.spawn(|| run(right));
        vec![a.join().expect("left half"), b.join().expect("right half")]
    });
    let small_masks: usize = counts.iter().map(|c| c.0).sum();
    let large_masks: usize = counts.iter().map(|c| c.1).sum();
    println!("masks compared: {small_masks} with SmolLM2, {large_masks} with Llama 3");
    assert!(
        small_masks + large_masks >= 2000,
        "only {} masks compared",
        small_masks + large_masks
    );
}

/// A 2 KB real-world JSON document under grammars/json.ebnf: every token is in its mask and accepted,
/// the end is complete with the stop token allowed, and every 25th step equals brute force (these
/// steps reach deep nesting that the short case strings do not).
#[test]
fn json_document_with_both_tokenizers() {
    let Some(_) = shared_dir("json_document_with_both_tokenizers") else {
        return;
    };
    let doc = common::read("tests/data/json/weather-forecast-2kb.json");
    let limits = Limits::default();
    let g =
        ebnf::parse(&common::read("grammars/json.ebnf"), "root", &limits).expect("json grammar");
    for (name, loaded) in [("smollm2", common::smollm2()), ("llama3", common::llama3())] {
        let loaded = loaded.expect("shared tokenizer");
        let compiled = compile(&g, Arc::new(loaded.vocab.clone()), &limits).expect("compiles");
        let mut m = GrammarMatcher::new(compiled);
        let tokens = encode(&loaded, &doc);
        for (k, &t) in tokens.iter().enumerate() {
            let mask = if k % 25 == 0 {
                check(&mut m, &|| format!("json document [{name}] step {k}"))
            } else {
                engine_mask(&mut m)
            };
            assert!(
                mask.contains(&t.0),
                "[{name}] token {k} ({t}) not in its mask"
            );
            assert!(m.accept_token(t), "[{name}] token {k} refused");
        }
        let end = check(&mut m, &|| format!("json document [{name}] end"));
        assert!(m.is_completed());
        assert!(m.stop_tokens().iter().all(|s| end.contains(&s.0)));
    }
}
