//! Multi-turn categories: their data, their scoring by BFCL's own checker, their ground truth.
//!
//! A multi-turn case is a conversation of several user turns over stateful backends (a file
//! system, a trading bot, ...; `involved_classes` with an `initial_config`). The model answers
//! each turn in steps, as BFCL's prompting flow runs local models: a step's calls are executed
//! by BFCL's backends in the [`Bridge`] and their results come back as tool messages; a step
//! without calls ends the turn; more than [`STEP_LIMIT`] steps in a turn end the conversation
//! (BFCL's forced quit). In `miss_func` cases some functions are held out of the tool list and
//! announced by BFCL's own user message in a later turn; constrained answers may call them from
//! then on. The conversation loop is [`super::conversation`].
//!
//! Scoring executes every step's calls again, and the ground truth's, with BFCL's
//! `multi_turn_checker` (state after each turn and execution results), twice: with the calls
//! structgen's reader read (the verdict in `correct`) and with the calls the BFCL handler of the
//! model's family decodes from the same texts (the leaderboard's reading, in `bfcl`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::bridge::{Bridge, BridgeError};
use super::convert::openai_tools;
use super::data::{function, read_lines, Case, Category, DataError, Function, Loc};
use super::lang::Language;
use super::memory::{self, Memory};
use super::run::{CaseResult, Mode, Reading};
use super::score::{read_calls, Scored, ScoredCall};
use crate::frontend::tool_calls::render_calls;
use crate::frontend::tools::{parse_tools, FormatSet, StyleSpec, Tool};

/// BFCL's `MAXIMUM_STEP_LIMIT`: a turn may take this many steps; one more ends the conversation.
pub const STEP_LIMIT: usize = 20;

/// The backends of the multi-turn categories and their function documents' files.
const BACKENDS: [(&str, &str); 8] = [
    ("GorillaFileSystem", "gorilla_file_system.json"),
    ("MathAPI", "math_api.json"),
    ("MessageAPI", "message_api.json"),
    ("TwitterAPI", "posting_api.json"),
    ("TicketAPI", "ticket_api.json"),
    ("TradingBot", "trading_bot.json"),
    ("TravelAPI", "travel_booking.json"),
    ("VehicleControlAPI", "vehicle_control.json"),
];

/// A multi-turn case's conversation, backends and ground truth.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiTurn {
    /// What the bridge needs: `id`, `category`, `initial_config`, `involved_classes`.
    pub entry: Value,
    /// Each turn's user messages (empty in a turn that announces held-out functions).
    pub turns: Vec<Vec<Value>>,
    /// Turn index → the functions announced in that turn (`miss_func`).
    pub holdout: BTreeMap<usize, Vec<Function>>,
    /// Per turn, BFCL's ground-truth call texts (none in a memory conversation).
    pub ground_truth: Vec<Vec<String>>,
    /// A memory conversation's scenario and answers.
    pub memory: Option<Memory>,
}

impl MultiTurn {
    /// Every function the case may come to offer: the initial ones and every held-out one.
    pub fn all_functions(&self, case: &Case) -> Vec<Function> {
        let mut all = case.functions.clone();
        all.extend(self.holdout.values().flatten().cloned());
        all
    }
}

/// One step of a turn: the answer, the calls read from it, and what executing them gave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The answer text.
    pub text: String,
    /// The call texts executed (BFCL's `name(arg=value)` form).
    #[serde(default)]
    pub executed: Vec<String>,
    /// One result text per executed call.
    #[serde(default)]
    pub results: Vec<String>,
    /// Tokens generated.
    #[serde(default)]
    pub tokens: usize,
    /// Why generation stopped.
    #[serde(default)]
    pub stop: String,
    /// The conversation's tokens when the step began.
    #[serde(default)]
    pub prompt_tokens: usize,
    /// Of those, the tokens whose KV cache was kept from the earlier steps.
    #[serde(default)]
    pub prompt_reused: usize,
    /// Prefill time of what was not kept (ms).
    #[serde(default)]
    pub prefill_ms: f64,
    /// Decode time (ms).
    #[serde(default)]
    pub decode_ms: f64,
}

