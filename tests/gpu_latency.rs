//! What `scripts/gpu-latency.sh` runs, checked on the CPU: `structgen latency` (every mode, per-run
//! and per-mode output, the mask wait with and without overlap, clear errors), `structgen
//! tokenizer` (a GGUF file's tokenizer and template as Hugging Face files that encode the same),
//! and the published configurations the random-weight checkpoints are made from.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use structgen::runtime::model::config::from_hf;

use common::structgen;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "structgen-gpu-latency-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn latency(extra: &[&str], dir: &Path) -> (Output, Vec<Value>, Vec<Value>) {
    let (runs, summary) = (dir.join("runs.jsonl"), dir.join("summary.jsonl"));
    let mut args = vec![
        "latency",
        "--model",
        "smollm2-135m",
        "--prompts",
        "grammars/prompts.jsonl",
        "--limit",
        "2",
        "--max-tokens",
        "40",
        "--out",
        runs.to_str().unwrap(),
        "--summary",
        summary.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = structgen(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out, lines(&runs), lines(&summary))
}

#[test]
fn latency_runs_every_mode_and_reports_the_mask_wait() {
    if common::model_file("latency_runs_every_mode").is_none() {
        return;
    }
    let dir = tempdir("modes");
    let (out, runs, modes) = latency(&[], &dir);
    assert_eq!(runs.len(), 6, "2 requests × 3 modes");
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(names, ["free", "constrained", "jump-forward"]);
    let table = String::from_utf8_lossy(&out.stdout);
    for m in &names {
        assert!(table.contains(&format!("| {m} | 2 |")), "{table}");
    }
    let by = |m: &str| modes.iter().find(|r| r["mode"] == m).unwrap();
    assert!(by("free")["mask_us_p50"].is_null());
    assert!(by("constrained")["mask_us_p50"].as_f64().unwrap() > 0.0);
    assert_eq!(by("constrained")["forward_passes_saved"], 0);
    assert!(by("jump-forward")["forward_passes_saved"].as_u64().unwrap() > 0);
    for r in runs.iter().filter(|r| r["mode"] != "free") {
        assert_eq!(r["valid"], true, "{}", r["text"]);
        let s = &r["summary"];
        let f = |k: &str| s[k].as_f64().unwrap_or_else(|| panic!("{k} in {s}"));
        // Overlapped, a step waits for at most its own fill.
        assert!(f("mask_wait_us_p99") <= f("mask_us_p99"), "{s}");
        // Every sampled step spends grammar time (at least its accept) on the critical path.
        assert!(f("step_overhead_pct_p50") > 0.0, "{s}");
        let share = f("grammar_ms") / f("decode_ms") * 100.0;
        assert!(
            (share - f("grammar_overhead_pct")).abs() < 1e-6 * share.max(1.0),
            "grammar overhead {} is not grammar_ms / decode_ms = {share}",
            f("grammar_overhead_pct")
        );
    }

    let (_, serial, _) = latency(
        &["--no-overlap", "--modes", "constrained"],
        &tempdir("serial"),
    );
    assert_eq!(serial.len(), 2);
    for r in &serial {
        let s = &r["summary"];
        assert_eq!(
            s["mask_wait_us_p50"], s["mask_us_p50"],
            "without overlap the whole mask is waited for"
        );
        assert_eq!(s["mask_wait_us_p99"], s["mask_us_p99"]);
    }
    let same: Vec<&Value> = runs.iter().filter(|r| r["mode"] == "constrained").collect();
    for (a, b) in same.iter().zip(&serial) {
        assert_eq!(a["text"], b["text"], "overlap does not change the answer");
    }
}

#[test]
fn latency_bad_input_is_a_clear_error() {
    let dir = tempdir("bad");
    let bad = dir.join("bad.jsonl");
    let tools = common::repo().join("grammars/tools/weather.json");
    let first = serde_json::json!({"prompt": "hi", "tools": tools});
    std::fs::write(&bad, format!("{first}\n{{\"prompt\": 3}}\n")).unwrap();
    let cases: [(Vec<&str>, String); 3] = [
        (
            vec![
                "latency",
                "--model",
                "smollm2-135m",
                "--prompts",
                bad.to_str().unwrap(),
            ],
            format!("{}:2: `prompt` is missing or not a string", bad.display()),
        ),
        (
            vec![
                "latency",
                "--model",
                "smollm2-135m",
                "--prompts",
                "grammars/prompts.jsonl",
                "--modes",
                "fast",
            ],
            "invalid value 'fast' for '--modes".into(),
        ),
        (
            vec![
                "latency",
                "--model",
                "smollm2-135m",
                "--prompts",
                "grammars/prompts.jsonl",
                "--no-jump-forward",
            ],
            "choose the modes with --modes".into(),
        ),
    ];
    for (args, needle) in cases {
        let out = structgen(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn tokenizer_files_from_a_gguf_encode_the_same() {
    let Some(model) = common::model_file("tokenizer_files_from_a_gguf") else {
        return;
    };
    let dir = tempdir("tok");
    let out = structgen(&[
        "tokenizer",
        "--model",
        model.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    let ours = structgen::vocab::load(&model).unwrap().tokenizer;
    for text in [
        "<|im_start|>user\nWhat's the weather in Zürich? {\"a\": [1, 2]}<|im_end|>",
        "  indented\n\tcode();  // ok",
    ] {
        let ids = |t: &tokenizers::Tokenizer| t.encode(text, false).unwrap().get_ids().to_vec();
        assert_eq!(ids(&written), ids(&ours), "{text:?}");
    }
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tokenizer_config.json")).unwrap())
            .unwrap();
    assert_eq!(config["eos_token"], "<|im_end|>");
    assert!(config["chat_template"]
        .as_str()
        .unwrap()
        .contains("<|im_start|>"));

    let missing = structgen(&[
        "tokenizer",
        "--model",
        "nope.gguf",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nope.gguf"));
}

#[test]
fn published_configs_give_the_published_shapes() {
    let dir = common::repo().join("models/configs");
    let expect = [
        ("llama-3.2-1b.json", 2048, 16, 32, 8),
        ("llama-3.1-8b.json", 4096, 32, 32, 8),
        ("qwen2.5-0.5b.json", 896, 24, 14, 2),
        ("qwen2.5-1.5b.json", 1536, 28, 12, 2),
    ];
    for (file, hidden, layers, heads, kv) in expect {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap();
        let cfg = from_hf(&v).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(
            (cfg.hidden, cfg.layers, cfg.heads, cfg.kv_heads),
            (hidden, layers, heads, kv),
            "{file}"
        );
        assert!(cfg.rope_base >= 5e5, "{file}: rope_theta read");
        if file.starts_with("llama") {
            assert!(
                cfg.rope_llama3.is_some(),
                "{file}: llama3 RoPE scaling read"
            );
        }
    }
}
