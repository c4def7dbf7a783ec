//! The model options shared by `run` and `bfcl`: which model, on which device, with which chat
//! template and call style → one [`LoadedModel`] (or a [`CliError`] naming what is wrong); and how
//! to decode ([`DecodeArgs`] → [`GenerateOptions`]).

use std::path::PathBuf;

use candle_core::Device;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::{read_text, CliError};
use crate::frontend::tools::{style, StyleSpec, STYLES};
use crate::runtime::generate::GenerateOptions;
use crate::runtime::model::ModelFiles;
use crate::runtime::request::stop_tokens;
use crate::runtime::sampler::Sampling;
use crate::runtime::source::{resolve, Manifest, ModelSpec, Resolved};
use crate::runtime::{Model, WeightDtype};

/// Which model to load, where, and how to prompt it.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Model: a .gguf file, a checkpoint folder, a name in models/manifest.toml, or a Hugging
    /// Face repo id (owner/name). Default: the manifest's default (Qwen2.5-Coder-1.5B-Instruct,
    /// the demo's model, fetched with its progress display on first use).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Hub revision (branch, tag or commit) for a repo id.
    #[arg(long, value_name = "REV")]
    revision: Option<String>,
    /// The GGUF file to fetch from a hub repo.
    #[arg(long, value_name = "FILE")]
    model_file: Option<String>,
    /// Manifest of known models (default: models/manifest.toml, else the built-in copy).
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// cpu, cuda or cuda:N (cuda needs a build with `--features cuda`).
    #[arg(long, default_value = "cpu", value_name = "DEVICE", value_parser = device_arg)]
    device: DeviceSpec,
    /// Weight dtype: auto keeps a GGUF file's quantized weights and gives a safetensors
    /// checkpoint its own dtype on a GPU (f32 on the CPU); bf16, f16 or f32 convert every weight
    /// (and the activations) to that dtype.
    #[arg(long, default_value = "auto", value_name = "auto|bf16|f16|f32")]
    dtype: WeightDtype,
    /// Jinja chat template to use instead of the model's own.
    #[arg(long, value_name = "FILE")]
    chat_template: Option<PathBuf>,
    /// Tool-call style (default: the manifest's for the model, else guessed from its template).
    #[arg(long, value_name = "STYLE")]
    style: Option<String>,
    /// Threads for the CPU forward pass (default: one per physical core); also candle's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Run a GGUF model on the CPU with candle's kernels instead of ours (for comparison).
    #[arg(long)]
    candle_kernels: bool,
}

/// Speculative decoding with a draft model.
#[derive(Debug, Clone, Args)]
pub struct DraftArgs {
    /// A smaller model with the same vocabulary that drafts tokens under the grammar for the
    /// model to verify in one pass (a file or manifest name, loaded like --model); the output
    /// is the same as without it. Needs the CPU kernels for the model.
    #[arg(long, value_name = "MODEL")]
    pub draft_model: Option<String>,
    /// Most tokens the draft model proposes per verification pass.
    #[arg(long, default_value_t = 4, value_name = "K", value_parser = clap::value_parser!(u16).range(1..=64))]
    draft_tokens: u16,
}

impl DraftArgs {
    /// Loads the draft model when one is given (same device, dtype and manifest as the model);
    /// with its files and the tokens per round.
    pub fn load(&self, args: &ModelArgs) -> Result<Option<LoadedDraft>, CliError> {
        let Some(name) = &self.draft_model else {
            return Ok(None);
        };
        let spec = ModelSpec {
            name: Some(name.clone()),
            revision: None,
            file: None,
        };
        let (model, resolved, _) = args.resolve_and_load(&spec, "draft model")?;
        Ok(Some(LoadedDraft {
            model,
            files: resolved.files,
            k: self.draft_tokens as usize,
        }))
    }
}

/// A loaded draft model.
pub struct LoadedDraft {
    /// The model.
    pub model: Model,
    /// Its files (to load more instances).
    pub files: ModelFiles,
    /// Tokens drafted per round.
    pub k: usize,
}

/// How to decode.
#[derive(Debug, Clone, Args)]
pub struct DecodeArgs {
    /// Most tokens to generate (per answer).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_tokens: usize,
    /// Sampling temperature; 0 = greedy.
    #[arg(long, default_value_t = 0.0, value_name = "T")]
    pub temperature: f32,
    /// Nucleus sampling: keep the best tokens up to this probability.
    #[arg(long, value_name = "P")]
    top_p: Option<f32>,
    /// Keep only the K best tokens.
    #[arg(long, value_name = "K")]
    top_k: Option<usize>,
    /// RNG seed (`bfcl`: case i samples with seed + i, and --shuffle draws with it).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Feed every token through sampling, even text the grammar forces.
    #[arg(long)]
    no_jump_forward: bool,
    /// Fill each mask after the logits are ready instead of while the forward pass runs (the
    /// whole fill time is then waited for; to measure what the overlap saves).
    #[arg(long)]
    no_overlap: bool,
    /// At every sampled step, check the token and a random sample of allowed and refused tokens
    /// against accept_token on a fork of the matcher; a disagreement stops with the grammar state.
    #[arg(long)]
    verify_masks: bool,
}

impl DecodeArgs {
    /// The generation options these flags give.
    pub fn options(&self) -> GenerateOptions {
        GenerateOptions {
            max_tokens: self.max_tokens,
            sampling: Sampling::from_flags(self.temperature, self.top_k, self.top_p),
            seed: self.seed,
            jump_forward: !self.no_jump_forward,
            verify_masks: self.verify_masks,
            overlap: !self.no_overlap,
            ..GenerateOptions::default()
        }
    }
}

