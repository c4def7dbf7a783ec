//! The multi-turn categories through BFCL's own backends and checker (the bridge to the
//! bfcl-eval wheel, in the virtual environment `scripts/bfcl-venv.sh` makes):
//!
//! - the ground truth of sampled cases of every multi-turn category scores correct under both
//!   readers, and broken versions of it (a call dropped, an argument changed) score wrong;
//! - the bridge's invariants, on a stand-in interpreter that speaks its protocol: a hung or
//!   crashed step gets error results, the process is started again, and the other sessions'
//!   state is replayed into it;
//! - a real conversation: SmolLM2-135M answers a multi-turn case under the grammar with a call
//!   required in every answer, its calls run on the backends and their results come back, every
//!   call is schema-valid, and BFCL's step limit ends the conversation;
//! - the memory categories: a prerequisite conversation's memory carries over to the next and
//!   is restored into a fresh bridge; SmolLM2 runs a question's whole prerequisite chain, in
//!   order, before the question, which BFCL's agentic checker scores.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use structgen::bfcl::bridge::Bridge;

/// The bridge's Python, or `None` (see `common::skip`) when `scripts/bfcl-venv.sh` has not run.
fn bfcl_python(test: &str) -> Option<PathBuf> {
    let p = common::repo().join("target/bfcl-venv/bin/python");
    if p.is_file() {
        Some(p)
    } else {
        common::skip(test, "run scripts/bfcl-venv.sh to make target/bfcl-venv");
        None
    }
}

