//! `structgen grammar`: parse a grammar, run the passes, build its automaton (so a grammar that
//! cannot match anything or exceeds a limit is reported here too), print it back as EBNF.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use super::{CliError, GrammarArgs};
use crate::engine::build_automaton;
use crate::grammar::print::print_grammar;
use crate::util::Limits;

/// Arguments of `structgen grammar`.
#[derive(Debug, Args)]
pub struct GrammarCmd {
    #[command(flatten)]
    source: GrammarArgs,
    /// Print the grammar as parsed, without normalizing, inlining or pruning.
    #[arg(long)]
    raw: bool,
}

/// Prints the (normalized) grammar.
pub fn run(cmd: GrammarCmd) -> Result<ExitCode, CliError> {
    let limits = Limits::default();
    let grammar = cmd.source.load(&limits)?.grammar;
    let automaton = build_automaton(&grammar, &limits).map_err(|error| CliError::Grammar {
        path: cmd.source.path().to_path_buf(),
        error,
    })?;
    let shown = if cmd.raw {
        &grammar
    } else {
        &automaton.grammar
    };
    std::io::stdout()
        .lock()
        .write_all(print_grammar(shown).as_bytes())
        .map_err(CliError::Output)?;
    Ok(ExitCode::SUCCESS)
}
