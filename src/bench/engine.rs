//! The engine interface the benchmark times, and structgen behind it.
//!
//! An [`Engine`] turns one request's grammar input into a [`Compiled`] grammar (timed: input →
//! ready matcher); a [`Compiled`] hands out fresh [`Sequence`]s, one per token sequence to check.
//! Errors are strings: they are reported per request, never fatal to the run.

use std::sync::Arc;

use serde_json::Value;

use crate::engine::{CompileOptions, CompiledGrammar, GrammarCompiler, GrammarMatcher};
use crate::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions};
use crate::frontend::structural_tag::structural_tag_grammar;
use crate::grammar::Grammar;
use crate::util::{Limits, TokenBitmask, TokenId};
use crate::vocab::Vocab;

/// What a request constrains the output with.
#[derive(Debug, Clone)]
pub enum GrammarInput {
    /// An xgrammar structural tag (`{"type": "structural_tag", ...}`).
    StructuralTag(Value),
    /// A JSON Schema for the whole output.
    JsonSchema(Value),
}

impl GrammarInput {
    /// The input as compact JSON: the whole-grammar cache key.
    pub fn key(&self) -> String {
        match self {
            GrammarInput::StructuralTag(v) => format!("tag:{v}"),
            GrammarInput::JsonSchema(v) => format!("schema:{v}"),
        }
    }
}

/// A grammar engine under test.
pub trait Engine: Sync {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// Compiles `input` (with the engine's caches, as a server would).
    fn compile(&self, input: &GrammarInput) -> Result<Box<dyn Compiled>, String>;
    /// Cache counters worth printing after a run, if any.
    fn cache_summary(&self) -> Option<String> {
        None
    }
}

/// A compiled grammar.
pub trait Compiled: Send {
    /// A matcher at the start of the grammar.
    fn start(&self) -> Box<dyn Sequence>;
}

/// One sequence being checked.
pub trait Sequence: Send {
    /// Computes the mask for the next token (the timed call).
    fn fill_mask(&mut self);
    /// Whether the last computed mask allows `token`.
    fn allows(&self, token: u32) -> bool;
    /// Feeds `token`; an error says why it was refused.
    fn accept(&mut self, token: u32) -> Result<(), String>;
}

/// structgen with a [`GrammarCompiler`] shared by every request of a run.
pub struct StructgenEngine {
    compiler: GrammarCompiler,
    stop: TokenId,
    schema_options: JsonSchemaOptions,
}

impl StructgenEngine {
    /// An engine for `vocab` stopping on `stop`.
    pub fn new(vocab: Arc<Vocab>, stop: TokenId, options: CompileOptions) -> Self {
        StructgenEngine {
            compiler: GrammarCompiler::new(vocab, Limits::default(), options),
            stop,
            schema_options: JsonSchemaOptions::default(),
        }
    }

    fn grammar(&self, input: &GrammarInput) -> Result<Grammar, String> {
        let limits = self.compiler.limits();
        match input {
            GrammarInput::StructuralTag(tag) => structural_tag_grammar(
                tag,
                Some(self.compiler.vocab()),
                &self.schema_options,
                limits,
            )
            .map(|t| t.grammar)
            .map_err(|e| e.to_string()),
            GrammarInput::JsonSchema(schema) => {
                json_schema_grammar(schema, &self.schema_options, limits)
                    .map(|s| s.grammar)
                    .map_err(|e| e.to_string())
            }
        }
    }
}

impl Engine for StructgenEngine {
    fn name(&self) -> &'static str {
        "structgen"
    }

    fn compile(&self, input: &GrammarInput) -> Result<Box<dyn Compiled>, String> {
        let grammar = self
            .compiler
            .compile_cached(&input.key(), || -> Result<Grammar, CompileFailure> {
                self.grammar(input).map_err(CompileFailure)
            })
            .map_err(|e| e.0)?;
        let compiled = StructgenCompiled {
            grammar,
            stop: self.stop,
        };
        Ok(Box::new(compiled))
    }

    fn cache_summary(&self) -> Option<String> {
        let grammars = self.compiler.grammar_cache_hits();
        let pool = self.compiler.pool_stats()?;
        Some(format!(
            "grammar cache hits {grammars}; mask pool: {} perfect hits, {} partial hits, {} computed, {} entries, {:.1} MiB, {} evicted",
            pool.perfect_hits,
            pool.partial_hits,
            pool.misses,
            pool.entries,
            pool.bytes as f64 / (1 << 20) as f64,
            pool.evicted
        ))
    }
}

/// A compile error as the string the report shows.
struct CompileFailure(String);

impl From<crate::grammar::GrammarError> for CompileFailure {
    fn from(e: crate::grammar::GrammarError) -> Self {
        CompileFailure(e.to_string())
    }
}

struct StructgenCompiled {
    grammar: Arc<CompiledGrammar>,
    stop: TokenId,
}

impl Compiled for StructgenCompiled {
    fn start(&self) -> Box<dyn Sequence> {
        let size = self.grammar.vocab().size();
        Box::new(StructgenSequence {
            matcher: GrammarMatcher::with_stop_tokens(Arc::clone(&self.grammar), vec![self.stop]),
            mask: TokenBitmask::new(size),
        })
    }
}

struct StructgenSequence {
    matcher: GrammarMatcher,
    mask: TokenBitmask,
}

impl Sequence for StructgenSequence {
    fn fill_mask(&mut self) {
        self.matcher.fill_next_token_bitmask(&mut self.mask);
    }

    fn allows(&self, token: u32) -> bool {
        self.mask.is_allowed(TokenId(token))
    }

    fn accept(&mut self, token: u32) -> Result<(), String> {
        if self.matcher.accept_token(TokenId(token)) {
            Ok(())
        } else {
            Err(format!("token {token} refused"))
        }
    }
}
