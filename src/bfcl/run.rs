//! Running one case: the prompt, the answer in each mode, and its score.
//!
//! In: a loaded model, a [`Case`] and the [`Settings`]. Out: one [`CaseResult`] per mode. The
//! prompt is the model's chat template over the case's messages with the case's tools (OpenAI
//! format, see [`super::convert`]); it is prefilled once and every further mode resumes from it.
//! `constrained` generates under the tool-calling grammar of the model's style (tool_choice
//! auto unless asked otherwise, parallel calls allowed), `free` without a grammar; both answers are read with the same
//! style's parser. `ground-truth` needs no model: it writes the case's first possible answer as
//! calls in the style, which checks the data, the parser and the checker end to end.
//!
//! A case that cannot run (a tool list our tool parser refuses, a prompt longer than the model's
//! context, a generation error) gets a result with `error` set and counts as wrong, except where
//! BFCL's handling is asked for ([`failure_as_bfcl`]: right in the irrelevance categories). The
//! answer may take what the context leaves after the prompt, at most `--max-tokens`, as BFCL's
//! local handlers allow; [`Settings::strict`] refuses such a prompt instead.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::checker::is_omittable;
use super::convert::{offered_name, openai_tools};
use super::data::{Case, CheckKind, Param};
use super::lang::{self, Language};
use super::multi_turn::Step;
use super::score::{score, Scored};
use crate::engine::GrammarCompiler;
use crate::engine::GrammarMatcher;
use crate::frontend::tool_calls::render_calls;
use crate::frontend::tools::FormatSet;
use crate::frontend::tools::{parse_tools, StyleSpec, Tool, ToolChoice, ToolOptions};
use crate::runtime::batch::{Batch, BatchOptions, BatchRequest, Event};
use crate::runtime::generate::{Draft, GenerateOptions, Generation, Prefill, Session};
use crate::runtime::request::{prompt_tokens, tools_matcher};
use crate::runtime::trace::DraftStats;
use crate::runtime::Model;

/// How an answer is produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Generated under the tool-calling grammar.
    Constrained,
    /// Generated without a grammar.
    Free,
    /// The case's first possible answer, written as calls (no model).
    GroundTruth,
}

impl Mode {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Constrained => "constrained",
            Mode::Free => "free",
            Mode::GroundTruth => "ground-truth",
        }
    }
}

/// What every case of a run shares.
#[derive(Debug)]
pub struct Settings<'a> {
    /// The call style.
    pub style: &'static StyleSpec,
    /// A chat template (source, origin) instead of the model's own.
    pub template: Option<(String, String)>,
    /// Tokens that end an answer.
    pub stop: Vec<u32>,
    /// Generation options (the seed is per case).
    pub generate: GenerateOptions,
    /// The modes, in the order they run.
    pub modes: Vec<Mode>,
    /// Constrained answers: `Auto` (text or calls) or `Required` (at least one call).
    pub tool_choice: ToolChoice,
    /// The compiler for constrained answers (one for the run: masks are shared between cases).
    pub compiler: &'a GrammarCompiler,
    /// The call formats constrained answers may use and every answer is read in.
    pub formats: FormatSet,
    /// Tokens a draft model (when the run has one) proposes per verification pass.
    pub draft_tokens: usize,
    /// structgen's stricter handling: a prompt that leaves less than `max_tokens` of the
    /// context is an error (BFCL's local handlers let the answer take what is left).
    pub strict: bool,
}

/// One case answered in one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// The case id.
    pub id: String,
    /// Its category.
    pub category: String,
    /// How the answer was produced.
    pub mode: Mode,
    /// The answer text.
    pub text: String,
    /// Its score.
    #[serde(flatten)]
    pub scored: Scored,
    /// Why the case could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Generated tokens.
    pub tokens: usize,
    /// Grammar compile + prefill + decode (ms); a resumed mode counts the shared prefill too.
    pub latency_ms: f64,
    /// Grammar compile time (ms).
    pub compile_ms: f64,
    /// Mask, apply and accept time during decoding (ms).
    pub grammar_ms: f64,
    /// Decode time after the prefill (ms).
    pub decode_ms: f64,
    /// Why generation stopped.
    pub stop: String,
    /// With a draft model: what speculation did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<DraftStats>,
    /// The leaderboard's reading: the verdict on the calls the BFCL handler of the model's
    /// family decodes from the answer (absent when the run had no bridge or the style has no
    /// handler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfcl: Option<Reading>,
    /// A multi-turn case's conversation: per turn, its steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Vec<Step>>,
    /// A memory prerequisite conversation's snapshot of the memory when it ended (what the
    /// scenario's next conversations load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Value>,
}

