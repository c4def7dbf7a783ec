use std::process::ExitCode;

use clap::Parser;
use structgen::cli::{self, Cli};

fn main() -> ExitCode {
    cli::run(Cli::parse())
}
