//! `structgen serve`: the OpenAI-compatible server ([`crate::serve`]) on one model.

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::model_args::ModelArgs;
use super::source::call_formats_arg;
use super::CliError;
use crate::frontend::tools::FormatSet;
use crate::serve::{serve, SchemaPolicy, ServeConfig, ServedModel};

/// What to do with a schema keyword the grammar cannot enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Policy {
    /// Answer, naming the keyword and its JSON path in `structgen.unenforced` and the
    /// `x-structgen-unenforced` header.
    Warn,
    /// Refuse the request with HTTP 400 naming the keyword and its JSON path.
    Refuse,
}

/// Arguments of `structgen serve`.
#[derive(Debug, Args)]
pub struct ServeCmd {
    #[command(flatten)]
    model: ModelArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0: any free port, printed at start).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Requests decoded at once (sharing forward passes); more wait in the queue.
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    parallel: u16,
    /// Rows of one forward pass: every decoding sequence's tokens, then prompt chunks.
    #[arg(long, default_value_t = 512, value_name = "N", value_parser = clap::value_parser!(u32).range(4..))]
    step_tokens: u32,
    /// Requests admitted at once, waiting or decoding; further ones get HTTP 503.
    #[arg(long, default_value_t = 64, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_queue: u32,
    /// Largest request body in bytes; larger ones get HTTP 413.
    #[arg(long, default_value_t = 8 << 20, value_name = "BYTES")]
    max_body_bytes: usize,
    /// Largest `max_tokens` a request may ask for (and the default, within the context).
    #[arg(long, default_value_t = 4096, value_name = "N")]
    max_tokens_limit: usize,
    /// Require `Authorization: Bearer KEY` on /v1 endpoints (also from STRUCTGEN_API_KEY).
    #[arg(
        long,
        value_name = "KEY",
        env = "STRUCTGEN_API_KEY",
        hide_env_values = true
    )]
    api_key: Option<String>,
    /// Schema keywords the grammar cannot enforce exactly: warn (answer and name them) or refuse
    /// (HTTP 400).
    #[arg(long, value_enum, default_value = "warn")]
    schema_policy: Policy,
    /// The name clients send as `model` (default: --model as given, or the manifest's default).
    #[arg(long, value_name = "NAME")]
    served_model_name: Option<String>,
    /// Call formats allowed and read: `all` (the style's own and those its models also write) or
    /// `canonical`.
    #[arg(long, value_name = "all|canonical", default_value = "all", value_parser = call_formats_arg)]
    call_formats: FormatSet,
    /// Sample every token, even text the grammar forces (for comparison).
    #[arg(long)]
    no_jump_forward: bool,
    /// Compute every mask when its step needs it, not ahead while the model runs.
    #[arg(long)]
    no_warm_ahead: bool,
}

/// Runs `structgen serve`.
pub fn run(cmd: ServeCmd) -> Result<ExitCode, CliError> {
    let loaded = cmd.model.load()?;
    let cfg = ServeConfig {
        host: cmd.host,
        port: cmd.port,
        parallel: cmd.parallel as usize,
        step_tokens: cmd.step_tokens as usize,
        max_queue: cmd.max_queue as usize,
        max_body_bytes: cmd.max_body_bytes,
        max_tokens_limit: cmd.max_tokens_limit.max(1),
        api_key: cmd.api_key.filter(|k| !k.is_empty()),
        policy: match cmd.schema_policy {
            Policy::Warn => SchemaPolicy::Warn,
            Policy::Refuse => SchemaPolicy::Refuse,
        },
        jump_forward: !cmd.no_jump_forward,
        warm_ahead: !cmd.no_warm_ahead,
    };
    let served = ServedModel {
        name: cmd.served_model_name.unwrap_or(loaded.name),
        model: loaded.model,
        template: loaded.template,
        style: loaded.style,
        stop: loaded.stop,
        formats: cmd.call_formats,
    };
    serve(served, cfg)?;
    Ok(ExitCode::SUCCESS)
}
