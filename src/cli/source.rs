//! Where a grammar comes from on the command line, shared by every subcommand that takes one.

use std::path::PathBuf;

use clap::Args;

use super::{read_text, CliError};
use crate::grammar::{ebnf, Grammar};
use crate::util::Limits;

/// Grammar source arguments.
#[derive(Debug, Clone, Args)]
pub struct GrammarArgs {
    /// EBNF grammar file (xgrammar dialect).
    #[arg(long, value_name = "FILE")]
    pub ebnf: PathBuf,
    /// Name of the root rule.
    #[arg(long, default_value = "root", value_name = "NAME")]
    pub root: String,
}

impl GrammarArgs {
    /// Reads and parses the grammar.
    pub fn load(&self, limits: &Limits) -> Result<Grammar, CliError> {
        let src = read_text(&self.ebnf)?;
        ebnf::parse(&src, &self.root, limits).map_err(|error| CliError::Ebnf {
            path: self.ebnf.clone(),
            error,
        })
    }

    /// The file the grammar came from, for error messages.
    pub fn path(&self) -> &std::path::Path {
        &self.ebnf
    }
}
