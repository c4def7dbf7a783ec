//! structgen's inference runtime (L4), the only layer that runs a model: on Candle (GPUs, dense
//! checkpoints) and on our own CPU kernels. No command-line parsing: the `structgen` CLI and a
//! server sit on top of the same API.
//!
//! - [`source`]: a model name (local path, Hugging Face repo id, or `models/manifest.toml` entry)
//!   → [`model::ModelFiles`], fetching from the hub with `hf-hub` when needed.
//! - [`model`]: files → [`model::Model`] (our decoder with a truncatable KV cache, tokenizer,
//!   chat template) for llama, qwen2, qwen3, gemma3 and phi3 GGUF files and llama / qwen2 / qwen3
//!   safetensors checkpoints.
//! - [`chat`]: the model's chat template (minijinja) with messages and tools → prompt.
//! - [`kernels`]: quantized matrix products on the CPU (AVX2 / AVX-512 VNNI / portable) and
//!   their thread pool.
//! - [`logits`]: grammar bitmask → logits at −∞ (in place on CPU, uploaded bitmask elsewhere).
//! - [`sampler`]: greedy / temperature / top-k / top-p with a seed.
//! - [`request`]: messages + tools + style → prompt tokens, matcher and stop tokens.
//! - [`generate`](mod@generate): the decoding loop with jump-forward and rollback.
//! - [`trace`]: per-step records and the summary.
//! - [`batch`]: many sequences at once: continuous batching over one model ([`batch::Batch`]) and
//!   the threaded submit / receive / cancel API on it ([`batch::Runtime`]).

pub mod batch;
pub mod chat;
pub mod generate;
pub mod kernels;
pub mod logits;
pub mod model;
pub mod request;
pub mod sampler;
pub mod source;
pub mod trace;

pub use generate::{generate, GenerateError, GenerateOptions, Generation, Session};
pub use model::{Model, ModelError, ModelFiles, WeightDtype};
