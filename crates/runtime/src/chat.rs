//! Chat templates: the model's Jinja template + messages + tools → the prompt text.
//!
//! Templates come from GGUF `tokenizer.chat_template`, `tokenizer_config.json` or a file given
//! with `--chat-template`, and are rendered with minijinja plus Python string/dict methods
//! (`.strip()`, `.items()`, ...), `raise_exception` and `strftime_now`, the way Hugging Face
//! renders them: `messages`, `tools` (OpenAI format), `add_generation_prompt = true`,
//! `bos_token`, `eos_token`. A template that never mentions `tools` gets the tool list and the
//! call format written into the system message instead (prepended to an existing one).

use serde_json::{json, Value};

use structgen_engine::frontend::tools::StyleSpec;

/// A template that could not be compiled or rendered.
#[derive(Debug, thiserror::Error)]
#[error("chat template from {origin}{}: {message}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
pub struct ChatError {
    /// Where the template came from.
    pub origin: String,
    /// Template line of the error, when known.
    pub line: Option<usize>,
    /// What went wrong.
    pub message: String,
}

/// A compiled chat template.
#[derive(Debug)]
pub struct ChatTemplate {
    env: minijinja::Environment<'static>,
    origin: String,
    tools_aware: bool,
    bos: String,
    eos: String,
}

impl ChatTemplate {
    /// Compiles `source`; `origin` names it in errors; `bos` / `eos` are the special token texts.
    pub fn new(source: &str, origin: &str, bos: &str, eos: &str) -> Result<Self, ChatError> {
        let mut env = minijinja::Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    format!("the template raised: {msg}"),
                ))
            },
        );
        env.add_function("strftime_now", |fmt: String| strftime_now(&fmt));
        env.add_filter("tojson", tojson);
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| to_error(origin, &e))?;
        Ok(ChatTemplate {
            env,
            origin: origin.to_string(),
            tools_aware: source.contains("tools"),
            bos: bos.to_string(),
            eos: eos.to_string(),
        })
    }

    /// Whether the template renders a `tools` list itself.
    pub fn supports_tools(&self) -> bool {
        self.tools_aware
    }

    /// The prompt for `messages` (OpenAI chat messages) with `tools` (OpenAI tool list), ending
    /// with the assistant turn's opening.
    pub fn render(
        &self,
        messages: &[Value],
        tools: &[Value],
        style: &StyleSpec,
    ) -> Result<String, ChatError> {
        let mut messages = messages.to_vec();
        let tools_value = if tools.is_empty() || self.tools_aware {
            Value::from(tools.to_vec())
        } else {
            inject_tools(&mut messages, tools, style);
            Value::Null
        };
        let tools_value = if tools.is_empty() {
            Value::Null
        } else {
            tools_value
        };
        let ctx = json!({
            "messages": messages,
            "tools": tools_value,
            "add_generation_prompt": true,
            "bos_token": self.bos,
            "eos_token": self.eos,
        });
        let tmpl = self
            .env
            .get_template("chat")
            .map_err(|e| to_error(&self.origin, &e))?;
        tmpl.render(minijinja::Value::from_serialize(&ctx))
            .map_err(|e| to_error(&self.origin, &e))
    }
}

/// Hugging Face's `tojson` (Python's `json.dumps` with `ensure_ascii=False`): `", "` and `": "`
/// between items, or `indent` spaces per level, keys in order unless `sort_keys`. minijinja's own
/// filter writes compact, HTML-escaped JSON, which is not the text the models were trained on.
fn tojson(
    value: minijinja::Value,
    kwargs: minijinja::value::Kwargs,
) -> Result<minijinja::Value, minijinja::Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let v = serde_json::to_value(&value).map_err(|e| {
        minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("tojson: {e}"),
        )
    })?;
    let mut out = String::new();
    python_json(&v, indent, sort_keys.unwrap_or(false), 0, &mut out);
    Ok(minijinja::Value::from_safe_string(out))
}

fn python_json(v: &Value, indent: Option<usize>, sort: bool, level: usize, out: &mut String) {
    let (open, close, items): (char, char, Vec<(Option<&String>, &Value)>) = match v {
        Value::Array(a) => ('[', ']', a.iter().map(|x| (None, x)).collect()),
        Value::Object(m) => {
            let mut kv: Vec<(Option<&String>, &Value)> =
                m.iter().map(|(k, x)| (Some(k), x)).collect();
            if sort {
                kv.sort_by(|a, b| a.0.cmp(&b.0));
            }
            ('{', '}', kv)
        }
        scalar => {
            out.push_str(&scalar.to_string());
            return;
        }
    };
    out.push(open);
    if items.is_empty() {
        out.push(close);
        return;
    }
    for (i, (key, x)) in items.iter().enumerate() {
        match (i, indent) {
            (_, Some(n)) => {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&" ".repeat(n * (level + 1)));
            }
            (0, None) => {}
            (_, None) => out.push_str(", "),
        }
        if let Some(k) = key {
            out.push_str(&Value::String((*k).clone()).to_string());
            out.push_str(": ");
        }
        python_json(x, indent, sort, level + 1, out);
    }
    if let Some(n) = indent {
        out.push('\n');
        out.push_str(&" ".repeat(n * level));
    }
    out.push(close);
}

