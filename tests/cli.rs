//! The `structgen` binary on good and bad input: output formats, exit codes (0 ok, 1 refused input,
//! 2 error) and error messages naming the file and position. No input may make it panic.

mod common;

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use common::structgen;

/// `structgen check` of `inputs` (JSON Lines) against the JSON Schema file `schema`, SmolLM2
/// tokenizer, each line a JSON value when `json`.
fn check_schema(schema: &std::path::Path, inputs: &std::path::Path, json: bool) -> Output {
    let (s, i) = (
        schema.to_str().unwrap_or_default(),
        inputs.to_str().unwrap_or_default(),
    );
    let mut args = vec![
        "check",
        "--tokenizer",
        "../shared/tokenizers/smollm2-135m.tokenizer.json",
        "--json-schema",
        s,
        "--inputs",
        i,
    ];
    if json {
        args.push("--json");
    }
    structgen(&args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn temp_file(name: &str, contents: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("structgen-cli-{}-{name}", std::process::id()));
    std::fs::write(&p, contents).expect("write temp file");
    p
}

fn assert_clean_error(out: &Output, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn grammar_prints_normalized_ebnf_that_parses_back() {
    let out = structgen(&["grammar", "--ebnf", "grammars/json.ebnf"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(printed.starts_with("root ::= ws value ws\n"), "{printed}");
    let again = temp_file("json-printed.ebnf", printed.as_bytes());
    let out2 = structgen(&["grammar", "--ebnf", again.to_str().unwrap_or_default()]);
    assert_eq!(text(&out2.stdout), printed);
    let _ = std::fs::remove_file(again);
}

#[test]
fn lark_files_are_grammar_sources() {
    let grammar = temp_file(
        "call.lark",
        b"start: \"call(\" arg (\",\" arg)* \")\"\narg: NUMBER\n%import common.NUMBER\n%ignore \" \"\n",
    );
    let inputs = temp_file("call-inputs.jsonl", b"\"call(1, 2.5)\"\n\"call(1,)\"\n");
    let (g, i) = (
        grammar.to_str().unwrap_or_default(),
        inputs.to_str().unwrap_or_default(),
    );
    let out = structgen(&["grammar", "--lark", g]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("root ::= "),
        "{}",
        text(&out.stdout)
    );
    if common::shared_dir("lark_files_are_grammar_sources").is_some() {
        let out = structgen(&[
            "check",
            "--tokenizer",
            "../shared/tokenizers/smollm2-135m.tokenizer.json",
            "--lark",
            g,
            "--inputs",
            i,
            "--verify-masks",
        ]);
        let lines = text(&out.stdout);
        assert!(
            lines.contains("\"completed\":true"),
            "{lines}\n{}",
            text(&out.stderr)
        );
        assert!(lines.contains("\"accepted\":false"), "{lines}");
    }
    let bad = temp_file("bad.lark", b"start: item\nitem \"x\"\n");
    let path = bad.to_str().unwrap_or_default().to_string();
    assert_clean_error(
        &structgen(&["grammar", "--lark", &path]),
        &format!("{path}: Lark error at line 2, column 6: expected ':' after rule name"),
    );
    for f in [grammar, inputs, bad] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn grammar_errors_name_file_line_and_column() {
    let bad = temp_file("bad.ebnf", b"root ::= \"a\" b\n\nb ::= [z-a]\n");
    let path = bad.to_str().unwrap_or_default().to_string();
    assert_clean_error(
        &structgen(&["grammar", "--ebnf", &path]),
        &format!("{path}:3:8: "),
    );
    let _ = std::fs::remove_file(bad);

    let binary = temp_file("binary.ebnf", &[0x72, 0x6f, 0xff, 0xfe, 0x00]);
    let path = binary.to_str().unwrap_or_default().to_string();
    assert_clean_error(
        &structgen(&["grammar", "--ebnf", &path]),
        "not valid UTF-8 at byte 2",
    );
    let _ = std::fs::remove_file(binary);

    assert_clean_error(
        &structgen(&["grammar", "--ebnf", "/nonexistent.ebnf"]),
        "/nonexistent.ebnf",
    );
    let root = structgen(&["grammar", "--ebnf", "grammars/json.ebnf", "--root", "nope"]);
    assert_clean_error(&root, "root rule `nope` is not defined");
    let endless = temp_file("endless.ebnf", b"root ::= \"a\" root\n");
    let path = endless.to_str().unwrap_or_default().to_string();
    let out = structgen(&["grammar", "--ebnf", &path]);
    assert_clean_error(&out, "root rule `root` cannot match any finite string");
    let _ = std::fs::remove_file(endless);
}

#[test]
fn trace_steps_through_text() {
    let Some(_) = common::shared_dir("trace_steps_through_text") else {
        return;
    };
    let tok = "../shared/tokenizers/smollm2-135m.tokenizer.json";
    let out = structgen(&[
        "trace",
        "--tokenizer",
        tok,
        "--ebnf",
        "grammars/get_weather_call.ebnf",
        "--masks",
        "--text",
        r#"{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let (last, steps) = lines.split_last().expect("at least one line");
    for (k, step) in steps.iter().enumerate() {
        assert_eq!(step["step"], k);
        assert_eq!(step["accepted"], true);
        let allowed = step["allowed_ids"].as_array().expect("allowed_ids");
        assert_eq!(step["allowed"].as_u64(), Some(allowed.len() as u64));
        assert!(
            allowed.contains(&step["token"]),
            "token in its own mask at step {k}"
        );
        assert!(step["mask_us"].as_f64().is_some() && step["piece"].is_string());
    }
    assert_eq!(
        steps[0]["jump_forward"],
        r#"{"name": "get_weather", "arguments": {"city": ""#
    );
    assert_eq!(last["end"], true);
    assert_eq!(last["completed"], true);
    assert_eq!(last["step"], steps.len());
}

#[test]
fn free_text_options_take_values_that_start_with_a_dash() {
    let Some(_) = common::shared_dir("free_text_options_take_values_that_start_with_a_dash") else {
        return;
    };
    let out = structgen(&[
        "trace",
        "--tokenizer",
        "../shared/tokenizers/smollm2-135m.tokenizer.json",
        "--regex",
        r"-\(-[0-9]\)\*[0-9]+",
        "--text",
        "-(-3)*10",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let last: Value =
        serde_json::from_str(text(&out.stdout).lines().last().expect("a line")).expect("JSON");
    assert_eq!(last["completed"], true, "{}", text(&out.stdout));
}

#[test]
fn verify_masks_reports_the_tokens_it_checked() {
    let Some(_) = common::shared_dir("verify_masks_reports_the_tokens_it_checked") else {
        return;
    };
    let tok = "../shared/tokenizers/smollm2-135m.tokenizer.json";
    let call = r#"{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}"#;
    let out = structgen(&[
        "trace",
        "--tokenizer",
        tok,
        "--ebnf",
        "grammars/get_weather_call.ebnf",
        "--verify-masks",
        "--text",
        call,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let last: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("JSON");
    let steps = last["step"].as_u64().expect("step");
    let checked = last["verified_tokens"].as_u64().expect("verified_tokens");
    assert!(
        checked > steps * 16,
        "{checked} tokens checked over {steps} steps"
    );
    let inputs = temp_file(
        "verify.jsonl",
        format!("{}\n", Value::from(call)).as_bytes(),
    );
    let out = structgen(&[
        "check",
        "--tokenizer",
        tok,
        "--ebnf",
        "grammars/get_weather_call.ebnf",
        "--inputs",
        inputs.to_str().unwrap_or_default(),
        "--verify-masks",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let summary: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("JSON");
    assert!(
        summary["summary"]["verified_tokens"].as_u64() > Some(steps * 16),
        "{stdout}"
    );
    let _ = std::fs::remove_file(inputs);
}

#[test]
fn trace_stops_at_the_first_refused_token() {
    let Some(_) = common::shared_dir("trace_stops_at_the_first_refused_token") else {
        return;
    };
    let tok = "../shared/tokenizers/smollm2-135m.tokenizer.json";
    let out = structgen(&[
        "trace",
        "--tokenizer",
        tok,
        "--ebnf",
        "grammars/json.ebnf",
        "--text",
        "[1, 2,, 3]",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}")).expect("JSON");
    assert_eq!(last["accepted"], false);
    assert_eq!(last["piece"], ",,", "SmolLM2 has a `,,` token");
    assert!(!stdout.contains("\"end\""));
    assert!(text(&out.stderr).contains("is not allowed by the grammar"));

    let ids = structgen(&[
        "trace",
        "--tokenizer",
        tok,
        "--ebnf",
        "grammars/json.ebnf",
        "--tokens",
        "75,33,77",
        "--stop-token",
        "0",
        "--masks",
    ]);
    assert!(ids.status.success(), "{}", text(&ids.stderr));
    let end: Value =
        serde_json::from_str(text(&ids.stdout).lines().last().unwrap_or("{}")).expect("JSON");
    assert_eq!(end["completed"], true, "[1] is a complete JSON value");
    let allowed = end["allowed_ids"].as_array().expect("allowed_ids");
    assert!(
        allowed.contains(&Value::from(0)),
        "--stop-token 0 is allowed at the end"
    );
    assert!(
        !allowed.contains(&Value::from(2)),
        "<|im_end|> is no longer a stop token"
    );
}

#[test]
fn trace_rejects_bad_arguments_cleanly() {
    let Some(_) = common::shared_dir("trace_rejects_bad_arguments_cleanly") else {
        return;
    };
    let tok = "../shared/tokenizers/smollm2-135m.tokenizer.json";
    let base = ["trace", "--tokenizer", tok, "--ebnf", "grammars/json.ebnf"];
    let with = |extra: &[&str]| structgen(&[&base[..], extra].concat());
    assert_clean_error(
        &with(&["--tokens", "1,x,3"]),
        "item 2 (\"x\") is not a token id",
    );
    assert_clean_error(
        &with(&["--tokens", "1", "--stop-token", "999999"]),
        "stop token id 999999",
    );
    let out = with(&["--tokens", "4294967295"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an unknown id is refused, not a crash"
    );
    assert_clean_error(
        &structgen(&[
            "trace",
            "--tokenizer",
            "/nonexistent/tok.json",
            "--ebnf",
            "grammars/json.ebnf",
            "--text",
            "1",
        ]),
        "/nonexistent/tok.json",
    );
    let empty = temp_file("empty.ebnf", b"");
    let p = empty.to_str().unwrap_or_default().to_string();
    let out = structgen(&["trace", "--tokenizer", tok, "--ebnf", &p, "--text", "1"]);
    assert_clean_error(&out, "root rule `root` is not defined");
    let _ = std::fs::remove_file(empty);
}

#[test]
fn check_reports_each_input_and_a_summary() {
    let Some(_) = common::shared_dir("check_reports_each_input_and_a_summary") else {
        return;
    };
    let schema = temp_file(
        "count.schema.json",
        br#"{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}"#,
    );
    let inputs = temp_file("count.jsonl", b"{\"n\": 1}\n{\"n\": -1}\n\n{\"m\": 1}\n");
    let out = check_schema(&schema, &inputs, true);
    assert_eq!(
        out.status.code(),
        Some(1),
        "not every input passes: {}",
        text(&out.stderr)
    );
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(
        lines.len(),
        4,
        "three inputs (blank line skipped) and the summary"
    );
    let accepted: Vec<&Value> = lines[..3].iter().map(|l| &l["accepted"]).collect();
    assert_eq!(
        accepted,
        [&Value::Bool(true), &Value::Bool(false), &Value::Bool(false)]
    );
    assert!(lines[1]["failed_at_token"].as_u64().is_some());
    assert_eq!(lines[3]["summary"]["completed"], 1);
    assert_eq!(lines[3]["summary"]["inputs"], 3);
    let strings = check_schema(&schema, &inputs, false);
    assert_clean_error(
        &strings,
        "expected a JSON string, found an object (use --json",
    );
    let _ = (std::fs::remove_file(&schema), std::fs::remove_file(&inputs));
}

#[test]
fn check_rejects_repeated_unique_items_with_their_pointer() {
    let Some(_) = common::shared_dir("check_rejects_repeated_unique_items_with_their_pointer")
    else {
        return;
    };
    let schema = temp_file(
        "unique.schema.json",
        br#"{"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}}"#,
    );
    let inputs = temp_file(
        "unique.jsonl",
        b"{\"tags\": [\"a\", \"b\"]}\n{\"tags\": [\"a\", \"b\", \"a\"]}\n",
    );
    let out = check_schema(&schema, &inputs, true);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(lines[0]["accepted"], true);
    assert_eq!(lines[0]["violation"], Value::Null);
    assert_eq!(lines[1]["accepted"], false);
    assert_eq!(
        lines[1]["failed_at_token"],
        Value::Null,
        "the grammar took it"
    );
    assert!(
        lines[1]["violation"]
            .as_str()
            .is_some_and(|v| v.starts_with("/tags/2:")),
        "{}",
        lines[1]
    );
    assert_eq!(lines[2]["summary"]["completed"], 1);
    let _ = (std::fs::remove_file(&schema), std::fs::remove_file(&inputs));
}

#[test]
fn regex_and_schema_sources() {
    let out = structgen(&["grammar", "--regex", r"[a-z]+@[a-z]+\.com"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("root ::= [a-z]+ \"@\" [a-z]+ \".com\""),
        "{}",
        text(&out.stdout)
    );
    let out = structgen(&["grammar", "--regex", "(?!ab)[a-c]{2}"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_clean_error(
        &structgen(&["grammar", "--regex", "(a(?=b))"]),
        "at offset 2: look-around is only supported outside groups",
    );
    assert_clean_error(
        &structgen(&["grammar", "--regex", "a(?=b)"]),
        "cannot match any finite string",
    );
    let bad = temp_file(
        "bad.schema.json",
        b"{\"type\": \"object\",\n  \"properties\": [}",
    );
    let p = bad.to_str().unwrap_or_default().to_string();
    assert_clean_error(
        &structgen(&["grammar", "--json-schema", &p]),
        &format!("{p}:2:"),
    );
    let schema = temp_file(
        "warn.schema.json",
        br#"{"type": "array", "uniqueItems": true}"#,
    );
    let w = schema.to_str().unwrap_or_default().to_string();
    let out = structgen(&["grammar", "--json-schema", &w]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("/uniqueItems: uniqueItems is not enforced"),
        "{}",
        text(&out.stderr)
    );
    assert_clean_error(
        &structgen(&["grammar", "--json-schema", &w, "--strict-schema"]),
        "--strict-schema",
    );
    let misuse = structgen(&["grammar", "--ebnf", "grammars/json.ebnf", "--no-strict"]);
    assert_clean_error(&misuse, "need --json-schema");
    let _ = (std::fs::remove_file(bad), std::fs::remove_file(schema));
}

#[test]
fn tool_lists_and_structural_tags_as_sources() {
    let out = structgen(&[
        "grammar",
        "--tools",
        "grammars/tools/weather.json",
        "--style",
        "qwen",
        "--tool-choice",
        "required",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.starts_with("# structural tag: {\"type\":\"structural_tag\""),
        "{printed}"
    );
    assert!(
        printed.contains("TagDispatch((\"<tool_call>\""),
        "{printed}"
    );
    assert_clean_error(
        &structgen(&[
            "grammar",
            "--tools",
            "grammars/tools/weather.json",
            "--style",
            "gpt9",
        ]),
        "unknown style \"gpt9\"",
    );
    assert_clean_error(
        &structgen(&[
            "grammar",
            "--tools",
            "grammars/tools/weather.json",
            "--style",
            "llama",
            "--tool-choice",
            "get_time",
        ]),
        "tool_choice names \"get_time\"",
    );
    let bad = temp_file(
        "bad.tag.json",
        br#"{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f"], "tags": [{"begin": "<g>", "content": {"type": "any_text"}, "end": "</g>"}]}}"#,
    );
    let p = bad.to_str().unwrap_or_default().to_string();
    assert_clean_error(
        &structgen(&["grammar", "--structural-tag", &p]),
        &format!("{p}: /format/tags/0/begin: begin \"<g>\" does not start with any trigger"),
    );
    let _ = std::fs::remove_file(bad);
}

#[test]
fn check_takes_a_tool_list() {
    let Some(_) = common::shared_dir("check_takes_a_tool_list") else {
        return;
    };
    let inputs = temp_file(
        "calls.jsonl",
        br#""Sure. <function=get_weather>{\"location\": \"Oslo\"}</function>"
"<function=get_weather>{\"city\": \"Oslo\"}</function>"
"No call needed."
"#,
    );
    let i = inputs.to_str().unwrap_or_default().to_string();
    let out = structgen(&[
        "check",
        "--tokenizer",
        "../shared/tokenizers/llama3.tokenizer.json",
        "--tools",
        "grammars/tools/weather.json",
        "--style",
        "llama",
        "--inputs",
        &i,
    ]);
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let accepted: Vec<bool> = lines[..3].iter().map(|l| l["completed"] == true).collect();
    assert_eq!(accepted, [true, false, true], "{}", text(&out.stderr));
    let _ = std::fs::remove_file(inputs);
}

#[test]
fn bfcl_bad_input_is_a_clear_error() {
    let out = structgen(&["bfcl", "--data", "no/such/dir", "--mode", "ground-truth"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("no/such/dir: no question file for simple_python")
            && err.contains("scripts/fetch-bfcl.sh"),
        "{err}"
    );
    let out = structgen(&["bfcl", "--categories", "simple,parallel"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("unknown category \"simple\" (known: simple_python,"),
        "{err}"
    );
    let results = temp_file("results.json", b"{\"results\": 3}");
    let r = results.to_str().unwrap_or_default().to_string();
    if common::bfcl_data("bfcl_bad_input_is_a_clear_error: --rescore").is_some() {
        let out = structgen(&["bfcl", "--rescore", &r, "--categories", "parallel"]);
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(err.contains("not a structgen bfcl results file"), "{err}");
    }
    let _ = std::fs::remove_file(results);
}
