//! The decoder forward pass and its truncatable KV cache, one implementation for every
//! architecture in [`super::config::Arch`].
//!
//! In: token ids to append. Out: the logits row after the last of them. The KV cache holds, per
//! layer, keys and values of shape `(1, kv_heads, len, head_dim)` before head repetition; its
//! length is the position of the next token. [`Decoder::truncate`] cuts every layer to a shorter
//! length, which is how generation rolls back re-tokenized text without re-running the prompt.
//!
//! Attention: a query at absolute position `p` sees keys `j ≤ p`, and on sliding-window layers
//! only `p − j < window`. Grouped-query attention folds the query heads of one KV head into the
//! row dimension instead of copying keys.

use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Tensor, D};

use super::config::{Activation, ArchConfig};

/// Passes of at least this many tokens use a projection's dense copy when it has one.
const DENSE_ROWS: usize = 8;

/// A projection: a (possibly quantized) weight and an optional bias.
///
/// One token at a time, a quantized matmul is fastest (it is memory-bound and reads 4-bit
/// weights); a prompt of hundreds of tokens is compute-bound, where candle's dense f32 matmul is
/// about 3× faster on CPU than its quantized one. So a small model's projections may also keep a
/// dense copy ([`Decoder::add_dense_copies`]) that passes of [`DENSE_ROWS`] tokens or more use.
#[derive(Debug)]
pub struct Linear {
    /// The weight, `(out, in)`.
    pub weight: QMatMul,
    /// The bias, `(out,)`.
    pub bias: Option<Tensor>,
    /// A dense f32 copy of a quantized weight, for long passes.
    pub dense: Option<QMatMul>,
}

impl Linear {
    pub(super) fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let rows = x.elem_count() / x.dim(D::Minus1)?.max(1);
        let w = match &self.dense {
            Some(d) if rows >= DENSE_ROWS => d,
            _ => &self.weight,
        };
        let y = w.forward(x)?;
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

/// An RMSNorm weight.
#[derive(Debug)]
pub struct Norm(pub Tensor);

impl Norm {
    pub(super) fn forward(&self, x: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
        candle_nn::ops::rms_norm(&x.contiguous()?, &self.0, eps as f32)
    }
}

/// Query/key/value projections, separate or fused (`q | k | v` along the output).
#[derive(Debug)]
pub enum Qkv {
    /// Three projections.
    Separate(Linear, Linear, Linear),
    /// One projection, split after.
    Fused(Linear),
}

/// The gated MLP's input projections, separate or fused (`gate | up`).
#[derive(Debug)]
pub enum GateUp {
    /// Gate and up projections.
    Separate(Linear, Linear),
    /// One projection, split after.
    Fused(Linear),
}

/// One decoder block.
#[derive(Debug)]
pub struct Layer {
    /// Norm before attention.
    pub attn_norm: Norm,
    /// Q/K/V projections.
    pub qkv: Qkv,
    /// Output projection.
    pub o: Linear,
    /// Per-head query and key norms.
    pub qk_norm: Option<(Norm, Norm)>,
    /// Norm on the attention output before the residual add.
    pub post_attn_norm: Option<Norm>,
    /// Norm before the MLP.
    pub ffn_norm: Norm,
    /// Gate and up projections.
    pub gate_up: GateUp,
    /// Down projection.
    pub down: Linear,
    /// Norm on the MLP output before the residual add.
    pub post_ffn_norm: Option<Norm>,
}

/// The token embedding table.
#[derive(Debug)]
pub enum Embedding {
    /// Quantized rows, looked up without dequantizing the table.
    Quantized(QMatMul),
    /// A dense `(vocab, hidden)` table.
    Dense(Tensor),
}

/// A loaded network with its KV cache, on candle's tensors (any device, any dtype).
#[derive(Debug)]
pub struct CandleDecoder {
    /// Shape and options.
    pub cfg: ArchConfig,
    /// Token embeddings.
    pub embed: Embedding,
    /// Blocks.
    pub layers: Vec<Layer>,
    /// Final norm.
    pub norm: Norm,
    /// Output projection to the vocabulary.
    pub lm_head: QMatMul,
    /// Inverse RoPE frequencies of global and local layers, on the device.
    pub inv_freq: (Tensor, Tensor),
    /// Where the tensors live.
    pub device: Device,
    /// The activations' (and KV cache's) dtype: F32 over quantized weights, else the weights'.
    pub dtype: DType,
    /// Per layer `(keys, values)`.
    pub cache: Vec<Option<(Tensor, Tensor)>>,
}

impl CandleDecoder {
    /// Tokens in the cache (= position of the next token).
    pub fn len(&self) -> usize {
        self.cache
            .first()
            .and_then(|c| c.as_ref())
            .map_or(0, |(k, _)| k.dim(2).unwrap_or(0))
    }

