//! L2 — front ends: other grammar sources lowered through the same IR as EBNF.
//!
//! - [`json_schema`]: JSON Schema → typed `Schema` → grammar.
//! - [`structural_tag`]: xgrammar's structural-tag JSON → typed `Format` → grammar (TagDispatch).
//! - [`tools`]: an OpenAI tool list read and checked; the call styles and request options.
//! - [`tool_tag`]: a tool list + a style + options → structural tag.
//! - [`tool_calls`]: assistant text + that style → the calls it holds.
//! - [`lark`]: a Lark grammar (xgrammar's and llguidance's dialect) → grammar.
//! - `call_formats`: the other formats models write calls in (Markdown, bare JSON, ...).

pub(crate) mod call_formats;
pub mod json_schema;
pub mod lark;
pub mod structural_tag;
pub mod tool_calls;
pub mod tool_tag;
pub mod tools;
