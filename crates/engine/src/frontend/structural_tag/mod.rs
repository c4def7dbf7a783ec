//! Structural tags: xgrammar's JSON format for "free text interleaved with tagged, grammar-checked
//! parts" (tool calls, reasoning blocks), lowered through the same [`GrammarBuilder`] as every other
//! front end.
//!
//! Stages: [`format::parse_structural_tag`] (JSON → typed [`format::Format`] tree, errors with JSON
//! paths) → `lower` (formats → grammar rules; `triggered_tags`, `dispatch` and `any_text` with
//! excludes become one [`crate::grammar::TagDispatch`] each).
//!
//! Special tokens: with a vocabulary, every occurrence of a special token's text inside a literal
//! (`begin`, `end`, trigger, `const_string`) is matched as that token by id, because the model emits
//! the token, not its text; everything else stays text. Token formats (`token`, `exclude_token`,
//! `any_tokens`, `token_triggered_tags`) name tokens by id or by exact text.
//!
//! Free text inside a tag never contains that tag's end: `any_text`, `triggered_tags`, `dispatch`
//! and the token formats exclude the nearest enclosing tag's end strings (tokens) automatically.
//! Exclusion is checked within each run of free text: where a dispatched format itself ends in free
//! text, an excluded string split across its end and the dispatcher's free text is not seen (as in
//! xgrammar, the search restarts after a dispatched rule).

pub mod format;
pub(crate) mod lower;

use serde_json::Value;

use super::json_schema::{JsonSchemaOptions, SchemaError, SchemaFragments};
use crate::grammar::regex::RegexError;
use crate::grammar::{EbnfError, Grammar, GrammarBuilder, GrammarError};
use crate::util::Limits;
use crate::vocab::Vocab;

/// A schema error shown after the schema's own path: errors that carry a path inside the schema
/// continue it (`.../json_schema/properties/x: ...`), the others follow a colon.
fn after_path(error: &SchemaError) -> String {
    let text = error.to_string();
    if text.starts_with('/') {
        text
    } else {
        format!(": {text}")
    }
}

/// Why a structural tag cannot be turned into a grammar; each names the JSON path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    /// A missing or malformed field, an unknown type, a trigger that starts no tag, ...
    #[error("{path}: {message}")]
    Invalid {
        /// JSON path of the offending value.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A `json_schema` format's schema failed to convert.
    #[error("{path}/json_schema{}", after_path(.error))]
    Schema {
        /// JSON path of the format.
        path: String,
        /// The schema error (its own path is inside the schema).
        error: SchemaError,
    },
    /// A `grammar` format's EBNF failed to parse.
    #[error("{path}/grammar: {error}")]
    Ebnf {
        /// JSON path of the format.
        path: String,
        /// The EBNF error, with line:col inside the grammar text.
        error: EbnfError,
    },
    /// A `regex` format's pattern failed to convert.
    #[error("{path}/pattern: {error}")]
    Regex {
        /// JSON path of the format.
        path: String,
        /// The regex error, with its offset.
        error: RegexError,
    },
    /// The grammar builder refused (e.g. too many rules).
    #[error(transparent)]
    Grammar(#[from] GrammarError),
}

/// The grammar of a structural tag and the JSON Schema keywords it does not enforce.
#[derive(Debug, Clone)]
pub struct TagGrammar {
    /// Root rule `root`.
    pub grammar: Grammar,
    /// `path: message` for each schema keyword not enforced exactly.
    pub warnings: Vec<String>,
}

/// Converts a structural tag (`{"type": "structural_tag", "format": ...}`) into a grammar. Without
/// a vocabulary every literal is text and token formats may only use ids.
pub fn structural_tag_grammar(
    tag: &Value,
    vocab: Option<&Vocab>,
    options: &JsonSchemaOptions,
    limits: &Limits,
) -> Result<TagGrammar, TagError> {
    lower_tag(tag, vocab, options, limits, None)
}

/// [`structural_tag_grammar`] taking argument schemas lowered before from `fragments` (and keeping
/// the new ones there): the same grammar, without lowering a tool's schema twice.
pub fn structural_tag_grammar_with(
    tag: &Value,
    vocab: Option<&Vocab>,
    options: &JsonSchemaOptions,
    limits: &Limits,
    fragments: &SchemaFragments,
) -> Result<TagGrammar, TagError> {
    lower_tag(tag, vocab, options, limits, Some(fragments))
}

fn lower_tag(
    tag: &Value,
    vocab: Option<&Vocab>,
    options: &JsonSchemaOptions,
    limits: &Limits,
    fragments: Option<&SchemaFragments>,
) -> Result<TagGrammar, TagError> {
    let node = format::parse_structural_tag(tag)?;
    let mut builder = GrammarBuilder::new(limits);
    let root = builder.declare("root")?;
    let mut lowering = lower::Lowering::new(&mut builder, vocab, options, limits, fragments);
    let body = lowering.node(&node, &lower::Ends::default())?;
    let warnings = lowering.warnings;
    builder.define(root, body, None)?;
    Ok(TagGrammar {
        grammar: builder.build("root")?,
        warnings,
    })
}
