//! The bodies of the fuzz targets (`fuzz/fuzz_targets/*.rs`, run by `scripts/fuzz.sh`) and of
//! their regression tests (`crates/engine/tests/fuzz_regressions.rs`, which replays `fuzz/regressions/` and
//! `fuzz/corpus/` in every test run).
//!
//! Each target takes arbitrary bytes and drives one input-facing part of structgen. Bad input must
//! end in an error value; a target panics only on a bug: a panic inside structgen, a mask that
//! disagrees with `accept_token` on a fork (the brute-force reference), a cached mask that differs
//! from the uncached one, a jump-forward string a fork refuses, a printed grammar that does not
//! parse back to itself, or a vocabulary that breaks its own invariants. Inputs run under
//! [`fuzz_limits`], tight enough that every input finishes in well under a second.

use std::io::Cursor;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::engine::check::MaskVerifier;
use crate::engine::{CompileOptions, CompiledGrammar, GrammarCompiler, GrammarMatcher};
use crate::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions};
use crate::frontend::structural_tag::structural_tag_grammar;
use crate::grammar::print::print_grammar;
use crate::grammar::regex::regex_grammar;
use crate::grammar::{ebnf, Grammar};
use crate::util::{Limits, TokenBitmask, TokenId};
use crate::vocab::{self, TokenKind, Vocab};

/// A fuzz target: name (the file under `fuzz/fuzz_targets/`) and body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    ("ebnf", ebnf_target),
    ("json_schema", json_schema_target),
    ("structural_tag", structural_tag_target),
    ("regex", regex_target),
    ("gguf", gguf_target),
    ("tokenizer_json", tokenizer_json_target),
    ("matcher_ops", matcher_ops_target),
];

/// Limits for fuzzing: the defaults scaled down so that one input compiles in well under a
/// second (the fuzzer's own timeout catches anything slower).
pub fn fuzz_limits() -> Limits {
    Limits {
        max_rules: 2_000,
        max_grammar_nodes: 50_000,
        max_nfa_states_per_rule: 20_000,
        max_fsm_states: 50_000,
        max_repeat: 1_000,
        max_nesting: 64,
        max_schema_depth: 24,
        max_schema_alternatives: 64,
        max_earley_items: 20_000,
        max_mask_cache_bytes: 16 << 20,
        max_compile_ms: 1_000,
    }
}

/// Texts of the fuzzing vocabulary besides the printable ASCII characters: JSON and tool-call
/// pieces, multi-byte characters and lone UTF-8 bytes, so tokens cross rule and character
/// boundaries the way real BPE tokens do.
const PIECES: &[&[u8]] = &[
    b"{\"",
    b"\":",
    b"\": \"",
    b"\", \"",
    b"\"}",
    b"}}",
    b"true",
    b"false",
    b"null",
    b"name",
    b"arguments",
    b"<tool_call>",
    b"</tool_call>",
    b"\n",
    b"\n\n",
    b"  ",
    b"\t",
    b"\\n",
    b"\\\"",
    b"\\u00",
    b"12",
    b"0.5",
    b"-1",
    b"e+",
    b"abc",
    b" the",
    b"ing",
    b"\xc3\xa9",
    b"\xe2\x82\xac",
    b"\xf0\x9f\x98\x80",
    b"\xc3",
    b"\xa9",
    b"\xe2\x82",
    b"\xf0\x9f",
    b"\x98\x80",
    b"\x00",
    b"\xff",
];

/// Ids of the special tokens at the end of the fuzzing vocabulary.
const SPECIALS: &[&str] = &["<|end|>", "<|call|>"];

