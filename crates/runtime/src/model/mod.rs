//! Models: resolved weight files → a [`Model`] (decoder, tokenizer, chat template, special
//! tokens) on a device.
//!
//! GGUF files hold everything: weights (kept quantized), hyper-parameters, the tokenizer and the
//! chat template; a `tokenizer.json` / `tokenizer_config.json` beside the file overrides them.
//! Safetensors checkpoints come with `config.json`, `tokenizer.json` and usually
//! `tokenizer_config.json`. The forward pass and its KV cache are ours ([`decoder`]) so that the
//! cache can be truncated for rollback.
//!
//! Weight dtype ([`WeightDtype`]): `auto` keeps a GGUF file's quantized weights (f32
//! activations) and gives a safetensors checkpoint its own dtype (`torch_dtype`) on a GPU and f32
//! on the CPU; `bf16`, `f16` and `f32` dequantize or convert every weight to that dtype, and the
//! activations and KV cache follow it.

mod backend;
pub mod config;
mod cpu;
pub mod decoder;
mod slots;
mod weights;

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file;
use candle_core::{DType, Device};
use serde_json::Value;

use structgen_engine::vocab::{self, LoadedVocab};

pub use backend::{reusable_prefix, set_slot_cache_on_cpu, Decoder, Feed};

/// The files of one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelFiles {
    /// One GGUF file, with optional tokenizer files beside it.
    Gguf {
        /// The `.gguf` file.
        model: PathBuf,
        /// A `tokenizer.json` to use instead of the GGUF's own tokenizer.
        tokenizer: Option<PathBuf>,
        /// A `tokenizer_config.json` (chat template, special tokens).
        tokenizer_config: Option<PathBuf>,
    },
    /// A Transformers checkpoint.
    Safetensors {
        /// `config.json`.
        config: PathBuf,
        /// The weight shards.
        weights: Vec<PathBuf>,
        /// `tokenizer.json`.
        tokenizer: PathBuf,
        /// `tokenizer_config.json`, when present.
        tokenizer_config: Option<PathBuf>,
    },
}

/// How to hold a model's weights on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightDtype {
    /// GGUF: quantized as in the file; safetensors: the checkpoint's dtype on a GPU, f32 on CPU.
    #[default]
    Auto,
    /// bfloat16.
    Bf16,
    /// float16.
    F16,
    /// float32.
    F32,
}

impl std::str::FromStr for WeightDtype {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(WeightDtype::Auto),
            "bf16" => Ok(WeightDtype::Bf16),
            "f16" => Ok(WeightDtype::F16),
            "f32" => Ok(WeightDtype::F32),
            _ => Err(format!("{s:?} is not a dtype (auto, bf16, f16, f32)")),
        }
    }
}

impl WeightDtype {
    /// The dtype asked for, `None` for `auto`.
    pub fn explicit(self) -> Option<DType> {
        match self {
            WeightDtype::Auto => None,
            WeightDtype::Bf16 => Some(DType::BF16),
            WeightDtype::F16 => Some(DType::F16),
            WeightDtype::F32 => Some(DType::F32),
        }
    }
}

/// The dtype a safetensors checkpoint is loaded in: the one asked for, else on a GPU the
/// checkpoint's own (`torch_dtype`, or `dtype` as Transformers 5 writes it), else f32.
fn checkpoint_dtype(config: &Value, want: WeightDtype, device: &Device) -> DType {
    if let Some(dt) = want.explicit() {
        return dt;
    }
    if device.is_cpu() {
        return DType::F32;
    }
    let named = config["torch_dtype"].as_str().or(config["dtype"].as_str());
    match named {
        Some("bfloat16") => DType::BF16,
        Some("float16") => DType::F16,
        _ => DType::F32,
    }
}

fn dtype_name(dt: DType) -> &'static str {
    match dt {
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        _ => "f32",
    }
}