/// An answer as a BFCL handler decodes it, and the verdict on that.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// The handler (`module.Class` under `bfcl_eval.model_handler`).
    pub handler: String,
    /// Calls it decoded.
    pub calls: usize,
    /// Whether BFCL's checker accepts them.
    pub correct: bool,
    /// `correct`, or the checker's `kind: message` (or why decoding failed).
    pub verdict: String,
}

impl CaseResult {
    fn new(case: &Case, mode: Mode, text: String, scored: Scored) -> CaseResult {
        CaseResult {
            id: case.id.clone(),
            category: case.result_category(),
            mode,
            text,
            scored,
            error: None,
            prompt_tokens: 0,
            tokens: 0,
            latency_ms: 0.0,
            compile_ms: 0.0,
            grammar_ms: 0.0,
            decode_ms: 0.0,
            stop: String::new(),
            speculation: None,
            bfcl: None,
            turns: Vec::new(),
            memory: None,
        }
    }

    /// Whether it is a memory prerequisite conversation's (kept apart from the scored results).
    pub fn is_prereq(&self) -> bool {
        self.category.ends_with("_prereq")
    }

    /// A case that could not run in `mode`.
    pub fn failed(case: &Case, mode: Mode, error: String) -> CaseResult {
        let scored = Scored {
            calls: Vec::new(),
            parse_errors: Vec::new(),
            correct: false,
            verdict: format!("error: {error}"),
        };
        let mut r = CaseResult::new(case, mode, String::new(), scored);
        r.error = Some(error);
        r
    }
}

/// The case's tools as offered: the OpenAI array and the parsed list.
pub fn offered_tools(case: &Case) -> Result<(Vec<Value>, Vec<Tool>), String> {
    let json = openai_tools(&case.functions, case.category.language());
    let tools = parse_tools(&Value::Array(json.clone())).map_err(|e| format!("tools: {e}"))?;
    Ok((json, tools))
}

/// The case's first possible answer written as calls in `style`, scored.
pub fn ground_truth(case: &Case, style: &StyleSpec, formats: FormatSet) -> CaseResult {
    if case.multi_turn.is_some() {
        let why = "a multi-turn case's ground truth is scored by BFCL's checker (multi_turn::ground_truth)";
        return CaseResult::failed(case, Mode::GroundTruth, why.into());
    }
    let (json, tools) = match offered_tools(case) {
        Ok(both) => both,
        Err(e) => return CaseResult::failed(case, Mode::GroundTruth, e),
    };
    let calls: Vec<(String, Value)> = if case.category.check_kind() == CheckKind::AnyCall {
        // Relevance data has no answer: any call is right, so the truth is a call of the first
        // function with a placeholder of each required parameter's declared type.
        json.first()
            .map(|t| {
                let f = &t["function"];
                let name = f["name"].as_str().unwrap_or_default().to_string();
                (name, placeholder(&f["parameters"]))
            })
            .into_iter()
            .collect()
    } else {
        truth_calls(case)
    };
    let text = render_calls(&calls, style);
    let scored = score(case, &tools, style, formats, &text);
    CaseResult::new(case, Mode::GroundTruth, text, scored)
}

/// The case's first possible answer as calls (offered names, arguments in the case's language).
fn truth_calls(case: &Case) -> Vec<(String, Value)> {
    case.answers
        .iter()
        .map(|e| {
            let f = case.functions.iter().find(|f| f.name == e.name);
            let args: Map<String, Value> = e
                .params
                .iter()
                .filter_map(|(p, values)| {
                    let param = f.and_then(|f| f.param(p));
                    let required = f.is_some_and(|f| f.required.contains(p));
                    if param.is_none() && is_omittable(values) {
                        return None;
                    }
                    let value = first_acceptable(values, required)?;
                    let written = written_value(value, param);
                    Some((p.clone(), in_language(case, written, param)))
                })
                .collect();
            (offered_name(&e.name), Value::Object(args))
        })
        .collect()
}

