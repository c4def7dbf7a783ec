//! OpenAI request bodies → what the server runs: the conversation as the chat template wants it,
//! the tools and tool choice, the output format (a grammar source), and the sampling options.
//!
//! `POST /v1/chat/completions` takes OpenAI's fields plus `top_k` and vLLM's / SGLang's grammar
//! names; `POST /v1/completions` takes a prompt string and the same grammar options, including
//! vLLM's `structured_outputs` (`json`, `regex`, `grammar`, `choice`, `structural_tag`) and its
//! older `guided_json` / `guided_regex` / `guided_grammar` / `guided_choice`. Fields this server
//! does not implement (`n > 1`, `logprobs`, penalties, `logit_bias`, `best_of`, `echo`, `suffix`)
//! are refused with HTTP 400 when set to anything but their no-op value: the client is told,
//! nothing is silently ignored.

use serde_json::{json, Value};

use super::error::{pointer_param, ApiError};
use super::fields::{type_name, Fields};
use super::format::format;
pub use super::format::Format;
use crate::frontend::tools::{parse_tools, Tool, ToolChoice};

/// Sampling and limits of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct GenParams {
    /// Most tokens to generate, when given, and the field that gave it.
    pub max_tokens: Option<(usize, &'static str)>,
    /// Temperature (OpenAI's default 1).
    pub temperature: f32,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Top-k sampling.
    pub top_k: Option<usize>,
    /// The seed, when given.
    pub seed: Option<u64>,
    /// Stop strings.
    pub stop: Vec<String>,
}

/// What chat and text completion requests share: the model named, the output format, sampling
/// and limits, and how the answer is sent.
#[derive(Debug, Clone)]
pub struct Output {
    /// The `model` field.
    pub model: Option<String>,
    /// The output format.
    pub format: Format,
    /// Sampling and limits.
    pub gen: GenParams,
    /// Stream the answer as server-sent events.
    pub stream: bool,
    /// Send a last chunk with the usage.
    pub include_usage: bool,
}

/// A chat completion request.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The messages, as the chat template reads them (tool-call arguments as objects).
    pub messages: Vec<Value>,
    /// The tools as given (for the template) and as read (for the grammar and the answer).
    pub tools_json: Vec<Value>,
    /// The tools, read.
    pub tools: Vec<Tool>,
    /// Which calls the answer must or may make.
    pub tool_choice: ToolChoice,
    /// More than one call allowed.
    pub parallel_tool_calls: bool,
    /// The output options.
    pub out: Output,
}

/// A completion request.
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    /// The prompt text.
    pub prompt: String,
    /// The output options.
    pub out: Output,
}

/// The output options of a request whose format is `format`.
fn output(f: &Fields, format: Format, max_tokens_cap: usize) -> Result<Output, ApiError> {
    let (stream, include_usage) = stream_options(f)?;
    Ok(Output {
        model: f.str("model")?.map(str::to_string),
        format,
        gen: gen_params(f, max_tokens_cap)?,
        stream,
        include_usage,
    })
}

/// Most stop strings (OpenAI's limit).
const MAX_STOP: usize = 4;

fn gen_params(f: &Fields, max_tokens_cap: usize) -> Result<GenParams, ApiError> {
    f.unsupported("n", |v| v == &json!(1))?;
    f.unsupported("logprobs", |v| v == &json!(false))?;
    f.unsupported("top_logprobs", |v| v == &json!(0))?;
    f.unsupported("presence_penalty", |v| v.as_f64() == Some(0.0))?;
    f.unsupported("frequency_penalty", |v| v.as_f64() == Some(0.0))?;
    f.unsupported("repetition_penalty", |v| v.as_f64() == Some(1.0))?;
    f.unsupported("logit_bias", |v| {
        v.as_object().is_some_and(|o| o.is_empty())
    })?;
    let cap = max_tokens_cap as u64;
    let max_tokens = match (
        f.uint("max_completion_tokens", u64::MAX)?,
        f.uint("max_tokens", u64::MAX)?,
    ) {
        (Some(n), _) => Some((n, "max_completion_tokens")),
        (None, Some(n)) => Some((n, "max_tokens")),
        (None, None) => None,
    };
    if let Some((n, field)) = max_tokens {
        if n == 0 || n > cap {
            return Err(ApiError::invalid(
                field,
                format!("`{field}` must be from 1 to {cap} (this server's --max-tokens-limit), found {n}"),
            ));
        }
    }
    let stop = match f.get("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.as_str().map(str::to_string).ok_or_else(|| {
                    ApiError::invalid(
                        format!("stop[{i}]"),
                        format!("`stop[{i}]` must be a string, found {}", type_name(s)),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(ApiError::invalid(
                "stop",
                format!(
                    "`stop` must be a string or an array of strings, found {}",
                    type_name(v)
                ),
            ))
        }
    };
    if stop.len() > MAX_STOP || stop.iter().any(String::is_empty) {
        return Err(ApiError::invalid(
            "stop",
            format!("`stop` takes up to {MAX_STOP} non-empty strings"),
        ));
    }
    let seed = f.int("seed")?.map(|s| s as u64);
    Ok(GenParams {
        max_tokens: max_tokens.map(|(n, field)| (n as usize, field)),
        temperature: f.num("temperature", 0.0, 2.0)?.unwrap_or(1.0) as f32,
        top_p: f.num("top_p", 0.0, 1.0)?.map(|p| p as f32),
        top_k: f.int("top_k")?.filter(|&k| k > 0).map(|k| k as usize),
        seed,
        stop,
    })
}

