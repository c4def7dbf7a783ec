//! The engine interface the benchmark times, and structgen behind it.
//!
//! An [`Engine`] turns one request's grammar input into a [`Compiled`] grammar (timed: input →
//! ready matcher); a [`Compiled`] hands out fresh [`Sequence`]s, one per token sequence to check.
//! Errors are strings: they are reported per request, never fatal to the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::engine::check::{MaskVerifier, DEFAULT_SAMPLE};
use crate::engine::{CompileOptions, CompiledGrammar, GrammarCompiler, GrammarMatcher};
use crate::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions, PropertyOrder};
use crate::frontend::structural_tag::structural_tag_grammar_with;
use crate::grammar::Grammar;
use crate::util::{fingerprint, Limits, TokenBitmask, TokenId};
use crate::vocab::Vocab;

/// What a request constrains the output with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// An xgrammar structural tag (`{"type": "structural_tag", ...}`).
    StructuralTag,
    /// A JSON Schema for the whole output.
    JsonSchema,
}

/// One request's grammar input: its JSON value and the compact text a server would receive.
#[derive(Debug, Clone)]
pub struct GrammarInput {
    /// Structural tag or JSON Schema.
    pub kind: InputKind,
    /// The parsed input.
    pub value: Value,
    /// `value` as compact JSON text, members in their order.
    text: String,
}

impl GrammarInput {
    /// The input `value` of `kind`.
    pub fn new(kind: InputKind, value: Value) -> Self {
        let text = value.to_string();
        GrammarInput { kind, value, text }
    }

    /// The whole-grammar cache key: a fingerprint of the input's text, as the Python binding
    /// keys its cache by the text it is given. Hashing the text reads one contiguous string;
    /// walking the parsed value chased a pointer per member and cost a 50-tool request about
    /// 55 µs, most of a cache hit.
    pub fn key(&self) -> u128 {
        match self.kind {
            InputKind::StructuralTag => fingerprint(&("tag", self.text.as_str())),
            InputKind::JsonSchema => fingerprint(&("schema", self.text.as_str())),
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
    /// `--verify-masks` (untimed, after [`Sequence::allows`]): checks the last mask against the
    /// engine's own accept on forks, for `token` and a random sample of others. Engines without a
    /// self-check accept everything.
    fn verify(&mut self, _token: u32) -> Result<(), String> {
        Ok(())
    }
    /// Feeds `token`; an error says why it was refused.
    fn accept(&mut self, token: u32) -> Result<(), String>;
}

/// structgen with a [`GrammarCompiler`] shared by every request of a run.
pub struct StructgenEngine {
    compiler: GrammarCompiler,
    stop: TokenId,
    schema_options: JsonSchemaOptions,
    /// Tokens checked by `--verify-masks`, when on.
    verified: Option<Arc<AtomicU64>>,
}

impl StructgenEngine {
    /// An engine for `vocab` stopping on `stop`; with `verify_masks`, sequences check their masks
    /// ([`Sequence::verify`]).
    pub fn new(
        vocab: Arc<Vocab>,
        stop: TokenId,
        options: CompileOptions,
        limits: Limits,
        verify_masks: bool,
    ) -> Self {
        StructgenEngine {
            compiler: GrammarCompiler::new(vocab, limits, options),
            stop,
            schema_options: JsonSchemaOptions::default(),
            verified: verify_masks.then(|| Arc::new(AtomicU64::new(0))),
        }
    }

    fn grammar(&self, input: &GrammarInput) -> Result<Grammar, String> {
        let limits = self.compiler.limits();
        match input.kind {
            InputKind::StructuralTag => structural_tag_grammar_with(
                &input.value,
                Some(self.compiler.vocab()),
                &self.schema_options,
                limits,
                self.compiler.schema_fragments(),
            )
            .map(|t| t.grammar)
            .map_err(|e| e.to_string()),
            InputKind::JsonSchema => {
                // JSONSchemaBench's instances are judged with JSON Schema's meaning: members in
                // any order, unlisted ones allowed unless `additionalProperties` says otherwise.
                let options = JsonSchemaOptions {
                    strict: false,
                    property_order: PropertyOrder::Flexible,
                    ..self.schema_options.clone()
                };
                json_schema_grammar(&input.value, &options, limits)
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
            .compile_cached(input.key(), || -> Result<Grammar, CompileFailure> {
                self.grammar(input).map_err(CompileFailure)
            })
            .map_err(|e| e.0)?;
        let compiled = StructgenCompiled {
            grammar,
            stop: self.stop,
            verified: self.verified.clone(),
        };
        Ok(Box::new(compiled))
    }

    fn cache_summary(&self) -> Option<String> {
        let grammars = self.compiler.grammar_cache_hits();
        let fragments = self.compiler.schema_fragments().hits();
        let pool = self.compiler.pool_stats()?;
        let verified = self.verified.as_ref().map_or(String::new(), |v| {
            format!(
                "; --verify-masks: {} tokens checked against accept_token",
                v.load(Ordering::Relaxed)
            )
        });
        Some(format!(
            "grammar cache hits {grammars}, schema fragment hits {fragments}; mask pool: {} perfect hits, {} partial hits, {} computed ({} first-byte runs reused, {} walked; {} rule ends in the root's context reused, {} walked), {} entries, {:.1} MiB, {} evicted{verified}",
            pool.perfect_hits,
            pool.partial_hits,
            pool.misses,
            pool.runs_reused,
            pool.runs_walked,
            pool.ends_reused,
            pool.ends_walked,
            pool.entries,
            pool.bytes as f64 / (1 << 20) as f64,
            pool.evicted,
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
    verified: Option<Arc<AtomicU64>>,
}

impl Compiled for StructgenCompiled {
    fn start(&self) -> Box<dyn Sequence> {
        let size = self.grammar.vocab().size();
        Box::new(StructgenSequence {
            matcher: GrammarMatcher::with_stop_tokens(Arc::clone(&self.grammar), vec![self.stop]),
            mask: TokenBitmask::new(size),
            verifier: self.verified.as_ref().map(|count| {
                (
                    MaskVerifier::new(u64::from(self.stop.0), DEFAULT_SAMPLE),
                    Arc::clone(count),
                )
            }),
            step: 0,
        })
    }
}

struct StructgenSequence {
    matcher: GrammarMatcher,
    mask: TokenBitmask,
    verifier: Option<(MaskVerifier, Arc<AtomicU64>)>,
    step: usize,
}

impl Sequence for StructgenSequence {
    fn fill_mask(&mut self) {
        self.matcher.fill_next_token_bitmask(&mut self.mask);
    }

    fn allows(&self, token: u32) -> bool {
        self.mask.is_allowed(TokenId(token))
    }

    fn verify(&mut self, token: u32) -> Result<(), String> {
        let Some((verifier, count)) = &mut self.verifier else {
            return Ok(());
        };
        let before = verifier.tokens;
        let checked = verifier
            .check_step(
                &self.matcher,
                &self.mask,
                self.step,
                Some(TokenId(token)),
                true,
            )
            .map_err(|e| e.to_string());
        count.fetch_add(verifier.tokens - before, Ordering::Relaxed);
        checked
    }

    fn accept(&mut self, token: u32) -> Result<(), String> {
        self.step += 1;
        if self.matcher.accept_token(TokenId(token)) {
            Ok(())
        } else {
            Err(format!("token {token} refused"))
        }
    }
}