/// The fuzzing vocabulary: printable ASCII, [`PIECES`], a padding hole and two special tokens
/// (the first is the stop token).
pub fn fuzz_vocab() -> &'static Arc<Vocab> {
    static VOCAB: OnceLock<Arc<Vocab>> = OnceLock::new();
    VOCAB.get_or_init(|| {
        let mut entries: Vec<(u32, Vec<u8>, TokenKind)> = (0x20u8..0x7F)
            .map(|b| vec![b])
            .chain(PIECES.iter().map(|p| p.to_vec()))
            .enumerate()
            .map(|(i, b)| (i as u32, b, TokenKind::Normal))
            .collect();
        // One id left out: padding, as in real vocabularies rounded up to a multiple of 64.
        let first_special = entries.len() as u32 + 1;
        for (i, s) in SPECIALS.iter().enumerate() {
            entries.push((
                first_special + i as u32,
                s.as_bytes().to_vec(),
                TokenKind::Special,
            ));
        }
        let size = first_special as usize + SPECIALS.len();
        Arc::new(Vocab::new(size, entries, vec![TokenId(first_special)]))
    })
}

/// A compiler over the fuzzing vocabulary (one per target, so masks are shared between inputs
/// the way a server shares them between requests).
fn compiler() -> GrammarCompiler {
    GrammarCompiler::new(
        Arc::clone(fuzz_vocab()),
        fuzz_limits(),
        CompileOptions::default(),
    )
}

/// A deterministic choice stream: the fuzz input's bytes, then a fixed generator.
struct Choices<'a> {
    data: &'a [u8],
    state: u64,
}

impl<'a> Choices<'a> {
    fn new(data: &'a [u8]) -> Self {
        let seed = data.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
        });
        Choices { data, state: seed }
    }

    fn byte(&mut self) -> u8 {
        if let Some((&b, rest)) = self.data.split_first() {
            self.data = rest;
            return b;
        }
        self.state = self
            .state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.state >> 33) as u8
    }

    fn below(&mut self, n: usize) -> usize {
        let x = usize::from(self.byte()) << 8 | usize::from(self.byte());
        x % n.max(1)
    }

    fn exhausted(&self) -> bool {
        self.data.is_empty()
    }
}

/// Checks the matcher's mask against the brute-force reference (every token tried on a fork), the
/// uncached mask, and its jump-forward string against a fork; returns the mask's allowed ids.
pub fn check_state(m: &mut GrammarMatcher, what: &str) -> Vec<u32> {
    let size = m.grammar().vocab().size();
    let mut mask = TokenBitmask::new(size);
    m.fill_next_token_bitmask(&mut mask);
    let mut uncached = TokenBitmask::new(size);
    m.fill_next_token_bitmask_uncached(&mut uncached);
    assert!(
        mask.words() == uncached.words(),
        "{what}: cached mask {:?} differs from uncached {:?}; {}",
        mask.allowed_ids(),
        uncached.allowed_ids(),
        m.describe_state()
    );
    let mut verifier = MaskVerifier::new(0, 0);
    for t in 0..size as u32 {
        if let Err(d) = verifier.check_step(m, &mask, 0, Some(TokenId(t)), false) {
            panic!("{what}: {d}");
        }
    }
    let jf = m.find_jump_forward_bytes();
    assert!(
        jf.is_empty() || m.fork().accept_bytes(&jf),
        "{what}: jump-forward {jf:?} refused; {}",
        m.describe_state()
    );
    mask.allowed_ids()
}

/// Walks `g` for a few steps, taking allowed tokens chosen by `choices` and checking every state.
fn walk(g: &Arc<CompiledGrammar>, choices: &mut Choices<'_>, steps: usize) {
    let mut m = GrammarMatcher::new(Arc::clone(g));
    for step in 0..steps {
        let allowed = check_state(&mut m, &format!("walk step {step}"));
        if allowed.is_empty() {
            return;
        }
        let t = allowed[choices.below(allowed.len())];
        assert!(
            m.accept_token(TokenId(t)),
            "walk step {step}: token {t} was in the mask"
        );
    }
}

/// Compiles `grammar` (errors are fine) and walks it.
fn compile_and_walk(compiler: &GrammarCompiler, grammar: &Grammar, data: &[u8]) {
    if let Ok(g) = compiler.compile(grammar) {
        walk(&g, &mut Choices::new(data), 12);
    }
}

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

fn json(data: &[u8]) -> Option<Value> {
    serde_json::from_slice(data).ok()
}