/// A loaded model with what prompting and stopping it needs.
pub struct LoadedModel {
    /// The model.
    pub model: Model,
    /// Its name: `--model` as given, or the manifest's default entry.
    pub name: String,
    /// Its files (to load more instances).
    pub files: ModelFiles,
    /// The device it is on.
    pub device: Device,
    /// How its weights are held.
    pub dtype: WeightDtype,
    /// The chat template (source, origin) when one was given instead of the model's.
    pub template: Option<(String, String)>,
    /// The call style's name.
    pub style_name: String,
    /// The call style.
    pub style: &'static StyleSpec,
    /// Stop tokens: the tokenizer's, the EOS text's and the manifest's.
    pub stop: Vec<u32>,
}

/// Where a model runs (`--device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSpec {
    /// The CPU.
    Cpu,
    /// CUDA device N.
    Cuda(usize),
}

/// `--device`: `cpu`, `cuda` or `cuda:N`.
fn device_arg(spec: &str) -> Result<DeviceSpec, String> {
    match spec {
        "cpu" => Ok(DeviceSpec::Cpu),
        "cuda" => Ok(DeviceSpec::Cuda(0)),
        s => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(n)) => Ok(DeviceSpec::Cuda(n)),
            _ => Err("expected cpu, cuda or cuda:N".into()),
        },
    }
}

/// Opens the device (a CUDA device fails here when the build or the machine has none).
fn device(spec: DeviceSpec) -> Result<Device, CliError> {
    match spec {
        DeviceSpec::Cpu => Ok(Device::Cpu),
        DeviceSpec::Cuda(n) => {
            Device::new_cuda(n).map_err(|e| CliError::Usage(format!("--device cuda:{n}: {e}")))
        }
    }
}

/// A spinner on stderr with `msg` and the elapsed time.
pub fn spinner(msg: &str) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    pb
}

/// A style for a model outside the manifest, guessed from its chat template.
fn guess_style(template: Option<&str>) -> &'static str {
    let t = template.unwrap_or_default();
    if t.contains("<function=") {
        "qwen_coder"
    } else if t.contains("<|python_tag|>") || t.contains("\"parameters\"") {
        "llama_json"
    } else if t.contains("<|channel|>") {
        "harmony"
    } else if t.contains("[TOOL_CALLS]") {
        "mistral"
    } else {
        "hermes"
    }
}

/// The style called `name`, or a usage error listing the known ones.
pub fn named_style(name: &str) -> Result<&'static StyleSpec, CliError> {
    style(name).ok_or_else(|| {
        let names: Vec<&str> = STYLES.iter().map(|s| s.name).collect();
        CliError::Usage(format!(
            "unknown --style {name:?} (known: {})",
            names.join(", ")
        ))
    })
}

impl ModelArgs {
    /// Applies `--threads` and `--candle-kernels` to the models loaded from now on.
    fn set_threads(&self) {
        crate::runtime::kernels::set_enabled(!self.candle_kernels);
        if let Some(n) = self.threads {
            crate::runtime::kernels::set_threads(n as usize);
            // candle's CPU ops size their pools from this when they first run.
            std::env::set_var("RAYON_NUM_THREADS", n.to_string());
        }
    }

    /// The `--style` given, if any.
    pub fn style_name(&self) -> Option<&str> {
        self.style.as_deref()
    }

    /// Resolves `spec` against the manifest, fetches it if needed and loads it on this device in
    /// this dtype; prints `what: description`.
    fn resolve_and_load(
        &self,
        spec: &ModelSpec,
        what: &str,
    ) -> Result<(Model, Resolved, Device), CliError> {
        let dev = device(self.device)?;
        let manifest = Manifest::load(self.manifest.as_deref())?;
        let resolved = resolve(spec, &manifest, true)?;
        let pb = spinner(&format!("loading {what}"));
        let model = Model::load(&resolved.files, &dev, self.dtype)?;
        pb.finish_and_clear();
        eprintln!("{what}: {}", model.description);
        Ok((model, resolved, dev))
    }

    /// Resolves, fetches if needed and loads the model; prints its description and warnings.
    pub fn load(&self) -> Result<LoadedModel, CliError> {
        self.set_threads();
        let spec = ModelSpec {
            name: self.model.clone(),
            revision: self.revision.clone(),
            file: self.model_file.clone(),
        };
        let (model, resolved, dev) = self.resolve_and_load(&spec, "model")?;
        for w in &model.vocab.warnings {
            eprintln!("warning: tokenizer: {w}");
        }
        let template = match &self.chat_template {
            Some(p) => Some((read_text(p)?, p.display().to_string())),
            None => None,
        };
        let style_name = match (&self.style, &resolved.entry) {
            (Some(s), _) => s.clone(),
            (None, Some(e)) => e.style.clone(),
            (None, None) => {
                let source = template.as_ref().or(model.chat_template.as_ref());
                let g = guess_style(source.map(|t| t.0.as_str()));
                eprintln!("note: no --style given; guessed {g:?} from the chat template");
                g.to_string()
            }
        };
        let style = named_style(&style_name)?;
        let extra = resolved
            .entry
            .as_ref()
            .map(|e| e.stop.clone())
            .unwrap_or_default();
        let stop = stop_tokens(&model, &extra);
        let name = match &self.model {
            Some(m) => m.clone(),
            None => Manifest::load(self.manifest.as_deref())?.default,
        };
        Ok(LoadedModel {
            model,
            name,
            files: resolved.files,
            device: dev,
            dtype: self.dtype,
            template,
            style_name,
            style,
            stop,
        })
    }
}
