//! `structgen tokenizer`: a model file's tokenizer and chat template → Hugging Face files
//! (`tokenizer.json`, `tokenizer_config.json`) in a folder, so that a safetensors checkpoint (a
//! random-weight one for latency runs, say) can use the tokenizer a GGUF file carries. The
//! tokenizer written is the one structgen itself encodes with, so the files load back to the same
//! token ids (checked before anything is written).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use super::atomic::AtomicFile;
use super::CliError;
use crate::runtime::model::gguf_chat;
use crate::vocab;

/// Arguments of `structgen tokenizer`.
#[derive(Debug, Args)]
pub struct TokenizerCmd {
    /// The model file: a .gguf file (tokenizer, chat template and special tokens from its
    /// metadata) or a tokenizer.json.
    #[arg(long, value_name = "FILE")]
    model: PathBuf,
    /// The folder to write tokenizer.json and tokenizer_config.json into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Runs `structgen tokenizer`.
pub fn run(cmd: TokenizerCmd) -> Result<ExitCode, CliError> {
    let loaded = vocab::load(&cmd.model)?;
    let (template, bos, eos) = {
        let mut file = std::fs::File::open(&cmd.model).map_err(|source| CliError::Io {
            path: cmd.model.clone(),
            source,
        })?;
        match crate::runtime::model::read_gguf(&mut file) {
            Ok(content) => gguf_chat(&content, &loaded),
            Err(_) => (None, String::new(), String::new()),
        }
    };
    let text = loaded.tokenizer.to_string(false).map_err(|e| {
        CliError::Usage(format!(
            "{}: cannot serialize the tokenizer: {e}",
            cmd.model.display()
        ))
    })?;
    let back = text
        .parse::<tokenizers::Tokenizer>()
        .map_err(|e| CliError::Usage(format!("the written tokenizer does not load back: {e}")))?;
    let probe =
        "Hello, world! {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}\n\t 123";
    let ids = |t: &tokenizers::Tokenizer| t.encode(probe, false).map(|e| e.get_ids().to_vec());
    if ids(&back).ok() != ids(&loaded.tokenizer).ok() {
        return Err(CliError::Usage(
            "the written tokenizer encodes differently from the loaded one".into(),
        ));
    }
    std::fs::create_dir_all(&cmd.out).map_err(|source| CliError::Io {
        path: cmd.out.clone(),
        source,
    })?;
    let mut config = json!({"bos_token": bos, "eos_token": eos});
    if let Some(t) = &template {
        config["chat_template"] = json!(t);
    }
    let write = |name: &str, body: &str| {
        let mut f = AtomicFile::create(&cmd.out.join(name))?;
        f.write_line(body)?;
        f.commit()
    };
    write("tokenizer.json", &text)?;
    write(
        "tokenizer_config.json",
        &serde_json::to_string_pretty(&config).unwrap_or_default(),
    )?;
    eprintln!(
        "wrote {}/tokenizer.json ({} tokens) and tokenizer_config.json ({})",
        cmd.out.display(),
        loaded.vocab.size(),
        if template.is_some() {
            "with the chat template"
        } else {
            "no chat template in the model file"
        }
    );
    Ok(ExitCode::SUCCESS)
}
