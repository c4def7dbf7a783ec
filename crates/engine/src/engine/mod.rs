//! L3 — the engine: compile a grammar against a vocabulary once, then drive one matcher per sequence.
//!
//! - `compiler`: `Grammar` + `Vocab` → `Arc<CompiledGrammar>` (`Send + Sync`): passes, per-rule
//!   DFAs, productive-rule trimming, the frozen global automaton, lazily filled state masks;
//!   [`GrammarCompiler`] shares masks and whole grammars across requests.
//! - `earley`: the byte-level Earley parser over the rule automata, keeping every byte position's
//!   item set so that any suffix can be dropped (rollback) in O(1).
//! - `lookahead`: first and follow bytes of the automaton.
//! - `mask`: the token-mask walk over the vocabulary's sorted order with prefix-trie skipping.
//! - `mask_cache`: the adaptive accepted / rejected / uncertain split per state and the
//!   cross-grammar pool that shares it.
//! - `bitsets`: equal accepted-token bitsets held once by a pool's masks.
//! - `run_memo`: the mask cache's first-byte runs, shared between states by the structure entered.
//! - `end_memo`: the matcher's decisions of rule ends in the root's context, shared between
//!   grammars by structure, and in other contexts, kept per grammar by the parse's open rules.
//! - `uncertain`: a state's uncertain tokens, grouped by the suffix its rule's context must accept.
//! - `set_walk`: the mask cache's out-of-context token walk, memoized over canonical Earley sets.
//! - `token_equiv`: the states of a rule no token tells apart, which share one mask.
//! - `repetition`: large `{min,max}` repetitions as counted rules (a run-time iteration count).
//! - `matcher`: [`GrammarMatcher`], the per-sequence state and its public API.
//! - [`batch`]: masks of many sequences filled in parallel with rayon.
//! - [`ahead`]: the masks a matcher is about to need, computed while the model runs.
//! - [`speculative`]: a draft checked without keeping it, and the masks of a draft-token tree.
//! - [`check`]: stepping a token sequence with a mask before every token (`structgen check`).

pub mod ahead;
pub mod automaton;
pub mod batch;
mod bitsets;
pub mod check;
mod compiler;
pub(crate) mod earley;
mod end_memo;
pub(crate) mod hash;
pub(crate) mod lookahead;
mod loops;
pub(crate) mod mask;
pub(crate) mod mask_cache;
mod matcher;
mod rule_dfa;
mod run_memo;
pub(crate) mod set_walk;
pub mod speculative;
mod token_equiv;
mod uncertain;

pub use automaton::{build_automaton, Automaton};
pub use compiler::{compile, CompileOptions, CompiledGrammar, GrammarCompiler, Precompute};
pub use mask_cache::PoolStats;
pub use matcher::{GrammarMatcher, MatcherError};
pub use speculative::{DraftTree, DraftTreeError};
