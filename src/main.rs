use std::process::ExitCode;

use clap::Parser;
use structgen::cli::{self, Cli};

/// mimalloc: allocation-heavy grammar compiles are a quarter faster than with glibc's malloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::run(Cli::parse())
}
