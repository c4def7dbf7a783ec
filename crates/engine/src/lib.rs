//! structgen-engine — structured generation for language models (the XGrammar-2 design), with no
//! model runtime: grammars from EBNF, JSON Schema, regular expressions, structural tags and tool
//! lists, compiled against a tokenizer's vocabulary into per-token masks, and the matcher that
//! keeps a sequence inside its grammar (masks, jump-forward, rollback).
//!
//! It depends on no tensor library, template engine, model hub or command-line parser: `regex-syntax`,
//! `serde_json`, `thiserror` and `rayon`, plus the `tokenizers` crate for the vocabulary loaders
//! (features `tokenizers` and `gguf`, on by default).
//!
//! # Data flow
//!
//! ```text
//!  EBNF text ───────── grammar::ebnf ─────────┐
//!  JSON Schema ─────── frontend::json_schema ─┤
//!  regex ───────────── grammar::regex ───────┼──► Grammar (rules of typed Expr, one root)
//!  Lark ────────────── frontend::lark ────────┤
//!  structural tag ──── frontend::structural_tag┤         │
//!  tools + call style ─ frontend::tools ──────┘         │  engine::build_automaton: optimize,
//!                                                        ▼  compress repetitions, rule DFAs, trim
//!                                                   Automaton  (no vocabulary: what the Earley
//!  tokenizer.json / GGUF / tiktoken                     │        parser and the mask walk run on)
//!        │ vocab::load                                  │
//!        ▼                                              ▼
//!      Vocab ──────────────────────────────► GrammarCompiler::compile ──► Arc<CompiledGrammar>
//!      (token bytes, sorted order)             (adaptive masks, filled on first use and shared
//!                                               across grammars by structural hash)
//!                                                        │ one per sequence
//!                                                        ▼
//!                                                  GrammarMatcher ── fill_next_token_bitmask
//!                                                  (Earley parser)   → TokenBitmask
//!                                                                  ── accept_token / rollback /
//!                                                                     find_jump_forward_string
//! ```
//!
//! | module | owns |
//! |---|---|
//! | [`util`] | ids, [`TokenBitmask`] (xgrammar's int32 layout), [`Limits`] (every resource bound) |
//! | [`grammar`] | the grammar IR, EBNF parsing and printing, passes, repetition compression, byte DFAs |
//! | [`frontend`] | JSON Schema, regex, structural tags, tool lists → grammar; reading calls back |
//! | [`vocab`] | [`Vocab`], the [`TokenSource`] trait any tokenizer implements, and the loaders |
//! | [`engine`] | the automaton, compiling for a vocabulary, masks and their caches, the matcher |
//!
//! Layers only look down the table; `tests/layering.rs` checks that, and that `engine/` and
//! `frontend/json_schema/` have no import circle.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use structgen_engine::{compile, ebnf, GrammarMatcher, Limits, TokenBitmask, TokenId, TokenKind, Vocab};
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
//!
//! A server compiling a grammar per request keeps one [`GrammarCompiler`] per vocabulary: it
//! caches whole grammars by key, tools' lowered argument schemas by fingerprint
//! ([`GrammarCompiler::schema_fragments`]), rule automata by body, and token masks by state
//! structure.

#![deny(missing_docs)]

pub mod engine;
pub mod frontend;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod grammar;
pub mod util;
pub mod vocab;

pub use engine::{
    compile, CompileOptions, CompiledGrammar, GrammarCompiler, GrammarMatcher, MatcherError,
};
pub use grammar::{ebnf, Grammar, GrammarBuilder};
pub use util::{Limits, RuleId, StateId, TokenBitmask, TokenId};
pub use vocab::{TokenKind, TokenSource, Vocab};
