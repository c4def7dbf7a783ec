//! L6 — the command line: clap arguments → one resolved config per subcommand → one function that
//! does the work. Every failure is a [`CliError`] printed as `error: ...` with the file and position
//! it concerns; `run` turns it into a non-zero exit code and never panics on user input.

mod agent;
mod atomic;
mod bench_cmd;
mod bfcl_bridge;
mod bfcl_cmd;
mod check;
mod grammar_cmd;
mod latency_batch;
mod latency_cmd;
mod model_args;
mod run_batch;
mod run_cmd;
mod serve_cmd;
mod source;
mod speed_cmd;
mod tokenizer_cmd;
mod trace;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::grammar::{EbnfError, GrammarError};
use crate::vocab::VocabError;

pub use source::GrammarArgs;

/// structgen: structured generation for LLM tool calling.
#[derive(Debug, Parser)]
#[command(name = "structgen", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a grammar in normalized EBNF, or the error that stops it.
    Grammar(grammar_cmd::GrammarCmd),
    /// Step through a text token by token under a grammar, printing one JSON line per step.
    Trace(trace::TraceCmd),
    /// Check many inputs (JSON Lines) against a grammar, token by token with a mask at every step.
    Check(check::CheckCmd),
    /// Generate with a model (GGUF or safetensors, CPU or CUDA) under the tool-calling grammar,
    /// with jump-forward and per-step timing.
    Run(Box<run_cmd::RunCmd>),
    /// Compile and mask latency on tool-calling workloads or JSONSchemaBench, optionally side by
    /// side with llguidance in the same process.
    Bench(Box<bench_cmd::BenchCmd>),
    /// BFCL-style accuracy of a local model on tool calling, constrained and free, scored by an
    /// AST checker with BFCL's semantics.
    Bfcl(Box<bfcl_cmd::BfclCmd>),
    /// End-to-end latency of one model on a set of tool-calling requests: free, constrained and
    /// constrained + jump-forward, with the grammar's wait on the critical path.
    Latency(Box<latency_cmd::LatencyCmd>),
    /// An OpenAI-compatible HTTP server (chat completions, completions, streaming) on the batched
    /// runtime; every tool call is generated under its request's grammar.
    Serve(Box<serve_cmd::ServeCmd>),
    /// The model runtime's prompt and generation speed, measured as llama.cpp's llama-bench
    /// measures it (no tokenizer, no grammar).
    Speed(Box<speed_cmd::SpeedCmd>),
    /// Write a model file's tokenizer and chat template as tokenizer.json and
    /// tokenizer_config.json (e.g. a GGUF file's, for a safetensors checkpoint).
    Tokenizer(tokenizer_cmd::TokenizerCmd),
}

/// Everything that can stop a subcommand.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is not UTF-8 text.
    #[error("{path}: not valid UTF-8 at byte {offset}")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// First invalid byte.
        offset: usize,
    },
    /// An EBNF syntax error.
    #[error("{path}:{error}")]
    Ebnf {
        /// The grammar file.
        path: PathBuf,
        /// The error with its line:col.
        error: EbnfError,
    },
    /// A Lark grammar that cannot be read or lowered (the error names line and column).
    #[error("{path}: {error}")]
    Lark {
        /// The grammar file.
        path: PathBuf,
        /// What is wrong and where.
        error: crate::frontend::lark::LarkError,
    },
    /// A grammar that parses but cannot be compiled.
    #[error("{path}: {error}")]
    Grammar {
        /// The grammar file.
        path: PathBuf,
        /// What is wrong.
        error: GrammarError,
    },
    /// A JSON file that does not parse.
    #[error("{path}:{line}:{col}: invalid JSON: {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// The parser's message.
        message: String,
    },
    /// A JSON Schema that cannot be converted.
    #[error("{path}: {error}")]
    Schema {
        /// The schema file.
        path: PathBuf,
        /// What is wrong, with its JSON path.
        error: crate::frontend::json_schema::SchemaError,
    },
    /// A structural tag that cannot be converted.
    #[error("{path}: {error}")]
    Tag {
        /// The structural tag (or tool list) file.
        path: PathBuf,
        /// What is wrong, with its JSON path.
        error: crate::frontend::structural_tag::TagError,
    },
    /// A tool list that cannot be turned into a structural tag.
    #[error("{path}: {error}")]
    Tools {
        /// The tool list file.
        path: PathBuf,
        /// What is wrong, with its JSON path.
        error: crate::frontend::tools::ToolsError,
    },
    /// A regex that cannot be converted.
    #[error(transparent)]
    Regex(#[from] crate::grammar::regex::RegexError),
    /// The mask and `accept_token` disagreed (an engine bug).
    #[error("engine self-check failed on input {index}: {error}")]
    Disagreement {
        /// Which input.
        index: usize,
        /// The disagreement.
        error: crate::engine::check::Disagreement,
    },
    /// A tokenizer that cannot be loaded.
    #[error(transparent)]
    Vocab(#[from] VocabError),
    /// A bad argument value.
    #[error("{0}")]
    Usage(String),
    /// The server could not start or failed.
    #[error(transparent)]
    Serve(#[from] crate::serve::ServeError),
    /// A model that cannot be resolved or loaded.
    #[error(transparent)]
    Model(#[from] crate::runtime::ModelError),
    /// A request that cannot be prepared (template, tokenizer, tool grammar).
    #[error(transparent)]
    Request(#[from] crate::runtime::request::RequestError),
    /// BFCL data that cannot be read.
    #[error(transparent)]
    Bfcl(#[from] crate::bfcl::data::DataError),
    /// Generation stopped on an error.
    #[error("generation failed: {0}")]
    Generate(#[from] crate::runtime::GenerateError),
    /// Writing the output failed (other than a closed pipe).
    #[error("writing output: {0}")]
    Output(std::io::Error),
}

/// Runs one command; the exit code is 0 on success, 1 when a traced input is refused, 2 on errors.
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Grammar(cmd) => grammar_cmd::run(cmd),
        Command::Trace(cmd) => trace::run(cmd),
        Command::Check(cmd) => check::run(cmd),
        Command::Run(cmd) => run_cmd::run(*cmd),
        Command::Bench(cmd) => bench_cmd::run(*cmd),
        Command::Bfcl(cmd) => bfcl_cmd::run(*cmd),
        Command::Latency(cmd) => latency_cmd::run(*cmd),
        Command::Speed(cmd) => speed_cmd::run(*cmd),
        Command::Serve(cmd) => serve_cmd::run(*cmd),
        Command::Tokenizer(cmd) => tokenizer_cmd::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Reads a JSON file; a syntax error names the file and line:col.
pub(crate) fn read_json(path: &std::path::Path) -> Result<serde_json::Value, CliError> {
    let text = read_text(path)?;
    serde_json::from_str(&text).map_err(|e| CliError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        col: e.column(),
        message: e.to_string(),
    })
}

/// Reads a UTF-8 text file.
pub(crate) fn read_text(path: &std::path::Path) -> Result<String, CliError> {
    let bytes = std::fs::read(path).map_err(|source| CliError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| CliError::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}
