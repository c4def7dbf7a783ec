//! [`Decoder`]: one network with its KV cache, run by candle's tensors (GPUs, dense dtypes,
//! safetensors checkpoints) or by our CPU kernels ([`super::cpu`], GGUF weights on the CPU).
//! Both append tokens, return the last logits row and truncate the cache exactly.
//!
//! A decoder holds any number of KV caches, one per sequence, in slots: slot 0 always exists and
//! is the one of the single-sequence calls ([`Decoder::forward`], [`Decoder::truncate`], ...);
//! [`Decoder::new_slot`] adds more and [`Decoder::forward_batch`] appends tokens to several in one
//! call. On our CPU kernels that is one pass whose weights are read once for all the rows; on a
//! GPU it is one pass over preallocated per-layer caches of every slot ([`super::slots`]); on
//! candle's CPU path the sequences run one after another (their caches swapped in turn).
//! Rollback and KV reuse act on one slot without touching the others.

use std::sync::atomic::{AtomicBool, Ordering};

use candle_core::{DType, Device, Tensor};

use super::config::ArchConfig;
use super::cpu::{CpuDecoder, Segment};
use super::decoder::CandleDecoder;
use super::slots::SlotCache;
use crate::kernels::PACK_MIN_ROWS;

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
    /// Per slot, the tokens whose keys and values its cache holds, in order (empty once a pass
    /// failed); `None` for a free slot.
    held: Vec<Option<Vec<u32>>>,
}

/// Whether candle decoders built on the CPU from now on use the GPU's batched slot cache.
static SLOTS_ON_CPU: AtomicBool = AtomicBool::new(false);

/// Builds candle decoders on the CPU with the batched slot cache of the GPU path
/// ([`super::slots`]), so that path can be tested without a GPU (off by default).
pub fn set_slot_cache_on_cpu(on: bool) {
    SLOTS_ON_CPU.store(on, Ordering::SeqCst);
}

/// How much of a cache that shares `common` leading tokens with a prompt of `len` tokens a
/// prefill keeps: at least one token always runs (for its logits), and a prompt of
/// [`PACK_MIN_ROWS`] tokens or more always runs at least that many, so that the rows it computes
/// take the packed products whatever was reused; a prompt's logits then never depend on how much
/// of it an earlier request left in the cache.
pub fn reusable_prefix(common: usize, len: usize) -> usize {
    if len >= PACK_MIN_ROWS {
        common.min(len - PACK_MIN_ROWS)
    } else {
        common.min(len.saturating_sub(1))
    }
}

/// Tokens to append to one slot in a batched pass.
#[derive(Debug, Clone, Copy)]
pub struct Feed<'a> {
    /// The slot ([`Decoder::new_slot`]; 0 always exists).
    pub slot: usize,
    /// The tokens, at the slot's end.
    pub tokens: &'a [u32],
    /// Whether they are prompt tokens (packed products for 4 or more) rather than generated
    /// ones (always row by row, as a decode step).
    pub prompt: bool,
}

/// A candle decoder's per-layer keys and values.
type CandleCache = Vec<Option<(Tensor, Tensor)>>;

#[derive(Debug)]
enum Backend {
    Candle {
        dec: Box<CandleDecoder>,
        /// The caches of the slots other than `active`, whose cache is in `dec.cache`.
        parked: Vec<CandleCache>,
        active: usize,
    },
    /// Candle with every slot in one preallocated cache per layer, batched passes (GPUs).
    Slots {
        dec: Box<CandleDecoder>,
        cache: SlotCache,
    },
    Cpu(Box<CpuDecoder>),
}

impl Decoder {
    /// Runs `dec` on candle: on a GPU (or on the CPU after [`set_slot_cache_on_cpu`]) with every
    /// slot in one preallocated cache per layer and batched passes, else one sequence at a time.
    pub fn candle(dec: CandleDecoder) -> candle_core::Result<Decoder> {
        if dec.device.is_cpu() && !SLOTS_ON_CPU.load(Ordering::SeqCst) {
            return Ok(Decoder::candle_per_slot(dec));
        }
        let cache = SlotCache::new(&dec)?;
        Ok(Decoder {
            cfg: dec.cfg.clone(),
            device: dec.device.clone(),
            dtype: dec.dtype,
            backend: Backend::Slots {
                dec: Box::new(dec),
                cache,
            },
            held: vec![Some(Vec::new())],
        })
    }

