//! Whole-token grammar elements (`Token(...)`, `ExcludeToken(...)`, `TokenTagDispatch(...)`, the
//! `token_dispatch` structural tag) with real tokenizers: along random walks and along a tool call
//! that a special token triggers, the engine's mask equals the brute-force mask (every id tried
//! on a fork), the call parses, and what a stop token may do is only end the input.

mod common;

use std::sync::Arc;

use common::{brute_force_mask, encode, engine_mask, shared_dir, Rng};
use structgen::frontend::json_schema::JsonSchemaOptions;
use structgen::frontend::structural_tag;
use structgen::vocab::{LoadedVocab, TokenKind};
use structgen::{compile, ebnf, GrammarMatcher, Limits, TokenId};

/// Special tokens that are not stop tokens, in id order.
fn specials(loaded: &LoadedVocab) -> Vec<u32> {
    let v = &loaded.vocab;
    (0..v.size() as u32)
        .filter(|&t| {
            v.kind(TokenId(t)) == TokenKind::Special && !v.stop_tokens().contains(&TokenId(t))
        })
        .collect()
}

fn check(m: &mut GrammarMatcher, what: &str) -> Vec<u32> {
    let engine = engine_mask(m);
    let reference = brute_force_mask(m);
    assert_eq!(
        engine, reference,
        "{what}: engine mask differs from brute force"
    );
    engine
}

/// Random walks from the start, preferring the special tokens the mask allows (so that triggers
/// fire); returns the number of masks compared.
fn walks(m0: &GrammarMatcher, name: &str, specials: &[u32], seed: u64) -> usize {
    let mut rng = Rng::new(seed);
    let mut count = 0;
    for w in 0..3 {
        let mut m = m0.fork();
        for k in 0..10 {
            let mask = check(&mut m, &format!("{name} walk {w} step {k}"));
            count += 1;
            let stop = m.stop_tokens().to_vec();
            let free: Vec<u32> = mask
                .iter()
                .copied()
                .filter(|t| !stop.contains(&TokenId(*t)))
                .collect();
            if free.is_empty() {
                break;
            }
            let special: Vec<u32> = free
                .iter()
                .copied()
                .filter(|t| specials.contains(t))
                .collect();
            let pick = if !special.is_empty() && rng.below(3) == 0 {
                special[rng.below(special.len())]
            } else {
                free[rng.below(free.len())]
            };
            assert!(
                m.accept_token(TokenId(pick)),
                "{name}: allowed {pick} refused"
            );
        }
    }
    count
}

/// Feeds `tokens`, comparing masks before each; then the stop token must be allowed.
fn run(m: &mut GrammarMatcher, name: &str, tokens: &[TokenId]) -> usize {
    for (k, &t) in tokens.iter().enumerate() {
        let mask = check(m, &format!("{name} step {k}"));
        assert!(
            mask.contains(&t.0),
            "{name}: token {k} ({}) not allowed",
            t.0
        );
        assert!(m.accept_token(t), "{name}: token {k} refused");
    }
    check(m, &format!("{name} end"));
    assert!(m.is_completed(), "{name}: not complete");
    let stop = m.stop_tokens()[0];
    assert!(
        m.accept_token(stop) && m.is_terminated(),
        "{name}: stop refused"
    );
    tokens.len() + 1
}

fn matcher(loaded: &LoadedVocab, src: &str) -> GrammarMatcher {
    let limits = Limits::default();
    let g = ebnf::parse(src, "root", &limits).unwrap_or_else(|e| panic!("{src}: {e}"));
    GrammarMatcher::new(
        compile(&g, Arc::new(loaded.vocab.clone()), &limits).unwrap_or_else(|e| panic!("{e}")),
    )
}

