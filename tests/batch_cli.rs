//! The batched commands end to end with the real SmolLM2-135M-Instruct GGUF: `run --prompts`
//! (answers in input order, each the one `run --prompt` gives alone, a bad line reported and the
//! others answered), `speed --batch` (one measurement per batch size) and `latency --batch`
//! (the table and an SVG plot), and their bad arguments.

mod common;

use serde_json::Value;

fn ok(args: &[&str]) -> String {
    let out = common::structgen(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn run_prompts_answers_each_line_as_run_alone() {
    let Some(model) = common::model_file("run_prompts_answers_each_line_as_run_alone") else {
        return;
    };
    let model = model.to_string_lossy().into_owned();
    let dir = std::env::temp_dir().join(format!("structgen-batch-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tools = common::repo().join("grammars/tools/weather.json");
    let lines = [
        format!(
            r#"{{"prompt": "Weather in Paris?", "tools": "{}", "tool_choice": "required"}}"#,
            tools.display()
        ),
        r#"{"prompt": 7}"#.to_string(),
        r#"{"messages": [{"role": "user", "content": "Say hello to Ada."}]}"#.to_string(),
        format!(
            r#"{{"prompt": "Is it snowing in Oslo?", "tools": "{}", "tool_choice": "get_weather"}}"#,
            tools.display()
        ),
    ];
    let file = dir.join("prompts.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let out = ok(&[
        "run",
        "--model",
        &model,
        "--prompts",
        file.to_str().unwrap(),
        "--parallel",
        "3",
        "--max-tokens",
        "40",
    ]);
    let answers: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 4);
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(a["line"], i + 1, "answers out of order");
    }
    let err = answers[1]["error"].as_str().expect("line 2 is an error");
    assert!(
        err.contains("prompts.jsonl:2") && err.contains("`prompt`"),
        "{err}"
    );
    for i in [0, 3] {
        assert_eq!(
            answers[i]["tool_calls"][0]["function"]["name"], "get_weather",
            "{}",
            answers[i]
        );
    }
    // Line 4 alone, as `structgen run` answers it.
    let alone = ok(&[
        "run",
        "--model",
        &model,
        "--prompt",
        "Is it snowing in Oslo?",
        "--tools",
        tools.to_str().unwrap(),
        "--tool-choice",
        "get_weather",
        "--max-tokens",
        "40",
        "--json",
    ]);
    let alone: Value = serde_json::from_str(&alone).unwrap();
    assert_eq!(alone["text"], answers[3]["text"]);
    let alone = ok(&[
        "run",
        "--model",
        &model,
        "--prompt",
        "Say hello to Ada.",
        "--max-tokens",
        "40",
        "--json",
    ]);
    let alone: Value = serde_json::from_str(&alone).unwrap();
    assert_eq!(alone["text"], answers[2]["text"]);
    // Out to a file, atomically.
    let to = dir.join("answers.jsonl");
    ok(&[
        "run",
        "--model",
        &model,
        "--prompts",
        file.to_str().unwrap(),
        "--max-tokens",
        "40",
        "--out",
        to.to_str().unwrap(),
    ]);
    let written = std::fs::read_to_string(&to).unwrap();
    assert_eq!(written.lines().count(), 4);
    let first: Value = serde_json::from_str(written.lines().next().unwrap()).unwrap();
    assert_eq!(first["text"], answers[0]["text"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn speed_and_latency_measure_each_batch_size() {
    let Some(model) = common::model_file("speed_and_latency_measure_each_batch_size") else {
        return;
    };
    let model = model.to_string_lossy().into_owned();
    let out = ok(&[
        "speed", "--model", &model, "-p", "8", "-n", "4", "-r", "1", "--batch", "1,3", "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows = v["batched"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (r, b) in rows.iter().zip([1, 3]) {
        assert_eq!(r["batch"], b);
        assert!(r["tg_tokens_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["pp_tokens_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    let dir = std::env::temp_dir().join(format!("structgen-latency-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("t.svg");
    let summary = dir.join("s.jsonl");
    let table = ok(&[
        "latency",
        "--model",
        &model,
        "--prompts",
        "grammars/prompts.jsonl",
        "--batch",
        "1,2",
        "--max-tokens",
        "12",
        "--warmup",
        "0",
        "--plot",
        svg.to_str().unwrap(),
        "--reference",
        "peer=1:10,2:20",
        "--summary",
        summary.to_str().unwrap(),
    ]);
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| 1 |") || l.starts_with("| 2 |"))
        .collect();
    assert_eq!(rows.len(), 6, "2 batch sizes × 3 modes:\n{table}");
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("jump-forward") && plot.contains("peer"));
    let lines: Vec<Value> = std::fs::read_to_string(&summary)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    for l in &lines {
        assert!(l["output_tokens_per_s"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["decode_tokens_per_s"].as_f64().unwrap() > 0.0, "{l}");
        if l["mode"] != "free" {
            assert!(l["mask_fill_us_p50"].as_f64().is_some(), "{l}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn batched_commands_refuse_bad_arguments() {
    let Some(model) = common::model_file("batched_commands_refuse_bad_arguments") else {
        return;
    };
    let model = model.to_string_lossy().into_owned();
    let out = common::structgen(&["speed", "--model", &model, "--batch", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--batch 0"));
    let out = common::structgen(&[
        "latency",
        "--model",
        &model,
        "--prompts",
        "grammars/prompts.jsonl",
        "--plot",
        "x.svg",
    ]);
    assert!(
        !out.status.success(),
        "--plot without --batch must be refused"
    );
    let out = common::structgen(&[
        "latency",
        "--model",
        &model,
        "--prompts",
        "grammars/prompts.jsonl",
        "--batch",
        "1",
        "--plot",
        "x.svg",
        "--reference",
        "nopoints",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("NAME=B:TOKS"));
}
