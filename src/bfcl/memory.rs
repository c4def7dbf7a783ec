//! The memory categories (BFCL's agentic `memory_kv` and `memory_rec_sum`): their data, the
//! prerequisite conversations that fill the memory, and the scoring of the questions.
//!
//! A scenario (`customer`, `student`, ...) is a chain of prerequisite conversations, in which a
//! user tells the model about themselves over many turns and the model keeps what matters with
//! the memory backend's tools, then questions about what was told, each a conversation of its
//! own over the memory the chain left. As bfcl-eval runs them:
//!
//! - every conversation's first turn starts with a system message holding the backend's
//!   instructions and its core memory as loaded (questions also get BFCL's answer format);
//! - a backend loads its scenario's latest snapshot when it is made, and a prerequisite
//!   conversation saves one when it ends (a conversation that failed saves none, so the next
//!   loads the one before); the first of a chain starts empty;
//! - a question is right when its last answer that makes no call mentions one of the possible
//!   answers (`agentic_checker`); prerequisite conversations are not scored.
//!
//! Each mode keeps its own memory (its snapshots under [`Bridge::memory_dir`] of the mode), and
//! every snapshot is kept in its prerequisite conversation's result, so a resumed run restores
//! it ([`restore`]). [`needs`] orders the conversations: a chain one after another, a question
//! after its chain's last.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::{json, Value};

use super::bridge::{Bridge, BridgeError};
use super::data::{read_lines, Case, Category, DataError, Loc, MultiTurn};
use super::multi_turn::{function_docs, tools_for, Scorer, Step};
use super::run::{CaseResult, Mode, Reading};
use super::score::{read_calls, Scored};

/// A memory conversation's place: its scenario and, for a question, what its answer must say.
#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    /// The scenario whose memory it uses.
    pub scenario: String,
    /// A question's possible answers (empty in a prerequisite conversation).
    pub answers: Vec<String>,
    /// A prerequisite conversation's place in its scenario's chain (`None`: a question).
    pub prereq: Option<usize>,
}

/// The category's backend class and its function documents' file.
fn backend(category: Category) -> Option<(&'static str, &'static str)> {
    match category {
        Category::MemoryKv => Some(("MemoryAPI_kv", "memory_kv.json")),
        Category::MemoryRecSum => Some(("MemoryAPI_rec_sum", "memory_rec_sum.json")),
        _ => None,
    }
}

/// The questions of memory category `category`: `questions` and `answers` files (shared by the
/// memory categories; ids renamed `memory_N-…` → `memory_kv_N-…` as bfcl-eval renames them),
/// function documents from `dir/multi_turn_func_doc`.
pub fn load_memory(
    dir: &Path,
    category: Category,
    questions: &Path,
    answers: &Path,
) -> Result<Vec<Case>, DataError> {
    let mut truth: HashMap<String, Vec<String>> = HashMap::new();
    for (line, v) in read_lines(answers)? {
        let at = Loc {
            path: answers,
            line,
        };
        let id = at.string(&v, "/id")?.to_string();
        let texts = at
            .array(&v, "/ground_truth")?
            .iter()
            .enumerate()
            .map(|(k, a)| {
                a.as_str().map(str::to_string).ok_or_else(|| {
                    at.shape(format!("/ground_truth/{k}"), "expected an answer text")
                })
            })
            .collect::<Result<_, _>>()?;
        truth.insert(id, texts);
    }
    conversations(dir, category, questions, &mut |id| {
        truth
            .remove(id)
            .map(Some)
            .ok_or_else(|| DataError::NoAnswer {
                path: answers.to_path_buf(),
                id: id.to_string(),
            })
    })
}

/// The prerequisite conversations of `scenario` in memory category `category`, in chain order
/// (`dir/memory_prereq_conversation/memory_<scenario>.json`).
pub fn prerequisites(
    dir: &Path,
    category: Category,
    scenario: &str,
) -> Result<Vec<Case>, DataError> {
    let path = dir
        .join("memory_prereq_conversation")
        .join(format!("memory_{scenario}.json"));
    let mut cases = conversations(dir, category, &path, &mut |_| Ok(None))?;
    for (p, c) in cases.iter_mut().enumerate() {
        if let Some(m) = c.multi_turn.as_mut().and_then(|mt| mt.memory.as_mut()) {
            m.prereq = Some(p);
        }
    }
    Ok(cases)
}

