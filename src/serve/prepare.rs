//! A request body → what the runtime runs: its prompt tokens (chat template or raw prompt), its
//! constraint, the reader of its answer, its token budget within the context, and its ids.

use serde_json::Value;

use super::answer::Reader;
use super::constraint::{Constraint, Spec};
use super::error::ApiError;
use super::http::{check_model, now_s, AppState};
use super::request::{chat_request, completion_request, Format, GenParams, Output};
use super::shape::Ids;
use crate::frontend::tools::{FormatSet, ToolChoice, ToolOptions};
/// Which endpoint a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Chat,
    Text,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Chat => "chat",
            Kind::Text => "completions",
        }
    }
}

/// A request ready for the runtime.
pub(super) struct Prepared {
    pub(super) kind: Kind,
    pub(super) prompt: Vec<u32>,
    pub(super) constraint: Constraint,
    pub(super) reader: Reader,
    pub(super) gen: GenParams,
    pub(super) max_tokens: usize,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) ids: Ids,
    /// The output must be JSON checked afterwards (`response_format` schemas).
    pub(super) json_output: bool,
    /// Whether a grammar constrains it.
    pub(super) constrained: bool,
}

fn ids(kind: Kind, name: &str) -> Ids {
    let r: u64 = rand::random();
    Ids {
        id: match kind {
            Kind::Chat => format!("chatcmpl-{r:016x}"),
            Kind::Text => format!("cmpl-{r:016x}"),
        },
        created: now_s(),
        model: name.to_string(),
        call_prefix: format!("call_{r:016x}_"),
    }
}

/// `max_tokens` within the context left after the prompt.
fn token_budget(
    st: &AppState,
    prompt: usize,
    gen: &GenParams,
    prompt_param: &str,
) -> Result<usize, ApiError> {
    if prompt >= st.context {
        return Err(ApiError::invalid(
            prompt_param,
            format!(
                "the prompt is {prompt} tokens, and this model's context is {} tokens",
                st.context
            ),
        )
        .with_code("context_length_exceeded"));
    }
    let room = st.context - prompt;
    match gen.max_tokens {
        Some((n, field)) if n > room => Err(ApiError::invalid(
            field,
            format!(
                "this model's context is {} tokens; the prompt takes {prompt}, so `{field}` can be at most {room}, not {n}",
                st.context
            ),
        )
        .with_code("context_length_exceeded")),
        Some((n, _)) => Ok(n),
        None => Ok(room.min(st.cfg.max_tokens_limit)),
    }
}

pub(super) fn prepare_chat(st: &AppState, body: &Value) -> Result<Prepared, ApiError> {
    let req = chat_request(body, st.cfg.max_tokens_limit)?;
    check_model(st, req.out.model.as_deref())?;
    let style = st.grammars.style;
    let text = st
        .template
        .render(&req.messages, &req.tools_json, style)
        .map_err(|e| ApiError::invalid("messages", format!("the chat template failed: {e}")))?;
    let prompt = st
        .tokenizer
        .encode(text.as_str(), false)
        .map_err(|e| ApiError::internal(format!("tokenizing the prompt: {e}")))?
        .get_ids()
        .to_vec();
    let max_tokens = token_budget(st, prompt.len(), &req.out.gen, "messages")?;
    let calls = !req.tools.is_empty() && req.tool_choice != ToolChoice::None;
    let options = ToolOptions {
        tool_choice: req.tool_choice.clone(),
        parallel_tool_calls: req.parallel_tool_calls,
        reasoning: None,
        formats: st.formats,
    };
    // With a response format, calls are read in the style's own syntax only: an answer in the
    // format (JSON with a "name" key, say) must not be taken for a call.
    let (spec, formats) = if req.tools.is_empty() {
        (Spec::Format(&req.out.format), st.formats)
    } else if req.out.format == Format::Text {
        (Spec::Tools(&req.tools, options), st.formats)
    } else if calls {
        (
            Spec::ToolsOr(&req.tools, options, &req.out.format),
            FormatSet::Canonical,
        )
    } else {
        (Spec::Format(&req.out.format), st.formats)
    };
    let constraint = st.grammars.build(spec)?;
    let reader = Reader::new(style, req.tools.clone(), calls, formats, false);
    Ok(prepared(
        st,
        Kind::Chat,
        prompt,
        max_tokens,
        constraint,
        reader,
        req.out,
    ))
}

pub(super) fn prepare_text(st: &AppState, body: &Value) -> Result<Prepared, ApiError> {
    let req = completion_request(body, st.cfg.max_tokens_limit)?;
    check_model(st, req.out.model.as_deref())?;
    let prompt = st
        .tokenizer
        .encode(req.prompt.as_str(), true)
        .map_err(|e| ApiError::internal(format!("tokenizing the prompt: {e}")))?
        .get_ids()
        .to_vec();
    if prompt.is_empty() {
        return Err(ApiError::invalid("prompt", "`prompt` must not be empty"));
    }
    let max_tokens = token_budget(st, prompt.len(), &req.out.gen, "prompt")?;
    let constraint = st.grammars.build(Spec::Format(&req.out.format))?;
    let reader = Reader::new(st.grammars.style, Vec::new(), false, st.formats, true);
    Ok(prepared(
        st,
        Kind::Text,
        prompt,
        max_tokens,
        constraint,
        reader,
        req.out,
    ))
}

/// A request of `kind` with its prompt, token budget, constraint and reader, and the output
/// options both endpoints share.
fn prepared(
    st: &AppState,
    kind: Kind,
    prompt: Vec<u32>,
    max_tokens: usize,
    constraint: Constraint,
    reader: Reader,
    out: Output,
) -> Prepared {
    Prepared {
        kind,
        prompt,
        constrained: constraint.matcher.is_some(),
        constraint,
        reader,
        json_output: matches!(out.format, Format::JsonObject | Format::JsonSchema { .. }),
        gen: out.gen,
        max_tokens,
        stream: out.stream,
        include_usage: out.include_usage,
        ids: ids(kind, &st.name),
    }
}
