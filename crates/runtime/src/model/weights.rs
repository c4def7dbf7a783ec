//! Weight files → a [`CandleDecoder`]: GGUF tensors (kept quantized, or dequantized to one dtype) or
//! safetensors checkpoints (dense, in the dtype their VarBuilder converts to), named by llama.cpp's
//! or Transformers' conventions. Every dense tensor of a decoder has one dtype, which is also the
//! dtype of its activations; over quantized weights the activations are f32.
//!
//! Both formats go through [`Source`], which answers "is tensor X there" and "give me X as a
//! matmul weight / a dense tensor" under a format-neutral [`Part`] name, so the layer assembly is
//! written once. Shapes are checked against the config; a missing or misshapen tensor is an error
//! naming it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::{gguf_file, QMatMul, QTensor};
use candle_core::{DType, Device, Tensor};

use super::config::{inv_freqs, Arch, ArchConfig};
use super::decoder::{CandleDecoder, Embedding, GateUp, Layer, Linear, Norm, Qkv};
use super::ModelError;

/// A tensor role, independent of the file format's naming.
#[derive(Debug, Clone, Copy)]
enum Part {
    Embed,
    Output,
    OutputNorm,
    RopeFreqs,
    Layer(usize, L),
}

/// The tensors of one layer (every name a format gives one is in its table; there is no fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L {
    Q,
    K,
    V,
    QBias,
    KBias,
    VBias,
    Qkv,
    O,
    QNorm,
    KNorm,
    AttnNorm,
    PostAttnNorm,
    FfnNorm,
    PostFfnNorm,
    Gate,
    Up,
    Down,
}

/// Where weights come from.
pub enum Source<'a> {
    /// An open GGUF file.
    Gguf {
        /// Its header.
        content: &'a gguf_file::Content,
        /// The file, for reading tensor data.
        file: &'a mut File,
        /// Its path, for errors.
        path: &'a Path,
        /// Dequantize every tensor to this dtype instead of keeping quantized weights.
        dense: Option<DType>,
    },
    /// Memory-mapped safetensors shards.
    Safetensors {
        /// The tensors.
        vb: candle_nn::VarBuilder<'a>,
        /// The shard paths, for errors.
        paths: &'a [PathBuf],
    },
}

fn gguf_name(part: Part) -> String {
    match part {
        Part::Embed => "token_embd.weight".into(),
        Part::Output => "output.weight".into(),
        Part::OutputNorm => "output_norm.weight".into(),
        Part::RopeFreqs => "rope_freqs.weight".into(),
        Part::Layer(i, t) => {
            let n = match t {
                L::Q => "attn_q.weight",
                L::K => "attn_k.weight",
                L::V => "attn_v.weight",
                L::QBias => "attn_q.bias",
                L::KBias => "attn_k.bias",
                L::VBias => "attn_v.bias",
                L::Qkv => "attn_qkv.weight",
                L::O => "attn_output.weight",
                L::QNorm => "attn_q_norm.weight",
                L::KNorm => "attn_k_norm.weight",
                L::AttnNorm => "attn_norm.weight",
                L::PostAttnNorm => "post_attention_norm.weight",
                L::FfnNorm => "ffn_norm.weight",
                L::PostFfnNorm => "post_ffw_norm.weight",
                L::Gate => "ffn_gate.weight",
                L::Up => "ffn_up.weight",
                L::Down => "ffn_down.weight",
            };
            format!("blk.{i}.{n}")
        }
    }
}

