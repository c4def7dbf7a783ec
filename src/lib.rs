//! structgen — structured generation for LLM tool calling (the XGrammar-2 design) and an
//! inference CLI: the model runtime, chat templates, evaluation and the `structgen` command on top
//! of the engine crate, [`structgen_engine`] (re-exported here as [`engine`], [`grammar`],
//! [`frontend`], [`vocab`] and [`util`]).
//!
//! ```text
//!  crates/engine (structgen-engine, no candle / minijinja / hf-hub / clap)
//!    util → grammar → frontend, vocab → engine          the grammar, its automaton, masks, matcher
//!  crates/runtime (structgen-runtime, no clap; re-exported as `runtime`)
//!    model files → Model (candle, our CPU kernels), chat templates, constrained generation
//!    with jump-forward, rollback and speculation, batched decoding of many sequences
//!  src/ (structgen)
//!    bench     `structgen bench`: workloads, engines side by side, reports
//!    bfcl      `structgen bfcl`: BFCL data, prompts, the AST checker, accuracy reports
//!    serve     `structgen serve`: OpenAI-compatible HTTP server on the batched runtime
//!    cli       `structgen`: raw flags → one resolved config per command → the work
//! ```
//!
//! Layers, each using only the ones above it:
//!
//! | module | owns |
//! |---|---|
//! | [`engine`], [`grammar`], [`frontend`], [`vocab`], [`util`] | the engine crate |
//! | [`runtime`] | the runtime crate: models on Candle and our kernels, chat templates, constrained and batched generation |
//! | [`bench`](mod@bench) | `structgen bench`: workloads, engines side by side, reports |
//! | [`bfcl`] | `structgen bfcl`: BFCL data, prompts, the AST checker, accuracy reports |
//! | [`json_lines`] | reading JSON Lines inputs with line numbers |
//! | [`serve`] | `structgen serve`: the OpenAI-compatible server on the batched runtime |
//! | [`cli`] | the `structgen` command line |
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
pub mod serve;

pub use structgen_engine::{engine, frontend, grammar, util, vocab};
pub use structgen_runtime as runtime;

pub use structgen_engine::{
    compile, ebnf, CompiledGrammar, Grammar, GrammarBuilder, GrammarMatcher, Limits, MatcherError,
    RuleId, StateId, TokenBitmask, TokenId, TokenKind, Vocab,
};
