//! Running multi-turn cases: many conversations at once on one model ([`Batch`]), their calls
//! executed by BFCL's backends in the [`Bridge`].
//!
//! Each (case, mode) is one conversation, a small state machine: a turn starts by adding its
//! user messages (or, in a `miss_func` turn, BFCL's message announcing the held-out functions,
//! which constrained answers may call from then on); each step renders the whole conversation
//! through the chat template and submits it to the batch (the slot's cache keeps the earlier
//! steps' prefix, so a step prefills only what is new); when the answer is done, the calls
//! structgen's reader reads from it are executed and the assistant message and one tool
//! message per call are added, then the next step starts; an answer without calls ends the
//! turn; more than [`STEP_LIMIT`] steps in a turn end the conversation. As in BFCL's local
//! handlers, an answer may take what is left of the context after the prompt (at most
//! `--max-tokens`); a prompt that leaves no room ends the conversation with an error.
//!
//! Memory conversations ([`memory`]) run the same way, with the memory backend's system prompt
//! (from the bridge, as the backend loaded its snapshot) opening the first turn; a prerequisite
//! conversation that ends saves its memory for the next, and a conversation starts only after
//! the one it needs ([`memory::needs`]) has ended in the same mode.
//!
//! Invariants: a conversation's answers do not depend on what else is in the batch (the batch
//! decodes each sequence as alone); its backends live in its own bridge session, ended when it
//! finishes; a bridge failure is a result for the model (see [`Bridge::execute`]) or, when the
//! bridge cannot be started again, that conversation's error — never a crashed run.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use super::bridge::Bridge;
use super::convert::openai_tools;
use super::data::{Case, Function};
use super::lang::Language;
use super::memory;
use super::multi_turn::{finished, tools_for, Scorer, Step, STEP_LIMIT};
use super::run::{mode_matcher, CaseResult, Mode, Settings};
use super::score::read_calls;
use crate::frontend::tools::Tool;
use crate::runtime::batch::{Batch, BatchOptions, BatchRequest, Event};
use crate::runtime::request::prompt_tokens;
use crate::runtime::Model;

/// One conversation in flight.
struct Conversation {
    case: usize,
    mode: usize,
    session: String,
    /// The bridge's entry for its backends (a memory backend's with the mode's folder).
    entry: Value,
    messages: Vec<Value>,
    /// The tools in the system prompt (the case's initial ones, as BFCL's prompting flow keeps).
    offered: Vec<Value>,
    /// The case's functions, then the held-out ones announced so far: what the reader reads.
    functions: Vec<Function>,
    /// `functions` as tools: what constrained answers may call.
    tools: Vec<Tool>,
    turn: usize,
    turns: Vec<Vec<Step>>,
    prompt_tokens: usize,
    compile_ms: f64,
    grammar_ms: f64,
    decode_ms: f64,
    prefill_ms: f64,
    /// Set when the conversation has ended.
    end: Option<End>,
}

enum End {
    /// Every turn ran, or a turn took too many steps.
    Done,
    /// It could not go on.
    Error(String),
}

/// Whether assistant messages carry `tool_calls` (the template renders them) or their text.
fn template_has_tool_calls(model: &Model, settings: &Settings) -> bool {
    settings
        .template
        .as_ref()
        .or(model.chat_template.as_ref())
        .is_some_and(|(src, _)| src.contains("tool_calls"))
}

