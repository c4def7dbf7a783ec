//! The leaderboard's summary of a run, computed as bfcl-eval's `eval_runner_helper` computes it.
//!
//! Per mode and per reader (structgen's verdicts, and the BFCL handler's when the run has them):
//! the non-live AST group (the unweighted mean of simple — itself the unweighted mean of
//! simple_python, simple_java and simple_javascript — multiple, parallel and parallel_multiple),
//! the live AST group (the mean over live_simple, live_multiple, live_parallel and
//! live_parallel_multiple weighted by case counts), the multi-turn group (unweighted over its four
//! categories), the agentic group (web search and memory), hallucination (irrelevance: the
//! unweighted mean of irrelevance and live_irrelevance; relevance: live_relevance), and the
//! overall score: those five groups weighted 10/10/10/30/40. As in bfcl-eval, a category the run
//! did not answer counts 0 (weighted by its full size in the data) — the summary lists them,
//! because an overall score with absent categories is not the leaderboard's number.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::run::{CaseResult, Mode};

/// One group's score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// Accuracy, 0..1.
    pub accuracy: f64,
    /// Cases behind it.
    pub count: usize,
}

/// The leaderboard's numbers for one mode under one reader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The mode.
    pub mode: Mode,
    /// `structgen` or `bfcl` (the handler's decoding).
    pub reader: String,
    /// The overall score.
    pub overall: f64,
    /// Non-live AST.
    pub non_live: f64,
    /// Live AST.
    pub live: f64,
    /// Multi-turn.
    pub multi_turn: f64,
    /// Agentic (web search, memory).
    pub agentic: f64,
    /// Irrelevance detection.
    pub irrelevance: f64,
    /// Relevance detection.
    pub relevance: f64,
    /// Categories the overall score counts as 0 because the run did not answer them.
    pub absent: Vec<String>,
    /// The paper's columns: cases whose calls are correct, over all cases answered.
    pub correct_call_rate: f64,
    /// Calls whose arguments validate against their tool's schema, over all calls.
    pub schema_valid_call_rate: Option<f64>,
}

/// Every category the overall score is made of.
const SCORED: [&str; 22] = [
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
    "live_irrelevance",
    "live_relevance",
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
    "web_search_base",
    "web_search_no_snippet",
    "memory_kv",
    "memory_vector",
    "memory_rec_sum",
];

fn unweighted(scores: &[Score]) -> Score {
    Score {
        accuracy: scores.iter().map(|s| s.accuracy).sum::<f64>() / scores.len() as f64,
        count: scores.iter().map(|s| s.count).sum(),
    }
}

fn weighted(scores: &[Score]) -> Score {
    let count: usize = scores.iter().map(|s| s.count).sum();
    let total: f64 = scores.iter().map(|s| s.accuracy * s.count as f64).sum();
    Score {
        accuracy: if count == 0 {
            0.0
        } else {
            total / count as f64
        },
        count,
    }
}

/// The summaries of `results`, per mode and reader; `size(category)` is a category's full case
/// count in the data (the weight of an absent live category).
pub fn summaries(results: &[CaseResult], size: &dyn Fn(&str) -> usize) -> Vec<Summary> {
    let mut modes: Vec<Mode> = Vec::new();
    for r in results {
        if !modes.contains(&r.mode) {
            modes.push(r.mode);
        }
    }
    let mut out = Vec::new();
    for mode in modes {
        let of: Vec<&CaseResult> = results.iter().filter(|r| r.mode == mode).collect();
        out.push(summary(&of, mode, "structgen", size, |r| {
            Some(r.scored.correct)
        }));
        if of.iter().all(|r| r.bfcl.is_some()) {
            out.push(summary(&of, mode, "bfcl", size, |r| {
                r.bfcl.as_ref().map(|b| b.correct)
            }));
        }
    }
    out
}

fn summary(
    results: &[&CaseResult],
    mode: Mode,
    reader: &str,
    size: &dyn Fn(&str) -> usize,
    correct: impl Fn(&CaseResult) -> Option<bool>,
) -> Summary {
    let mut per: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in results {
        let e = per.entry(r.category.as_str()).or_default();
        e.0 += 1;
        e.1 += usize::from(correct(r) == Some(true));
    }
    let mut absent = Vec::new();
    let mut score = |c: &'static str| match per.get(c) {
        Some(&(n, ok)) => Score {
            accuracy: ok as f64 / n as f64,
            count: n,
        },
        None => {
            absent.push(c.to_string());
            Score {
                accuracy: 0.0,
                count: size(c),
            }
        }
    };
    let mut s: BTreeMap<&str, Score> = BTreeMap::new();
    for c in SCORED {
        s.insert(c, score(c));
    }
    let simple = unweighted(&[s["simple_python"], s["simple_java"], s["simple_javascript"]]);
    let non_live = unweighted(&[simple, s["multiple"], s["parallel"], s["parallel_multiple"]]);
    let live = weighted(&[
        s["live_simple"],
        s["live_multiple"],
        s["live_parallel"],
        s["live_parallel_multiple"],
    ]);
    let multi_turn = unweighted(&[
        s["multi_turn_base"],
        s["multi_turn_miss_func"],
        s["multi_turn_miss_param"],
        s["multi_turn_long_context"],
    ]);
    let web = unweighted(&[s["web_search_base"], s["web_search_no_snippet"]]);
    let memory = unweighted(&[s["memory_kv"], s["memory_vector"], s["memory_rec_sum"]]);
    let agentic = unweighted(&[web, memory]);
    let irrelevance = unweighted(&[s["irrelevance"], s["live_irrelevance"]]);
    let relevance = s["live_relevance"];
    let groups = [
        (non_live, 10.0),
        (live, 10.0),
        (irrelevance, 10.0),
        (multi_turn, 30.0),
        (agentic, 40.0),
    ];
    let overall = groups.iter().map(|(g, w)| g.accuracy * w).sum::<f64>() / 100.0;
    let calls: usize = results.iter().map(|r| r.scored.calls.len()).sum();
    let valid: usize = results
        .iter()
        .map(|r| r.scored.calls.iter().filter(|c| c.schema_valid).count())
        .sum();
    let answered = results.len().max(1) as f64;
    Summary {
        mode,
        reader: reader.to_string(),
        overall,
        non_live: non_live.accuracy,
        live: live.accuracy,
        multi_turn: multi_turn.accuracy,
        agentic: agentic.accuracy,
        irrelevance: irrelevance.accuracy,
        relevance: relevance.accuracy,
        absent,
        correct_call_rate: results.iter().filter(|r| correct(r) == Some(true)).count() as f64
            / answered,
        schema_valid_call_rate: (calls > 0).then(|| valid as f64 / calls as f64),
    }
}

/// The summaries as a Markdown table, then the absent categories.
pub fn table(summaries: &[Summary]) -> String {
    let mut out = String::from(
        "| mode | reader | overall | non-live AST | live AST | multi-turn | agentic | irrelevance | relevance | correct call rate | schema-valid call rate |\n\
         |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    for s in summaries {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.mode.name(),
            s.reader,
            pct(s.overall),
            pct(s.non_live),
            pct(s.live),
            pct(s.multi_turn),
            pct(s.agentic),
            pct(s.irrelevance),
            pct(s.relevance),
            pct(s.correct_call_rate),
            s.schema_valid_call_rate.map_or("-".to_string(), pct),
        ));
    }
    if let Some(s) = summaries.first() {
        if !s.absent.is_empty() {
            out.push_str(&format!(
                "\nNot answered, counted 0 in the overall score as bfcl-eval does: {}\n",
                s.absent.join(", ")
            ));
        }
    }
    out
}
