//! [`Decoder`]: one network with its KV cache, run by candle's tensors (GPUs, dense dtypes,
//! safetensors checkpoints) or by our CPU kernels ([`super::cpu`], GGUF weights on the CPU).
//! Both append tokens, return the last logits row and truncate the cache exactly.

use candle_core::{DType, Device, Tensor};

use super::config::ArchConfig;
use super::cpu::CpuDecoder;
use super::decoder::CandleDecoder;

/// A loaded network with its KV cache.
#[derive(Debug)]
pub struct Decoder {
    /// Shape and options.
    pub cfg: ArchConfig,
    /// Where the tensors live.
    pub device: Device,
    /// The activations' (and KV cache's) dtype: F32 over quantized weights, else the weights'.
    pub dtype: DType,
    backend: Backend,
    /// The tokens whose keys and values the cache holds, in order (empty once a pass failed).
    held: Vec<u32>,
}

#[derive(Debug)]
enum Backend {
    Candle(Box<CandleDecoder>),
    Cpu(Box<CpuDecoder>),
}

impl Decoder {
    /// Runs `dec` on candle.
    pub fn candle(dec: CandleDecoder) -> Decoder {
        Decoder {
            cfg: dec.cfg.clone(),
            device: dec.device.clone(),
            dtype: dec.dtype,
            backend: Backend::Candle(Box::new(dec)),
            held: Vec::new(),
        }
    }

    /// Runs `dec` on our CPU kernels with `threads` threads when its weights allow (f32
    /// activations on the CPU, every weight in a format the kernels read); else on candle, with
    /// the reason. Returns the decoder and a description of what runs it.
    pub fn cpu_or_candle(
        dec: CandleDecoder,
        threads: usize,
    ) -> candle_core::Result<(Decoder, String)> {
        if !dec.device.is_cpu() || dec.dtype != DType::F32 {
            return Ok((Decoder::candle(dec), "candle kernels".into()));
        }
        match CpuDecoder::from_candle(&dec, threads)? {
            Ok(cpu) => {
                let what = format!("CPU kernels ({})", cpu.describe());
                Ok((
                    Decoder {
                        cfg: dec.cfg.clone(),
                        device: dec.device.clone(),
                        dtype: DType::F32,
                        backend: Backend::Cpu(Box::new(cpu)),
                        held: Vec::new(),
                    },
                    what,
                ))
            }
            Err(why) => Ok((Decoder::candle(dec), format!("candle kernels ({why})"))),
        }
    }

    /// Whether our CPU kernels run it.
    pub fn on_cpu_kernels(&self) -> bool {
        matches!(self.backend, Backend::Cpu(_))
    }

    /// Tokens in the cache (= position of the next token).
    pub fn len(&self) -> usize {
        match &self.backend {
            Backend::Candle(d) => d.len(),
            Backend::Cpu(d) => d.len(),
        }
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows of the embedding table (= length of a logits row).
    pub fn vocab_size(&self) -> usize {
        match &self.backend {
            Backend::Candle(d) => d.vocab_size(),
            Backend::Cpu(d) => d.vocab_size(),
        }
    }

    /// Cuts the cache to its first `len` positions.
    pub fn truncate(&mut self, len: usize) -> candle_core::Result<()> {
        self.held.truncate(len);
        match &mut self.backend {
            Backend::Candle(d) => d.truncate(len),
            Backend::Cpu(d) => {
                d.truncate(len);
                Ok(())
            }
        }
    }

    /// How many leading tokens of `tokens` the cache already holds: a prompt that continues an
    /// earlier one (the next turn of a conversation, another request with the same system
    /// prompt) needs only the rest prefilled after [`Decoder::truncate`] to that length.
    pub fn common_prefix(&self, tokens: &[u32]) -> usize {
        let n = self.held.len().min(self.len());
        self.held[..n]
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// Appends `tokens` at the cache's end; returns the logits after the last one, `(vocab,)` f32.
    pub fn forward(&mut self, tokens: &[u32]) -> candle_core::Result<Tensor> {
        let before = self.len();
        let out = match &mut self.backend {
            Backend::Candle(d) => d.forward(tokens),
            Backend::Cpu(d) => d.forward(tokens),
        };
        self.record(before, tokens, out.is_ok());
        out
    }

    /// Appends `tokens` and returns the logits after each of them, `(tokens.len(), vocab)` f32,
    /// each row exactly what [`Decoder::forward`] of that token alone would give: the products
    /// run row by row, as in a decode step, never packed. For verifying drafted tokens; only our
    /// CPU kernels have it.
    pub fn forward_each(&mut self, tokens: &[u32]) -> candle_core::Result<Tensor> {
        let before = self.len();
        let out = match &mut self.backend {
            Backend::Candle(_) => Err(candle_core::Error::Msg(
                "verifying drafted tokens needs the CPU kernels (a GGUF model on the CPU)".into(),
            )),
            Backend::Cpu(d) => d.forward_each(tokens),
        };
        self.record(before, tokens, out.is_ok());
        out
    }

    /// Keeps `held` in step with the cache after a pass from length `before`.
    fn record(&mut self, before: usize, tokens: &[u32], ok: bool) {
        if ok && self.held.len() == before {
            self.held.extend_from_slice(tokens);
        } else {
            self.held.clear();
        }
    }

    /// Gives a candle decoder's quantized projections dense f32 copies for long passes within
    /// `budget` bytes; returns the bytes taken (0 on our CPU kernels, which need none).
    pub fn add_dense_copies(&mut self, budget: usize) -> candle_core::Result<usize> {
        match &mut self.backend {
            Backend::Candle(d) => d.add_dense_copies(budget),
            Backend::Cpu(_) => Ok(0),
        }
    }
}
