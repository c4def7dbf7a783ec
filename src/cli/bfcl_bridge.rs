//! `structgen bfcl`'s use of the BFCL bridge: starting it when the run needs it, what is not run
//! without it, and the leaderboard's reading of single-turn answers.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::CliError;
use crate::bfcl::bridge::Bridge;
use crate::bfcl::reading::{handler_for, single_turn};
use crate::bfcl::report::Skipped;
use crate::bfcl::{Case, CaseResult};

/// The BFCL categories of the same data that `structgen bfcl` does not run, and why.
const NOT_RUN: [(&str, &str); 2] = [
    (
        "web_search",
        "its backend queries SerpAPI and fetches web pages, which needs the network and an API key",
    ),
    (
        "memory_vector",
        "its backend embeds with a sentence-transformers model from the Hugging Face hub",
    ),
];

/// Options of the bridge to BFCL's Python code.
#[derive(Debug, Clone, Args)]
pub struct BridgeArgs {
    /// A Python with the bfcl-eval wheel importable (scripts/bfcl-venv.sh makes
    /// target/bfcl-venv): runs the multi-turn backends, BFCL's multi-turn checker and the model
    /// family's BFCL decoder (the leaderboard's reading of every answer).
    #[arg(long, default_value = "python3", value_name = "PATH")]
    pub bfcl_python: PathBuf,
    /// The longest one request to the bridge (one step's calls) may take before the bridge is
    /// restarted and the calls answered with an error, in seconds.
    #[arg(long, default_value_t = 60, value_name = "S")]
    pub bridge_timeout: u64,
}

/// The bridge of a run and what it changes.
pub struct RunBridge {
    /// The bridge, when it started.
    pub bridge: Option<Bridge>,
    /// The handler giving the leaderboard's reading (only with a bridge).
    pub handler: Option<&'static str>,
    /// Categories not run, and why.
    pub skipped: Vec<Skipped>,
}

/// Starts the bridge if `cases` has multi-turn or memory cases or `style` has a BFCL handler.
/// Without it, those cases are dropped from `cases` (an error when `explicit`: the user asked for
/// them) and said in `skipped`, and the reading is left out.
pub fn open(
    args: &BridgeArgs,
    style: &str,
    cases: &mut Vec<Case>,
    explicit: bool,
) -> Result<RunBridge, CliError> {
    let multi_turn = cases.iter().any(|c| c.multi_turn.is_some());
    let handler = handler_for(style);
    let mut skipped: Vec<Skipped> = NOT_RUN
        .iter()
        .map(|(c, why)| Skipped {
            category: c.to_string(),
            reason: why.to_string(),
        })
        .collect();
    if !multi_turn && handler.is_none() {
        return Ok(RunBridge {
            bridge: None,
            handler: None,
            skipped,
        });
    }
    let timeout = Duration::from_secs(args.bridge_timeout.max(1));
    match Bridge::start(&args.bfcl_python, timeout) {
        Ok(bridge) => Ok(RunBridge {
            bridge: Some(bridge),
            handler,
            skipped,
        }),
        Err(e) if multi_turn && explicit => Err(CliError::Usage(format!(
            "the multi-turn and memory categories need BFCL's backends: {e}"
        ))),
        Err(e) => {
            let mut dropped: Vec<&'static str> = Vec::new();
            for c in cases.iter().filter(|c| c.multi_turn.is_some()) {
                if !dropped.contains(&c.category.name()) {
                    dropped.push(c.category.name());
                }
            }
            cases.retain(|c| c.multi_turn.is_none());
            for c in &dropped {
                skipped.push(Skipped {
                    category: c.to_string(),
                    reason: format!("no BFCL bridge: {e}"),
                });
            }
            eprintln!(
                "note: {e}\nnote: not run: {}; BFCL's reading of the answers is left out",
                if dropped.is_empty() {
                    "-".to_string()
                } else {
                    dropped.join(", ")
                }
            );
            Ok(RunBridge {
                bridge: None,
                handler: None,
                skipped,
            })
        }
    }
}

impl RunBridge {
    /// Adds the leaderboard's reading to single-turn results `rs` of `case` (multi-turn ones
    /// have theirs from scoring). A bridge failure leaves the reading out and says so.
    pub fn read(&mut self, case: &Case, rs: &mut [CaseResult]) {
        let (Some(bridge), Some(handler)) = (self.bridge.as_mut(), self.handler) else {
            return;
        };
        if case.category.check_kind().is_conversation() {
            return;
        }
        for r in rs {
            match single_turn(bridge, handler, case, r) {
                Ok(reading) => r.bfcl = Some(reading),
                Err(e) => eprintln!("warning: {}: BFCL's reading failed: {e}", case.id),
            }
        }
    }
}
