//! Case results → one row per category and mode, a Markdown table, and the results file.
//!
//! Accuracy counts every case, those that could not run as wrong. The schema-valid rate is over
//! calls (every call read from the answers, calls of names not offered counted invalid); parse
//! failures count calls that started but could not be read. Mean tokens and latency are over
//! cases that ran; mask overhead is grammar time over decode time, summed over those cases; call
//! formats count the calls read in each format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::data::Category;
use super::leaderboard::Summary;
use super::run::{CaseResult, Mode};

/// The figures of one category (or `all`) in one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Category name, or `all`.
    pub category: String,
    /// The mode.
    pub mode: Mode,
    /// Cases.
    pub cases: usize,
    /// Cases the checker accepts.
    pub correct: usize,
    /// Cases that could not run.
    pub errors: usize,
    /// Calls read from the answers.
    pub calls: usize,
    /// Calls whose arguments validate against their tool's JSON Schema.
    pub schema_valid_calls: usize,
    /// Calls that started but could not be read.
    pub parse_failures: usize,
    /// Mean generated tokens per case that ran.
    pub mean_tokens: f64,
    /// Mean latency per case that ran (ms).
    pub mean_latency_ms: f64,
    /// Grammar time as % of decode time.
    pub mask_overhead_pct: f64,
    /// Calls read per call format (`canonical`, `markdown`, `json`, `python_tag`).
    #[serde(default)]
    pub formats: BTreeMap<String, usize>,
    /// Cases correct under the BFCL handler's reading (`None` unless every case has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfcl_correct: Option<usize>,
}

impl Row {
    /// Correct cases in %.
    pub fn accuracy_pct(&self) -> f64 {
        pct(self.correct, self.cases)
    }

    /// Schema-valid calls in % (`None` without calls).
    pub fn schema_valid_pct(&self) -> Option<f64> {
        (self.calls > 0).then(|| pct(self.schema_valid_calls, self.calls))
    }
}

fn pct(n: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

fn row(category: &str, mode: Mode, results: &[&CaseResult]) -> Row {
    let ran: Vec<&&CaseResult> = results.iter().filter(|r| r.error.is_none()).collect();
    let mean = |f: fn(&CaseResult) -> f64| {
        if ran.is_empty() {
            0.0
        } else {
            ran.iter().map(|r| f(r)).sum::<f64>() / ran.len() as f64
        }
    };
    let mut formats = BTreeMap::new();
    for c in results.iter().flat_map(|r| &r.scored.calls) {
        *formats.entry(c.format.clone()).or_insert(0) += 1;
    }
    let grammar: f64 = ran.iter().map(|r| r.grammar_ms).sum();
    let decode: f64 = ran.iter().map(|r| r.decode_ms).sum();
    Row {
        category: category.to_string(),
        mode,
        cases: results.len(),
        correct: results.iter().filter(|r| r.scored.correct).count(),
        errors: results.len() - ran.len(),
        calls: results.iter().map(|r| r.scored.calls.len()).sum(),
        schema_valid_calls: results
            .iter()
            .map(|r| r.scored.calls.iter().filter(|c| c.schema_valid).count())
            .sum(),
        parse_failures: results.iter().map(|r| r.scored.parse_errors.len()).sum(),
        mean_tokens: mean(|r| r.tokens as f64),
        mean_latency_ms: mean(|r| r.latency_ms),
        mask_overhead_pct: if decode > 0.0 {
            grammar / decode * 100.0
        } else {
            0.0
        },
        formats,
        bfcl_correct: results
            .iter()
            .map(|r| r.bfcl.as_ref().map(|b| usize::from(b.correct)))
            .sum(),
    }
}

/// One row per category present and mode, in BFCL's category order, then one `all` row per mode.
pub fn rows(results: &[CaseResult]) -> Vec<Row> {
    let mut modes: Vec<Mode> = Vec::new();
    for r in results {
        if !modes.contains(&r.mode) {
            modes.push(r.mode);
        }
    }
    let mut out = Vec::new();
    for c in Category::ALL {
        for &m in &modes {
            let of: Vec<&CaseResult> = results
                .iter()
                .filter(|r| r.category == c.name() && r.mode == m)
                .collect();
            if !of.is_empty() {
                out.push(row(c.name(), m, &of));
            }
        }
    }
    for &m in &modes {
        let of: Vec<&CaseResult> = results.iter().filter(|r| r.mode == m).collect();
        out.push(row("all", m, &of));
    }
    out
}

/// The rows as a Markdown table.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| category | mode | cases | accuracy | BFCL reading | schema-valid calls | parse failures | errors | mean tokens | mean latency ms | mask overhead | call formats |\n\
         |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n",
    );
    for r in rows {
        let valid = match r.schema_valid_pct() {
            Some(p) => format!("{p:.1}% ({}/{})", r.schema_valid_calls, r.calls),
            None => "- (0 calls)".to_string(),
        };
        let overhead = match r.mode {
            Mode::Constrained => format!("{:.2}%", r.mask_overhead_pct),
            _ => "-".to_string(),
        };
        let formats = if r.formats.is_empty() {
            "-".to_string()
        } else {
            let parts: Vec<String> = r.formats.iter().map(|(f, n)| format!("{f} {n}")).collect();
            parts.join(", ")
        };
        let bfcl = r.bfcl_correct.map_or("-".to_string(), |n| {
            format!("{:.1}% ({n})", pct(n, r.cases))
        });
        out.push_str(&format!(
            "| {} | {} | {} | {:.1}% ({}) | {bfcl} | {valid} | {} | {} | {:.1} | {:.0} | {overhead} | {formats} |\n",
            r.category,
            r.mode.name(),
            r.cases,
            r.accuracy_pct(),
            r.correct,
            r.parse_failures,
            r.errors,
            r.mean_tokens,
            r.mean_latency_ms,
        ));
    }
    out
}