/// Answers the multi-turn cases `todo` (indices into `cases`) in every mode of `settings`, up to
/// `parallel` conversations at once on `model`; `seed(i)` seeds case `i`. `done(i, results)` is
/// called as each case's modes have all finished; returning false stops the run.
#[allow(clippy::too_many_arguments)]
pub fn run_conversations(
    model: &mut Model,
    bridge: &mut Bridge,
    handler: Option<&str>,
    cases: &[Case],
    todo: &[usize],
    settings: &Settings,
    parallel: usize,
    seed: &dyn Fn(usize) -> u64,
    done: &mut dyn FnMut(usize, Vec<CaseResult>) -> bool,
) {
    let modes = &settings.modes;
    let tool_calls = template_has_tool_calls(model, settings);
    let mut batch = Batch::new(
        model,
        BatchOptions {
            max_seqs: parallel.max(1),
            step_tokens: 512,
            ..BatchOptions::default()
        },
    );
    let mut live: HashMap<u64, Conversation> = HashMap::new();
    let mut queue = Queue::new(todo, modes.len(), memory::needs(cases, todo));
    let mut next_id = 0u64;
    let mut events = Vec::new();
    loop {
        while live.len() < parallel.max(1) {
            let Some((i, k)) = queue.next() else { break };
            let case = &cases[i];
            let mode = modes[k];
            let dir = bridge.memory_dir(mode.name());
            let mut conv = match start(case, i, k, (mode, &dir), next_id) {
                Ok(c) => c,
                Err(e) => {
                    if !queue.finish(i, k, CaseResult::failed(case, mode, e), done) {
                        return;
                    }
                    continue;
                }
            };
            let ctx = Ctx {
                cases,
                settings,
                bridge,
                tool_calls,
                seed: seed(i),
            };
            begin_turn(&mut conv, &mut batch, next_id, ctx);
            if let Some(r) = ended(&mut conv, cases, settings, bridge, handler) {
                if !queue.finish(i, k, r, done) {
                    return;
                }
            } else {
                live.insert(next_id, conv);
            }
            next_id += 1;
        }
        if batch.is_idle() {
            if queue.unpark_all() {
                continue;
            }
            return;
        }
        batch.step(&mut events);
        for (id, ev) in events.drain(..) {
            let Event::Done(outcome) = ev else { continue };
            let Some(mut conv) = live.remove(&id) else {
                continue;
            };
            let (i, k) = (conv.case, conv.mode);
            let ctx = Ctx {
                cases,
                settings,
                bridge,
                tool_calls,
                seed: seed(i),
            };
            match outcome {
                Ok(gen) => answered(&mut conv, &mut batch, id, ctx, gen),
                Err(e) => conv.end = Some(End::Error(format!("generation: {e}"))),
            }
            if let Some(r) = ended(&mut conv, cases, settings, bridge, handler) {
                if !queue.finish(i, k, r, done) {
                    return;
                }
            } else {
                live.insert(id, conv);
            }
        }
    }
}

/// The (case, mode) pairs still to run, and the results of cases with modes still running.
///
/// A case's modes run one after another, so that the next mode finds the conversation's opening
/// (tools, system prompt, first turn: thousands of tokens) in the cache of the slot the last one
/// freed; other cases fill the other slots. `waiting` is a stack: the last pushed goes next. A
/// case that needs another to end first in the same mode ([`memory::needs`]) is parked until it
/// has.
struct Queue {
    waiting: Vec<(usize, usize)>,
    results: HashMap<usize, Vec<Option<CaseResult>>>,
    modes: usize,
    needs: HashMap<usize, usize>,
    ended: HashSet<(usize, usize)>,
    parked: HashMap<(usize, usize), Vec<(usize, usize)>>,
}

impl Queue {
    fn new(todo: &[usize], modes: usize, needs: HashMap<usize, usize>) -> Self {
        let mut q = Self {
            waiting: Vec::new(),
            results: HashMap::new(),
            modes,
            needs,
            ended: HashSet::new(),
            parked: HashMap::new(),
        };
        for &i in todo.iter().rev() {
            q.push((i, 0));
        }
        q
    }

    fn push(&mut self, (i, k): (usize, usize)) {
        match self.needs.get(&i) {
            Some(&j) if !self.ended.contains(&(j, k)) => {
                self.parked.entry((j, k)).or_default().push((i, k));
            }
            _ => self.waiting.push((i, k)),
        }
    }

    /// The next (case, mode) to start.
    fn next(&mut self) -> Option<(usize, usize)> {
        let (i, k) = self.waiting.pop()?;
        let modes = self.modes;
        self.results.entry(i).or_insert_with(|| vec![None; modes]);
        Some((i, k))
    }