/// A model that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A JSON file (`config.json`, a shard index, `tokenizer_config.json`) that does not parse.
    #[error("{path}:{line}:{col}: not valid JSON: {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        col: usize,
        /// What the parser found.
        message: String,
    },
    /// A file that is not what it should be: an unreadable GGUF header, a truncated safetensors
    /// shard, a shard index without its `weight_map`.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A hyper-parameter that is missing, malformed or not supported.
    #[error("{path}: {error}")]
    Config {
        /// The GGUF file or `config.json`.
        path: PathBuf,
        /// The key and what is wrong with it.
        error: config::ConfigError,
    },
    /// A tensor that is missing, has the wrong shape or cannot be read.
    #[error("{files}: tensor `{tensor}` {message}")]
    Tensor {
        /// The weight file(s).
        files: String,
        /// The tensor's name in them.
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// The tensor library failed while preparing the weights (memory, device support).
    #[error("{files}: {message}")]
    Backend {
        /// The weight file(s).
        files: String,
        /// The library's message and what was being done.
        message: String,
    },
    /// The tokenizer has ids the model's embedding has no row for.
    #[error("the tokenizer has {tokenizer} tokens but the model's embedding only {embedding}")]
    VocabMismatch {
        /// Tokenizer size.
        tokenizer: usize,
        /// Embedding rows.
        embedding: usize,
    },
    /// The tokenizer could not be loaded.
    #[error(transparent)]
    Vocab(#[from] vocab::VocabError),
    /// A model name could not be resolved or fetched.
    #[error("{0}")]
    Resolve(String),
}

/// A model ready to generate.
pub struct Model {
    /// The network and its KV cache.
    pub decoder: Decoder,
    /// Vocabulary and tokenizer.
    pub vocab: LoadedVocab,
    /// The chat template and where it came from.
    pub chat_template: Option<(String, String)>,
    /// Beginning-of-sequence token text.
    pub bos: String,
    /// End-of-sequence token text.
    pub eos: String,
    /// Logit row length (the embedding's vocabulary, may exceed the tokenizer's).
    pub logits_len: usize,
    /// One line describing the model.
    pub description: String,
}

/// A JSON file; errors name the file and the line and column.
pub(crate) fn read_json(path: &Path) -> Result<Value, ModelError> {
    let text = std::fs::read_to_string(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ModelError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        col: e.column(),
        message: e.to_string(),
    })
}

/// A special-token field of `tokenizer_config.json`: a string or `{"content": ...}`.
fn token_text(v: &Value) -> Option<String> {
    v.as_str()
        .or_else(|| v["content"].as_str())
        .map(str::to_string)
}

/// The chat template in `tokenizer_config.json`: a string, or a list of named templates
/// (`tool_use` preferred, then `default`).
fn config_template(cfg: &Value) -> Option<String> {
    match &cfg["chat_template"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(list) => ["tool_use", "default"]
            .iter()
            .find_map(|want| {
                list.iter()
                    .find(|t| t["name"] == *want)
                    .and_then(|t| t["template"].as_str())
            })
            .or_else(|| list.first().and_then(|t| t["template"].as_str()))
            .map(str::to_string),
        _ => None,
    }
}

