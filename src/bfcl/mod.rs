//! L5 — `structgen bfcl`: BFCL-style accuracy runs of a local model, constrained and free.
//!
//! Data flow, one module per stage:
//!
//! ```text
//! bfcl_eval/data ──data──► Case ──convert──► OpenAI tools ──run──► answer text (per mode)
//!                            │                                         │
//!                            └─ multi-turn, memory ──conversation──► steps ◄──► bridge (BFCL's backends)
//!                                                                      │
//!   report, leaderboard ◄── CaseResult ◄── score / multi_turn (+ reading: BFCL's decoder)
//! ```
//!
//! - [`data`]: question and possible-answer files → typed [`data::Case`]s;
//! - [`convert`]: BFCL function documents → OpenAI tools (BFCL's type mapping, `.` → `_`);
//! - [`run`]: one single-turn case on a model in each mode (prompt prefilled once), or its
//!   ground truth;
//! - [`conversation`]: multi-turn cases, many conversations at once on the batch runtime;
//! - [`multi_turn`]: their data, ground truth and scoring by BFCL's `multi_turn_checker`;
//! - [`memory`]: the memory categories: questions, the prerequisite conversations that fill the
//!   memory, scoring by BFCL's `agentic_checker`;
//! - [`bridge`]: the Python process running bfcl-eval's own code (backends, checker, decoders);
//! - [`score`]: answer text → calls, schema validity, parse failures, verdict;
//! - [`reading`]: the verdict under the BFCL handler of the model's family;
//! - [`checker`]: the AST checker with BFCL's semantics;
//! - [`report`]: rows per category and mode, the table, the results file;
//! - [`leaderboard`]: bfcl-eval's group and overall scores.

pub mod bridge;
pub mod checker;
pub mod conversation;
pub mod convert;
pub mod data;
pub mod lang;
pub mod leaderboard;
pub mod memory;
pub mod multi_turn;
pub mod reading;
pub mod report;
pub mod run;
pub mod score;

pub use data::{load, Case, Category};
pub use run::{CaseResult, Mode};