    /// Makes every parked case ready; whether there was one. Only reached when nothing runs,
    /// which the order of `needs` rules out: a case is never dropped for it.
    fn unpark_all(&mut self) -> bool {
        let parked: Vec<(usize, usize)> = self.parked.drain().flat_map(|(_, v)| v).collect();
        self.waiting.extend(parked);
        !self.waiting.is_empty()
    }

    /// Stores mode `k` of case `i`, readies what waited for it and its next mode (which goes
    /// first); calls `done` once every mode of the case is in, and returns what it returns
    /// (false stops the run).
    fn finish(
        &mut self,
        i: usize,
        k: usize,
        r: CaseResult,
        done: &mut dyn FnMut(usize, Vec<CaseResult>) -> bool,
    ) -> bool {
        self.ended.insert((i, k));
        for job in self
            .parked
            .remove(&(i, k))
            .unwrap_or_default()
            .into_iter()
            .rev()
        {
            self.push(job);
        }
        if k + 1 < self.modes {
            self.push((i, k + 1));
        }
        let Some(slots) = self.results.get_mut(&i) else {
            return true;
        };
        slots[k] = Some(r);
        if slots.iter().all(Option::is_some) {
            if let Some(slots) = self.results.remove(&i) {
                return done(i, slots.into_iter().flatten().collect());
            }
        }
        true
    }
}

fn start(
    case: &Case,
    i: usize,
    k: usize,
    (mode, memory_dir): (Mode, &std::path::Path),
    id: u64,
) -> Result<Conversation, String> {
    let Some(mt) = case.multi_turn.as_deref() else {
        return Err(format!("{} is not a multi-turn case", case.id));
    };
    let entry = match &mt.memory {
        Some(_) => memory::with_dir(&mt.entry, memory_dir),
        None => mt.entry.clone(),
    };
    Ok(Conversation {
        case: i,
        mode: k,
        session: format!("{}_{}_{id}", case.id, mode.name()),
        entry,
        messages: Vec::new(),
        offered: openai_tools(&case.functions, Language::Python),
        functions: case.functions.clone(),
        tools: tools_for(&case.functions)?,
        turn: 0,
        turns: Vec::new(),
        prompt_tokens: 0,
        compile_ms: 0.0,
        grammar_ms: 0.0,
        decode_ms: 0.0,
        prefill_ms: 0.0,
        end: None,
    })
}

/// What a step needs besides the conversation.
struct Ctx<'a, 'b> {
    cases: &'a [Case],
    settings: &'a Settings<'b>,
    bridge: &'a mut Bridge,
    tool_calls: bool,
    seed: u64,
}

/// Starts the conversation's next turn (or ends it after the last).
fn begin_turn(conv: &mut Conversation, batch: &mut Batch, id: u64, ctx: Ctx) {
    let case = &ctx.cases[conv.case];
    let Some(mt) = case.multi_turn.as_deref() else {
        return;
    };
    if conv.turn == mt.turns.len() {
        conv.end = Some(End::Done);
        return;
    }
    let t = conv.turn;
    if let Some(held) = mt.holdout.get(&t) {
        let docs: Vec<Value> = held.iter().map(|f| f.doc.clone()).collect();
        match ctx.bridge.holdout_message(&docs) {
            Ok(text) => conv.messages.push(json!({"role": "user", "content": text})),
            Err(e) => {
                conv.end = Some(End::Error(format!("turn {t}: {e}")));
                return;
            }
        }
        conv.functions.extend(held.iter().cloned());
        match tools_for(&conv.functions) {
            Ok(tools) => conv.tools = tools,
            Err(e) => {
                conv.end = Some(End::Error(e));
                return;
            }
        }
    } else if t == 0 && mt.memory.is_some() {
        match ctx
            .bridge
            .memory_prompt(&conv.session, &conv.entry, &mt.turns[0])
        {
            Ok(first) => conv.messages.extend(first),
            Err(e) => {
                conv.end = Some(End::Error(format!("the memory's system prompt: {e}")));
                return;
            }
        }
    } else {
        conv.messages.extend(mt.turns[t].iter().cloned());
    }
    conv.turns.push(Vec::new());
    submit_step(conv, batch, id, ctx);
}