/// A value of `schema`'s type: its first `enum` value, else the type's empty value; an object
/// holds its required properties.
fn placeholder(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str().unwrap_or("string") {
        "integer" | "number" => Value::from(0),
        "boolean" => Value::Bool(false),
        "array" => Value::Array(Vec::new()),
        "object" => {
            let required = schema["required"].as_array().cloned().unwrap_or_default();
            let props = &schema["properties"];
            Value::Object(
                required
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|k| (k.to_string(), placeholder(&props[k])))
                    .collect(),
            )
        }
        _ => Value::String(String::new()),
    }
}

/// The first acceptable value; `None` when that is `""` (omit it), unless the parameter is
/// required, which takes the first value that is not `""` (or `""` itself when it is the only one).
fn first_acceptable(values: &[Value], required: bool) -> Option<&Value> {
    let omit = |v: &Value| v.as_str() == Some("");
    match values.first() {
        Some(v) if omit(v) && required => values.iter().find(|v| !omit(v)).or(Some(v)),
        Some(v) if omit(v) => None,
        first => first,
    }
}

/// An acceptable value as written in a call: a `dict` parameter's acceptable value (and each dict
/// of a list-of-dicts parameter) lists acceptable values per key, so each key takes its first.
/// A ground-truth value as the case's language writes it: Java and JavaScript values are strings
/// in their syntax ([`lang::literal`]), Python values JSON.
fn in_language(case: &Case, value: Value, param: Option<&Param>) -> Value {
    let language = case.category.language();
    match (language, param) {
        (Language::Python, _) | (_, None) => value,
        (_, Some(p)) => Value::String(lang::literal(language, &value, &p.ty, p.items.as_deref())),
    }
}

fn written_value(value: &Value, param: Option<&Param>) -> Value {
    let dict = |v: &Value| match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter_map(|(k, values)| match values {
                    Value::Array(a) => first_acceptable(a, false).map(|v| (k.clone(), v.clone())),
                    other => Some((k.clone(), other.clone())),
                })
                .collect(),
        ),
        other => other.clone(),
    };
    match (param, value) {
        // A dict's (or a Java HashMap's) answer lists acceptable values per key.
        (Some(p), Value::Object(_)) if p.ty == "dict" || p.ty == "HashMap" => dict(value),
        (Some(p), Value::Array(items)) if p.items.as_deref() == Some("dict") => {
            Value::Array(items.iter().map(dict).collect())
        }
        _ => value.clone(),
    }
}

/// Answers `case` in every mode of `settings` on `model` (with `draft` drafting tokens when
/// given); `seed` seeds sampling.
pub fn run_case(
    model: &mut Model,
    mut draft: Option<&mut Model>,
    case: &Case,
    settings: &Settings,
    seed: u64,
) -> Vec<CaseResult> {
    let fail_all = |e: String| -> Vec<CaseResult> {
        settings
            .modes
            .iter()
            .map(|&m| CaseResult::failed(case, m, e.clone()))
            .collect()
    };
    let (tools, ids, max_tokens) = match prepare(model, case, settings) {
        Ok(p) => p,
        Err(e) => return fail_all(e),
    };
    let mut prefill = None;
    settings
        .modes
        .iter()
        .map(|&mode| {
            let prompted = Prompted {
                tools: &tools,
                ids: &ids,
                max_tokens,
            };
            let draft = draft.as_deref_mut();
            answer(
                model,
                draft,
                case,
                settings,
                &prompted,
                (mode, seed),
                &mut prefill,
            )
            .unwrap_or_else(|e| CaseResult::failed(case, mode, e))
        })
        .collect()
}

/// A case's offered tools, prompt tokens and the most tokens its answer may take, or why it
/// cannot run.
fn prepare(
    model: &Model,
    case: &Case,
    settings: &Settings,
) -> Result<(Vec<Tool>, Vec<u32>, usize), String> {
    let (tools_json, tools) = offered_tools(case)?;
    let (_, ids) = prompt_tokens(
        model,
        settings.template.as_ref(),
        &case.messages,
        &tools_json,
        settings.style,
    )
    .map_err(|e| format!("prompt: {e}"))?;
    let context = model.decoder.cfg.context;
    let max_tokens = settings.generate.max_tokens;
    if settings.strict && ids.len() + max_tokens > context {
        return Err(format!(
            "the prompt ({} tokens) plus --max-tokens {max_tokens} exceeds the model's context of {context}",
            ids.len(),
        ));
    }
    // As BFCL's local handlers: the answer may take what the context has left (2 spare).
    if ids.len() + 2 > context {
        return Err(format!(
            "the prompt ({} tokens) leaves no room in the model's context of {context}",
            ids.len()
        ));
    }
    let room = context - ids.len() - 2;
    Ok((tools, ids, max_tokens.min(room)))
}

