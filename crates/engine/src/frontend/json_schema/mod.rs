//! JSON Schema → grammar.
//!
//! Stages, each in its own file:
//! - [`schema`]: the untyped `serde_json::Value` is parsed into a typed [`schema::Schema`] (keyword
//!   types checked, BFCL aliases `dict` / `float` / `tuple` / `any` mapped, unsupported keywords
//!   recorded as warnings with their JSON path);
//! - [`merge`]: `allOf`, `anyOf` / `oneOf` and `$ref` with sibling keywords are brought into a
//!   disjunction of flat conjunctions ([`merge::Conj`]); a bare `$ref` stays a reference and becomes
//!   its own rule, which is what makes recursive schemas work;
//! - [`lower`], [`objects`], [`arrays`], [`numbers`], [`strings`]: each conjunction becomes grammar
//!   expressions through the shared [`GrammarBuilder`].
//!
//! Semantics: properties appear in schema order, required ones must appear, optional ones may be
//! left out (or, with [`PropertyOrder::Flexible`], required ones in a fixed order and the others
//! anywhere); with [`JsonSchemaOptions::strict`] (default) an object that lists `properties` or
//! `patternProperties` admits no others unless `additionalProperties` says so, and one that lists
//! neither admits any members (JSON Schema's meaning, and xgrammar's). Every keyword that is
//! not enforced exactly is reported as a [`SchemaWarning`] naming its JSON path; with
//! `strict_schema` a warning is an error instead.

pub mod arrays;
pub mod lower;
pub mod merge;
pub mod numbers;
pub mod objects;
pub mod post_check;
pub mod schema;
pub mod strings;

use serde_json::Value;

use crate::grammar::{Grammar, GrammarBuilder, GrammarError};
use crate::util::{Limits, RuleId};

/// How the generated JSON is laid out and how strictly the schema is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonSchemaOptions {
    /// Allow whitespace around every structural token (bounded by `max_whitespace`).
    pub any_whitespace: bool,
    /// Most whitespace characters in one place with `any_whitespace`; `None` is unbounded.
    pub max_whitespace: Option<u32>,
    /// Without `any_whitespace`: pretty-print with this many spaces per level (one item per line).
    pub indent: Option<usize>,
    /// Without `any_whitespace`: the item and key separators; default `(", ", ": ")`, or
    /// `(",", ": ")` with `indent`.
    pub separators: Option<(String, String)>,
    /// Objects that list `properties` or `patternProperties` admit no others unless
    /// `additionalProperties` says otherwise (objects that list neither stay open).
    pub strict: bool,
    /// Where object members may appear.
    pub property_order: PropertyOrder,
    /// Treat every warning (keyword not enforced) as an error.
    pub strict_schema: bool,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions {
            any_whitespace: true,
            max_whitespace: Some(2),
            indent: None,
            separators: None,
            strict: true,
            property_order: PropertyOrder::Schema,
            strict_schema: false,
        }
    }
}

/// The order of object members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertyOrder {
    /// Listed properties in schema order, extra members after them (for generation).
    Schema,
    /// For checking JSON written by others: required members once each, in the order of the
    /// `required` list or of `properties`; optional and extra members anywhere between them, each
    /// checked against its schema (a repeated optional key is not detected).
    Flexible,
}

/// A keyword that the grammar does not enforce exactly, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaWarning {
    /// JSON pointer of the keyword (e.g. `/properties/tags/uniqueItems`).
    pub path: String,
    /// What is not enforced and how the grammar differs.
    pub message: String,
}

impl std::fmt::Display for SchemaWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// Why a schema cannot be turned into a grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A keyword with a value of the wrong kind, an unresolvable `$ref`, a bad pattern, ...
    #[error("{}: {message}", if path.is_empty() { "/" } else { path })]
    Invalid {
        /// JSON pointer of the offending keyword.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A warning promoted to an error by `strict_schema`.
    #[error("{0} (an error because of --strict-schema)")]
    NotEnforced(String),
    /// `$ref` inlining or nesting deeper than `Limits::max_schema_depth`.
    #[error("{path}: schema nesting deeper than the limit `max_schema_depth` = {limit}")]
    TooDeep {
        /// Where the limit was hit.
        path: String,
        /// The configured limit.
        limit: usize,
    },
    /// The grammar builder refused (e.g. too many rules).
    #[error(transparent)]
    Grammar(#[from] GrammarError),
}

impl SchemaError {
    pub(crate) fn invalid(path: &str, message: impl Into<String>) -> Self {
        SchemaError::Invalid {
            path: path.to_string(),
            message: message.into(),
        }
    }
}

/// The grammar of a schema and the keywords it does not enforce.
#[derive(Debug, Clone)]
pub struct SchemaGrammar {
    /// Root rule `root` matches exactly the JSON texts the grammar allows.
    pub grammar: Grammar,
    /// Keywords not enforced exactly.
    pub warnings: Vec<SchemaWarning>,
    /// The `uniqueItems` check for complete values, when the schema asks for unique items.
    pub post_check: Option<post_check::PostCheck>,
}

/// Converts a schema into a grammar with root rule `root`.
pub fn json_schema_grammar(
    schema: &Value,
    options: &JsonSchemaOptions,
    limits: &Limits,
) -> Result<SchemaGrammar, SchemaError> {
    let mut builder = GrammarBuilder::new(limits);
    let root = builder.declare("root")?;
    let warnings = add_schema_rule(&mut builder, root, schema, options, limits)?;
    Ok(SchemaGrammar {
        grammar: builder.build("root")?,
        warnings,
        post_check: post_check::PostCheck::new(schema, limits),
    })
}

/// Defines rule `rule` of `builder` as the JSON values `schema` allows (adding helper rules), and
/// returns the warnings. Structural tags use this to embed argument schemas in larger grammars.
pub fn add_schema_rule(
    builder: &mut GrammarBuilder,
    rule: RuleId,
    schema: &Value,
    options: &JsonSchemaOptions,
    limits: &Limits,
) -> Result<Vec<SchemaWarning>, SchemaError> {
    let mut lowerer = lower::Lowerer::new(schema, builder, options, limits);
    let parsed = lowerer.parse_root()?;
    let body = lowerer.schema_expr(&parsed, 0)?;
    let warnings = lowerer.finish();
    builder.define(rule, body, None)?;
    if options.strict_schema {
        if let Some(w) = warnings.first() {
            return Err(SchemaError::NotEnforced(w.to_string()));
        }
    }
    Ok(warnings)
}