/// Submits the conversation so far for its next answer.
fn submit_step(conv: &mut Conversation, batch: &mut Batch, id: u64, ctx: Ctx) {
    let settings = ctx.settings;
    let ids = match prompt_tokens(
        batch.model(),
        settings.template.as_ref(),
        &conv.messages,
        &conv.offered,
        settings.style,
    ) {
        Ok((_, ids)) => ids,
        Err(e) => {
            conv.end = Some(End::Error(format!("prompt: {e}")));
            return;
        }
    };
    let context = batch.model().decoder.cfg.context;
    if settings.strict && ids.len() + settings.generate.max_tokens > context {
        conv.end = Some(End::Error(format!(
            "turn {}: the conversation ({} tokens) plus --max-tokens {} exceeds the model's context of {context}",
            conv.turn,
            ids.len(),
            settings.generate.max_tokens
        )));
        return;
    }
    if ids.len() + 2 > context {
        conv.end = Some(End::Error(format!(
            "turn {}: the conversation ({} tokens) fills the model's context of {context}",
            conv.turn,
            ids.len()
        )));
        return;
    }
    let mode = settings.modes[conv.mode];
    let (matcher, ms) = match mode_matcher(mode, &conv.tools, settings) {
        Ok(m) => m,
        Err(e) => {
            conv.end = Some(End::Error(e));
            return;
        }
    };
    conv.compile_ms += ms;
    conv.prompt_tokens = ids.len();
    let mut opts = settings.generate.clone();
    opts.seed = ctx.seed;
    opts.max_tokens = opts.max_tokens.min(context - ids.len() - 2);
    batch.submit(
        id,
        BatchRequest {
            prompt: ids,
            matcher,
            stop_tokens: settings.stop.clone(),
            opts,
        },
    );
}

/// Takes a finished answer: executes its calls and goes on, or ends the turn.
fn answered(
    conv: &mut Conversation,
    batch: &mut Batch,
    id: u64,
    ctx: Ctx,
    gen: crate::runtime::generate::Generation,
) {
    let settings = ctx.settings;
    let s = &gen.summary;
    conv.grammar_ms += s.grammar_ms;
    conv.decode_ms += s.decode_ms;
    conv.prefill_ms += s.prefill_ms;
    let (calls, _) = read_calls(
        &conv.functions,
        &conv.tools,
        settings.style,
        settings.formats,
        &gen.text,
    );
    let mut step = Step {
        text: gen.text.clone(),
        executed: Vec::new(),
        results: Vec::new(),
        tokens: s.tokens_generated,
        stop: s.stop_reason.clone(),
        prompt_tokens: s.prompt_tokens,
        prompt_reused: s.prompt_reused,
        prefill_ms: s.prefill_ms,
        decode_ms: s.decode_ms,
    };
    let turn = conv.turns.len() - 1;
    if calls.is_empty() {
        conv.messages
            .push(json!({"role": "assistant", "content": gen.text}));
        conv.turns[turn].push(step);
        conv.turn += 1;
        begin_turn(conv, batch, id, ctx);
        return;
    }
    let as_json: Vec<Value> = calls
        .iter()
        .map(|c| json!({"name": c.name, "arguments": c.arguments}))
        .collect();
    match ctx.bridge.execute(&conv.session, &conv.entry, &as_json) {
        Ok((executed, results)) => {
            step.executed = executed;
            step.results = results;
        }
        Err(e) => {
            conv.turns[turn].push(step);
            conv.end = Some(End::Error(format!("executing the calls: {e}")));
            return;
        }
    }
    conv.messages.push(if ctx.tool_calls {
        let tool_calls: Vec<Value> = as_json
            .iter()
            .map(|c| json!({"type": "function", "function": c}))
            .collect();
        json!({"role": "assistant", "content": "", "tool_calls": tool_calls})
    } else {
        json!({"role": "assistant", "content": gen.text})
    });
    for (call, result) in step.executed.iter().zip(&step.results) {
        conv.messages
            .push(json!({"role": "tool", "name": call, "content": result}));
    }
    conv.turns[turn].push(step);
    if conv.turns[turn].len() > STEP_LIMIT {
        // BFCL's forced quit: the conversation ends in this turn.
        conv.end = Some(End::Done);
        return;
    }
    submit_step(conv, batch, id, ctx);
}