fn stream_options(f: &Fields) -> Result<(bool, bool), ApiError> {
    let stream = f.bool("stream")?.unwrap_or(false);
    let include_usage = match f.object("stream_options")? {
        Some(o) => {
            if !stream {
                return Err(ApiError::invalid(
                    "stream_options",
                    "`stream_options` is only allowed when `stream` is true",
                ));
            }
            o.bool("include_usage")?.unwrap_or(false)
        }
        None => false,
    };
    Ok((stream, include_usage))
}

/// The text of a message's `content`: a string, or text parts joined by newlines.
fn content_text(v: Option<&Value>, param: &str) -> Result<Option<String>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                let pf = Fields::of(p, &format!("{param}[{i}]"))?;
                match pf.req_str("type")? {
                    "text" => texts.push(pf.req_str("text")?.to_string()),
                    other => {
                        return Err(ApiError::invalid(
                            pf.param("type"),
                            format!(
                                "content parts of type {other:?} are not supported (text only)"
                            ),
                        ))
                    }
                }
            }
            Ok(Some(texts.join("\n")))
        }
        Some(v) => Err(ApiError::invalid(
            param,
            format!(
                "`{param}` must be a string or an array of content parts, found {}",
                type_name(v)
            ),
        )),
    }
}

/// The messages as the chat template reads them.
fn messages(f: &Fields) -> Result<Vec<Value>, ApiError> {
    let list = f
        .array("messages")?
        .ok_or_else(|| ApiError::invalid("messages", "missing required field `messages`"))?;
    if list.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "`messages` must not be empty",
        ));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, m) in list.iter().enumerate() {
        let at = format!("messages[{i}]");
        let mf = Fields::of(m, &at)?;
        let role = mf.req_str("role")?;
        let content = content_text(mf.get("content"), &mf.param("content"))?;
        let mut msg = json!({"role": role, "content": content.clone().unwrap_or_default()});
        match role {
            "system" | "developer" => msg["role"] = json!("system"),
            "user" => {}
            "assistant" => {
                if let Some(r) = mf.str("reasoning_content")? {
                    msg["reasoning_content"] = json!(r);
                }
                if let Some(calls) = mf.array("tool_calls")? {
                    let mut read = Vec::new();
                    for (j, c) in calls.iter().enumerate() {
                        let cf = Fields::of(c, &format!("{at}.tool_calls[{j}]"))?;
                        let func = cf.object("function")?.ok_or_else(|| {
                            ApiError::invalid(
                                cf.param("function"),
                                "missing required field `function`",
                            )
                        })?;
                        let name = func.req_str("name")?;
                        let args = match func.get("arguments") {
                            None => json!({}),
                            Some(Value::String(s)) if s.trim().is_empty() => json!({}),
                            Some(Value::String(s)) => {
                                serde_json::from_str::<Value>(s).map_err(|e| {
                                    ApiError::invalid(
                                        func.param("arguments"),
                                        format!("`{}` is not JSON: {e}", func.param("arguments")),
                                    )
                                })?
                            }
                            Some(v @ Value::Object(_)) => v.clone(),
                            Some(v) => {
                                return Err(ApiError::invalid(
                                    func.param("arguments"),
                                    format!(
                                        "`{}` must be a JSON string, found {}",
                                        func.param("arguments"),
                                        type_name(v)
                                    ),
                                ))
                            }
                        };
                        if !args.is_object() {
                            return Err(ApiError::invalid(
                                func.param("arguments"),
                                format!(
                                    "`{}` must hold a JSON object, found {}",
                                    func.param("arguments"),
                                    type_name(&args)
                                ),
                            ));
                        }
                        let id = cf.str("id")?.unwrap_or_default();
                        read.push(json!({"id": id, "type": "function",
                                         "function": {"name": name, "arguments": args}}));
                    }
                    msg["tool_calls"] = Value::Array(read);
                } else if content.is_none() {
                    return Err(ApiError::invalid(
                        mf.param("content"),
                        format!(
                            "`{}` is required unless `tool_calls` is given",
                            mf.param("content")
                        ),
                    ));
                }
            }
            "tool" => {
                if content.is_none() {
                    return Err(ApiError::invalid(
                        mf.param("content"),
                        format!("missing required field `{}`", mf.param("content")),
                    ));
                }
                if let Some(id) = mf.str("tool_call_id")? {
                    msg["tool_call_id"] = json!(id);
                }
                if let Some(name) = mf.str("name")? {
                    msg["name"] = json!(name);
                }
            }
            other => {
                return Err(ApiError::invalid(
                    mf.param("role"),
                    format!(
                        "`{}` must be system, developer, user, assistant or tool, found {other:?}",
                        mf.param("role")
                    ),
                ))
            }
        }
        if matches!(role, "user" | "system" | "developer") && content.is_none() {
            return Err(ApiError::invalid(
                mf.param("content"),
                format!("missing required field `{}`", mf.param("content")),
            ));
        }
        out.push(msg);
    }
    // A tool message names its tool for templates that show it; take it from the call's id.
    let names: Vec<(String, String)> = out
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .filter_map(|c| {
            Some((
                c["id"].as_str()?.to_string(),
                c["function"]["name"].as_str()?.to_string(),
            ))
        })
        .collect();
    for m in out
        .iter_mut()
        .filter(|m| m["role"] == "tool" && m.get("name").is_none())
    {
        if let Some((_, n)) = names
            .iter()
            .find(|(id, _)| m["tool_call_id"].as_str() == Some(id))
        {
            m["name"] = json!(n);
        }
    }
    Ok(out)
}

