//! Masks computed ahead of the parse: the states a matcher is about to consult, computed while
//! the model runs, so that a batch's slowest mask (the first visit of a state: a call's first
//! argument value, a key, a string's contents) is not filled after the logits are ready.
//!
//! [`GrammarMatcher::ahead`] takes the states of the matcher's live items (no mask is computed
//! there) into an [`Ahead`], which holds the compiled grammar and runs on any thread after the
//! matcher has moved on. [`Ahead::run`] walks the automaton breadth first from those states, out
//! to `reach` bytes: a byte edge is one byte on, a call leads into its callee's start at no cost
//! and to its return state one byte on (a callee writes at least a byte, unless nullable); where
//! the live items' rules return to (the items that called them, up the parse's open rules) is
//! one byte on too. Distances are lower bounds, so every state the parse can reach within
//! `reach` bytes is on the way. It computes the mask of every state on the way that an item may
//! consult and that no one computed yet, nearest first, until `stop` says to stop; a
//! TagDispatch's free-text states only within 2 bytes (every partial trigger
//! is a state whose mask walks the whole vocabulary, and text passes through few of them).
//! [`Warmer`] runs the latest [`Ahead`]s of a batch's sequences on threads of its own.
//!
//! Invariants:
//! - no mask changes: a state's mask is computed into the same per-state cache the matcher
//!   fills on first use, only earlier;
//! - a state's mask is computed once per grammar: a matcher that needs a state while it is
//!   being computed here waits for that computation instead of starting its own;
//! - the walk's order is by distance, so a run that was stopped has done the nearest states;
//! - a [`Warmer`] runs only the last batch of work submitted to it: positions a sequence has
//!   left are never warmed after a newer submission arrives.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use super::compiler::CompiledGrammar;
use super::matcher::GrammarMatcher;
use crate::util::StateId;

/// Default reach of [`GrammarMatcher::ahead`] in bytes: a call's key, separator and the start of
/// its value (`"location": "`) from anywhere before the key.
pub const DEFAULT_REACH: usize = 24;

/// Reach in bytes for the states of a TagDispatch's free text: each partial trigger is a state of
/// its own whose mask walks the whole vocabulary, and text passes through few of them, so only
/// the next two bytes are warmed (the name trie after a trigger is a tag rule's, and warmed
/// as far as any).
const DISPATCH_REACH: u32 = 2;

/// Most states one [`Ahead::run`] visits, so that a wide grammar's walk stays short.
const MAX_VISITED: usize = 4096;

/// The states a matcher stands at, to warm the masks ahead of (see the module documentation).
#[derive(Clone)]
pub struct Ahead {
    grammar: Arc<CompiledGrammar>,
    /// States and their distances (bytes, a lower bound).
    from: Vec<(StateId, u32)>,
    reach: usize,
}

/// What a run did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AheadStats {
    /// Masks computed (states no one had computed before).
    pub computed: u64,
    /// Time spent computing them (µs).
    pub us: f64,
}

impl GrammarMatcher {
    /// The work of warming the masks of the states within `reach` bytes of this matcher's
    /// position; `None` once the matcher has ended.
    pub fn ahead(&self, reach: usize) -> Option<Ahead> {
        if self.is_terminated() {
            return None;
        }
        // Each state once, at its least distance; then nearest first.
        let mut from = self.ahead_starts();
        from.sort_unstable();
        from.dedup_by_key(|&mut (s, _)| s);
        from.sort_by_key(|&(_, d)| d);
        Some(Ahead {
            grammar: Arc::clone(self.grammar()),
            from,
            reach,
        })
    }
}