/// EBNF text: parse; a grammar that parses prints to text that parses back to the same print;
/// then compile and walk it.
pub fn ebnf_target(data: &[u8]) {
    static COMPILER: OnceLock<GrammarCompiler> = OnceLock::new();
    let Some(src) = text(data) else { return };
    let limits = fuzz_limits();
    let Ok(g) = ebnf::parse(src, "root", &limits) else {
        return;
    };
    let printed = print_grammar(&g);
    let again = ebnf::parse(&printed, "root", &limits)
        .unwrap_or_else(|e| panic!("printed grammar does not parse: {e}\n{printed}"));
    assert_eq!(print_grammar(&again), printed, "print is not a fixed point");
    compile_and_walk(COMPILER.get_or_init(compiler), &g, data);
}

/// A JSON Schema: convert, compile, walk.
pub fn json_schema_target(data: &[u8]) {
    static COMPILER: OnceLock<GrammarCompiler> = OnceLock::new();
    let Some(schema) = json(data) else { return };
    if let Ok(sg) = json_schema_grammar(&schema, &JsonSchemaOptions::default(), &fuzz_limits()) {
        compile_and_walk(COMPILER.get_or_init(compiler), &sg.grammar, data);
    }
}

/// A structural tag (xgrammar's JSON format): convert against the fuzzing vocabulary, compile,
/// walk.
pub fn structural_tag_target(data: &[u8]) {
    static COMPILER: OnceLock<GrammarCompiler> = OnceLock::new();
    let Some(tag) = json(data) else { return };
    let options = JsonSchemaOptions::default();
    if let Ok(t) = structural_tag_grammar(&tag, Some(fuzz_vocab()), &options, &fuzz_limits()) {
        compile_and_walk(COMPILER.get_or_init(compiler), &t.grammar, data);
    }
}

/// A regex pattern: convert, compile, walk.
pub fn regex_target(data: &[u8]) {
    static COMPILER: OnceLock<GrammarCompiler> = OnceLock::new();
    let Some(pattern) = text(data) else { return };
    if let Ok(g) = regex_grammar(pattern, &fuzz_limits()) {
        compile_and_walk(COMPILER.get_or_init(compiler), &g, data);
    }
}

/// Checks the invariants of a loaded vocabulary: every id in range has bytes consistent with its
/// kind, stop tokens are inside it, and the sorted view covers exactly the text tokens.
fn check_vocab(v: &Vocab) {
    for &s in v.stop_tokens() {
        assert!(
            s.index() < v.size(),
            "stop token {} outside vocabulary of {}",
            s.0,
            v.size()
        );
    }
    let text = (0..v.size() as u32)
        .filter(|&t| v.is_text(TokenId(t)))
        .count();
    assert_eq!(v.sorted().len(), text, "sorted view vs text tokens");
    for w in v.sorted().windows(2) {
        assert!(
            v.token_bytes(w[0]) <= v.token_bytes(w[1]),
            "sorted view out of order"
        );
    }
    assert!(v.token_bytes(TokenId(u32::MAX)).is_empty());
}

/// GGUF data: read the header and tokenizer metadata.
pub fn gguf_target(data: &[u8]) {
    if let Ok(loaded) = vocab::gguf::from_reader(&mut Cursor::new(data)) {
        check_vocab(&loaded.vocab);
    }
}

/// A `tokenizer.json`: load through the `tokenizers` crate, then build the vocabulary.
pub fn tokenizer_json_target(data: &[u8]) {
    if let Ok(t) = vocab::hf::parse(data) {
        check_vocab(&vocab::hf::from_tokenizer(&t, None));
    }
}

/// Grammars the matcher target drives: nesting, recursion, counted repetition, ambiguity,
/// whole-token terminals, TagDispatch and Unicode classes.
const MATCHER_GRAMMARS: &[&str] = &[
    r#"root ::= obj
obj ::= "{" ws (pair ("," ws pair)*)? ws "}"
pair ::= str ws ":" ws val
val ::= str | num | obj | "[" ws (val (ws "," ws val)*)? ws "]" | "true" | "false" | "null"
str ::= "\"" ([^"\\] | "\\" ["\\nt])* "\""
num ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \n\t]*"#,
    r#"root ::= TagDispatch(("<tool_call>", call), ("<|call|>", call), stop_eos=true, loop_after_dispatch=true)