/// The tool choice: `none`, `auto`, `required` or `{"type": "function", "function": {"name"}}`.
fn tool_choice(f: &Fields, tools: &[Tool]) -> Result<ToolChoice, ApiError> {
    let choice = match f.get("tool_choice") {
        None => {
            return Ok(if tools.is_empty() {
                ToolChoice::None
            } else {
                ToolChoice::Auto
            })
        }
        Some(Value::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(ApiError::invalid(
                    "tool_choice",
                    format!("`tool_choice` must be none, auto, required or a named function, found {other:?}"),
                ))
            }
        },
        Some(v @ Value::Object(_)) => {
            let cf = Fields::of(v, "tool_choice")?;
            let func = cf.object("function")?.ok_or_else(|| {
                ApiError::invalid("tool_choice.function", "missing required field `tool_choice.function`")
            })?;
            ToolChoice::Named(func.req_str("name")?.to_string())
        }
        Some(v) => {
            return Err(ApiError::invalid(
                "tool_choice",
                format!("`tool_choice` must be a string or an object, found {}", type_name(v)),
            ))
        }
    };
    match &choice {
        ToolChoice::Required | ToolChoice::Named(_) if tools.is_empty() => Err(ApiError::invalid(
            "tool_choice",
            "`tool_choice` asks for a call but `tools` is empty",
        )),
        ToolChoice::Named(n) if !tools.iter().any(|t| &t.name == n) => Err(ApiError::invalid(
            "tool_choice.function.name",
            format!("`tool_choice` names {n:?}, which is not in `tools`"),
        )),
        _ => Ok(choice),
    }
}

/// Reads a chat completion request.
pub fn chat_request(body: &Value, max_tokens_cap: usize) -> Result<ChatRequest, ApiError> {
    let f = Fields::of(body, "")?;
    let messages = messages(&f)?;
    let tools_json = f.array("tools")?.cloned().unwrap_or_default();
    // Every tool's schema is enforced, `strict` or not: a call is never outside its schema.
    let enforced: Vec<Value> = tools_json
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if let Some(func) = t.get_mut("function").and_then(Value::as_object_mut) {
                func.remove("strict");
            } else if let Some(obj) = t.as_object_mut() {
                obj.remove("strict");
            }
            t
        })
        .collect();
    let tools = parse_tools(&Value::Array(enforced)).map_err(|e| {
        ApiError::invalid(
            pointer_param("tools", &e.path),
            format!("tools: {}", e.message),
        )
    })?;
    let tool_choice = tool_choice(&f, &tools)?;
    let parallel_tool_calls = f.bool("parallel_tool_calls")?.unwrap_or(true);
    let format = format(&f)?;
    if format != Format::Text && matches!(tool_choice, ToolChoice::Required | ToolChoice::Named(_))
    {
        return Err(ApiError::invalid(
            "response_format",
            "a response format cannot apply when `tool_choice` requires a call (the answer is the call); use `tool_choice: \"auto\"` for calls or an answer in that format",
        ));
    }
    Ok(ChatRequest {
        messages,
        tools_json,
        tools,
        tool_choice,
        parallel_tool_calls,
        out: output(&f, format, max_tokens_cap)?,
    })
}