/// The system-message text that teaches a tool-unaware template's model the tools and format.
pub fn tools_system_text(tools: &[Value], style: &StyleSpec) -> String {
    let example = format!(
        "{}{}{}",
        style.begin.replace("{name}", "TOOL_NAME"),
        if style.xml_args {
            "<parameter=ARG_NAME>\nARG_VALUE\n</parameter>\n"
        } else {
            "{\"ARG_NAME\": ARG_VALUE}"
        },
        style.end
    );
    let listing: Vec<String> = tools.iter().map(|t| t.to_string()).collect();
    format!(
        "You are a helpful assistant with access to these tools:\n{}\n\nWhen the user's request needs a tool, answer with a tool call, written exactly as:\n{example}\nwhere TOOL_NAME is one of the tool names and the arguments follow its parameters. Otherwise answer in plain text.",
        listing.join("\n")
    )
}

fn inject_tools(messages: &mut Vec<Value>, tools: &[Value], style: &StyleSpec) {
    let text = tools_system_text(tools, style);
    match messages.first_mut() {
        Some(first) if first["role"] == "system" => {
            let old = first["content"].as_str().unwrap_or_default().to_string();
            first["content"] = Value::String(format!("{text}\n\n{old}"));
        }
        _ => messages.insert(0, json!({"role": "system", "content": text})),
    }
}

fn to_error(origin: &str, e: &minijinja::Error) -> ChatError {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    ChatError {
        origin: origin.to_string(),
        line: e.line(),
        message,
    }
}

/// `strftime_now(fmt)` for the `%Y %m %d %B %b %H %M %S` directives templates use for dates.
fn strftime_now(fmt: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let (y, m, d) = civil_from_days(days);
    let rem = secs % 86_400;
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let month = MONTHS[(m - 1) as usize];
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('B') => out.push_str(month),
            Some('b') => out.push_str(&month[..3]),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use structgen_engine::frontend::tools::style;

    const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn tool_unaware_template_gets_a_system_message() {
        let t = ChatTemplate::new(CHATML, "test", "", "<|im_end|>").unwrap();
        assert!(!t.supports_tools());
        let tools = vec![json!({"type": "function", "function": {"name": "f"}})];
        let out = t
            .render(
                &[json!({"role": "user", "content": "hi"})],
                &tools,
                style("qwen").unwrap(),
            )
            .unwrap();
        assert!(
            out.starts_with(
                "<|im_start|>system\nYou are a helpful assistant with access to these tools:"
            ),
            "{out}"
        );
        assert!(out.contains("<tool_call>\n{\"name\": \"TOOL_NAME\""));
        assert!(out.ends_with("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));
    }

    #[test]
    fn tool_aware_template_sees_tools_and_python_methods() {
        let src = "{%- if tools %}{% for t in tools %}[{{ t.function.name }}]{% endfor %}{% endif %}{% for m in messages %}{{ m.content.strip() }}{% endfor %}{{ raise_exception('no') if messages|length > 5 }}";
        let t = ChatTemplate::new(src, "test", "<s>", "</s>").unwrap();
        assert!(t.supports_tools());
        let tools = vec![json!({"type": "function", "function": {"name": "f"}})];
        let out = t
            .render(
                &[json!({"role": "user", "content": "  hi  "})],
                &tools,
                style("llama").unwrap(),
            )
            .unwrap();
        assert_eq!(out, "[f]hi");
        let many = vec![json!({"role": "user", "content": "x"}); 6];
        let err = t
            .render(&many, &tools, style("llama").unwrap())
            .unwrap_err();
        assert!(err.to_string().contains("the template raised: no"), "{err}");
    }

    #[test]
    fn tojson_writes_what_python_writes() {
        let t = ChatTemplate::new(
            "{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ y | tojson }}",
            "t",
            "",
            "",
        )
        .unwrap();
        let env_render = |x: Value, y: Value| {
            let tmpl = t.env.get_template("chat").unwrap();
            tmpl.render(minijinja::Value::from_serialize(json!({"x": x, "y": y})))
                .unwrap()
        };
        let got = env_render(
            json!({"b": [1, 2.5, "<é>\n"], "a": {}, "c": [], "d": null}),
            json!(true),
        );
        assert_eq!(
            got,
            "{\"b\": [1, 2.5, \"<é>\\n\"], \"a\": {}, \"c\": [], \"d\": null}|{\n  \"b\": [\n    1,\n    2.5,\n    \"<é>\\n\"\n  ],\n  \"a\": {},\n  \"c\": [],\n  \"d\": null\n}|true"
        );
    }

    #[test]
    fn syntax_error_names_line() {
        let err = ChatTemplate::new("ok\n{% if %}", "x.jinja", "", "").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(
            err.to_string()
                .starts_with("chat template from x.jinja, line 2:"),
            "{err}"
        );
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
    }
}
