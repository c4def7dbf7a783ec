//! One tool-calling request for a loaded model: messages + tools + style → prompt tokens, the
//! grammar matcher for the answer, and the stop tokens. Shared by `structgen run`, the tests and
//! the evaluation commands so that all of them prompt and constrain a model the same way.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::chat::{ChatError, ChatTemplate};
use super::model::Model;
use structgen_engine::engine::{CompileOptions, GrammarCompiler, GrammarMatcher};
use structgen_engine::frontend::json_schema::JsonSchemaOptions;
use structgen_engine::frontend::structural_tag::{structural_tag_grammar_with, TagError};
use structgen_engine::frontend::tool_tag::tools_structural_tag;
use structgen_engine::frontend::tools::{StyleSpec, Tool, ToolOptions, ToolsError};
use structgen_engine::grammar::GrammarError;
use structgen_engine::util::{Limits, TokenId};

/// Why a request could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The model has no chat template and none was given.
    #[error("the model has no chat template; pass one (--chat-template FILE)")]
    NoTemplate,
    /// The template failed.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// The tokenizer failed on the prompt.
    #[error("tokenizing the prompt: {0}")]
    Tokenize(String),
    /// The tool list cannot become a structural tag (e.g. an unsatisfiable parameter schema).
    #[error("tool grammar: {0}")]
    Tools(#[from] ToolsError),
    /// The structural tag cannot become a grammar.
    #[error("tool grammar: {0}")]
    Tag(#[from] TagError),
    /// The grammar does not compile within the limits.
    #[error("tool grammar: {0}")]
    Compile(#[from] GrammarError),
}

/// The prompt as token ids, rendered with `template` (or the model's own).
pub fn prompt_tokens(
    model: &Model,
    template: Option<&(String, String)>,
    messages: &[Value],
    tools: &[Value],
    style: &StyleSpec,
) -> Result<(String, Vec<u32>), RequestError> {
    let (src, origin) = template
        .or(model.chat_template.as_ref())
        .ok_or(RequestError::NoTemplate)?;
    let t = ChatTemplate::new(src, origin, &model.bos, &model.eos)?;
    let text = t.render(messages, tools, style)?;
    let ids = model
        .vocab
        .tokenizer
        .encode(text.as_str(), false)
        .map_err(|e| RequestError::Tokenize(e.to_string()))?
        .get_ids()
        .to_vec();
    Ok((text, ids))
}

/// The tokenizer's stop tokens plus the EOS text and `extra` texts that are single tokens.
pub fn stop_tokens(model: &Model, extra: &[String]) -> Vec<u32> {
    let vocab = &model.vocab.vocab;
    let mut stop: Vec<u32> = vocab.stop_tokens().iter().map(|t| t.0).collect();
    for s in extra.iter().chain(std::iter::once(&model.eos)) {
        if let Some(t) = vocab.find_token(s) {
            if !stop.contains(&t.0) {
                stop.push(t.0);
            }
        }
    }
    stop
}

/// A grammar compiler for `model`'s vocabulary with the default limits and options; one compiler
/// shared by many requests reuses masks between them (the cross-grammar cache).
pub fn grammar_compiler(model: &Model) -> GrammarCompiler {
    GrammarCompiler::new(
        Arc::new(model.vocab.vocab.clone()),
        Limits::default(),
        CompileOptions::default(),
    )
}

/// The matcher for an answer calling `tools` in `style`, compiled by `compiler` (made for the
/// model's vocabulary), and its compile time in ms.
pub fn tools_matcher(
    compiler: &GrammarCompiler,
    tools: &[Tool],
    style: &StyleSpec,
    options: &ToolOptions,
    stop: &[u32],
) -> Result<(GrammarMatcher, f64), RequestError> {
    let t = Instant::now();
    let limits = compiler.limits();
    let tag = tools_structural_tag(tools, style, options)?;
    let grammar = structural_tag_grammar_with(
        &tag,
        Some(compiler.vocab()),
        &JsonSchemaOptions::default(),
        limits,
        compiler.schema_fragments(),
    )?
    .grammar;
    let compiled = compiler.compile_owned(grammar)?;
    let matcher =
        GrammarMatcher::with_stop_tokens(compiled, stop.iter().map(|&t| TokenId(t)).collect());
    Ok((matcher, t.elapsed().as_secs_f64() * 1e3))
}