/// BFCL's reading of a case that could not run: it stores the error text as the answer, which
/// decodes to no call, so the case is right in the irrelevance categories.
pub fn failure_as_bfcl(case: &Case, r: &mut CaseResult) {
    if r.error.is_some() && case.category.check_kind() == CheckKind::NoCall {
        r.scored.correct = true;
        r.scored.verdict =
            "correct: the case could not run, which BFCL reads as no call".to_string();
    }
}

/// The matcher of a mode (none for free answers) and its compile time.
pub(super) fn mode_matcher(
    mode: Mode,
    tools: &[Tool],
    settings: &Settings,
) -> Result<(Option<GrammarMatcher>, f64), String> {
    if mode != Mode::Constrained {
        return Ok((None, 0.0));
    }
    let options = ToolOptions {
        tool_choice: settings.tool_choice.clone(),
        formats: settings.formats,
        ..ToolOptions::default()
    };
    let (m, ms) = tools_matcher(
        settings.compiler,
        tools,
        settings.style,
        &options,
        &settings.stop,
    )
    .map_err(|e| e.to_string())?;
    Ok((Some(m), ms))
}

/// A case's result in `mode` from its generation.
fn scored_result(
    case: &Case,
    mode: Mode,
    settings: &Settings,
    prompted: &Prompted,
    gen: &Generation,
    compile_ms: f64,
    latency_ms: f64,
) -> CaseResult {
    let s = &gen.summary;
    let scored = score(
        case,
        prompted.tools,
        settings.style,
        settings.formats,
        &gen.text,
    );
    let mut r = CaseResult::new(case, mode, gen.text.clone(), scored);
    r.prompt_tokens = prompted.ids.len();
    r.tokens = s.tokens_generated;
    r.latency_ms = latency_ms;
    r.compile_ms = compile_ms;
    r.grammar_ms = s.grammar_ms;
    r.decode_ms = s.decode_ms;
    r.stop = s.stop_reason.clone();
    r.speculation = s.speculation;
    r
}

