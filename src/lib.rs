//! structgen — structured generation for LLM tool calling (the XGrammar-2 design) and an inference CLI.
//!
//! Layers, each using only the ones above it:
//!
//! | module | layer | owns |
//! |---|---|---|
//! | [`util`] | L0 | `u32` ids, [`TokenBitmask`], [`Limits`] |
//! | [`grammar`] | L1 | the grammar IR, EBNF parsing and printing, passes, per-rule byte FSMs |
//! | [`frontend`] | L2 | regex and JSON Schema → grammar |
//! | [`vocab`] | L2 | [`Vocab`] and its loaders (tokenizer.json, GGUF, tiktoken) |
//! | [`engine`] | L3 | compiling a grammar for a vocabulary (adaptive mask cache, cross-grammar pool, JIT); the Earley [`GrammarMatcher`] |
//! | [`runtime`] | L4 | models on Candle, chat templates, constrained generation |
//! | [`bench`] | L5 | `structgen bench`: workloads, engines side by side, reports |
//! | [`bfcl`] | L5 | `structgen bfcl`: BFCL data, prompts, the AST checker, accuracy reports |
//! | [`cli`] | L6 | the `structgen` command line |
//! | [`fuzzing`] | L6 | the bodies of the fuzz targets and their regression tests |
//!
//! ```
//! use std::sync::Arc;
//! use structgen::{compile, ebnf, GrammarMatcher, Limits, TokenBitmask, TokenId, TokenKind, Vocab};
//!
//! let limits = Limits::default();
//! let grammar = ebnf::parse(r#"root ::= "yes" | "no""#, "root", &limits).unwrap();
//! let tokens = [("y", 0), ("es", 1), ("no", 2), ("n", 3), ("maybe", 4)];
//! let entries = tokens.iter().map(|(t, id)| (*id, t.as_bytes().to_vec(), TokenKind::Normal));
//! let vocab = Vocab::new(6, entries.chain([(5, b"</s>".to_vec(), TokenKind::Special)]), vec![TokenId(5)]);
//! let mut matcher = GrammarMatcher::new(compile(&grammar, Arc::new(vocab), &limits).unwrap());
//!
//! let mut mask = TokenBitmask::new(6);
//! matcher.fill_next_token_bitmask(&mut mask);
//! assert_eq!(mask.allowed_ids(), vec![0, 2, 3]); // "y", "no", "n"
//! assert!(matcher.accept_token(TokenId(0)));
//! assert_eq!(matcher.find_jump_forward_string(), "es");
//! assert!(matcher.accept_token(TokenId(1)) && matcher.accept_token(TokenId(5)));
//! assert!(matcher.is_terminated());
//! ```

pub mod bench;
pub mod bfcl;
pub mod cli;
pub mod json_lines;
pub mod runtime;

pub use structgen_engine::{engine, frontend, grammar, util, vocab};

pub use structgen_engine::{
    compile, ebnf, CompiledGrammar, Grammar, GrammarBuilder, GrammarMatcher, Limits, MatcherError,
    RuleId, StateId, TokenBitmask, TokenId, TokenKind, Vocab,
};