/// The multi-turn cases of `category`: `questions` and `answers` files, function documents
/// from `dir/multi_turn_func_doc`.
pub fn load_multi_turn(
    dir: &Path,
    category: Category,
    questions: &Path,
    answers: &Path,
) -> Result<Vec<Case>, DataError> {
    let mut truth: HashMap<String, Vec<Vec<String>>> = HashMap::new();
    for (line, v) in read_lines(answers)? {
        let at = Loc {
            path: answers,
            line,
        };
        let id = at.string(&v, "/id")?.to_string();
        let mut turns = Vec::new();
        for (t, turn) in at.array(&v, "/ground_truth")?.iter().enumerate() {
            let calls = turn.as_array().ok_or_else(|| {
                at.shape(format!("/ground_truth/{t}"), "expected an array of calls")
            })?;
            let mut texts = Vec::new();
            for (k, c) in calls.iter().enumerate() {
                let s = c.as_str().ok_or_else(|| {
                    at.shape(format!("/ground_truth/{t}/{k}"), "expected a call text")
                })?;
                texts.push(s.to_string());
            }
            turns.push(texts);
        }
        truth.insert(id, turns);
    }
    let mut docs: HashMap<&str, Vec<Function>> = HashMap::new();
    let mut cases = Vec::new();
    for (line, v) in read_lines(questions)? {
        let at = Loc {
            path: questions,
            line,
        };
        let id = at.string(&v, "/id")?.to_string();
        let turns = at.turns(&v)?;
        let mut functions = Vec::new();
        let classes = at.array(&v, "/involved_classes")?;
        for (k, c) in classes.iter().enumerate() {
            let pointer = format!("/involved_classes/{k}");
            let name = c
                .as_str()
                .ok_or_else(|| at.shape(pointer.clone(), "expected a class name"))?;
            let Some(&(class, file)) = BACKENDS.iter().find(|(n, _)| *n == name) else {
                let known: Vec<&str> = BACKENDS.iter().map(|(n, _)| *n).collect();
                return Err(at.shape(
                    pointer,
                    format!("unknown backend {name:?} (known: {})", known.join(", ")),
                ));
            };
            if !docs.contains_key(class) {
                docs.insert(
                    class,
                    function_docs(&dir.join("multi_turn_func_doc").join(file))?,
                );
            }
            functions.extend(docs[class].iter().cloned());
        }
        let mut holdout = BTreeMap::new();
        if let Some(missed) = v.get("missed_function") {
            let missed = missed
                .as_object()
                .ok_or_else(|| at.shape("/missed_function".into(), "expected an object"))?;
            for (turn, names) in missed {
                let pointer = format!("/missed_function/{turn}");
                let t: usize = turn
                    .parse()
                    .map_err(|_| at.shape(pointer.clone(), "expected a turn index as key"))?;
                let names = names
                    .as_array()
                    .ok_or_else(|| at.shape(pointer.clone(), "expected function names"))?;
                let mut held = Vec::new();
                for n in names.iter().filter_map(Value::as_str) {
                    let i = functions.iter().position(|f| f.name == n).ok_or_else(|| {
                        at.shape(
                            pointer.clone(),
                            format!("{n} is not a function of the case"),
                        )
                    })?;
                    held.push(functions.remove(i));
                }
                holdout.insert(t, held);
            }
        }
        let ground_truth = truth.remove(&id).ok_or_else(|| DataError::NoAnswer {
            path: answers.to_path_buf(),
            id: id.clone(),
        })?;
        if ground_truth.len() != turns.len() {
            return Err(at.shape(
                "/question".into(),
                format!(
                    "{} turns, but the possible answer has {}",
                    turns.len(),
                    ground_truth.len()
                ),
            ));
        }
        let entry = json!({
            "id": id,
            "category": category.name(),
            "initial_config": v.get("initial_config").cloned().unwrap_or_else(|| json!({})),
            "involved_classes": classes,
        });
        cases.push(Case {
            id,
            category,
            messages: turns.iter().flatten().cloned().collect(),
            functions,
            answers: Vec::new(),
            multi_turn: Some(Box::new(MultiTurn {
                entry,
                turns,
                holdout,
                ground_truth,
                memory: None,
            })),
        });
    }
    Ok(cases)
}

pub(super) fn function_docs(path: &Path) -> Result<Vec<Function>, DataError> {
    read_lines(path)?
        .into_iter()
        .map(|(line, v)| function(&Loc { path, line }, &v, ""))
        .collect()
}

/// The tools `functions` (a case's own, then the held-out ones announced so far) offer.
pub fn tools_for(functions: &[Function]) -> Result<Vec<Tool>, String> {
    let json = openai_tools(functions, Language::Python);
    parse_tools(&Value::Array(json)).map_err(|e| format!("tools: {e}"))
}

/// What scoring a conversation needs besides the case.
pub struct Scorer<'a> {
    /// The bridge.
    pub bridge: &'a mut Bridge,
    /// The call style answers are written in.
    pub style: &'a StyleSpec,
    /// The call formats structgen's reader reads.
    pub formats: FormatSet,
    /// The BFCL handler of the model's family (`module.Class`), when it has one.
    pub handler: Option<&'a str>,
}