/// A question's possible answers by its data id (`None`: a prerequisite conversation).
type Answers<'a> = dyn FnMut(&str) -> Result<Option<Vec<String>>, DataError> + 'a;

/// The memory conversations of `path`; `answers(id)` gives a question's possible answers.
fn conversations(
    dir: &Path,
    category: Category,
    path: &Path,
    answers: &mut Answers,
) -> Result<Vec<Case>, DataError> {
    let Some((class, file)) = backend(category) else {
        return Ok(Vec::new());
    };
    let functions = function_docs(&dir.join("multi_turn_func_doc").join(file))?;
    let mut cases = Vec::new();
    for (line, v) in read_lines(path)? {
        let at = Loc { path, line };
        let data_id = at.string(&v, "/id")?;
        let scenario = at.string(&v, "/scenario")?.to_string();
        let turns = at.turns(&v)?;
        if turns.is_empty() {
            return Err(at.shape("/question".into(), "no turn"));
        }
        let possible = answers(data_id)?;
        let id = data_id.replace("memory", category.name());
        let test_category = id.rsplit_once('_').map_or(id.as_str(), |(c, _)| c);
        let entry = json!({
            "id": id,
            "category": category.name(),
            "initial_config": {class: {
                "scenario": scenario,
                "test_id": id,
                "test_category": test_category,
            }},
            "involved_classes": [class],
        });
        cases.push(Case {
            id: id.clone(),
            category,
            messages: turns.iter().flatten().cloned().collect(),
            functions: functions.clone(),
            answers: Vec::new(),
            multi_turn: Some(Box::new(MultiTurn {
                entry,
                turns,
                holdout: BTreeMap::new(),
                ground_truth: Vec::new(),
                memory: Some(Memory {
                    scenario,
                    prereq: None,
                    answers: possible.unwrap_or_default(),
                }),
            })),
        });
    }
    Ok(cases)
}

/// The case's memory place, when it is a memory conversation.
pub fn memory_of(case: &Case) -> Option<&Memory> {
    case.multi_turn.as_deref()?.memory.as_ref()
}

/// Whether the case is a memory prerequisite conversation.
pub fn is_prereq(case: &Case) -> bool {
    memory_of(case).is_some_and(|m| m.prereq.is_some())
}

/// Adds to `cases` the prerequisite chains of the scenarios its memory questions use, each
/// chain before the first of its questions.
pub fn add_prerequisites(dir: &Path, cases: &mut Vec<Case>) -> Result<(), DataError> {
    let mut chains: Vec<(Category, String)> = Vec::new();
    for c in cases.iter() {
        if let Some(m) = memory_of(c).filter(|m| m.prereq.is_none()) {
            if !chains.contains(&(c.category, m.scenario.clone())) {
                chains.push((c.category, m.scenario.clone()));
            }
        }
    }
    let mut out = Vec::with_capacity(cases.len());
    for c in cases.drain(..) {
        let key = memory_of(&c).map(|m| (c.category, m.scenario.clone()));
        if let Some(at) = key.and_then(|k| chains.iter().position(|x| *x == k)) {
            let (category, scenario) = chains.remove(at);
            out.extend(prerequisites(dir, category, &scenario)?);
        }
        out.push(c);
    }
    *cases = out;
    Ok(())
}

/// `entry` with its memory backend's snapshots under `dir`.
pub fn with_dir(entry: &Value, dir: &Path) -> Value {
    let mut e = entry.clone();
    if let Some(config) = e["initial_config"].as_object_mut() {
        for c in config.values_mut() {
            if let Some(c) = c.as_object_mut() {
                c.insert("model_result_dir".into(), json!(dir.display().to_string()));
            }
        }
    }
    e
}

/// For each memory conversation of `todo` (indices into `cases`), the one that must end first
/// in the same mode: a prerequisite's predecessor in its chain, a question's chain's last
/// (among `todo`: one already answered ended in an earlier run).
pub fn needs(cases: &[Case], todo: &[usize]) -> HashMap<usize, usize> {
    let mut last: HashMap<(Category, &str), (usize, usize)> = HashMap::new();
    let mut out = HashMap::new();
    for &i in todo {
        let Some(m) = memory_of(&cases[i]) else {
            continue;
        };
        let key = (cases[i].category, m.scenario.as_str());
        if let Some(p) = m.prereq {
            if let Some(&(q, j)) = last.get(&key) {
                if q < p {
                    out.insert(i, j);
                }
            }
            last.insert(key, (p, i));
        }
    }
    for &i in todo {
        let Some(m) = memory_of(&cases[i]).filter(|m| m.prereq.is_none()) else {
            continue;
        };
        if let Some(&(_, j)) = last.get(&(cases[i].category, m.scenario.as_str())) {
            out.insert(i, j);
        }
    }
    out
}

