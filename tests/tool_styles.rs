//! Every built-in tool-call style on grammars/tools/weather.json: a hand-written valid answer is
//! accepted; a wrong tool name, a text-only answer under `tool_choice: required` and a call under
//! `tool_choice: none` are refused; plus named tool choice, parallel calls and reasoning blocks.
//! Texts are checked byte-exactly (a byte vocabulary), so no tokenizer is needed.

mod common;

use std::sync::Arc;

use serde_json::Value;
use structgen::frontend::json_schema::JsonSchemaOptions;
use structgen::frontend::structural_tag::structural_tag_grammar;
use structgen::frontend::tool_tag::tools_structural_tag;
use structgen::frontend::tools::{parse_tools, style, ToolChoice, ToolOptions, STYLES};
use structgen::{compile, GrammarMatcher, Limits};

fn tools() -> Vec<structgen::frontend::tools::Tool> {
    let v: Value =
        serde_json::from_str(&common::read("grammars/tools/weather.json")).expect("JSON");
    parse_tools(&v).expect("tool list")
}

/// Whether `text` is a complete answer of `style` under `options`.
fn answer_ok(style_name: &str, options: &ToolOptions, text: &str) -> bool {
    let spec = style(style_name).expect("style");
    let tag = tools_structural_tag(&tools(), spec, options).expect("structural tag");
    let limits = Limits::default();
    let g = structural_tag_grammar(&tag, None, &JsonSchemaOptions::default(), &limits)
        .unwrap_or_else(|e| panic!("{style_name}: {e}"));
    let compiled = compile(&g.grammar, common::byte_vocab(), &limits).expect("compiles");
    let mut m = GrammarMatcher::new(Arc::clone(&compiled));
    m.accept_string(text) && m.is_completed()
}

fn choice(c: ToolChoice) -> ToolOptions {
    ToolOptions {
        tool_choice: c,
        ..ToolOptions::default()
    }
}

/// A valid single call of `get_weather` in each style, and the same call with another tool name.
fn call(style_name: &str, tool: &str) -> String {
    call_with(
        style_name,
        tool,
        r#"{"location": "Paris", "unit": "celsius"}"#,
        "<parameter=location>\nParis\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n",
    )
}

/// A valid call of `get_forecast` in each style.
fn forecast(style_name: &str) -> String {
    call_with(
        style_name,
        "get_forecast",
        r#"{"location": "Tokyo", "days": 5}"#,
        "<parameter=location>\nTokyo\n</parameter>\n<parameter=days>\n5\n</parameter>\n",
    )
}