/// Reads a completion request.
pub fn completion_request(
    body: &Value,
    max_tokens_cap: usize,
) -> Result<CompletionRequest, ApiError> {
    let f = Fields::of(body, "")?;
    f.unsupported("echo", |v| v == &json!(false))?;
    f.unsupported("best_of", |v| v == &json!(1))?;
    f.unsupported("suffix", |v| v.as_str() == Some(""))?;
    let prompt = match f.get("prompt") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => a[0].as_str().unwrap_or_default().to_string(),
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                "prompt",
                "`prompt` must be one string (batches of prompts are not supported; send one request each)",
            ))
        }
        Some(v) => return Err(ApiError::invalid("prompt", format!("`prompt` must be a string, found {}", type_name(v)))),
        None => return Err(ApiError::invalid("prompt", "missing required field `prompt`")),
    };
    let format = format(&f)?;
    Ok(CompletionRequest {
        prompt,
        out: output(&f, format, max_tokens_cap)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Value {
        json!([{"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
    }

    #[test]
    fn a_tool_round_trip_reads_back() {
        let body = json!({"model": "m", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"t\": 30}"}],
            "tools": tools(), "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "max_tokens": 64, "stop": "END", "seed": 3, "stream": true, "stream_options": {"include_usage": true}});
        let r = chat_request(&body, 4096).unwrap();
        assert_eq!(r.messages[0]["content"], "Weather?");
        assert_eq!(
            r.messages[1]["tool_calls"][0]["function"]["arguments"]["city"],
            "Rome"
        );
        assert_eq!(r.messages[2]["name"], "get_weather");
        assert_eq!(r.tool_choice, ToolChoice::Named("get_weather".into()));
        assert_eq!(r.out.gen.max_tokens, Some((64, "max_tokens")));
        assert_eq!(r.out.gen.stop, vec!["END".to_string()]);
        assert!(r.out.stream && r.out.include_usage);
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (json!({"messages": "hi"}), "messages"),
            (
                json!({"messages": [{"role": "robot", "content": "x"}]}),
                "messages[0].role",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "n": 2}),
                "n",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 10_000_000}),
                "max_tokens",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}),
                "tool_choice",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "a b"}}]}),
                "tools[0].function.name",
            ),
            (
                json!({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]}),
                "messages[0].tool_calls[0].function.arguments",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "temperature": 3}),
                "temperature",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}}),
                "response_format.type",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}}),
                "stream_options",
            ),
        ];
        for (body, param) in cases {
            let e = chat_request(&body, 4096).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
        }
    }

    #[test]
    fn grammar_fields_of_vllm_and_sglang_are_read() {
        let body = json!({"prompt": "x", "structured_outputs": {"choice": ["yes", "no"]}});
        let r = completion_request(&body, 100).unwrap();
        assert!(matches!(r.out.format, Format::Choice { ref options, .. } if options.len() == 2));
        let body = json!({"prompt": "x", "guided_json": "{\"type\": \"integer\"}"});
        let r = completion_request(&body, 100).unwrap();
        assert_eq!(
            r.out.format,
            Format::JsonSchema {
                schema: json!({"type": "integer"}),
                param: "guided_json".into()
            }
        );
        let body = json!({"prompt": "x", "guided_regex": "a+", "guided_grammar": "root ::= \"a\""});
        assert!(completion_request(&body, 100).is_err());
        let legacy = json!({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "structural_tag",
            "structures": [{"begin": "<f>", "schema": {"type": "object"}, "end": "</f>"}], "triggers": ["<f>"]}});
        let r = chat_request(&legacy, 100).unwrap();
        let Format::StructuralTag { tag, .. } = r.out.format else {
            panic!("not a tag")
        };
        assert_eq!(tag["format"]["type"], "triggered_tags");
    }
}