fn canonical() -> String {
    "canonical".to_string()
}

fn yes() -> bool {
    true
}

/// Which cases a run answers, so that a resumed run can check it continues the same one.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Selection {
    /// `--categories` as given (empty: all).
    pub categories: Vec<String>,
    /// `--limit`.
    pub limit: Option<usize>,
    /// `--shuffle`.
    pub shuffle: bool,
    /// `--mode`.
    pub mode: String,
    /// `--ids` as given (empty: every case of the categories).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
}

/// A results file: the run's settings, the summary rows and every case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// The model, as loaded.
    pub model: String,
    /// The call style.
    pub style: String,
    /// The data folder.
    pub data: String,
    /// Most tokens per answer.
    pub max_tokens: usize,
    /// tool_choice of constrained answers (`auto` or `required`).
    #[serde(default)]
    pub tool_choice: String,
    /// Sampling temperature (0: greedy).
    #[serde(default)]
    pub temperature: f32,
    /// Sampling seed.
    pub seed: u64,
    /// The call formats recognised (`all` or `canonical`; files from before formats: `canonical`).
    #[serde(default = "canonical")]
    pub call_formats: String,
    /// `--strict-failures`: failed cases wrong everywhere, no shrinking of `max_tokens` (files
    /// from before it: true, the only handling then).
    #[serde(default = "yes")]
    pub strict_failures: bool,
    /// The case selection: categories (empty: all), `--limit`, `--shuffle`, and the mode.
    #[serde(default)]
    pub selection: Selection,
    /// Wall time of the whole run (s).
    pub total_s: f64,
    /// The bfcl-eval version of the bridge (multi-turn backends, BFCL's reading), if it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfcl_eval: Option<String>,
    /// The BFCL handler whose decoder gave the leaderboard's reading, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfcl_handler: Option<String>,
    /// Categories not run, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// The summary.
    pub summary: Vec<Row>,
    /// The leaderboard's group and overall scores, per mode and reader.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaderboard: Vec<Summary>,
    /// Every case in every mode.
    pub results: Vec<CaseResult>,
    /// The memory categories' prerequisite conversations (not scored; their snapshots are
    /// what a resumed run restores).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prereqs: Vec<CaseResult>,
}

/// A category a run did not answer, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// BFCL's category name.
    pub category: String,
    /// Why it was not run.
    pub reason: String,
}