impl Ahead {
    /// States within the reach whose masks are not computed yet, nearest first.
    pub fn pending(&self) -> Vec<StateId> {
        let g = &self.grammar;
        let a = g.automaton();
        let fsm = a.fsm();
        let mut dist = vec![u32::MAX; fsm.num_states()];
        let mut queue = VecDeque::new();
        // Nearest first (`from` is sorted by distance).
        for &(s, d) in &self.from {
            if d < dist[s.index()] {
                dist[s.index()] = d;
                queue.push_back(s);
            }
        }
        let mut out = Vec::new();
        let mut listed = vec![false; fsm.num_states()];
        let mut visited = 0;
        // 0–1 breadth first: a call's callee start is at the caller's distance (front of the
        // queue), everything else one byte further (back).
        while let Some(s) = queue.pop_front() {
            visited += 1;
            if visited > MAX_VISITED {
                break;
            }
            let d = dist[s.index()];
            let rule = fsm.rule_of(s);
            let near = !a.is_dispatcher(rule) || d <= DISPATCH_REACH;
            let consulted = near && a.continues(s) && a.counted(rule).is_none();
            if consulted && d as usize <= self.reach && !listed[s.index()] && !g.has_state_mask(s) {
                listed[s.index()] = true;
                out.push(s);
            }
            if d as usize >= self.reach {
                continue;
            }
            let mut relax = |t: StateId, cost: u32, queue: &mut VecDeque<StateId>| {
                let nd = d + cost;
                if nd < dist[t.index()] {
                    dist[t.index()] = nd;
                    if cost == 0 {
                        queue.push_front(t);
                    } else {
                        queue.push_back(t);
                    }
                }
            };
            for e in fsm.byte_edges(s) {
                relax(e.target, 1, &mut queue);
            }
            for &(callee, ret) in fsm.ref_edges(s) {
                relax(fsm.start(callee), 0, &mut queue);
                relax(ret, u32::from(!a.nullable(callee)), &mut queue);
            }
        }
        out
    }

    /// Computes the pending masks, nearest first, asking `stop` before each.
    pub fn run(&self, stop: impl Fn() -> bool) -> AheadStats {
        let mut stats = AheadStats::default();
        for s in self.pending() {
            if stop() {
                break;
            }
            let t = Instant::now();
            if self.grammar.warm_state_mask(s) {
                stats.computed += 1;
                stats.us += t.elapsed().as_secs_f64() * 1e6;
            }
        }
        stats
    }
}

/// Work handed to the warmer: the latest batch not yet started.
#[derive(Default)]
struct Queue {
    work: Vec<Ahead>,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    generation: AtomicU64,
    computed: AtomicU64,
    nanos: AtomicU64,
    busy: AtomicBool,
}

/// Threads that run the latest [`Ahead`]s submitted to them, beside the caller (see the module
/// documentation). Dropping it stops them after the mask each is computing.
pub struct Warmer {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Warmer {
    /// A warmer on `threads` threads of its own (at least one), never the caller's rayon pool, so
    /// that the masks a step waits for are never queued behind speculative ones.
    pub fn new(threads: usize) -> std::io::Result<Warmer> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("structgen-ahead-{i}"))
            .build()
            .map_err(std::io::Error::other)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            generation: AtomicU64::new(0),
            computed: AtomicU64::new(0),
            nanos: AtomicU64::new(0),
            busy: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("structgen-ahead".into())
            .spawn(move || s.serve(&pool))?;
        Ok(Warmer {
            shared,
            thread: Some(thread),
        })
    }

    /// Threads for a warmer beside a model and its mask fills: one per eight cores, at least
    /// one (the forward pass's kernels and the fills keep the others).
    pub fn default_threads() -> usize {
        std::thread::available_parallelism().map_or(1, |n| (n.get() / 8).max(1))
    }

    /// Replaces the work not yet done with `work` (a run in progress stops before its next mask).
    pub fn submit(&self, work: Vec<Ahead>) {
        let mut q = self.shared.lock();
        q.work = work;
        // Under the lock, so that the thread reads it with the work it takes.
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        self.shared.wake.notify_one();
    }

    /// The masks computed and the time spent on them since the last call.
    pub fn take_stats(&self) -> AheadStats {
        AheadStats {
            computed: self.shared.computed.swap(0, Ordering::Relaxed),
            us: self.shared.nanos.swap(0, Ordering::Relaxed) as f64 / 1e3,
        }
    }

    /// Whether work is waiting or running.
    pub fn is_busy(&self) -> bool {
        self.shared.busy.load(Ordering::SeqCst) || !self.shared.lock().work.is_empty()
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // The queue holds no invariant a panicking holder could break.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn serve(&self, pool: &rayon::ThreadPool) {
        loop {
            let (work, generation) = {
                let mut q = self.lock();
                while q.work.is_empty() && !q.closed {
                    q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
                }
                if q.closed {
                    return;
                }
                self.busy.store(true, Ordering::SeqCst);
                // Read under the lock: a later submission bumps it after taking the lock.
                let generation = self.generation.load(Ordering::SeqCst);
                (std::mem::take(&mut q.work), generation)
            };
            let stop =
                || self.generation.load(Ordering::SeqCst) != generation || self.lock().closed;
            pool.install(|| {
                use rayon::prelude::*;
                work.par_iter().for_each(|ahead| {
                    let stats = ahead.run(stop);
                    self.computed.fetch_add(stats.computed, Ordering::Relaxed);
                    self.nanos
                        .fetch_add((stats.us * 1e3) as u64, Ordering::Relaxed);
                });
            });
            self.busy.store(false, Ordering::SeqCst);
        }
    }
}