/// Before a resumed run: for each chain and mode, makes the latest snapshot its answered
/// prerequisite conversations saved the one its next conversation loads.
pub fn restore(
    bridge: &mut Bridge,
    cases: &[Case],
    answered: &[Vec<CaseResult>],
    modes: &[Mode],
) -> Result<(), BridgeError> {
    let mut latest: BTreeMap<(usize, &str, &str), (usize, usize, &Value)> = BTreeMap::new();
    for (i, c) in cases.iter().enumerate() {
        let Some((m, p)) = memory_of(c).and_then(|m| Some((m, m.prereq?))) else {
            continue;
        };
        for r in &answered[i] {
            let Some(snapshot) = r.memory.as_ref() else {
                continue;
            };
            let key = (c.category as usize, m.scenario.as_str(), r.mode.name());
            if latest.get(&key).is_none_or(|&(q, _, _)| q < p) {
                latest.insert(key, (p, i, snapshot));
            }
        }
    }
    for ((_, _, mode), (_, i, snapshot)) in latest {
        if !modes.iter().any(|m| m.name() == mode) {
            continue;
        }
        let Some(mt) = cases[i].multi_turn.as_deref() else {
            continue;
        };
        let entry = with_dir(&mt.entry, &bridge.memory_dir(mode));
        bridge.memory_restore(&entry, Some(snapshot))?;
    }
    Ok(())
}

/// Scores memory conversation `turns` of `case`: a question by BFCL's `agentic_checker` on its
/// last answer without a call, as structgen's reader and as the BFCL handler read the steps; a
/// prerequisite conversation is not scored (its calls are kept, for their schema validity).
pub fn score(
    scorer: &mut Scorer,
    case: &Case,
    memory: &Memory,
    turns: &[Vec<Step>],
) -> Result<(Scored, Option<Reading>), BridgeError> {
    let tools = tools_for(&case.functions).map_err(BridgeError::Failed)?;
    let mut calls = Vec::new();
    let mut parse_errors = Vec::new();
    // BFCL reads the first turn's steps (a question has one turn).
    let steps: &[Step] = turns.first().map_or(&[], Vec::as_slice);
    let mut last = None;
    for (k, step) in turns.iter().flatten().enumerate() {
        let (read, errors) = read_calls(
            &case.functions,
            &tools,
            scorer.style,
            scorer.formats,
            &step.text,
        );
        if read.is_empty() && k < steps.len() {
            last = Some(step.text.as_str());
        }
        calls.extend(read);
        parse_errors.extend(errors);
    }
    if memory.prereq.is_some() {
        let scored = Scored {
            calls,
            parse_errors,
            correct: false,
            verdict: "prerequisite conversation (not scored)".into(),
        };
        return Ok((scored, None));
    }
    let (correct, verdict) = check(scorer.bridge, last, &memory.answers)?;
    let scored = Scored {
        calls,
        parse_errors,
        correct,
        verdict,
    };
    let Some(handler) = scorer.handler else {
        return Ok((scored, None));
    };
    let mut last = None;
    let mut decoded = 0;
    for step in steps {
        match scorer.bridge.decode_step(handler, &step.text)? {
            Some(calls) => decoded += calls.len(),
            None => last = Some(step.text.as_str()),
        }
    }
    let (correct, verdict) = check(scorer.bridge, last, &memory.answers)?;
    let reading = Reading {
        handler: handler.to_string(),
        calls: decoded,
        correct,
        verdict,
    };
    Ok((scored, Some(reading)))
}

/// A memory question's ground truth: a final answer in BFCL's answer format giving its first
/// possible answer.
pub fn ground_truth_step(memory: &Memory) -> Step {
    let answer = memory.answers.first().map_or("", String::as_str);
    Step {
        text: format!("{{'answer': '{answer}', 'context': 'the ground truth'}}"),
        ..Step::default()
    }
}

fn check(
    bridge: &mut Bridge,
    last: Option<&str>,
    answers: &[String],
) -> Result<(bool, String), BridgeError> {
    match last {
        Some(text) => bridge.agentic_check(text, answers),
        None => Ok((
            false,
            "agentic:no_last_message: every step made calls; there is no final answer".into(),
        )),
    }
}