fn hf_name(part: Part) -> String {
    match part {
        Part::Embed => "model.embed_tokens.weight".into(),
        Part::Output => "lm_head.weight".into(),
        Part::OutputNorm => "model.norm.weight".into(),
        Part::RopeFreqs => "rope_freqs".into(),
        Part::Layer(i, t) => {
            // Llama / Qwen naming, the architectures loaded from safetensors. Their checkpoints
            // have no fused q/k/v and no post-norms; those get Phi-3's and Gemma's names, which
            // such a checkpoint lacks, so asking for them finds nothing.
            let n = match t {
                L::Q => "self_attn.q_proj.weight",
                L::K => "self_attn.k_proj.weight",
                L::V => "self_attn.v_proj.weight",
                L::QBias => "self_attn.q_proj.bias",
                L::KBias => "self_attn.k_proj.bias",
                L::VBias => "self_attn.v_proj.bias",
                L::Qkv => "self_attn.qkv_proj.weight",
                L::O => "self_attn.o_proj.weight",
                L::QNorm => "self_attn.q_norm.weight",
                L::KNorm => "self_attn.k_norm.weight",
                L::AttnNorm => "input_layernorm.weight",
                L::PostAttnNorm => "post_attention_norm.weight",
                L::FfnNorm => "post_attention_layernorm.weight",
                L::PostFfnNorm => "post_feedforward_layernorm.weight",
                L::Gate => "mlp.gate_proj.weight",
                L::Up => "mlp.up_proj.weight",
                L::Down => "mlp.down_proj.weight",
            };
            format!("model.layers.{i}.{n}")
        }
    }
}

/// A quantized tensor as a dense one of `dtype`.
fn dequantized(q: &QTensor, dtype: DType, device: &Device) -> candle_core::Result<Tensor> {
    q.dequantize(device)?.to_dtype(dtype)
}

