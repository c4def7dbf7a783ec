//! What the engine's schema tests share: a byte vocabulary, a schema's matcher under given
//! options, and whether a matcher takes a whole text.

use std::sync::Arc;

use serde_json::Value;
use structgen_engine::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions};
use structgen_engine::{compile, GrammarMatcher, Limits, TokenId, TokenKind, Vocab};

/// A vocabulary of every single byte, and a stop token.
pub fn bytes() -> Arc<Vocab> {
    let entries = (0..=255u32).map(|b| (b, vec![b as u8], TokenKind::Normal));
    let stop = (256, b"</s>".to_vec(), TokenKind::Special);
    Arc::new(Vocab::new(257, entries.chain([stop]), vec![TokenId(256)]))
}

/// The matcher of `schema` under `options` on [`bytes`], and the conversion's warnings.
pub fn schema_matcher(
    schema: &Value,
    options: &JsonSchemaOptions,
) -> (GrammarMatcher, Vec<String>) {
    let limits = Limits::default();
    let out =
        json_schema_grammar(schema, options, &limits).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let warnings = out.warnings.iter().map(|w| w.to_string()).collect();
    let compiled = compile(&out.grammar, bytes(), &limits).expect("compiles");
    (GrammarMatcher::new(compiled), warnings)
}

/// Whether `m` takes all of `text` and may then stop.
pub fn accepts(m: &GrammarMatcher, text: &str) -> bool {
    let mut m = m.fork();
    m.accept_string(text) && m.accept_token(TokenId(256))
}