fn run_json(args: &[&str], out: &Path) -> Value {
    let mut all: Vec<&str> = args.to_vec();
    let out_s = out.to_string_lossy().into_owned();
    all.extend(["--out", &out_s]);
    let o = common::structgen(&all);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("structgen-mt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// `structgen bfcl --model smollm2-135m ARGS` with the bridge, its results file `out` (in the
/// test's temporary folder); `None` (skipped) without the data, the model or the bridge's venv.
fn smollm2_bfcl(test: &str, args: &[&str], out: &str) -> Option<Value> {
    common::bfcl_data(test)?;
    common::model_file(test)?;
    let py = bfcl_python(test)?;
    let py = py.to_string_lossy().into_owned();
    let mut all = vec!["bfcl", "--model", "smollm2-135m", "--bfcl-python", &py];
    all.extend_from_slice(args);
    Some(run_json(&all, &temp(out)))
}

const CATEGORIES: &str =
    "multi_turn_base,multi_turn_miss_func,multi_turn_miss_param,multi_turn_long_context";

#[test]
fn ground_truth_is_right_and_broken_truth_is_wrong() {
    let test = "ground_truth_is_right_and_broken_truth_is_wrong";
    let (Some(_), Some(py)) = (common::bfcl_data(test), bfcl_python(test)) else {
        return;
    };
    let py = py.to_string_lossy().into_owned();
    let out = temp("gt.json");
    let args = [
        "bfcl",
        "--mode",
        "ground-truth",
        "--style",
        "qwen",
        "--categories",
        CATEGORIES,
        "--limit",
        "12",
        "--shuffle",
        "--bfcl-python",
        &py,
    ];
    let run = run_json(&args, &out);
    let rs = run["results"].as_array().unwrap();
    assert_eq!(rs.len(), 4 * 12);
    for r in rs {
        assert_eq!(r["correct"], true, "{}: {}", r["id"], r["verdict"]);
        assert_eq!(r["bfcl"]["correct"], true, "{}: {}", r["id"], r["bfcl"]);
    }
    // Break every case: drop the last call of its longest turn, or change its first argument.
    let mut broken = run.clone();
    for (k, r) in broken["results"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        let turns = r["turns"].as_array_mut().unwrap();
        let t = (0..turns.len())
            .max_by_key(|&t| turns[t][0]["text"].as_str().unwrap().len())
            .unwrap();
        let text = turns[t][0]["text"].as_str().unwrap().to_string();
        let new = if k % 2 == 0 {
            match text.rfind("\n<tool_call>") {
                Some(i) => text[..i].to_string(),
                None => "I cannot help with that.".to_string(),
            }
        } else {
            // A value no backend accepts as the same: the first string argument doubled.
            let at = text.find(": \"").map(|i| i + 3);
            match at {
                Some(i) => format!("{}zz_{}", &text[..i], &text[i..]),
                None => "I cannot help with that.".to_string(),
            }
        };
        turns[t][0]["text"] = Value::String(new);
    }
    let saved = temp("broken.json");
    std::fs::write(&saved, serde_json::to_string(&broken).unwrap()).unwrap();
    let rescored = run_json(
        &[
            "bfcl",
            "--rescore",
            &saved.to_string_lossy(),
            "--categories",
            CATEGORIES,
            "--bfcl-python",
            &py,
        ],
        &temp("rescored.json"),
    );
    let rs = rescored["results"].as_array().unwrap();
    let wrong = rs.iter().filter(|r| r["correct"] == false).count();
    let bfcl_wrong = rs.iter().filter(|r| r["bfcl"]["correct"] == false).count();
    // An argument changed where the backend state ends the same (a read-only call) may still
    // pass: BFCL compares states and execution results, not call texts.
    assert!(wrong * 10 >= rs.len() * 8, "{wrong} of {} wrong", rs.len());
    assert_eq!(
        wrong, bfcl_wrong,
        "the two readers read the same texts alike"
    );
}

/// A stand-in for the bridge's interpreter: ignores the script, speaks the protocol, counts the
/// calls each session has executed (its "state"), hangs on a call named `hang` and exits on one
/// named `crash`.
const FAKE: &str = r#"#!/usr/bin/env python3
import json, sys, time
state = {}
for line in sys.stdin:
    req = json.loads(line)
    op = req["op"]
    if op == "hello":
        out = {"bfcl_eval": "fake"}
    elif op == "execute":
        names = [c["name"] for c in req["calls"]]
        if "hang" in names:
            time.sleep(60)
        if "crash" in names:
            sys.exit(3)
        n = state.get(req["session"], 0) + len(names)
        state[req["session"]] = n
        out = {"calls": [f"{x}()" for x in names], "results": [str(n)] * len(names)}
    elif op == "decode":
        out = {"calls": [f"{c['name']}()" for c in req["calls"]]}
    elif op == "end":
        state.pop(req["session"], None)
        out = {}
    else:
        out = None
    if out is None:
        print(json.dumps({"ok": False, "error": "unknown op"}), flush=True)
    else:
        out["ok"] = True
        print(json.dumps(out), flush=True)
"#;

#[cfg(unix)]
#[test]
fn bridge_survives_hangs_and_crashes_and_replays_state() {
    use std::os::unix::fs::PermissionsExt;
    let fake = temp("fake-python");
    std::fs::write(&fake, FAKE).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Another test's child process may hold the just-written file open for a moment (ETXTBSY).
    let mut tries = 0;
    let mut b = loop {
        match Bridge::start(&fake, Duration::from_secs(2)) {
            Ok(b) => break b,
            Err(e) if e.to_string().contains("busy") && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(b.version(), "fake");
    let entry = json!({"id": "x"});
    let call = |n: &str| json!({"name": n, "arguments": {}});
    let (_, r) = b.execute("a", &entry, &[call("f"), call("g")]).unwrap();
    assert_eq!(r, ["2", "2"]);
    let (_, r) = b.execute("b", &entry, &[call("f")]).unwrap();
    assert_eq!(r, ["1"]);
    // A hang: error results within the timeout, and nothing of the step kept.
    let t = std::time::Instant::now();
    let (texts, r) = b.execute("a", &entry, &[call("hang")]).unwrap();
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(texts, ["hang()"]);
    assert!(r[0].starts_with("Error during execution"), "{r:?}");
    // The restarted process has both sessions' state back.
    let (_, r) = b.execute("a", &entry, &[call("f")]).unwrap();
    assert_eq!(r, ["3"]);
    let (_, r) = b.execute("b", &entry, &[call("f")]).unwrap();
    assert_eq!(r, ["2"]);
    // A crash: the same.
    let (_, r) = b.execute("b", &entry, &[call("crash")]).unwrap();
    assert!(r[0].contains("died"), "{r:?}");
    let (_, r) = b.execute("b", &entry, &[call("f")]).unwrap();
    assert_eq!(r, ["3"]);
    // An ended session is not replayed.
    b.end("a");
    let (_, r) = b.execute("a", &entry, &[call("f")]).unwrap();
    assert_eq!(r, ["1"]);
}

#[test]
fn a_missing_interpreter_is_a_clear_error() {
    let e = Bridge::start(Path::new("/no/such/python"), Duration::from_secs(5)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("/no/such/python"), "{msg}");
    assert!(msg.contains("scripts/bfcl-venv.sh"), "{msg}");
}

#[test]
fn smollm2_runs_a_conversation_under_the_grammar() {
    let Some(run) = smollm2_bfcl(
        "smollm2_runs_a_conversation_under_the_grammar",
        &[
            "--mode",
            "constrained",
            "--tool-choice",
            "required",
            "--categories",
            "multi_turn_miss_func",
            "--ids",
            "multi_turn_miss_func_100",
            "--max-tokens",
            "40",
        ],
        "smollm2.json",
    ) else {
        return;
    };
    let r = &run["results"][0];
    assert!(r["error"].is_null(), "{}", r["error"]);
    let turns = r["turns"].as_array().unwrap();
    assert!(!turns.is_empty());
    let verdict = r["verdict"].as_str().unwrap();
    // Every turn ran (3 in this case, one announcing held-out functions), or one took more
    // than BFCL's 20 steps and ended the conversation.
    assert!(
        turns.len() == 3 || verdict.contains("force_terminated"),
        "{} turns: {verdict}",
        turns.len()
    );
    for (t, turn) in turns.iter().enumerate() {
        let steps = turn.as_array().unwrap();
        assert!(!steps.is_empty() && steps.len() <= 21, "turn {t}");
        for (k, s) in steps.iter().enumerate() {
            let executed = s["executed"].as_array().unwrap();
            assert_eq!(executed.len(), s["results"].as_array().unwrap().len());
            // A step without calls ends its turn.
            let last = k + 1 == steps.len();
            assert!(!executed.is_empty() || last, "turn {t} step {k}");
        }
    }
    // tool_choice required: every answer calls, so calls ran on the backends and came back.
    let calls = r["calls"].as_array().unwrap();
    assert!(!calls.is_empty());
    for c in calls {
        assert_eq!(c["schema_valid"], true, "{c}");
    }
    let results: Vec<&Value> = turns
        .iter()
        .flat_map(|t| t.as_array().unwrap())
        .flat_map(|s| s["results"].as_array().unwrap())
        .collect();
    assert!(!results.is_empty());
    // The leaderboard's reading of the same steps is there too (SmolLM2 writes the hermes style).
    assert_eq!(
        r["bfcl"]["handler"], "local_inference.qwen_fc.QwenFCHandler",
        "{}",
        r["bfcl"]
    );
}

/// A memory entry of `category`'s backend class `class` for the bridge, its snapshots under
/// `dir`.
fn memory_entry(id: &str, class: &str, dir: &Path) -> Value {
    let test_category = id.rsplit_once('_').unwrap().0;
    json!({
        "id": id,
        "category": "memory_kv",
        "initial_config": {class: {
            "scenario": "notetaker",
            "test_id": id,
            "test_category": test_category,
            "model_result_dir": dir.display().to_string(),
        }},
        "involved_classes": [class],
    })
}

#[test]
fn memory_snapshots_carry_over_and_restore() {
    let test = "memory_snapshots_carry_over_and_restore";
    let Some(py) = bfcl_python(test) else {
        return;
    };
    let class = "MemoryAPI_kv";
    let mut bridge = Bridge::start(&py, Duration::from_secs(60)).unwrap();
    let dir = bridge.memory_dir("free");
    let first = memory_entry("memory_kv_prereq_0-notetaker-0", class, &dir);
    let add = json!({"name": "core_memory_add", "arguments": {"key": "user_name", "value": "Ada"}});
    let (_, results) = bridge.execute("p0", &first, &[add]).unwrap();
    assert!(results[0].contains("added"), "{results:?}");
    let snapshot = bridge.memory_flush("p0", &first).unwrap();
    bridge.end("p0");
    assert_eq!(snapshot["core_memory"]["user_name"], "Ada", "{snapshot}");
    // The next conversation of the scenario loads it, and its system prompt shows it.
    let question = memory_entry("memory_kv_130-notetaker-0", class, &dir);
    let turn = [json!({"role": "user", "content": "What is my name?"})];
    let first_turn = bridge.memory_prompt("q", &question, &turn).unwrap();
    assert_eq!(first_turn.len(), 2);
    let system = first_turn[0]["content"].as_str().unwrap();
    assert!(system.contains("Ada"), "{system}");
    assert!(system.contains("'answer'"), "the answer format: {system}");
    let all = json!({"name": "core_memory_retrieve_all", "arguments": {}});
    let (_, got) = bridge
        .execute("q", &question, std::slice::from_ref(&all))
        .unwrap();
    assert!(got[0].contains("Ada"), "{got:?}");
    bridge.end("q");
    // A fresh bridge (a resumed run) starts empty until the snapshot is restored.
    let mut fresh = Bridge::start(&py, Duration::from_secs(60)).unwrap();
    let question = memory_entry(
        "memory_kv_130-notetaker-0",
        class,
        &fresh.memory_dir("free"),
    );
    let (_, empty) = fresh
        .execute("a", &question, std::slice::from_ref(&all))
        .unwrap();
    assert!(!empty[0].contains("Ada"), "{empty:?}");
    fresh.end("a");
    fresh.memory_restore(&question, Some(&snapshot)).unwrap();
    let (_, got) = fresh
        .execute("b", &question, std::slice::from_ref(&all))
        .unwrap();
    assert!(got[0].contains("Ada"), "{got:?}");
    // BFCL's agentic checker judges the final answer.
    let (ok, _) = fresh
        .agentic_check(
            "{'answer': 'Ada', 'context': 'core memory'}",
            &["Ada".into()],
        )
        .unwrap();
    let (wrong, why) = fresh
        .agentic_check("{'answer': 'I do not know'}", &["Ada".into()])
        .unwrap();
    assert!(ok && !wrong, "{why}");
}

#[test]
fn smollm2_answers_a_memory_question_after_its_chain() {
    let Some(run) = smollm2_bfcl(
        "smollm2_answers_a_memory_question_after_its_chain",
        &[
            "--mode",
            "free",
            "--categories",
            "memory_kv",
            "--ids",
            "memory_kv_130-notetaker-0",
            "--max-tokens",
            "8",
            "--parallel",
            "2",
        ],
        "memory.json",
    ) else {
        return;
    };
    let data = common::repo().join("data/bfcl");
    // The notetaker chain ran first, in order, each conversation whole and saving its memory.
    let chain: Vec<Value> =
        std::fs::read_to_string(data.join("memory_prereq_conversation/memory_notetaker.json"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let prereqs = run["prereqs"].as_array().unwrap();
    assert_eq!(prereqs.len(), chain.len());
    for (p, c) in prereqs.iter().zip(&chain) {
        let id = c["id"].as_str().unwrap().replace("memory", "memory_kv");
        assert_eq!(p["id"], id.as_str());
        assert_eq!(p["category"], "memory_kv_prereq");
        assert!(p["error"].is_null(), "{}", p["error"]);
        assert_eq!(
            p["turns"].as_array().unwrap().len(),
            c["question"].as_array().unwrap().len(),
            "{id}"
        );
        assert!(
            p["memory"]["core_memory"].is_object(),
            "{id}: {}",
            p["memory"]
        );
    }
    // The question is scored by BFCL's agentic checker under both readers; the summary counts
    // it in the agentic group and leaves the unscored chain out.
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert!(r["error"].is_null(), "{}", r["error"]);
    let verdict = r["verdict"].as_str().unwrap();
    assert!(
        verdict == "correct" || verdict.starts_with("agentic:"),
        "{verdict}"
    );
    assert!(r["bfcl"]["verdict"].is_string(), "{}", r["bfcl"]);
    let all = run["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["category"] == "all")
        .unwrap();
    assert_eq!(all["cases"], 1);
}