impl Source<'_> {
    /// The dtype GGUF weights are dequantized to; `None`: they stay quantized.
    fn dense(&self) -> Option<DType> {
        match self {
            Source::Gguf { dense, .. } => *dense,
            Source::Safetensors { .. } => None,
        }
    }

    /// The dtype of dense tensors and activations.
    fn dtype(&self) -> DType {
        match self {
            Source::Gguf { dense, .. } => dense.unwrap_or(DType::F32),
            Source::Safetensors { vb, .. } => vb.dtype(),
        }
    }

    fn name(&self, part: Part) -> String {
        match self {
            Source::Gguf { .. } => gguf_name(part),
            Source::Safetensors { .. } => hf_name(part),
        }
    }

    fn where_(&self) -> String {
        match self {
            Source::Gguf { path, .. } => path.display().to_string(),
            Source::Safetensors { paths, .. } => paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    fn has(&self, part: Part) -> bool {
        let name = self.name(part);
        match self {
            Source::Gguf { content, .. } => content.tensor_infos.contains_key(&name),
            Source::Safetensors { vb, .. } => vb.contains_tensor(&name),
        }
    }

    /// An error about tensor `name` of this source.
    fn tensor_error(&self, name: &str, message: impl Into<String>) -> ModelError {
        ModelError::Tensor {
            files: self.where_(),
            tensor: name.to_string(),
            message: message.into(),
        }
    }

    fn missing(&self, part: Part) -> ModelError {
        self.tensor_error(&self.name(part), "is missing")
    }

    fn qtensor(&mut self, part: Part, device: &Device) -> Result<QTensor, ModelError> {
        let name = self.name(part);
        let where_ = self.where_();
        let unreadable = |e: candle_core::Error| ModelError::Tensor {
            files: where_.clone(),
            tensor: name.clone(),
            message: format!("{e} (truncated file?)"),
        };
        match self {
            Source::Gguf { content, file, .. } => {
                content.tensor(file, &name, device).map_err(unreadable)
            }
            Source::Safetensors { .. } => Err(self.missing(part)),
        }
    }

    /// A matmul weight of shape `(out, in)`.
    fn matmul(
        &mut self,
        part: Part,
        shape: (usize, usize),
        device: &Device,
    ) -> Result<QMatMul, ModelError> {
        if !self.has(part) {
            return Err(self.missing(part));
        }
        let name = self.name(part);
        let where_ = self.where_();
        let error = |message: String| ModelError::Tensor {
            files: where_.clone(),
            tensor: name.clone(),
            message,
        };
        let bad = |dims: &[usize]| {
            error(format!(
                "has shape {dims:?}, expected [{}, {}]",
                shape.0, shape.1
            ))
        };
        match self {
            Source::Gguf { .. } => {
                let dense = self.dense();
                let q = self.qtensor(part, device)?;
                if q.shape().dims() != [shape.0, shape.1] {
                    return Err(bad(q.shape().dims()));
                }
                let err = |e: candle_core::Error| error(e.to_string());
                match dense {
                    Some(dt) => Ok(QMatMul::Tensor(dequantized(&q, dt, device).map_err(err)?)),
                    None => QMatMul::from_arc(Arc::new(q)).map_err(err),
                }
            }
            Source::Safetensors { vb, .. } => {
                let t = vb.get_unchecked(&name).map_err(|e| error(e.to_string()))?;
                if t.dims() != [shape.0, shape.1] {
                    return Err(bad(t.dims()));
                }
                Ok(QMatMul::Tensor(t))
            }
        }
    }

    /// A dense tensor of `len` elements (norms, biases, rope factors) in the source's dtype.
    fn vector(&mut self, part: Part, len: usize, device: &Device) -> Result<Tensor, ModelError> {
        if !self.has(part) {
            return Err(self.missing(part));
        }
        let name = self.name(part);
        let error = |src: &Source, e: candle_core::Error| src.tensor_error(&name, e.to_string());
        let t = match self {
            Source::Gguf { .. } => {
                let q = self.qtensor(part, device)?;
                q.dequantize(device).map_err(|e| error(self, e))?
            }
            Source::Safetensors { vb, .. } => match vb.get_unchecked(&name) {
                Ok(t) => t,
                Err(e) => return Err(error(self, e)),
            },
        };
        if t.dims() != [len] {
            return Err(
                self.tensor_error(&name, format!("has shape {:?}, expected [{len}]", t.dims()))
            );
        }
        t.to_dtype(self.dtype()).map_err(|e| error(self, e))
    }

    fn linear(
        &mut self,
        i: usize,
        w: L,
        bias: Option<L>,
        shape: (usize, usize),
        device: &Device,
    ) -> Result<Linear, ModelError> {
        let weight = self.matmul(Part::Layer(i, w), shape, device)?;
        let bias = match bias {
            Some(b) if self.has(Part::Layer(i, b)) => {
                Some(self.vector(Part::Layer(i, b), shape.0, device)?)
            }
            _ => None,
        };
        Ok(Linear {
            weight,
            bias,
            dense: None,
        })
    }
}

/// Assembles the decoder for `cfg` from `src`; `vocab` is the embedding's row count.
pub fn build(
    cfg: ArchConfig,
    src: &mut Source,
    device: &Device,
) -> Result<CandleDecoder, ModelError> {
    let (h, d) = (cfg.hidden, cfg.head_dim);
    let (qd, kvd) = (cfg.heads * d, cfg.kv_heads * d);
    let dtype = src.dtype();
    let (vocab, embed) = match src {
        Source::Gguf { .. } => {
            let dense = src.dense();
            let name = gguf_name(Part::Embed);
            let q = src.qtensor(Part::Embed, device)?;
            let dims = q.shape().dims().to_vec();
            if dims.len() != 2 || dims[1] != h {
                return Err(
                    src.tensor_error(&name, format!("has shape {dims:?}, expected [vocab, {h}]"))
                );
            }
            let err = |e: candle_core::Error| src.tensor_error(&name, e.to_string());
            let embed = match dense {
                Some(dt) => Embedding::Dense(dequantized(&q, dt, device).map_err(err)?),
                None => Embedding::Quantized(QMatMul::from_arc(Arc::new(q)).map_err(err)?),
            };
            (dims[0], embed)
        }
        Source::Safetensors { vb, .. } => {
            let name = hf_name(Part::Embed);
            let t = match vb.get_unchecked(&name) {
                Ok(t) => t,
                Err(e) => return Err(src.tensor_error(&name, e.to_string())),
            };
            let dims = t.dims().to_vec();
            if dims.len() != 2 || dims[1] != h {
                return Err(
                    src.tensor_error(&name, format!("has shape {dims:?}, expected [vocab, {h}]"))
                );
            }
            (dims[0], Embedding::Dense(t))
        }
    };
    let lm_head = if src.has(Part::Output) {
        src.matmul(Part::Output, (vocab, h), device)?
    } else {
        match &embed {
            Embedding::Quantized(QMatMul::QTensor(q)) => QMatMul::QTensor(q.clone()),
            Embedding::Quantized(QMatMul::Tensor(t) | QMatMul::TensorF16(t))
            | Embedding::Dense(t) => QMatMul::Tensor(
                t.to_dtype(dtype)
                    .map_err(|e| src.tensor_error(&src.name(Part::Embed), e.to_string()))?,
            ),
        }
    };
    let mut layers = Vec::with_capacity(cfg.layers);
    for i in 0..cfg.layers {
        let l = |n| Part::Layer(i, n);
        let qkv = if src.has(l(L::Qkv)) {
            Qkv::Fused(src.linear(i, L::Qkv, None, (qd + 2 * kvd, h), device)?)
        } else {
            Qkv::Separate(
                src.linear(i, L::Q, Some(L::QBias), (qd, h), device)?,
                src.linear(i, L::K, Some(L::KBias), (kvd, h), device)?,
                src.linear(i, L::V, Some(L::VBias), (kvd, h), device)?,
            )
        };
        let qk_norm = if matches!(cfg.arch, Arch::Qwen3 | Arch::Gemma3) {
            Some((
                Norm(src.vector(l(L::QNorm), d, device)?),
                Norm(src.vector(l(L::KNorm), d, device)?),
            ))
        } else {
            None
        };
        let gemma = cfg.arch == Arch::Gemma3;
        let ffn = ffn_width(src, i, h)?;
        let gate_up = if src.has(l(L::Gate)) {
            GateUp::Separate(
                src.linear(i, L::Gate, None, (ffn, h), device)?,
                src.linear(i, L::Up, None, (ffn, h), device)?,
            )
        } else {
            GateUp::Fused(src.linear(i, L::Up, None, (2 * ffn, h), device)?)
        };
        layers.push(Layer {
            attn_norm: Norm(src.vector(l(L::AttnNorm), h, device)?),
            qkv,
            o: src.linear(i, L::O, None, (h, qd), device)?,
            qk_norm,
            post_attn_norm: if gemma {
                Some(Norm(src.vector(l(L::PostAttnNorm), h, device)?))
            } else {
                None
            },
            ffn_norm: Norm(src.vector(l(L::FfnNorm), h, device)?),
            gate_up,
            down: src.linear(i, L::Down, None, (h, ffn), device)?,
            post_ffn_norm: if gemma {
                Some(Norm(src.vector(l(L::PostFfnNorm), h, device)?))
            } else {
                None
            },
        });
    }
    let factors: Option<Vec<f32>> =
        if matches!(src, Source::Gguf { .. }) && src.has(Part::RopeFreqs) {
            let t = src.vector(Part::RopeFreqs, d / 2, device)?;
            Some(
                t.to_dtype(DType::F32)
                    .and_then(|t| t.to_vec1())
                    .map_err(|e| src.tensor_error(&src.name(Part::RopeFreqs), e.to_string()))?,
            )
        } else {
            None
        };
    let freqs = |base| {
        let f = inv_freqs(&cfg, base, factors.as_deref());
        Tensor::new(f, device).map_err(|e| ModelError::Backend {
            files: src.where_(),
            message: format!("rotary frequencies: {e}"),
        })
    };
    let inv_freq = (freqs(cfg.rope_base)?, freqs(cfg.rope_local_base)?);
    let norm = Norm(src.vector(Part::OutputNorm, h, device)?);
    let n_layers = layers.len();
    Ok(CandleDecoder {
        cfg,
        embed,
        layers,
        norm,
        lm_head,
        inv_freq,
        device: device.clone(),
        dtype,
        cache: vec![None; n_layers],
    })
}

/// The MLP width of layer `i`, read from its down projection's shape.
fn ffn_width(src: &Source, i: usize, h: usize) -> Result<usize, ModelError> {
    let part = Part::Layer(i, L::Down);
    let name = src.name(part);
    let dims: Vec<usize> = match src {
        Source::Gguf { content, .. } => content
            .tensor_infos
            .get(&name)
            .map(|t| t.shape.dims().to_vec())
            .ok_or_else(|| src.missing(part))?,
        Source::Safetensors { vb, .. } => vb
            .get_unchecked(&name)
            .map_err(|_| src.missing(part))?
            .dims()
            .to_vec(),
    };
    match dims[..] {
        [out, ffn] if out == h => Ok(ffn),
        _ => Err(src.tensor_error(&name, format!("has shape {dims:?}, expected [{h}, ffn]"))),
    }
}
