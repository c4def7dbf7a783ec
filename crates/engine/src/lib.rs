//! structgen-engine — the structured-generation engine of structgen, with no model runtime.
//!
//! (first pass; documented below once the public API is settled)

pub mod engine;
pub mod frontend;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod grammar;
pub mod util;
pub mod vocab;

pub use engine::{compile, CompiledGrammar, GrammarMatcher, MatcherError};
pub use grammar::{ebnf, Grammar, GrammarBuilder};
pub use util::{Limits, RuleId, StateId, TokenBitmask, TokenId};
pub use vocab::{TokenKind, Vocab};
