//! L0 — primitives every other layer uses.
//!
//! - `ids`: `u32` newtype ids (`RuleId`, `StateId`, `TokenId`) with checked constructors; they index
//!   dense `Vec`s, never `HashMap`s.
//! - `bitmask`: [`TokenBitmask`], the packed allowed-token mask (bit = 1 means allowed), laid out as
//!   xgrammar and vLLM expect: `ceil(vocab_size / 32)` little-endian `u32` words, token `t` at bit `t % 32`
//!   of word `t / 32`.
//! - `limits`: [`Limits`], every resource bound of the engine in one place.
//! - `marker`: how a whole token (by id) appears to the byte-level parser.
//! - `fingerprint`: [`Fingerprint`], 128-bit structural hashes used as memo and cache keys.
//! - [`guard`]: third-party parsers' panics on corrupt input turned into errors.
//! - `slices`: `SliceInterner`, dense ids for distinct `u32` slices (automaton construction).
//! - `graph`: strongly connected components (rule call graphs, automaton states).
//! - `byte_set`: [`ByteSet`], 256-bit byte sets.
//! - `kept`: buffers a thread keeps between uses.
//! - `memo`: `Memo`, results shared between grammars by key, bounded by bytes.

mod bitmask;
mod byte_set;
mod fingerprint;
pub(crate) mod graph;
pub mod guard;
mod ids;
pub(crate) mod json_lexer;
pub(crate) mod kept;
mod limits;
mod loop_class;
pub(crate) mod marker;
pub(crate) mod memo;
pub(crate) mod slices;

pub use bitmask::{TokenBitmask, TokenBitmaskMut};
pub use byte_set::{add_range, byte_at_or_above, has_byte, ByteSet};
pub use fingerprint::{fingerprint, hash_json, Fingerprint};
pub use ids::{IdOverflow, RuleId, StateId, TokenId};
pub use limits::{Budget, LimitError, Limits};
pub use loop_class::{is_continuation, member_count, CharShape, LoopClass, WIDE_CHAR_SHAPES};