impl Model {
    /// Loads `files` onto `device`, the weights held as `dtype` says.
    pub fn load(
        files: &ModelFiles,
        device: &Device,
        dtype: WeightDtype,
    ) -> Result<Model, ModelError> {
        match files {
            ModelFiles::Gguf {
                model,
                tokenizer,
                tokenizer_config,
            } => load_gguf(
                model,
                tokenizer.as_deref(),
                tokenizer_config.as_deref(),
                device,
                dtype,
            ),
            ModelFiles::Safetensors {
                config,
                weights,
                tokenizer,
                tokenizer_config,
            } => load_safetensors(
                config,
                weights,
                tokenizer,
                tokenizer_config.as_deref(),
                device,
                dtype,
            ),
        }
    }
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> ModelError {
    ModelError::File {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// Reads the header, metadata and tensor table of GGUF data with candle's reader. A reader panic
/// on corrupt data (candle 0.11.1 divides by `general.alignment` unchecked) becomes an error
/// instead of taking the program down.
pub fn read_gguf<R: std::io::Read + std::io::Seek>(
    reader: &mut R,
) -> Result<gguf_file::Content, String> {
    let corrupt = "not a readable GGUF file (truncated or corrupt?)";
    match structgen_engine::util::guard::catch_quiet(|| gguf_file::Content::read(reader)) {
        Ok(Ok(content)) => Ok(content),
        Ok(Err(e)) => Err(format!("{corrupt}: {e}")),
        Err(panic) => Err(format!("{corrupt}: {panic}")),
    }
}

/// Opens a GGUF file and builds its decoder (no tokenizer needed); also returns the header.
/// `kernels`: on the CPU with f32 activations, run it on our kernels with that many threads
/// (when its weight formats allow); `None`: on candle.
pub fn gguf_decoder(
    path: &Path,
    device: &Device,
    dtype: WeightDtype,
    kernels: Option<usize>,
) -> Result<(Decoder, gguf_file::Content, String), ModelError> {
    let mut file = std::fs::File::open(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let content = read_gguf(&mut file).map_err(|e| file_error(path, e))?;
    let cfg = config::from_gguf(&content.metadata).map_err(|error| ModelError::Config {
        path: path.to_path_buf(),
        error,
    })?;
    let dense = dtype.explicit();
    let description = format!(
        "{} ({}, GGUF, {} layers, hidden {}, {} heads / {} KV, {})",
        path.display(),
        cfg.arch.name(),
        cfg.layers,
        cfg.hidden,
        cfg.heads,
        cfg.kv_heads,
        match dense {
            Some(dt) => format!("dequantized to {}", dtype_name(dt)),
            None => "quantized weights, f32 activations".to_string(),
        }
    );
    let decoder = {
        let mut src = weights::Source::Gguf {
            content: &content,
            file: &mut file,
            path,
            dense,
        };
        weights::build(cfg, &mut src, device)?
    };
    let (decoder, runner) = match kernels {
        Some(threads) => {
            Decoder::cpu_or_candle(decoder, threads).map_err(|e| ModelError::Backend {
                files: path.display().to_string(),
                message: format!("preparing the CPU kernels: {e}"),
            })?
        }
        None => (
            Decoder::candle(decoder).map_err(|e| ModelError::Backend {
                files: path.display().to_string(),
                message: format!("allocating the KV cache: {e}"),
            })?,
            "candle kernels".to_string(),
        ),
    };
    Ok((decoder, content, format!("{description}, {runner}")))
}

/// On CPU, a GGUF model whose projections dequantize to at most this many bytes keeps dense f32
/// copies of them for prompt passes (about 3× faster prefill; see [`decoder::Linear`]).
pub const DENSE_COPY_BUDGET: usize = 1 << 30;

fn load_gguf(
    path: &Path,
    tokenizer: Option<&Path>,
    tokenizer_config: Option<&Path>,
    device: &Device,
    dtype: WeightDtype,
) -> Result<Model, ModelError> {
    let kernels = crate::kernels::enabled().then(crate::kernels::threads);
    let (mut decoder, content, mut description) = gguf_decoder(path, device, dtype, kernels)?;
    if device.is_cpu() {
        let bytes =
            decoder
                .add_dense_copies(DENSE_COPY_BUDGET)
                .map_err(|e| ModelError::Backend {
                    files: path.display().to_string(),
                    message: format!("dequantizing: {e}"),
                })?;
        if bytes > 0 {
            description.push_str(&format!(
                ", dense f32 copies for prompts ({} MB)",
                bytes >> 20
            ));
        }
    }
    let vocab = match tokenizer {
        Some(t) => vocab::load(t)?,
        None => vocab::load(path)?,
    };
    let (template, mut bos, mut eos) = gguf_chat(&content, &vocab);
    let mut template =
        template.map(|t| (t, format!("{} (tokenizer.chat_template)", path.display())));
    if let Some(tc) = tokenizer_config {
        let cfg = read_json(tc)?;
        if let Some(t) = config_template(&cfg) {
            template = Some((t, tc.display().to_string()));
        }
        bos = token_text(&cfg["bos_token"]).unwrap_or(bos);
        eos = token_text(&cfg["eos_token"]).unwrap_or(eos);
    }
    finish(decoder, vocab, template, bos, eos, description)
}

/// A GGUF file's chat template (`tokenizer.chat_template`) and its BOS and EOS token texts
/// (empty when the file names none), read with `vocab`, the file's tokenizer.
pub fn gguf_chat(
    content: &gguf_file::Content,
    vocab: &LoadedVocab,
) -> (Option<String>, String, String) {
    let template = match content.metadata.get("tokenizer.chat_template") {
        Some(gguf_file::Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    let token = |key: &str| {
        content
            .metadata
            .get(key)
            .and_then(|v| v.to_u32().ok())
            .map(|id| {
                String::from_utf8_lossy(
                    vocab.vocab.token_bytes(structgen_engine::util::TokenId(id)),
                )
                .into_owned()
            })
            .unwrap_or_default()
    };
    (
        template,
        token("tokenizer.ggml.bos_token_id"),
        token("tokenizer.ggml.eos_token_id"),
    )
}

/// Builds the decoder of a safetensors checkpoint from its `config.json` and shards.
pub fn safetensors_decoder(
    config: &Path,
    weight_files: &[PathBuf],
    device: &Device,
    dtype: WeightDtype,
) -> Result<(Decoder, String), ModelError> {
    let cfg_json = read_json(config)?;
    let cfg = config::from_hf(&cfg_json).map_err(|error| ModelError::Config {
        path: config.to_path_buf(),
        error,
    })?;
    for w in weight_files {
        check_safetensors_header(w)?;
    }
    let shards = || {
        weight_files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // SAFETY: the files are memory-mapped read-only; candle documents that they must not be
    // modified while mapped, which holds for model files we only read.
    let dt = checkpoint_dtype(&cfg_json, dtype, device);
    let vb = unsafe { candle_nn::VarBuilder::from_mmaped_safetensors(weight_files, dt, device) }
        .map_err(|e| ModelError::Backend {
            files: shards(),
            message: format!("mapping the shards: {e}"),
        })?;
    let description = format!(
        "{} ({}, safetensors, {} layers, hidden {}, {} heads / {} KV, {})",
        config.parent().unwrap_or(config).display(),
        cfg.arch.name(),
        cfg.layers,
        cfg.hidden,
        cfg.heads,
        cfg.kv_heads,
        dtype_name(dt)
    );
    let mut src = weights::Source::Safetensors {
        vb,
        paths: weight_files,
    };
    let decoder = Decoder::candle(weights::build(cfg, &mut src, device)?).map_err(|e| {
        ModelError::Backend {
            files: shards(),
            message: format!("allocating the KV cache: {e}"),
        }
    })?;
    Ok((decoder, description))
}

fn load_safetensors(
    config: &Path,
    weight_files: &[PathBuf],
    tokenizer: &Path,
    tokenizer_config: Option<&Path>,
    device: &Device,
    dtype: WeightDtype,
) -> Result<Model, ModelError> {
    let (decoder, description) = safetensors_decoder(config, weight_files, device, dtype)?;
    let vocab = vocab::load(tokenizer)?;
    let (template, bos, eos) = match tokenizer_config {
        Some(tc) => {
            let c = read_json(tc)?;
            (
                config_template(&c).map(|t| (t, tc.display().to_string())),
                token_text(&c["bos_token"]).unwrap_or_default(),
                token_text(&c["eos_token"]).unwrap_or_default(),
            )
        }
        None => (None, String::new(), String::new()),
    };
    finish(decoder, vocab, template, bos, eos, description)
}

/// Safetensors files start with an 8-byte little-endian header length and a JSON header; a
/// truncated file is caught here with its name instead of deep inside the mmap loader.
fn check_safetensors_header(path: &Path) -> Result<(), ModelError> {
    use std::io::Read;
    let io = |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let size = f.metadata().map_err(io)?.len();
    let mut len = [0u8; 8];
    if f.read_exact(&mut len).is_err() || u64::from_le_bytes(len).saturating_add(8) > size {
        return Err(file_error(
            path,
            "not a safetensors file (header longer than the file: truncated?)",
        ));
    }
    Ok(())
}

fn finish(
    decoder: Decoder,
    mut vocab: LoadedVocab,
    chat_template: Option<(String, String)>,
    bos: String,
    eos: String,
    description: String,
) -> Result<Model, ModelError> {
    let logits_len = decoder.vocab_size();
    if vocab.vocab.size() > logits_len {
        return Err(ModelError::VocabMismatch {
            tokenizer: vocab.vocab.size(),
            embedding: logits_len,
        });
    }
    vocab.vocab = vocab.vocab.padded_to(logits_len);
    Ok(Model {
        decoder,
        vocab,
        chat_template,
        bos,
        eos,
        logits_len,
        description,
    })
}
