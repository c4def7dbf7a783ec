//! The JSON of answers and stream chunks, as OpenAI sends them, with structgen's documented
//! extension field `structgen` (the grammar's timing and the keywords it did not enforce).

use serde_json::{json, Value};

use super::answer::{Answer, Delta};
use super::constraint::Unenforced;
use crate::runtime::Generation;

/// What every answer and chunk of one request carries.
#[derive(Debug, Clone)]
pub struct Ids {
    /// `chatcmpl-...` or `cmpl-...`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The served model's name.
    pub model: String,
    /// The prefix of the request's tool-call ids.
    pub call_prefix: String,
}

impl Ids {
    /// The id of call `i`.
    pub fn call_id(&self, i: usize) -> String {
        format!("{}{i}", self.call_prefix)
    }
}

/// Why the answer ended, in OpenAI's words.
pub fn finish_reason(gen: &Generation, answer: &Answer, stopped_by_string: bool) -> &'static str {
    if stopped_by_string {
        "stop"
    } else if gen.summary.stop_reason == "max tokens" {
        "length"
    } else if !answer.calls.is_empty() {
        "tool_calls"
    } else {
        "stop"
    }
}

/// The `usage` object for `completion` generated tokens.
pub fn usage(prompt: usize, completion: usize) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion,
           "total_tokens": prompt + completion})
}

/// The `structgen` extension: whether the output was constrained, the grammar's compile time,
/// mask fill and wait percentiles, its share of decode time, the keywords not enforced, and a
/// post-generation check's finding.
pub fn extension(
    gen: &Generation,
    constrained: bool,
    compile_ms: f64,
    unenforced: &[Unenforced],
    post_check: Option<String>,
) -> Value {
    let s = &gen.summary;
    json!({
        "constrained": constrained,
        "grammar": {
            "compile_ms": compile_ms,
            "mask_us_p50": s.mask_us_p50,
            "mask_us_p99": s.mask_us_p99,
            "mask_wait_us_p50": s.mask_wait_us_p50,
            "mask_wait_us_p99": s.mask_wait_us_p99,
            "overhead_pct": s.grammar_overhead_pct,
        },
        "tokens_forced": s.tokens_forced,
        "prefill_ms": s.prefill_ms,
        "decode_tokens_per_s": s.generation_tokens_per_s,
        "unenforced": unenforced,
        "post_check_violation": post_check,
    })
}

/// The `tool_calls` array of a message.
pub fn tool_calls(ids: &Ids, answer: &Answer) -> Value {
    Value::Array(
        answer
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({"id": ids.call_id(i), "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect(),
    )
}

/// The assistant message of a whole answer.
pub fn message(ids: &Ids, answer: &Answer) -> Value {
    let content = if answer.content.is_empty() && !answer.calls.is_empty() {
        Value::Null
    } else {
        json!(answer.content)
    };
    let mut m = json!({"role": "assistant", "content": content});
    if !answer.calls.is_empty() {
        m["tool_calls"] = tool_calls(ids, answer);
    }
    if let Some(r) = &answer.reasoning {
        m["reasoning_content"] = json!(r);
    }
    m
}

/// A whole chat completion.
pub fn chat_completion(
    ids: &Ids,
    answer: &Answer,
    finish: &str,
    usage: Value,
    ext: Value,
) -> Value {
    json!({"id": ids.id, "object": "chat.completion", "created": ids.created, "model": ids.model,
           "choices": [{"index": 0, "message": message(ids, answer), "logprobs": null,
                        "finish_reason": finish}],
           "usage": usage, "structgen": ext})
}

/// A whole text completion.
pub fn text_completion(ids: &Ids, text: &str, finish: &str, usage: Value, ext: Value) -> Value {
    json!({"id": ids.id, "object": "text_completion", "created": ids.created, "model": ids.model,
           "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}],
           "usage": usage, "structgen": ext})
}

/// A chat stream chunk with `delta`.
pub fn chat_chunk(ids: &Ids, delta: Value, finish: Option<&str>, with_usage: bool) -> Value {
    let mut c = json!({"id": ids.id, "object": "chat.completion.chunk", "created": ids.created,
                       "model": ids.model,
                       "choices": [{"index": 0, "delta": delta, "logprobs": null,
                                    "finish_reason": finish}]});
    if with_usage {
        c["usage"] = Value::Null;
    }
    c
}

/// The delta object of one streamed piece of an answer.
pub fn delta(ids: &Ids, d: &Delta) -> Value {
    match d {
        Delta::Reasoning(t) => json!({"reasoning_content": t}),
        Delta::Content(t) => json!({"content": t}),
        Delta::CallName(i, name) => json!({"tool_calls": [{"index": i, "id": ids.call_id(*i),
            "type": "function", "function": {"name": name, "arguments": ""}}]}),
        Delta::CallArguments(i, a) => {
            json!({"tool_calls": [{"index": i, "function": {"arguments": a}}]})
        }
    }
}

/// A text completion stream chunk.
pub fn text_chunk(ids: &Ids, text: &str, finish: Option<&str>, with_usage: bool) -> Value {
    let mut c = json!({"id": ids.id, "object": "text_completion", "created": ids.created,
                       "model": ids.model,
                       "choices": [{"index": 0, "text": text, "logprobs": null,
                                    "finish_reason": finish}]});
    if with_usage {
        c["usage"] = Value::Null;
    }
    c
}

/// The last chunk of a stream with `include_usage`: no choices, the usage.
pub fn usage_chunk(ids: &Ids, object: &str, usage: Value) -> Value {
    json!({"id": ids.id, "object": object, "created": ids.created, "model": ids.model,
           "choices": [], "usage": usage})
}