    /// Candle with its slots' caches swapped in turn.
    fn candle_per_slot(dec: CandleDecoder) -> Decoder {
        Decoder {
            cfg: dec.cfg.clone(),
            device: dec.device.clone(),
            dtype: dec.dtype,
            backend: Backend::Candle {
                dec: Box::new(dec),
                parked: vec![Vec::new()],
                active: 0,
            },
            held: vec![Some(Vec::new())],
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
            return Ok((Decoder::candle(dec)?, "candle kernels".into()));
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
                        held: vec![Some(Vec::new())],
                    },
                    what,
                ))
            }
            Err(why) => Ok((Decoder::candle(dec)?, format!("candle kernels ({why})"))),
        }
    }

    /// Whether our CPU kernels run it.
    pub fn on_cpu_kernels(&self) -> bool {
        matches!(self.backend, Backend::Cpu(_))
    }

    /// Tokens in slot 0's cache (= position of its next token).
    pub fn len(&self) -> usize {
        self.slot_len(0)
    }

    /// Whether slot 0's cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows of the embedding table (= length of a logits row).
    pub fn vocab_size(&self) -> usize {
        match &self.backend {
            Backend::Candle { dec, .. } | Backend::Slots { dec, .. } => dec.vocab_size(),
            Backend::Cpu(d) => d.vocab_size(),
        }
    }

    /// A new empty KV cache slot (a freed one when there is one).
    pub fn new_slot(&mut self) -> candle_core::Result<usize> {
        let slot = match &mut self.backend {
            Backend::Candle { parked, .. } => match self.held.iter().position(Option::is_none) {
                Some(i) => i,
                None => {
                    parked.push(Vec::new());
                    parked.len() - 1
                }
            },
            Backend::Slots { dec, cache } => cache.new_slot(dec)?,
            Backend::Cpu(d) => d.new_slot(),
        };
        if self.held.len() <= slot {
            self.held.resize(slot + 1, None);
        }
        self.held[slot] = Some(Vec::new());
        Ok(slot)
    }

    /// Frees a slot's cache for reuse (slot 0 is only emptied).
    pub fn free_slot(&mut self, slot: usize) {
        if slot == 0 {
            // Emptying a cache cannot fail.
            let _ = self.truncate_slot(0, 0);
            return;
        }
        match &mut self.backend {
            Backend::Candle {
                dec,
                parked,
                active,
            } => {
                if *active == slot {
                    dec.cache.iter_mut().for_each(|c| *c = None);
                } else if let Some(p) = parked.get_mut(slot) {
                    p.clear();
                }
            }
            Backend::Slots { cache, .. } => cache.free_slot(slot),
            Backend::Cpu(d) => d.free_slot(slot),
        }
        if let Some(h) = self.held.get_mut(slot) {
            *h = None;
        }
    }

    /// Tokens in a slot's cache (0 for a free slot).
    pub fn slot_len(&self, slot: usize) -> usize {
        match &self.backend {
            Backend::Candle {
                dec,
                parked,
                active,
            } => {
                if *active == slot {
                    dec.len()
                } else {
                    parked
                        .get(slot)
                        .and_then(|c| c.first())
                        .and_then(|c| c.as_ref())
                        .map_or(0, |(k, _)| k.dim(2).unwrap_or(0))
                }
            }
            Backend::Slots { cache, .. } => cache.len(slot),
            Backend::Cpu(d) => d.slot_len(slot),
        }
    }

    /// Cuts slot 0's cache to its first `len` positions.
    pub fn truncate(&mut self, len: usize) -> candle_core::Result<()> {
        self.truncate_slot(0, len)
    }

    /// Cuts a slot's cache to its first `len` positions; the other slots are untouched.
    pub fn truncate_slot(&mut self, slot: usize, len: usize) -> candle_core::Result<()> {
        if let Some(Some(h)) = self.held.get_mut(slot) {
            h.truncate(len);
        }
        match &mut self.backend {
            Backend::Candle { .. } => {
                self.activate(slot)?;
                match &mut self.backend {
                    Backend::Candle { dec, .. } => dec.truncate(len),
                    Backend::Slots { .. } | Backend::Cpu(_) => Ok(()),
                }
            }
            Backend::Slots { cache, .. } => {
                cache.truncate(slot, len);
                Ok(())
            }
            Backend::Cpu(d) => {
                d.truncate_slot(slot, len);
                Ok(())
            }
        }
    }

    /// On candle, puts `slot`'s cache in the decoder (parking the active one).
    fn activate(&mut self, slot: usize) -> candle_core::Result<()> {
        let free = !matches!(self.held.get(slot), Some(Some(_)));
        if let Backend::Candle {
            dec,
            parked,
            active,
        } = &mut self.backend
        {
            if free {
                candle_core::bail!("slot {slot} does not exist");
            }
            if *active != slot {
                std::mem::swap(&mut dec.cache, &mut parked[*active]);
                std::mem::swap(&mut dec.cache, &mut parked[slot]);
                if dec.cache.is_empty() {
                    dec.cache = vec![None; dec.layers.len()];
                }
                *active = slot;
            }
        }
        Ok(())
    }

    /// How many leading tokens of `tokens` slot 0's cache already holds: a prompt that continues
    /// an earlier one (the next turn of a conversation, another request with the same system
    /// prompt) needs only the rest prefilled after [`Decoder::truncate`] to that length.
    pub fn common_prefix(&self, tokens: &[u32]) -> usize {
        self.common_prefix_slot(0, tokens)
    }

    /// [`Decoder::common_prefix`] for a slot.
    pub fn common_prefix_slot(&self, slot: usize, tokens: &[u32]) -> usize {
        let Some(Some(held)) = self.held.get(slot) else {
            return 0;
        };
        let n = held.len().min(self.slot_len(slot));
        held[..n]
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// Appends prompt `tokens` at slot 0's end; returns the logits after the last one, `(vocab,)`
    /// f32 (a run of 4 tokens or more takes the packed products).
    pub fn forward(&mut self, tokens: &[u32]) -> candle_core::Result<Tensor> {
        self.forward_slot0(tokens, true)
    }

    /// Appends generated `tokens` (sampled or forced) at slot 0's end, every row computed as a
    /// decode step computes it; the logits after the last one.
    pub fn forward_generated(&mut self, tokens: &[u32]) -> candle_core::Result<Tensor> {
        self.forward_slot0(tokens, false)
    }

    fn forward_slot0(&mut self, tokens: &[u32], prompt: bool) -> candle_core::Result<Tensor> {
        let feed = Feed {
            slot: 0,
            tokens,
            prompt,
        };
        Ok(self.forward_batch(&[feed])?.remove(0))
    }

    /// Appends each feed's tokens at its slot's end (each slot at most once) and returns the
    /// logits after each one's last token, `(vocab,)` f32, in order. A sequence's logits are the
    /// same whatever else shares the call: prompt rows take the packed products when there are 4
    /// or more of them, generated rows are always computed row by row, as decode steps.
    pub fn forward_batch(&mut self, segs: &[Feed]) -> candle_core::Result<Vec<Tensor>> {
        let before: Vec<usize> = segs.iter().map(|f| self.slot_len(f.slot)).collect();
        let out = match &mut self.backend {
            Backend::Cpu(d) => {
                let parts: Vec<Segment> = segs
                    .iter()
                    .map(|f| Segment {
                        slot: f.slot,
                        tokens: f.tokens,
                        packed: f.prompt,
                    })
                    .collect();
                d.forward_batch(&parts).and_then(|rows| {
                    rows.into_iter()
                        .map(|r| {
                            let n = r.len();
                            Tensor::from_vec(r, n, &Device::Cpu)
                        })
                        .collect()
                })
            }
            Backend::Slots { dec, cache } => {
                let plain: Vec<(usize, &[u32])> = segs.iter().map(|f| (f.slot, f.tokens)).collect();
                cache.forward(dec, &plain)
            }
            Backend::Candle { .. } => {
                let mut rows = Vec::with_capacity(segs.len());
                for f in segs {
                    self.activate(f.slot)?;
                    if let Backend::Candle { dec, .. } = &mut self.backend {
                        rows.push(dec.forward(f.tokens)?);
                    }
                }
                Ok(rows)
            }
        };
        for (f, before) in segs.iter().zip(before) {
            self.record(f.slot, before, f.tokens, out.is_ok());
        }
        out
    }

    /// Appends `tokens` to slot 0 and returns the logits after each of them,
    /// `(tokens.len(), vocab)` f32, each row exactly what [`Decoder::forward`] of that token alone
    /// would give: the products run row by row, as in a decode step, never packed. For
    /// verifying drafted tokens; only our CPU kernels have it.
    pub fn forward_each(&mut self, tokens: &[u32]) -> candle_core::Result<Tensor> {
        let before = self.len();
        let out = match &mut self.backend {
            Backend::Candle { .. } | Backend::Slots { .. } => Err(candle_core::Error::Msg(
                "verifying drafted tokens needs the CPU kernels (a GGUF model on the CPU)".into(),
            )),
            Backend::Cpu(d) => d.forward_each(tokens),
        };
        self.record(0, before, tokens, out.is_ok());
        out
    }

    /// Keeps a slot's `held` in step with its cache after a pass from length `before`.
    fn record(&mut self, slot: usize, before: usize, tokens: &[u32], ok: bool) {
        if let Some(Some(held)) = self.held.get_mut(slot) {
            if ok && held.len() == before {
                held.extend_from_slice(tokens);
            } else {
                held.clear();
            }
        }
    }

    /// Gives a candle decoder's quantized projections dense f32 copies for long passes within
    /// `budget` bytes; returns the bytes taken (0 on our CPU kernels, which need none).
    pub fn add_dense_copies(&mut self, budget: usize) -> candle_core::Result<usize> {
        match &mut self.backend {
            Backend::Candle { dec, .. } | Backend::Slots { dec, .. } => {
                dec.add_dense_copies(budget)
            }
            Backend::Cpu(_) => Ok(0),
        }
    }
}
