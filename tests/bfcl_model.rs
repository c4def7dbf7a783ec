//! `structgen bfcl` end to end with the real SmolLM2-135M-Instruct GGUF and BFCL's data: one
//! case of every single-turn category in both modes (tool_choice auto, as BFCL asks), then the constrained
//! mode with a call required. Constrained calls always parse and validate against their tool's
//! JSON Schema (checked by the `jsonschema` crate inside the scorer); the results file holds every
//! answer and scores the same when re-scored.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn bfcl(args: &[&str], out: &Path) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_structgen"))
        .args(["bfcl", "--model", "smollm2-135m"])
        .args(args)
        .arg("--out")
        .arg(out)
        .current_dir(common::repo())
        .output()
        .expect("run structgen");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("{stdout}");
    let text = std::fs::read_to_string(out).expect("results file");
    serde_json::from_str(&text).expect("results JSON")
}

fn ready(test: &str) -> bool {
    common::bfcl_data(test).is_some() && common::model_file(test).is_some()
}

fn results(v: &Value) -> &Vec<Value> {
    v["results"].as_array().expect("results")
}

#[test]
fn one_case_per_category_in_both_modes() {
    if !ready("one_case_per_category_in_both_modes") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("structgen-bfcl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("both.json");
    let run = bfcl(&["--limit", "1", "--max-tokens", "40"], &out);
    let rs = results(&run);
    assert_eq!(rs.len(), 13 * 2, "13 categories × 2 modes");
    for r in rs {
        assert!(r["error"].is_null(), "{}: {}", r["id"], r["error"]);
        if r["mode"] == "constrained" {
            if r["stop"] == "grammar" {
                assert_eq!(r["parse_errors"], Value::Array(vec![]), "{}", r["id"]);
            }
            for c in r["calls"].as_array().unwrap() {
                assert_eq!(c["schema_valid"], true, "{}: {c}", r["id"]);
            }
        }
    }
    let rows = run["summary"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        13 * 2 + 2,
        "a row per category and mode, and `all`"
    );
    let rescored_out = dir.join("rescored.json");
    let again = bfcl(&["--rescore", out.to_str().unwrap()], &rescored_out);
    assert_eq!(again["summary"], run["summary"]);
    let required = dir.join("required.json");
    let forced = bfcl(
        &[
            "--limit",
            "2",
            "--max-tokens",
            "64",
            "--mode",
            "constrained",
            "--tool-choice",
            "required",
            "--categories",
            "simple_python,multiple,parallel,live_simple",
        ],
        &required,
    );
    let rs = results(&forced);
    assert_eq!(rs.len(), 4 * 2);
    let mut calls = 0;
    for r in rs {
        assert!(r["error"].is_null(), "{}: {}", r["id"], r["error"]);
        let cs = r["calls"].as_array().unwrap();
        if r["stop"] == "grammar" {
            assert_eq!(r["parse_errors"], Value::Array(vec![]), "{}", r["id"]);
            assert!(
                !cs.is_empty(),
                "{}: a call is required: {}",
                r["id"],
                r["text"]
            );
        }
        for c in cs {
            assert_eq!(c["schema_valid"], true, "{}: {c}", r["id"]);
            calls += 1;
        }
    }
    assert!(calls >= 4, "only {calls} calls in 8 answers");
    std::fs::remove_dir_all(&dir).ok();
}

/// The rows of a summary without the timing columns (which differ between runs).
fn scores(v: &Value) -> Vec<Value> {
    v["summary"]
        .as_array()
        .expect("summary")
        .iter()
        .map(|r| {
            let mut r = r.clone();
            for k in ["mean_latency_ms", "mask_overhead_pct"] {
                r.as_object_mut().expect("row").remove(k);
            }
            r
        })
        .collect()
}

#[test]
fn an_interrupted_run_resumes_to_the_same_table() {
    if !ready("an_interrupted_run_resumes_to_the_same_table") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("structgen-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let args = [
        "--limit",
        "2",
        "--max-tokens",
        "32",
        "--categories",
        "simple_python,irrelevance",
    ];
    let whole = bfcl(&args, &dir.join("whole.json"));
    // What an interruption after the first case leaves: that case's answers only.
    let mut partial = whole.clone();
    let first = results(&whole)[0]["id"].clone();
    partial["results"] = Value::Array(
        results(&whole)
            .iter()
            .filter(|r| r["id"] == first)
            .cloned()
            .collect(),
    );
    let saved = dir.join("partial.json");
    std::fs::write(&saved, serde_json::to_string(&partial).unwrap()).unwrap();
    let resumed = bfcl(
        &[&args[..], &["--resume", saved.to_str().unwrap()]].concat(),
        &dir.join("resumed.json"),
    );
    assert_eq!(results(&resumed).len(), results(&whole).len());
    assert_eq!(scores(&resumed), scores(&whole));
    for (a, b) in results(&resumed).iter().zip(results(&whole)) {
        assert_eq!(
            (&a["id"], &a["mode"], &a["text"]),
            (&b["id"], &b["mode"], &b["text"])
        );
    }
    // Other settings than the saved run's are refused, naming the setting.
    let o = Command::new(env!("CARGO_BIN_EXE_structgen"))
        .args(["bfcl", "--model", "smollm2-135m"])
        .args([
            "--limit",
            "3",
            "--max-tokens",
            "32",
            "--categories",
            "simple_python,irrelevance",
        ])
        .args(["--resume", saved.to_str().unwrap()])
        .current_dir(common::repo())
        .output()
        .expect("run structgen");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("case selection"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn parallel_cases_answer_as_sequential_ones() {
    if !ready("parallel_cases_answer_as_sequential_ones") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("structgen-bfcl-par-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let args = [
        "--categories",
        "simple_python,multiple,irrelevance",
        "--limit",
        "2",
    ];
    let args: Vec<&str> = args.into_iter().chain(["--max-tokens", "40"]).collect();
    let one = bfcl(&args, &dir.join("one.json"));
    let mut par = args.clone();
    par.extend(["--parallel", "4"]);
    let many = bfcl(&par, &dir.join("many.json"));
    let (a, b) = (results(&one), results(&many));
    assert!(a.len() >= 2 * 3 * 2, "{} results", a.len());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(
            (&x["id"], &x["mode"]),
            (&y["id"], &y["mode"]),
            "results in another order"
        );
        assert_eq!(
            x["text"], y["text"],
            "{} {}: batched answer differs",
            x["id"], x["mode"]
        );
        assert_eq!(x["correct"], y["correct"], "{} {}", x["id"], x["mode"]);
    }
    let rows = |v: &Value| v["summary"].as_array().expect("summary rows").clone();
    for (x, y) in rows(&one).iter().zip(&rows(&many)) {
        assert_eq!(
            (&x["category"], &x["correct"]),
            (&y["category"], &y["correct"])
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