impl Scorer<'_> {
    /// Scores the conversation `turns` of `case`: structgen's verdict (with every call read and
    /// its schema validity) and the BFCL handler's.
    pub fn score(
        &mut self,
        case: &Case,
        turns: &[Vec<Step>],
    ) -> Result<(Scored, Option<Reading>), BridgeError> {
        let Some(mt) = case.multi_turn.as_deref() else {
            return Err(BridgeError::Failed(format!(
                "{} is not a multi-turn case",
                case.id
            )));
        };
        if let Some(m) = &mt.memory {
            return memory::score(self, case, m, turns);
        }
        let functions = mt.all_functions(case);
        let tools = tools_for(&functions).map_err(BridgeError::Failed)?;
        let mut calls: Vec<ScoredCall> = Vec::new();
        let mut parse_errors = Vec::new();
        let mut ours: Vec<Vec<Vec<String>>> = Vec::new();
        for turn in turns {
            let mut steps = Vec::new();
            for step in turn {
                let (read, errors) =
                    read_calls(&functions, &tools, self.style, self.formats, &step.text);
                parse_errors.extend(errors);
                if !read.is_empty() {
                    let as_json: Vec<Value> = read
                        .iter()
                        .map(|c| json!({"name": c.name, "arguments": c.arguments}))
                        .collect();
                    steps.push(self.bridge.decode_calls(&as_json)?);
                }
                calls.extend(read);
            }
            ours.push(steps);
        }
        let (correct, verdict) = self.verdict(mt, &ours)?;
        let scored = Scored {
            calls,
            parse_errors,
            correct,
            verdict,
        };
        let Some(handler) = self.handler else {
            return Ok((scored, None));
        };
        let mut theirs: Vec<Vec<Vec<String>>> = Vec::new();
        let mut decoded_calls = 0;
        for turn in turns {
            let mut steps = Vec::new();
            for step in turn {
                // BFCL skips a step its decoder cannot read, as one without calls.
                if let Some(calls) = self.bridge.decode_step(handler, &step.text)? {
                    decoded_calls += calls.len();
                    steps.push(calls);
                }
            }
            theirs.push(steps);
        }
        let (correct, verdict) = self.verdict(mt, &theirs)?;
        let reading = Reading {
            handler: handler.to_string(),
            calls: decoded_calls,
            correct,
            verdict,
        };
        Ok((scored, Some(reading)))
    }

    fn verdict(
        &mut self,
        mt: &MultiTurn,
        steps: &[Vec<Vec<String>>],
    ) -> Result<(bool, String), BridgeError> {
        if steps.len() != mt.ground_truth.len() {
            return Ok((
                false,
                format!(
                    "multi_turn:force_terminated: the conversation ended after {} of {} turns (more than {STEP_LIMIT} steps in a turn)",
                    steps.len(),
                    mt.ground_truth.len()
                ),
            ));
        }
        self.bridge.check(&mt.entry, &mt.ground_truth, steps)
    }
}

/// The case's ground truth as a conversation: each turn one step, its calls written in
/// `style`, scored.
pub fn ground_truth(case: &Case, scorer: &mut Scorer) -> CaseResult {
    let mut run = || -> Result<CaseResult, BridgeError> {
        let Some(mt) = case.multi_turn.as_deref() else {
            return Err(BridgeError::Failed(format!(
                "{} is not a multi-turn case",
                case.id
            )));
        };
        if let Some(m) = &mt.memory {
            let turns = vec![vec![memory::ground_truth_step(m)]];
            let (scored, reading) = scorer.score(case, &turns)?;
            return Ok(finished(case, Mode::GroundTruth, turns, scored, reading));
        }
        let truth = scorer.bridge.truth(&mt.entry, &mt.ground_truth)?;
        let turns: Vec<Vec<Step>> = truth
            .iter()
            .map(|calls| {
                let calls: Vec<(String, Value)> = calls
                    .iter()
                    .map(|c| {
                        let name = c["name"].as_str().unwrap_or_default().to_string();
                        (name, c["arguments"].clone())
                    })
                    .collect();
                vec![Step {
                    text: render_calls(&calls, scorer.style),
                    ..Step::default()
                }]
            })
            .collect();
        let (scored, reading) = scorer.score(case, &turns)?;
        Ok(finished(case, Mode::GroundTruth, turns, scored, reading))
    };
    run().unwrap_or_else(|e| CaseResult::failed(case, Mode::GroundTruth, e.to_string()))
}

/// A conversation's result: its steps' texts joined, its turns kept.
pub fn finished(
    case: &Case,
    mode: Mode,
    turns: Vec<Vec<Step>>,
    scored: Scored,
    reading: Option<Reading>,
) -> CaseResult {
    let text = turns
        .iter()
        .flatten()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut r = CaseResult::failed(case, mode, String::new());
    r.error = None;
    r.text = text;
    r.scored = scored;
    r.bfcl = reading;
    r.tokens = turns.iter().flatten().map(|s| s.tokens).sum();
    r.turns = turns;
    r
}