#[test]
fn token_elements_mask_like_brute_force_on_a_real_tokenizer() {
    let Some(_) = shared_dir("token_elements_mask_like_brute_force_on_a_real_tokenizer") else {
        return;
    };
    let loaded = common::smollm2().expect("../shared/tokenizers has SmolLM2");
    let sp = specials(&loaded);
    assert!(
        sp.len() >= 3,
        "SmolLM2 has special tokens beyond its stop tokens"
    );
    let (trigger, end, banned) = (sp[0], sp[1], sp[2]);
    let grammars = [
        format!(
            "root ::= TokenTagDispatch(({trigger}, call), excludes=({banned}))\n\
             call ::= \"{{\\\"name\\\": \\\"\" [a-z_]+ \"\\\"}}\" Token({end})"
        ),
        format!("root ::= \"x\" ExcludeToken({banned}, {trigger})* Token({trigger}) \"y\""),
        format!(
            "root ::= TagDispatch((\"<call>\", mid))\n\
             mid ::= TokenTagDispatch(({trigger}, body), loop_after_dispatch=false)\n\
             body ::= [0-9]+ \"!\""
        ),
        format!("root ::= (Token({trigger}, {end}) | \"ab\")+ ExcludeToken()"),
    ];
    let mut masks = 0;
    for (i, src) in grammars.iter().enumerate() {
        let m = matcher(&loaded, src);
        masks += walks(&m, &format!("grammar {i}"), &sp, 17 + i as u64);
    }
    // The tool call of the first grammar: free text, the trigger, the call, its end token.
    let mut tokens = encode(&loaded, "Let me look that up.");
    tokens.push(TokenId(trigger));
    tokens.extend(encode(&loaded, "{\"name\": \"get_weather\"}"));
    tokens.push(TokenId(end));
    tokens.extend(encode(&loaded, " Done."));
    masks += run(&mut matcher(&loaded, &grammars[0]), "tool call", &tokens);
    // The banned token never comes as a free token; a stop token is only the end.
    let mut m = matcher(&loaded, &grammars[0]);
    assert!(!m.accept_token(TokenId(banned)));
    let stop = m.stop_tokens()[0];
    let mut inside = matcher(&loaded, &grammars[0]);
    assert!(inside.accept_token(TokenId(trigger)));
    assert!(
        !inside.accept_token(stop),
        "a stop token is not a free token inside a call"
    );
    assert!(m.accept_token(stop) && m.is_terminated());
    println!("token elements: {masks} masks equal brute force");
    assert!(masks >= 60, "only {masks} masks compared");
}

#[test]
fn token_dispatch_structural_tag_lowers_to_token_level_dispatch() {
    let Some(_) = shared_dir("token_dispatch_structural_tag_lowers_to_token_level_dispatch") else {
        return;
    };
    let loaded = common::smollm2().expect("../shared/tokenizers has SmolLM2");
    let sp = specials(&loaded);
    let (trigger, end) = (sp[0], sp[1]);
    let tag = serde_json::json!({
        "type": "structural_tag",
        "format": {
            "type": "token_dispatch",
            "rules": [[trigger, {
                "type": "sequence",
                "elements": [
                    {"type": "json_schema", "json_schema": {"type": "object",
                        "properties": {"city": {"type": "string"}}, "required": ["city"]}},
                    {"type": "token", "token": end}
                ]
            }]],
            "exclude_tokens": [sp[2]]
        }
    });
    let limits = Limits::default();
    let options = JsonSchemaOptions::default();
    let g = structural_tag::structural_tag_grammar(&tag, Some(&loaded.vocab), &options, &limits)
        .expect("token_dispatch lowers")
        .grammar;
    let compiled = compile(&g, Arc::new(loaded.vocab.clone()), &limits).expect("compiles");
    let mut m = GrammarMatcher::new(compiled);
    let mut tokens = encode(&loaded, "Sure.");
    tokens.push(TokenId(trigger));
    tokens.extend(encode(&loaded, "{\"city\": \"Paris\"}"));
    tokens.push(TokenId(end));
    run(&mut m, "token_dispatch call", &tokens);
    let bad = serde_json::json!({"type": "structural_tag", "format": {
        "type": "token_dispatch", "rules": [[trigger, {"type": "const_string", "value": "x"}]],
        "exclude_tokens": [trigger]}});
    let err = structural_tag::structural_tag_grammar(&bad, Some(&loaded.vocab), &options, &limits)
        .expect_err("a trigger that is also excluded is refused");
    assert!(err.to_string().contains("/format/rules/0/0"), "{err}");
}
