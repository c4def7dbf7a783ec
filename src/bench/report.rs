//! Text tables of benchmark summaries: one block per workload, one row per engine, and the ratios
//! against llguidance when it ran in the same process.

use super::Summary;

/// One engine's figures on one workload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineRow {
    /// Engine name.
    pub engine: String,
    /// Its summary.
    pub summary: Summary,
    /// Cache counters, if the engine has any.
    pub cache: Option<String>,
    /// The first few failures, `id: reason`.
    pub failures: Vec<String>,
    /// Every refused sequence, `id#index` (a JSON Schema instance, a workload's output).
    pub refused: Vec<String>,
}

/// Suffix of the rows restricted to what every engine of the block accepted.
pub const COMMON: &str = " ∩";

/// The column header of [`row`].
pub const HEADER: &str = "engine        ok/req   masks  compile ms: first     p50     p99 | mask µs: mean     p50      p99      max | grammar ms/req";

/// One table row.
pub fn row(r: &EngineRow) -> String {
    let s = &r.summary;
    format!(
        "{:<12} {:>4}/{:<4} {:>6}  {:>17.2} {:>7.3} {:>7.2} | {:>13.2} {:>7.2} {:>8.1} {:>8.0} | {:>14.2}",
        r.engine,
        s.ok,
        s.requests,
        s.tokens,
        s.compile_first_ms,
        s.compile_p50_ms,
        s.compile_p99_ms,
        s.mask_mean_us,
        s.mask_p50_us,
        s.mask_p99_us,
        s.mask_max_us,
        s.grammar_ms_per_request
    )
}

/// `structgen / llguidance` ratios of the figures the targets name, when both rows exist: on the
/// jobs and sequences both accepted when those rows exist, else on everything.
pub fn ratios(rows: &[EngineRow]) -> Option<String> {
    let find = |name: &str| {
        rows.iter()
            .find(|r| r.engine == format!("{name}{COMMON}"))
            .or_else(|| rows.iter().find(|r| r.engine == name))
    };
    let ours = find("structgen")?;
    let theirs = find("llguidance")?;
    let (a, b) = (&ours.summary, &theirs.summary);
    let ratio = |ours: f64, theirs: f64| {
        if ours <= 0.0 || theirs <= 0.0 {
            return "n/a".to_string();
        }
        let r = ours / theirs;
        if r <= 1.0 {
            format!("{r:.4}× (1/{:.1})", 1.0 / r)
        } else {
            format!("{r:.3}× (slower)")
        }
    };
    let on = if ours.engine.ends_with(COMMON) {
        " (on what both accepted)"
    } else {
        ""
    };
    Some(format!(
        "structgen / llguidance{on}: compile p50 {}, mask mean {}, mask p99 {}",
        ratio(a.compile_p50_ms, b.compile_p50_ms),
        ratio(a.mask_mean_us, b.mask_mean_us),
        ratio(a.mask_p99_us, b.mask_p99_us),
    ))
}

/// The block of one workload.
pub fn render(title: &str, rows: &[EngineRow]) -> String {
    let mut out = format!("{title}\n{HEADER}\n");
    for r in rows {
        out.push_str(&row(r));
        out.push('\n');
    }
    if let Some(line) = ratios(rows) {
        out.push_str(&line);
        out.push('\n');
    }
    for r in rows {
        if let Some(c) = &r.cache {
            out.push_str(&format!("{}: {c}\n", r.engine));
        }
        for f in &r.failures {
            out.push_str(&format!("{} failed: {f}\n", r.engine));
        }
        if !r.refused.is_empty() {
            const SHOWN: usize = 8;
            let more = r.refused.len().saturating_sub(SHOWN);
            out.push_str(&format!(
                "{} refused {} of {} sequences: {}{}\n",
                r.engine,
                r.refused.len(),
                r.summary.sequences,
                r.refused[..r.refused.len().min(SHOWN)].join(", "),
                if more > 0 {
                    format!(" and {more} more (all in --json)")
                } else {
                    String::new()
                }
            ));
        }
    }
    out
}
