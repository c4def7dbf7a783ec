//! `structgen grammar`: parse a grammar, run the passes, print it back as EBNF.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use super::{CliError, GrammarArgs};
use crate::grammar::{passes, print::print_grammar};
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
    let grammar = cmd.source.load(&Limits::default())?;
    let grammar = if cmd.raw {
        grammar
    } else {
        passes::optimize(grammar)
    };
    std::io::stdout()
        .lock()
        .write_all(print_grammar(&grammar).as_bytes())
        .map_err(CliError::Output)?;
    Ok(ExitCode::SUCCESS)
}
