//! `structgen grammar`: parse a grammar, run the passes, build its automaton (so a grammar that
//! cannot match anything or exceeds a limit is reported here too), print it back as EBNF. With
//! `--tools`, the structural tag built from the tool list is printed first (as one JSON line);
//! `--tokenizer` makes special-token texts whole-token terminals, as `trace` and `check` do.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{CliError, GrammarArgs};
use crate::engine::build_automaton;
use crate::grammar::print::print_grammar;
use crate::util::Limits;
use crate::vocab;

/// Arguments of `structgen grammar`.
#[derive(Debug, Args)]
pub struct GrammarCmd {
    #[command(flatten)]
    source: GrammarArgs,
    /// Print the grammar as parsed, without normalizing, inlining or pruning.
    #[arg(long)]
    raw: bool,
    /// Vocabulary whose special tokens structural-tag literals may name.
    #[arg(long, value_name = "PATH")]
    tokenizer: Option<PathBuf>,
}

/// Prints the (normalized) grammar.
pub fn run(cmd: GrammarCmd) -> Result<ExitCode, CliError> {
    let config = cmd.source.resolve()?;
    let limits = Limits::default();
    let vocab = match &cmd.tokenizer {
        Some(path) => Some(vocab::load(path)?.vocab),
        None => None,
    };
    let loaded = config.load(&limits, vocab.as_ref())?;
    let grammar = loaded.grammar;
    let automaton = build_automaton(&grammar, &limits).map_err(|error| CliError::Grammar {
        path: config.path().to_path_buf(),
        error,
    })?;
    let shown = if cmd.raw {
        &grammar
    } else {
        automaton.grammar()
    };
    let mut out = std::io::stdout().lock();
    if let Some(tag) = &loaded.structural_tag {
        writeln!(out, "# structural tag: {tag}").map_err(CliError::Output)?;
    }
    out.write_all(print_grammar(shown).as_bytes())
        .map_err(CliError::Output)?;
    Ok(ExitCode::SUCCESS)
}
