//! `structgen serve`: an OpenAI-compatible HTTP server on the batched runtime, whose tool calls
//! are produced under the grammar of each request's tools and `tool_choice`, and whose schema
//! keywords are enforced or named (never silently dropped).
//!
//! Data flow of one request:
//!
//! ```text
//!  HTTP body ─ request.rs ─▶ ChatRequest ─ (blocking thread) ─▶ prompt tokens + constraint.rs matcher
//!      ─▶ batch::Runtime (the model's own thread, shared forward passes) ─▶ events (sink → channel)
//!      ─▶ answer.rs (text → content / reasoning / tool calls, or stream deltas) ─▶ shape.rs JSON
//! ```
//!
//! Invariants:
//! - the model runs only on the runtime's thread; the HTTP runtime (tokio) never blocks on it:
//!   templates, tokenization and grammar compilation run on its blocking threads;
//! - every call in an answer was generated under the request's grammar (`required` and a named
//!   function always produce a call, `none` never does); a keyword the grammar does not enforce is
//!   named in the answer's `structgen.unenforced` field and the `x-structgen-unenforced` header
//!   (`--schema-policy warn`), or the request is refused (`refuse`);
//! - at most `--max-queue` requests are admitted at once; beyond that the answer is 503 with
//!   `Retry-After` instead of an unbounded queue;
//! - a client that goes away mid-stream has its sequence cancelled at the runtime's next step;
//! - SIGTERM / Ctrl-C stop accepting connections and let the admitted requests finish;
//! - each request's events come through its own channel, so no request sees another's tokens.
//!
//! The extension field `structgen` of every answer (and of a stream's last chunk) carries:
//! `constrained`, `grammar.{compile_ms, mask_us_p50, mask_us_p99, mask_wait_us_p50,
//! mask_wait_us_p99, overhead_pct}`, `tokens_forced`, `prefill_ms`, `decode_tokens_per_s`,
//! `unenforced: [{param, path, message}]` and `post_check_violation`.

mod answer;
mod constraint;
mod driver;
mod error;
mod fields;
mod format;
mod http;
mod metrics;
mod prepare;
mod reply;
mod request;
mod shape;

pub use constraint::SchemaPolicy;
pub use http::{serve, ServeConfig, ServeError, ServedModel};