/// The result of a conversation that has ended (`None` while it goes on).
fn ended(
    conv: &mut Conversation,
    cases: &[Case],
    settings: &Settings,
    bridge: &mut Bridge,
    handler: Option<&str>,
) -> Option<CaseResult> {
    let mut end = conv.end.take()?;
    let case = &cases[conv.case];
    let mode = settings.modes[conv.mode];
    // A prerequisite conversation that ran to its end leaves its memory to the next ones.
    let mut snapshot = None;
    if memory::is_prereq(case) && matches!(end, End::Done) {
        match bridge.memory_flush(&conv.session, &conv.entry) {
            Ok(s) => snapshot = Some(s),
            Err(e) => end = End::Error(format!("saving the memory: {e}")),
        }
    }
    bridge.end(&conv.session);
    let turns = std::mem::take(&mut conv.turns);
    let mut r = match end {
        End::Error(e) => {
            let mut r = finished(case, mode, turns, Default::default(), None);
            r.scored.verdict = format!("error: {e}");
            r.error = Some(e);
            r
        }
        End::Done => {
            let mut scorer = Scorer {
                bridge,
                style: settings.style,
                formats: settings.formats,
                handler,
            };
            match scorer.score(case, &turns) {
                Ok((scored, reading)) => finished(case, mode, turns, scored, reading),
                Err(e) => {
                    let mut r = finished(case, mode, turns, Default::default(), None);
                    r.scored.verdict = format!("error: scoring: {e}");
                    r.error = Some(format!("scoring: {e}"));
                    r
                }
            }
        }
    };
    r.prompt_tokens = conv.prompt_tokens;
    r.compile_ms = conv.compile_ms;
    r.grammar_ms = conv.grammar_ms;
    r.decode_ms = conv.decode_ms;
    r.latency_ms = conv.compile_ms + conv.prefill_ms + conv.decode_ms;
    r.memory = snapshot;
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfcl::data::Category;

    fn result(mode: Mode) -> CaseResult {
        let case = Case {
            id: "c".into(),
            category: Category::MemoryKv,
            messages: Vec::new(),
            functions: Vec::new(),
            answers: Vec::new(),
            multi_turn: None,
        };
        CaseResult::failed(&case, mode, String::new())
    }

    #[test]
    fn a_case_waits_for_the_one_it_needs_in_each_mode() {
        // Case 1 needs case 0 (a chain), case 2 needs case 1 (its question); two modes.
        let needs = HashMap::from([(1, 0), (2, 1)]);
        let mut q = Queue::new(&[0, 1, 2], 2, needs);
        assert_eq!(q.next(), Some((0, 0)));
        assert_eq!(q.next(), None, "1 and 2 are parked");
        let mut done = Vec::new();
        let mut record = |i: usize, r: Vec<CaseResult>| {
            done.push((i, r.len()));
            true
        };
        assert!(q.finish(0, 0, result(Mode::Constrained), &mut record));
        // Case 0's next mode goes first (its cache), then case 1 in the first mode.
        assert_eq!(q.next(), Some((0, 1)));
        assert_eq!(q.next(), Some((1, 0)));
        assert_eq!(q.next(), None);
        assert!(q.finish(1, 0, result(Mode::Constrained), &mut record));
        // Case 1's second mode waits for case 0's, still running.
        assert_eq!(q.next(), Some((2, 0)));
        assert_eq!(q.next(), None);
        assert!(q.finish(0, 1, result(Mode::Free), &mut record));
        assert_eq!(q.next(), Some((1, 1)));
        assert!(q.finish(1, 1, result(Mode::Free), &mut record));
        assert!(q.finish(2, 0, result(Mode::Constrained), &mut record));
        assert_eq!(q.next(), Some((2, 1)));
        assert!(q.finish(2, 1, result(Mode::Free), &mut record));
        assert_eq!(q.next(), None);
        assert!(!q.unpark_all());
        assert_eq!(done, vec![(0, 2), (1, 2), (2, 2)]);
    }
}
