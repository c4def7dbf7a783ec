//! JSON Schema → grammar.
//!
//! Stages, each in its own file:
//! - `schema`: the untyped `serde_json::Value` is parsed into a typed `schema::Schema` (keyword
//!   types checked, BFCL aliases `dict` / `float` / `tuple` / `any` mapped, unsupported keywords
//!   recorded as warnings with their JSON path);
//! - `merge`: `allOf`, `anyOf` / `oneOf` and `$ref` with sibling keywords are brought into a
//!   disjunction of flat conjunctions (`merge::Conj`); a bare `$ref` stays a reference and becomes
//!   its own rule, which is what makes recursive schemas work;
//! - `unevaluated`: `unevaluatedProperties` / `unevaluatedItems` applied to each conjunction from
//!   what the schemas merged into it evaluate;
//! - `lower`, `objects`, `arrays`, `numbers`, `strings`: each conjunction becomes grammar
//!   expressions through the shared [`GrammarBuilder`];
//! - `fragments`: [`SchemaFragments`], lowered schemas kept by a compiler and imported again when a
//!   tool's schema comes back.
//!
//! Semantics: properties appear in schema order, required ones must appear, optional ones may be
//! left out (or, with [`PropertyOrder::Flexible`], required ones in a fixed order and the others
//! anywhere); with [`JsonSchemaOptions::strict`] (default) an object that lists `properties` or
//! `patternProperties` admits no others unless `additionalProperties` says so, and one that lists
//! neither admits any members (JSON Schema's meaning, and xgrammar's). Every keyword that is
//! not enforced exactly is reported as a [`SchemaWarning`] naming its JSON path; with
//! `strict_schema` a warning is an error instead.

mod arrays;
mod fragments;
mod keywords;
mod lower;
mod merge;
mod negate;
mod numbers;
mod objects;
mod options;
mod pattern;
pub mod post_check;
mod read;
mod refs;
mod resources;
mod schema;
mod strings;
mod unevaluated;
mod values;

use serde_json::Value;

use crate::grammar::{Grammar, GrammarBuilder};
use crate::util::{Limits, RuleId};

pub use fragments::SchemaFragments;
pub use options::{JsonSchemaOptions, PropertyOrder, SchemaError, SchemaWarning};
pub(crate) use schema::ANNOTATIONS;
pub(crate) use strings::format_regex;

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
        post_check: post_check::PostCheck::with_formats(schema, limits, options.format_assertion),
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
    let doc = schema::Document::read(schema, limits)?;
    let mut lowerer = lower::Lowerer::new(&doc, builder, options, limits);
    let body = lowerer.schema_expr(&doc.root, 0)?;
    let warnings = lowerer.finish();
    builder.define(rule, body, None)?;
    if options.strict_schema {
        if let Some(w) = warnings.first() {
            return Err(SchemaError::NotEnforced(w.to_string()));
        }
    }
    Ok(warnings)
}