impl Drop for Warmer {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            // A panic on the warmer's thread lost only speculative work.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::DEFAULT_REACH;
    use crate::engine::{CompileOptions, GrammarCompiler, GrammarMatcher, Precompute};
    use crate::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions};
    use crate::grammar::{ebnf, Grammar};
    use crate::util::{Limits, TokenBitmask, TokenId};
    use crate::vocab::Vocab;

    /// Every printable ASCII byte, and longer tokens across the structure of a call.
    fn texts() -> Vec<String> {
        let mut t: Vec<String> = (b' '..=b'~').map(|b| (b as char).to_string()).collect();
        for s in [
            "{\"",
            "location",
            "\": \"",
            "Paris",
            "\", \"",
            "unit",
            "celsius",
            "\"}",
            "days",
            "\": ",
            "3}",
            "<t=",
            "get",
            "_weather",
            "></t>",
            "</t>",
            "> ",
            "ris\", \"",
            "ab",
            "))>",
            "<((",
        ] {
            t.push(s.to_string());
        }
        t
    }

    fn vocab() -> Arc<Vocab> {
        let t = texts();
        Vocab::of_texts(&t.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Longest-match tokens of `text`.
    fn tokens(text: &str) -> Vec<TokenId> {
        let t = texts();
        let mut out = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let (i, tok) = t
                .iter()
                .enumerate()
                .filter(|(_, tok)| rest.starts_with(tok.as_str()))
                .max_by_key(|(_, tok)| tok.len())
                .expect("a token");
            out.push(TokenId(i as u32));
            rest = &rest[tok.len()..];
        }
        out
    }

    fn grammars() -> Vec<(Grammar, &'static str)> {
        let schema = json!({"type": "object", "properties": {
            "location": {"type": "string"},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"}},
            "required": ["location"]});
        let sg = json_schema_grammar(&schema, &JsonSchemaOptions::default(), &Limits::default())
            .expect("schema");
        let tags = ebnf::parse(
            "root ::= TagDispatch((\"<t=\", call), stop_eos=true, stop_str=(), \
             loop_after_dispatch=true, excludes=())\n\
             call ::= \"get_weather> \" [a-z\" ,]+ \"</t>\"",
            "root",
            &Limits::default(),
        )
        .expect("ebnf");
        // Recursion keeps `inner` a rule of its own: `))>` returns from the innermost `inner`
        // through the two that called it and the root, to a state only the callers lead to.
        let nested = ebnf::parse(
            "root ::= \"<\" inner \">\" [xy]\ninner ::= [a-z]+ | \"(\" inner \")\"",
            "root",
            &Limits::default(),
        )
        .expect("ebnf");
        vec![
            (nested, "<((ab))>x"),
            (
                sg.grammar,
                "{\"location\": \"Paris\", \"unit\": \"celsius\", \"days\": 3}",
            ),
            (
                tags,
                "the weather <t=get_weather> \"paris\", \"celsius\"</t>",
            ),
        ]
    }

    /// A compiler that computes no mask ahead of time: every mask starts cold.
    fn compiler() -> GrammarCompiler {
        let options = CompileOptions {
            precompute: Precompute::Top(0),
            ..CompileOptions::default()
        };
        GrammarCompiler::new(vocab(), Limits::default(), options)
    }

    /// Warming ahead at every step changes no mask (against a compiler that never warms and
    /// the uncached walk), and leaves the states the next token reaches warm: after a run
    /// to its end, the live states a token of at most the reach's bytes leads to (but a
    /// TagDispatch's free text beyond its own reach) have their masks.
    #[test]
    fn warmed_masks_are_the_masks_and_the_next_states_are_warm() {
        let (warm, cold) = (compiler(), compiler());
        let size = warm.vocab().size();
        for (grammar, text) in grammars() {
            let mut w = GrammarMatcher::new(warm.compile(&grammar).expect("compiles"));
            let mut c = GrammarMatcher::new(cold.compile(&grammar).expect("compiles"));
            let (mut mw, mut mc, mut mu) = (
                TokenBitmask::new(size),
                TokenBitmask::new(size),
                TokenBitmask::new(size),
            );
            let toks = tokens(text);
            for (step, &t) in toks.iter().enumerate() {
                if step > 0 {
                    let left: Vec<_> = w
                        .ahead(0)
                        .expect("live")
                        .pending()
                        .into_iter()
                        .filter(|&s| {
                            let a = w.grammar().automaton();
                            !a.is_dispatcher(a.fsm().rule_of(s))
                        })
                        .collect();
                    assert!(left.is_empty(), "{text:?} step {step}: cold {left:?}");
                }
                let ahead = w.ahead(DEFAULT_REACH).expect("live");
                ahead.run(|| false);
                assert!(
                    ahead.pending().is_empty(),
                    "a run to its end leaves nothing"
                );
                w.fill_next_token_bitmask(&mut mw);
                c.fill_next_token_bitmask(&mut mc);
                c.fill_next_token_bitmask_uncached(&mut mu);
                assert_eq!(mw, mc, "{text:?} step {step}");
                assert_eq!(mw, mu, "{text:?} step {step}");
                assert!(mw.is_allowed(t), "{text:?} step {step}");
                assert!(w.accept_token(t) && c.accept_token(t));
            }
        }
    }

    /// From inside a call the walk reaches what the callers do after it: from `<((ab` the
    /// states after `))>`, which only the items that called `inner` lead to.
    #[test]
    fn the_walk_climbs_to_the_callers() {
        let compiler = compiler();
        let (grammar, _) = grammars().remove(0);
        let mut m = GrammarMatcher::new(compiler.compile(&grammar).expect("compiles"));
        assert!(m.accept_string("<((ab"));
        let pending = m.ahead(DEFAULT_REACH).expect("live").pending();
        let mut after = m.fork();
        assert!(after.accept_string("))>"));
        let a = after.grammar().automaton();
        let next: Vec<_> = after
            .ahead_starts()
            .into_iter()
            .filter(|&(s, d)| d == 0 && a.continues(s))
            .map(|(s, _)| s)
            .collect();
        assert!(!next.is_empty());
        for s in next {
            assert!(
                pending.contains(&s),
                "{s:?} after the call, not in {pending:?}"
            );
        }
    }

    /// A stopped run computes nothing, and the warmer's threads end with it.
    #[test]
    fn stopped_runs_and_the_warmer() {
        let compiler = compiler();
        let (grammar, _) = grammars().remove(0);
        let m = GrammarMatcher::new(compiler.compile(&grammar).expect("compiles"));
        let ahead = m.ahead(DEFAULT_REACH).expect("live");
        let before = ahead.pending();
        assert!(!before.is_empty());
        assert_eq!(ahead.run(|| true).computed, 0);
        assert_eq!(ahead.pending(), before);
        let warmer = super::Warmer::new(1).expect("a thread");
        warmer.submit(vec![ahead.clone()]);
        let start = std::time::Instant::now();
        while warmer.is_busy() {
            assert!(start.elapsed().as_secs() < 30, "the warmer finishes");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(ahead.pending().is_empty());
        assert_eq!(warmer.take_stats().computed, before.len() as u64);
        drop(warmer);
    }
}