call ::= "{\"name\": \"" [a-z]{1,8} "\", \"arguments\": " "{" [^{}]{0,40} "}}</tool_call>""#,
    r#"root ::= "a"{3,300} [b-z]{0,200} "e" | [a-c]{2,5} "ab"*"#,
    r#"root ::= s
s ::= s s | "a" | "ab" | ""
"#,
    r#"root ::= ([^\x00-\x7f] | "é" | "€" | [😀-😂])+ "!"?"#,
    r#"root ::= <[0, 5, 99]> "x" | <[^0]>* "end""#,
];

/// Random operation sequences on one matcher (and its forks) over a fixed grammar chosen by the
/// first byte; the state is checked against the brute-force reference after every operation.
pub fn matcher_ops_target(data: &[u8]) {
    static GRAMMARS: OnceLock<Vec<Arc<CompiledGrammar>>> = OnceLock::new();
    let grammars = GRAMMARS.get_or_init(|| {
        let limits = fuzz_limits();
        let compiler = compiler();
        MATCHER_GRAMMARS
            .iter()
            .map(|src| {
                let g = ebnf::parse(src, "root", &limits).unwrap_or_else(|e| panic!("{e}\n{src}"));
                compiler
                    .compile(&g)
                    .unwrap_or_else(|e| panic!("{e}\n{src}"))
            })
            .collect()
    });
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let g = &grammars[usize::from(pick) % grammars.len()];
    let size = g.vocab().size() as u32;
    let mut choices = Choices::new(rest);
    let mut m = GrammarMatcher::new(Arc::clone(g));
    let mut allowed = check_state(&mut m, "start");
    let mut op = 0;
    while !choices.exhausted() && op < 64 {
        op += 1;
        let what = format!("op {op}");
        match choices.byte() % 8 {
            // An allowed token, most of the time, so walks go deep.
            0..=2 if !allowed.is_empty() => {
                let t = allowed[choices.below(allowed.len())];
                assert!(
                    m.accept_token(TokenId(t)),
                    "{what}: allowed token {t} refused"
                );
            }
            // Any token id, in range or not: taken exactly when the mask allowed it.
            3 => {
                let t = (choices.below(size as usize + 4)) as u32;
                let before = m.num_steps();
                let ok = m.accept_token(TokenId(t));
                assert_eq!(ok, allowed.contains(&t), "{what}: token {t} vs mask");
                assert_eq!(m.num_steps(), before + usize::from(ok));
            }
            4 => {
                let n = choices.below(6);
                let bytes: Vec<u8> = (0..n).map(|_| choices.byte()).collect();
                let before = m.num_steps();
                let ok = m.accept_bytes(&bytes);
                assert_eq!(m.num_steps(), before + usize::from(ok), "{what}");
            }
            5 => {
                let steps = m.num_steps();
                let n = choices.below(steps + 2);
                assert_eq!(m.rollback(n).is_ok(), n <= steps, "{what}: rollback {n}");
                assert_eq!(m.num_steps(), if n <= steps { steps - n } else { steps });
            }
            6 => m = m.fork(),
            _ => {
                if choices.byte().is_multiple_of(4) {
                    m.reset();
                }
            }
        }
        allowed = check_state(&mut m, &what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_takes_empty_and_junk_input() {
        for (name, target) in TARGETS {
            for input in [
                &b""[..],
                b"\xff\xfe",
                b"{}",
                b"root ::= \"a\"",
                b"GGUF\x03\x00\x00\x00",
            ] {
                let run = std::panic::catch_unwind(|| target(input));
                assert!(run.is_ok(), "{name} panicked on {input:?}");
            }
        }
    }

    #[test]
    fn the_fuzzing_vocabulary_has_its_specials_and_a_hole() {
        let v = fuzz_vocab();
        let stop = v.stop_tokens()[0];
        assert_eq!(v.kind(stop), TokenKind::Special);
        assert_eq!(v.kind(TokenId(stop.0 - 1)), TokenKind::Padding);
        check_vocab(v);
    }
}