    /// Rows of the embedding table (= length of a logits row).
    pub fn vocab_size(&self) -> usize {
        match &self.embed {
            Embedding::Quantized(QMatMul::QTensor(q)) => q.shape().dims()[0],
            Embedding::Quantized(QMatMul::Tensor(t) | QMatMul::TensorF16(t))
            | Embedding::Dense(t) => t.dims()[0],
        }
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cuts the cache to its first `len` positions.
    pub fn truncate(&mut self, len: usize) -> candle_core::Result<()> {
        for slot in &mut self.cache {
            if let Some((k, v)) = slot.take() {
                if len > 0 {
                    let keep = len.min(k.dim(2)?);
                    *slot = Some((k.narrow(2, 0, keep)?, v.narrow(2, 0, keep)?));
                }
            }
        }
        Ok(())
    }

    /// Gives every quantized projection a dense f32 copy for long passes (prompts), when all the
    /// copies together take at most `budget` bytes; returns the bytes taken (0: none made).
    pub fn add_dense_copies(&mut self, budget: usize) -> candle_core::Result<usize> {
        let mut linears: Vec<&mut Linear> = Vec::new();
        for l in &mut self.layers {
            match &mut l.qkv {
                Qkv::Separate(q, k, v) => linears.extend([q, k, v]),
                Qkv::Fused(f) => linears.push(f),
            }
            match &mut l.gate_up {
                GateUp::Separate(g, u) => linears.extend([g, u]),
                GateUp::Fused(f) => linears.push(f),
            }
            linears.extend([&mut l.o, &mut l.down]);
        }
        let bytes: usize = linears
            .iter()
            .map(|l| match &l.weight {
                QMatMul::QTensor(q) => q.shape().elem_count() * 4,
                _ => 0,
            })
            .sum();
        if bytes == 0 || bytes > budget {
            return Ok(0);
        }
        for l in linears {
            if let QMatMul::QTensor(q) = &l.weight {
                l.dense = Some(QMatMul::Tensor(q.dequantize(&self.device)?));
            }
        }
        Ok(bytes)
    }

    /// Appends `tokens` at the cache's end; returns the logits after the last one, `(vocab,)` f32.
    pub fn forward(&mut self, tokens: &[u32]) -> candle_core::Result<Tensor> {
        let h = self.hidden(tokens)?;
        let seq = h.dim(1)?;
        self.logits(&h.narrow(1, seq - 1, 1)?)?.get(0)
    }

    /// The final hidden states `(1, seq, hidden)` → logits `(seq, vocab)` f32.
    pub(super) fn logits(&self, h: &Tensor) -> candle_core::Result<Tensor> {
        let logits = self.lm_head.forward(h)?.squeeze(0)?.to_dtype(DType::F32)?;
        match self.cfg.final_softcap {
            Some(cap) => (logits / cap)?.tanh()? * cap,
            None => Ok(logits),
        }
    }

    /// Appends `tokens`; returns the normalized hidden states after them, `(1, seq, hidden)`.
    fn hidden(&mut self, tokens: &[u32]) -> candle_core::Result<Tensor> {
        if tokens.is_empty() {
            candle_core::bail!("forward called with no tokens");
        }
        let offset = self.len();
        let seq = tokens.len();
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = match &self.embed {
            Embedding::Quantized(q) => q.embedding(&ids)?,
            Embedding::Dense(t) => t.index_select(&ids, 0)?,
        }
        .to_dtype(self.dtype)?;
        if self.cfg.scale_embeddings {
            x = (x * (self.cfg.hidden as f64).sqrt())?;
        }
        let mut x = x.unsqueeze(0)?;
        let positions: Vec<f32> = (offset..offset + seq).map(|p| p as f32).collect();
        let positions = Tensor::from_vec(positions, (seq, 1), &self.device)?;
        let dt = self.dtype;
        let global = rope_tables(
            &positions,
            &self.inv_freq.0,
            self.cfg.rope_linear_factor,
            dt,
        )?;
        let rep = self.cfg.heads / self.cfg.kv_heads;
        let total = offset + seq;
        let global_mask = mask(seq, offset, total, None, rep, &self.device, dt)?;
        let local = match self.cfg.sliding_window {
            Some((w, _)) => Some((
                rope_tables(&positions, &self.inv_freq.1, 1.0, dt)?,
                mask(seq, offset, total, Some(w), rep, &self.device, dt)?,
            )),
            None => None,
        };
        for i in 0..self.layers.len() {
            let (rope, attn_mask) = match &local {
                Some((rope, m)) if self.cfg.is_local_layer(i) => (rope, m),
                _ => (&global, &global_mask),
            };
            let layer = &self.layers[i];
            let h = layer.attn_norm.forward(&x, self.cfg.eps)?;
            let (a, cache) = attention(
                &self.cfg,
                layer,
                &h,
                rope,
                self.cache[i].take(),
                attn_mask.as_ref(),
            )?;
            self.cache[i] = Some(cache);
            let a = match &layer.post_attn_norm {
                Some(n) => n.forward(&a, self.cfg.eps)?,
                None => a,
            };
            x = (x + a)?;
            let h = layer.ffn_norm.forward(&x, self.cfg.eps)?;
            let m = mlp(&self.cfg, layer, &h)?;
            let m = match &layer.post_ffn_norm {
                Some(n) => n.forward(&m, self.cfg.eps)?,
                None => m,
            };
            x = (x + m)?;
        }
        self.norm.forward(&x, self.cfg.eps)
    }
}

/// `(cos, sin)` of shape `(seq, head_dim / 2)` for these positions, computed in f32 and given
/// in `dtype`.
pub(super) fn rope_tables(
    positions: &Tensor,
    inv_freq: &Tensor,
    linear: f64,
    dtype: DType,
) -> candle_core::Result<(Tensor, Tensor)> {
    let pos = if linear != 1.0 {
        (positions / linear)?
    } else {
        positions.clone()
    };
    let angles = pos.broadcast_mul(&inv_freq.unsqueeze(0)?)?;
    Ok((
        angles.cos()?.to_dtype(dtype)?.contiguous()?,
        angles.sin()?.to_dtype(dtype)?.contiguous()?,
    ))
}

pub(super) fn heads(x: Tensor, n: usize, d: usize) -> candle_core::Result<Tensor> {
    let (b, s, _) = x.dims3()?;
    x.reshape((b, s, n, d))
}

/// A layer's queries and keys, per-head normed and rotated, `(1, heads, seq, d)` and
/// `(1, kv_heads, seq, d)`, and its values `(1, seq, kv_heads, d)`, for the rows of `h`.
pub(super) fn qkv_roped(
    cfg: &ArchConfig,
    layer: &Layer,
    h: &Tensor,
    rope: &(Tensor, Tensor),
) -> candle_core::Result<(Tensor, Tensor, Tensor)> {
    let (nh, nkv, d) = (cfg.heads, cfg.kv_heads, cfg.head_dim);
    let (q, k, v) = match &layer.qkv {
        Qkv::Separate(q, k, v) => (q.forward(h)?, k.forward(h)?, v.forward(h)?),
        Qkv::Fused(qkv) => {
            let all = qkv.forward(h)?;
            (
                all.narrow(D::Minus1, 0, nh * d)?,
                all.narrow(D::Minus1, nh * d, nkv * d)?,
                all.narrow(D::Minus1, (nh + nkv) * d, nkv * d)?,
            )
        }
    };
    let mut q = heads(q, nh, d)?;
    let mut k = heads(k, nkv, d)?;
    if let Some((qn, kn)) = &layer.qk_norm {
        q = qn.forward(&q, cfg.eps)?;
        k = kn.forward(&k, cfg.eps)?;
    }
    let q = q.transpose(1, 2)?.contiguous()?;
    let k = k.transpose(1, 2)?.contiguous()?;
    let (cos, sin) = rope;
    let rot = if cfg.rope_interleaved {
        candle_nn::rotary_emb::rope_i
    } else {
        candle_nn::rotary_emb::rope
    };
    Ok((rot(&q, cos, sin)?, rot(&k, cos, sin)?, heads(v, nkv, d)?))
}

fn attention(
    cfg: &ArchConfig,
    layer: &Layer,
    h: &Tensor,
    rope: &(Tensor, Tensor),
    cache: Option<(Tensor, Tensor)>,
    attn_mask: Option<&Tensor>,
) -> candle_core::Result<(Tensor, (Tensor, Tensor))> {
    let (nh, nkv, d) = (cfg.heads, cfg.kv_heads, cfg.head_dim);
    let (q, k, v) = qkv_roped(cfg, layer, h, rope)?;
    let seq = q.dim(2)?;
    let v = v.transpose(1, 2)?.contiguous()?;
    let (k, v) = match cache {
        Some((ck, cv)) => (Tensor::cat(&[&ck, &k], 2)?, Tensor::cat(&[&cv, &v], 2)?),
        None => (k, v),
    };
    let qg = q.reshape((1, nkv, nh / nkv * seq, d))?;
    let scores = (qg.matmul(&k.t()?)? * cfg.attn_scale)?;
    let scores = match attn_mask {
        Some(m) => scores.broadcast_add(m)?,
        None => scores,
    };
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    let out = probs.matmul(&v)?.reshape((1, nh, seq, d))?;
    let out = out.transpose(1, 2)?.reshape((1, seq, nh * d))?;
    Ok((layer.o.forward(&out)?, (k, v)))
}

/// The additive attention mask for `seq` queries from `offset` over `total` keys, its rows
/// repeated for the `rep` query heads of each KV head: `(rep * seq, total)`, or `None` when
/// nothing is masked. Built once per forward pass and shared by the layers.
pub(super) fn mask(
    seq: usize,
    offset: usize,
    total: usize,
    window: Option<usize>,
    rep: usize,
    device: &Device,
    dtype: DType,
) -> candle_core::Result<Option<Tensor>> {
    let hidden = |p: usize, j: usize| j > p || window.is_some_and(|w| p - j.min(p) >= w);
    let any = (0..seq).any(|i| (0..total).any(|j| hidden(offset + i, j)));
    if !any {
        return Ok(None);
    }
    let values: Vec<f32> = (0..seq)
        .flat_map(|i| {
            (0..total).map(move |j| {
                if hidden(offset + i, j) {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    Tensor::from_vec(values, (seq, total), device)?
        .to_dtype(dtype)?
        .repeat((rep, 1))
        .map(Some)
}

pub(super) fn mlp(cfg: &ArchConfig, layer: &Layer, h: &Tensor) -> candle_core::Result<Tensor> {
    let (gate, up) = match &layer.gate_up {
        GateUp::Separate(g, u) => (g.forward(h)?, u.forward(h)?),
        GateUp::Fused(gu) => {
            let both = gu.forward(h)?;
            let half = both.dim(D::Minus1)? / 2;
            (
                both.narrow(D::Minus1, 0, half)?,
                both.narrow(D::Minus1, half, half)?,
            )
        }
    };
    let gate = match cfg.activation {
        Activation::Silu => candle_nn::ops::silu(&gate)?,
        Activation::GeluTanh => gate.gelu()?,
    };
    layer.down.forward(&(gate * up)?)
}
