//! L5 — `structgen bfcl`: BFCL-style accuracy runs of a local model, constrained and free.
//!
//! Data flow, one module per stage:
//!
//! ```text
//! bfcl_eval/data ──data──► Case ──convert──► OpenAI tools ──run──► answer text (per mode)
//!                                                                      │
//!                   report ◄── CaseResult ◄── score (parse calls, jsonschema, checker)
//! ```
//!
//! - [`data`]: question and possible-answer files → typed [`data::Case`]s;
//! - [`convert`]: BFCL function documents → OpenAI tools (BFCL's type mapping, `.` → `_`);
//! - [`run`]: one case on a model in each mode (prompt prefilled once), or its ground truth;
//! - [`score`]: answer text → calls, schema validity, parse failures, verdict;
//! - [`checker`]: the AST checker with BFCL's semantics;
//! - [`report`]: rows per category and mode, the table, the results file.

pub mod bridge;
pub mod checker;
pub mod conversation;
pub mod convert;
pub mod data;
pub mod lang;
pub mod leaderboard;
pub mod multi_turn;
pub mod reading;
pub mod report;
pub mod run;
pub mod score;

pub use data::{load, Case, Category};
pub use run::{CaseResult, Mode};
