//! L2 — front ends: other grammar sources lowered through the same IR as EBNF.
//!
//! - [`regex`]: regex patterns (via `regex-syntax`), with ECMA-262 meaning for `\d \w \s .`.
//! - [`json_schema`]: JSON Schema → typed `Schema` → grammar.

pub mod json_schema;
pub mod regex;