/// Answers the cases `todo` (indices into `cases`) in every mode of `settings`, up to `parallel`
/// sequences decoding at once on `model` ([`Batch`]); `seed(i)` seeds case `i`. `done(i, results)`
/// is called as each case's modes have all finished, in whatever order they finish. Each answer
/// is the one [`run_case`] gives (the batch decodes every sequence as it decodes alone).
pub fn run_cases_batched(
    model: &mut Model,
    cases: &[Case],
    todo: &[usize],
    settings: &Settings,
    parallel: usize,
    seed: &dyn Fn(usize) -> u64,
    done: &mut dyn FnMut(usize, Vec<CaseResult>) -> bool,
) {
    struct Pending {
        tools: Vec<Tool>,
        ids: Vec<u32>,
        max_tokens: usize,
        compile_ms: Vec<f64>,
        results: Vec<Option<CaseResult>>,
        /// The next mode to start.
        next: usize,
    }
    /// Starts the case's next mode that needs the model (one at a time, so that the next finds
    /// the prompt in the cache of the slot the last one freed, as a sequential run resumes from
    /// its prefill); fills in those that need none.
    fn start_next(
        batch: &mut Batch,
        case: &Case,
        i: usize,
        p: &mut Pending,
        settings: &Settings,
        seed: u64,
    ) {
        let modes = &settings.modes;
        while p.next < modes.len() {
            let (k, mode) = (p.next, modes[p.next]);
            p.next += 1;
            if mode == Mode::GroundTruth {
                p.results[k] = Some(ground_truth(case, settings.style, settings.formats));
                continue;
            }
            match mode_matcher(mode, &p.tools, settings) {
                Ok((matcher, ms)) => {
                    p.compile_ms[k] = ms;
                    let mut opts = settings.generate.clone();
                    opts.seed = seed;
                    opts.max_tokens = p.max_tokens;
                    let req = BatchRequest {
                        prompt: p.ids.clone(),
                        matcher,
                        stop_tokens: settings.stop.clone(),
                        opts,
                    };
                    batch.submit((i * modes.len() + k) as u64, req);
                    return;
                }
                Err(e) => p.results[k] = Some(CaseResult::failed(case, mode, e)),
            }
        }
    }
    let modes = &settings.modes;
    let mut pending: std::collections::HashMap<usize, Pending> = Default::default();
    let mut next = 0;
    let mut batch = Batch::new(
        model,
        BatchOptions {
            max_seqs: parallel.max(1),
            step_tokens: 512,
            ..BatchOptions::default()
        },
    );
    let mut events = Vec::new();
    loop {
        // Keep the batch fed: admit cases while fewer requests than sequences wait.
        while next < todo.len() && batch.queued() < parallel.max(1) {
            let i = todo[next];
            next += 1;
            let case = &cases[i];
            let (tools, ids, max_tokens) = match prepare(batch.model(), case, settings) {
                Ok(p) => p,
                Err(e) => {
                    let r = modes
                        .iter()
                        .map(|&m| CaseResult::failed(case, m, e.clone()));
                    if !done(i, r.collect()) {
                        return;
                    }
                    continue;
                }
            };
            let mut p = Pending {
                tools,
                ids,
                max_tokens,
                compile_ms: vec![0.0; modes.len()],
                results: vec![None; modes.len()],
                next: 0,
            };
            start_next(&mut batch, case, i, &mut p, settings, seed(i));
            if p.results.iter().all(Option::is_some) {
                if !done(i, p.results.into_iter().flatten().collect()) {
                    return;
                }
            } else {
                pending.insert(i, p);
            }
        }
        if batch.is_idle() {
            return;
        }
        batch.step(&mut events);
        for (id, ev) in events.drain(..) {
            let Event::Done(result) = ev else {
                continue;
            };
            let (i, k) = (id as usize / modes.len(), id as usize % modes.len());
            let (case, mode) = (&cases[i], modes[k]);
            let Some(p) = pending.get_mut(&i) else {
                continue;
            };
            let prompted = Prompted {
                tools: &p.tools,
                ids: &p.ids,
                max_tokens: p.max_tokens,
            };
            p.results[k] = Some(match result {
                Ok(gen) => {
                    let s = &gen.summary;
                    let latency = p.compile_ms[k] + s.prefill_ms + s.decode_ms;
                    scored_result(
                        case,
                        mode,
                        settings,
                        &prompted,
                        &gen,
                        p.compile_ms[k],
                        latency,
                    )
                }
                Err(e) => CaseResult::failed(case, mode, format!("generation: {e}")),
            });
            start_next(&mut batch, case, i, p, settings, seed(i));
            if p.results.iter().all(Option::is_some) {
                if let Some(p) = pending.remove(&i) {
                    if !done(i, p.results.into_iter().flatten().collect()) {
                        return;
                    }
                }
            }
        }
    }
}

/// A case's offered tools and prompt tokens.
struct Prompted<'a> {
    tools: &'a [Tool],
    ids: &'a [u32],
    max_tokens: usize,
}

fn answer(
    model: &mut Model,
    draft: Option<&mut Model>,
    case: &Case,
    settings: &Settings,
    prompted: &Prompted,
    (mode, seed): (Mode, u64),
    prefill: &mut Option<Prefill>,
) -> Result<CaseResult, String> {
    if mode == Mode::GroundTruth {
        return Ok(ground_truth(case, settings.style, settings.formats));
    }
    let (matcher, compile_ms) = mode_matcher(mode, prompted.tools, settings)?;
    let mut opts = settings.generate.clone();
    opts.max_tokens = prompted.max_tokens;
    opts.seed = seed;
    let draft = match draft {
        Some(d) => Some(Draft::new(d, model, settings.draft_tokens).map_err(|e| e.to_string())?),
        None => None,
    };
    let mut session =
        Session::new(model, matcher, settings.stop.clone(), opts).map_err(|e| e.to_string())?;
    if let Some(d) = draft {
        session.set_draft(d);
    }
    let t = Instant::now();
    let resumed = match prefill {
        Some(p) => {
            session.resume(p).map_err(|e| e.to_string())?;
            true
        }
        None => {
            session.prefill(prompted.ids).map_err(|e| e.to_string())?;
            *prefill = session.prefilled();
            false
        }
    };
    let stop = loop {
        match session.step(&mut |_| {}) {
            Ok(Some(stop)) => break stop,
            Ok(None) => {}
            Err(e) => return Err(format!("generation: {e}")),
        }
    };
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    let gen = session.finish(stop);
    let s = &gen.summary;
    let latency = compile_ms + wall_ms + if resumed { s.prefill_ms } else { 0.0 };
    Ok(scored_result(
        case, mode, settings, prompted, &gen, compile_ms, latency,
    ))
}