/// A call of `tool` in each style: `args` as JSON, `params` as `qwen_coder`'s parameter blocks.
fn call_with(style_name: &str, tool: &str, args: &str, params: &str) -> String {
    match style_name {
        "llama" => format!("<function={tool}>{args}</function>"),
        "llama_json" => format!(r#"{{"name": "{tool}", "parameters": {args}}}"#),
        "qwen" | "hermes" => format!("<tool_call>\n{{\"name\": \"{tool}\", \"arguments\": {args}}}\n</tool_call>"),
        "qwen_coder" => format!("<tool_call>\n<function={tool}>\n{params}</function>\n</tool_call>"),
        "harmony" => format!("<|start|>assistant<|channel|>commentary to=functions.{tool} <|constrain|>json<|message|>{args}<|call|>"),
        "deepseek" => format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{tool}\n```json\n{args}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
        "mistral" => format!(r#"[TOOL_CALLS][{{"name": "{tool}", "arguments": {args}}}]"#),
        other => panic!("no sample for style {other}"),
    }
}

/// Harmony answers start with the analysis channel (its reasoning block, on by default).
fn reasoned(style_name: &str, body: &str) -> String {
    if style_name == "harmony" {
        format!("<|channel|>analysis<|message|>The user wants weather.<|end|>{body}")
    } else {
        body.to_string()
    }
}

#[test]
fn every_style_accepts_a_valid_call_and_refuses_bad_ones() {
    for spec in STYLES {
        let s = spec.name;
        let auto = ToolOptions::default();
        let good = reasoned(s, &call(s, "get_weather"));
        assert!(
            answer_ok(s, &auto, &good),
            "{s}: valid call refused: {good}"
        );
        let text_first = reasoned(
            s,
            &format!("Let me look that up.\n{}", call(s, "get_weather")),
        );
        assert!(
            answer_ok(s, &auto, &text_first),
            "{s}: text before the call refused"
        );
        let unknown = reasoned(s, &call(s, "get_wether"));
        assert!(!answer_ok(s, &auto, &unknown), "{s}: unknown tool accepted");
        let broken = if s == "qwen_coder" {
            // (string values are raw text there, so the unknown argument is a parameter)
            good.replace(
                "</function>",
                "<parameter=bogus>\n1\n</parameter>\n</function>",
            )
        } else {
            good.replace("\"Paris\"", "\"Paris\", \"bogus\": 1")
        };
        assert!(
            !answer_ok(s, &auto, &broken),
            "{s}: unknown argument accepted: {broken}"
        );

        let required = choice(ToolChoice::Required);
        let text_only = reasoned(s, "It is sunny in Paris.");
        assert!(
            !answer_ok(s, &required, &text_only),
            "{s}: text-only answer accepted under required"
        );
        assert!(
            answer_ok(s, &required, &good),
            "{s}: call refused under required"
        );

        let none = choice(ToolChoice::None);
        assert!(
            answer_ok(s, &none, &text_only),
            "{s}: text refused under none"
        );
        assert!(!answer_ok(s, &none, &good), "{s}: call accepted under none");

        // A named choice takes that tool's call only, and always a call.
        let tokyo = reasoned(s, &forecast(s));
        for (tool, own, other) in [
            ("get_forecast", &tokyo, &good),
            ("get_weather", &good, &tokyo),
        ] {
            let named = choice(ToolChoice::Named(tool.into()));
            assert!(
                answer_ok(s, &named, own),
                "{s}: named {tool}: its call refused: {own}"
            );
            assert!(
                !answer_ok(s, &named, other),
                "{s}: named {tool}: other tool accepted"
            );
            assert!(
                !answer_ok(s, &named, &text_only),
                "{s}: named {tool}: text-only answer accepted"
            );
        }
        assert!(
            answer_ok(s, &auto, &text_only),
            "{s}: text-only answer refused under auto"
        );
    }
}

#[test]
fn parallel_calls_and_reasoning() {
    let one = call("qwen", "get_weather");
    let two = format!("{one}\n{one}");
    assert!(answer_ok("qwen", &ToolOptions::default(), &two));
    let single = ToolOptions {
        parallel_tool_calls: false,
        ..ToolOptions::default()
    };
    assert!(answer_ok("qwen", &single, &one));
    assert!(
        !answer_ok("qwen", &single, &two),
        "second call accepted without parallel calls"
    );
    let block = |calls: &[String], sep: &str| {
        let inner: Vec<String> = calls
            .iter()
            .map(|c| {
                c.trim_start_matches("[TOOL_CALLS][")
                    .trim_end_matches(']')
                    .to_string()
            })
            .collect();
        format!("[TOOL_CALLS][{}]", inner.join(sep))
    };
    let m = call("mistral", "get_weather");
    assert!(answer_ok(
        "mistral",
        &ToolOptions::default(),
        &block(&[m.clone(), m.clone()], ", ")
    ));
    assert!(!answer_ok(
        "mistral",
        &single,
        &block(&[m.clone(), m], ", ")
    ));

    let on = ToolOptions {
        reasoning: Some(true),
        ..ToolOptions::default()
    };
    let off = ToolOptions {
        reasoning: Some(false),
        ..ToolOptions::default()
    };
    assert!(answer_ok(
        "qwen",
        &on,
        &format!("<think>\nRain? Check.\n</think>\n\n{one}")
    ));
    assert!(!answer_ok("qwen", &on, &one), "reasoning block skipped");
    assert!(answer_ok(
        "qwen",
        &off,
        &format!("<think>\n\n</think>\n\n{one}")
    ));
    assert!(!answer_ok(
        "qwen",
        &off,
        &format!("<think>\nthoughts\n</think>\n\n{one}")
    ));
    let harmony_call = call("harmony", "get_weather");
    assert!(
        answer_ok("harmony", &off, &harmony_call),
        "harmony without analysis"
    );
    assert!(
        !answer_ok("harmony", &ToolOptions::default(), &harmony_call),
        "analysis is on by default"
    );
}

#[test]
fn tool_list_errors_name_the_json_path() {
    let cases = [
        (r#"{"name": "x"}"#, "/: expected a JSON array"),
        (
            r#"[{"type": "function", "function": {"description": "no name"}}]"#,
            "/0/function: missing field `name`",
        ),
        (
            r#"[{"type": "function", "function": {"name": ""}}]"#,
            "/0/function/name",
        ),
        (
            r#"[{"name": "a"}, {"name": "a"}]"#,
            "/1/name: tool \"a\" is listed twice",
        ),
        (
            r#"[{"type": "retrieval"}]"#,
            "/0/type: expected \"function\"",
        ),
        (
            r#"[{"name": "a", "parameters": "object"}]"#,
            "/0/parameters: expected a JSON Schema object",
        ),
    ];
    for (text, expected) in cases {
        let v: Value = serde_json::from_str(text).expect("JSON");
        let err = parse_tools(&v).expect_err(text).to_string();
        assert!(err.starts_with(expected), "{text}: {err}");
    }
    let spec = style("llama").expect("style");
    let named = choice(ToolChoice::Named("nope".into()));
    let err = tools_structural_tag(&tools(), spec, &named).expect_err("unknown tool choice");
    assert!(err.to_string().contains("\"nope\""), "{err}");
    let required = choice(ToolChoice::Required);
    assert!(
        tools_structural_tag(&[], spec, &required).is_err(),
        "required with no tools"
    );
}
