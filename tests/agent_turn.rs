//! `structgen run --tool-exec` with the real SmolLM2-135M-Instruct GGUF: the model's call (a call is
//! required, as a 135M model rarely decides to call) runs through a command, its result comes back
//! as a `tool` message through the chat template, and the model answers again; a tool that fails
//! or hangs becomes an error result the model sees, and the run ends normally.

mod common;

use std::process::Command;

use serde_json::Value;

fn agent(tool: &str, extra: &[&str]) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_structgen"))
        .args(["run", "--model", "smollm2-135m"])
        .args(["--tools", "grammars/tools/weather.json"])
        .args(["--tool-choice", "required", "--no-parallel-calls"])
        .args([
            "--prompt",
            "What's the weather in Paris?",
            "--max-tokens",
            "48",
        ])
        .args(["--tool-exec", tool, "--json"])
        .args(extra)
        .current_dir(common::repo())
        .output()
        .expect("run structgen");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&String::from_utf8_lossy(&o.stdout)).expect("one JSON object")
}

#[test]
fn a_call_runs_and_its_result_reaches_the_next_turn() {
    if common::model_file("a_call_runs_and_its_result_reaches_the_next_turn").is_none() {
        return;
    }
    let v = agent("grammars/tools/run.py", &["--max-turns", "2"]);
    let turns = v["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 2, "{v}");
    let call = &turns[0]["tool_calls"][0]["function"];
    assert!(
        call["name"]
            .as_str()
            .unwrap_or_default()
            .starts_with("get_"),
        "{v}"
    );
    let result = &turns[0]["tool_results"][0];
    assert_eq!(result["error"], false, "{result}");
    assert!(result["content"]["location"].is_string(), "{result}");
    let messages = v["messages"].as_array().expect("messages");
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool"], "{v}");
    assert_eq!(
        messages[1]["tool_calls"][0]["id"],
        messages[2]["tool_call_id"]
    );
    let content: Value =
        serde_json::from_str(messages[2]["content"].as_str().unwrap_or_default()).expect("JSON");
    assert_eq!(content, result["content"]);
    // Turn 2 is `auto` and ran from the tool's result; with --max-turns 2 its calls (if any) wait.
    assert!(
        turns[1]["summary"]["tokens_generated"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{v}"
    );
    assert!(turns[1]["tool_results"]
        .as_array()
        .is_some_and(|r| r.is_empty()));
}

#[test]
fn failing_and_hanging_tools_become_error_results() {
    if common::model_file("failing_and_hanging_tools_become_error_results").is_none() {
        return;
    }
    for (tool, why) in [
        ("echo 'no such city' >&2; exit 4", "no such city"),
        ("echo plain words", "not JSON"),
        ("sleep 600", "did not answer within"),
    ] {
        let t = std::time::Instant::now();
        let v = agent(tool, &["--max-turns", "2", "--tool-timeout", "0.5"]);
        // A generous bound, not a benchmark: the run must not wait out the tool's 600 s.
        assert!(
            t.elapsed().as_secs() < 300,
            "{tool}: took {:?}",
            t.elapsed()
        );
        let result = &v["turns"][0]["tool_results"][0];
        assert_eq!(result["error"], true, "{tool}: {result}");
        let msg = result["content"]["error"].as_str().unwrap_or_default();
        assert!(msg.contains(why), "{tool}: {msg}");
        let tool_msg = &v["messages"][2];
        assert!(
            tool_msg["content"]
                .as_str()
                .unwrap_or_default()
                .contains(why),
            "{tool_msg}"
        );
    }
}
