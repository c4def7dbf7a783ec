//! L3 — the engine: compile a grammar against a vocabulary once, then drive one matcher per sequence.
//!
//! - [`compiler`]: `Grammar` + `Vocab` → `Arc<CompiledGrammar>` (immutable, `Send + Sync`): passes,
//!   per-rule DFAs, productive-rule trimming, the frozen global automaton.
//! - [`earley`]: the byte-level Earley parser over the rule automata, keeping every byte position's
//!   item set so that any suffix can be dropped (rollback) in O(1).
//! - [`mask`]: the token-mask walk over the vocabulary's sorted order with prefix-trie skipping.
//! - [`matcher`]: [`GrammarMatcher`], the per-sequence state and its public API.
//! - [`check`]: stepping a token sequence with a mask before every token (`structgen check`).

pub mod check;
pub mod compiler;
pub mod earley;
pub mod mask;
pub mod matcher;

pub use compiler::{build_automaton, compile, Automaton, CompiledGrammar};
pub use matcher::{GrammarMatcher, MatcherError};
