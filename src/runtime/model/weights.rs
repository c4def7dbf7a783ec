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

/// A tensor role, independent of the file format's naming.
#[derive(Debug, Clone, Copy)]
enum Part {
    Embed,
    Output,
    OutputNorm,
    RopeFreqs,
    Layer(usize, &'static str),
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
        Part::Layer(i, name) => {
            let n = match name {
                "q" => "attn_q.weight",
                "k" => "attn_k.weight",
                "v" => "attn_v.weight",
                "q.bias" => "attn_q.bias",
                "k.bias" => "attn_k.bias",
                "v.bias" => "attn_v.bias",
                "qkv" => "attn_qkv.weight",
                "o" => "attn_output.weight",
                "q_norm" => "attn_q_norm.weight",
                "k_norm" => "attn_k_norm.weight",
                "attn_norm" => "attn_norm.weight",
                "post_attn_norm" => "post_attention_norm.weight",
                "ffn_norm" => "ffn_norm.weight",
                "post_ffn_norm" => "post_ffw_norm.weight",
                "gate" => "ffn_gate.weight",
                "up" => "ffn_up.weight",
                "down" => "ffn_down.weight",
                other => other,
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
        Part::Layer(i, name) => {
            let n = match name {
                "q" => "self_attn.q_proj.weight",
                "k" => "self_attn.k_proj.weight",
                "v" => "self_attn.v_proj.weight",
                "q.bias" => "self_attn.q_proj.bias",
                "k.bias" => "self_attn.k_proj.bias",
                "v.bias" => "self_attn.v_proj.bias",
                "o" => "self_attn.o_proj.weight",
                "q_norm" => "self_attn.q_norm.weight",
                "k_norm" => "self_attn.k_norm.weight",
                "attn_norm" => "input_layernorm.weight",
                "ffn_norm" => "post_attention_layernorm.weight",
                "gate" => "mlp.gate_proj.weight",
                "up" => "mlp.up_proj.weight",
                "down" => "mlp.down_proj.weight",
                other => other,
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

    fn missing(&self, part: Part) -> String {
        format!("{}: tensor `{}` is missing", self.where_(), self.name(part))
    }

    fn qtensor(&mut self, part: Part, device: &Device) -> Result<QTensor, String> {
        let name = self.name(part);
        let where_ = self.where_();
        match self {
            Source::Gguf { content, file, .. } => content
                .tensor(file, &name, device)
                .map_err(|e| format!("{where_}: tensor `{name}`: {e} (truncated file?)")),
            Source::Safetensors { .. } => Err(self.missing(part)),
        }
    }

    /// A matmul weight of shape `(out, in)`.
    fn matmul(
        &mut self,
        part: Part,
        shape: (usize, usize),
        device: &Device,
    ) -> Result<QMatMul, String> {
        if !self.has(part) {
            return Err(self.missing(part));
        }
        let name = self.name(part);
        let where_ = self.where_();
        let bad = |dims: &[usize]| {
            format!(
                "{where_}: tensor `{name}` has shape {dims:?}, expected [{}, {}]",
                shape.0, shape.1
            )
        };
        match self {
            Source::Gguf { .. } => {
                let dense = self.dense();
                let q = self.qtensor(part, device)?;
                if q.shape().dims() != [shape.0, shape.1] {
                    return Err(bad(q.shape().dims()));
                }
                let err = |e: candle_core::Error| format!("{where_}: `{name}`: {e}");
                match dense {
                    Some(dt) => Ok(QMatMul::Tensor(dequantized(&q, dt, device).map_err(err)?)),
                    None => QMatMul::from_arc(Arc::new(q)).map_err(err),
                }
            }
            Source::Safetensors { vb, .. } => {
                let t = vb
                    .get_unchecked(&name)
                    .map_err(|e| format!("{where_}: tensor `{name}`: {e}"))?;
                if t.dims() != [shape.0, shape.1] {
                    return Err(bad(t.dims()));
                }
                Ok(QMatMul::Tensor(t))
            }
        }
    }

    /// A dense tensor of `len` elements (norms, biases, rope factors) in the source's dtype.
    fn vector(&mut self, part: Part, len: usize, device: &Device) -> Result<Tensor, String> {
        if !self.has(part) {
            return Err(self.missing(part));
        }
        let name = self.name(part);
        let where_ = self.where_();
        let t = match self {
            Source::Gguf { .. } => self
                .qtensor(part, device)?
                .dequantize(device)
                .map_err(|e| format!("{where_}: `{name}`: {e}"))?,
            Source::Safetensors { vb, .. } => vb
                .get_unchecked(&name)
                .map_err(|e| format!("{where_}: tensor `{name}`: {e}"))?,
        };
        if t.dims() != [len] {
            return Err(format!(
                "{where_}: tensor `{name}` has shape {:?}, expected [{len}]",
                t.dims()
            ));
        }
        t.to_dtype(self.dtype()).map_err(|e| e.to_string())
    }

    fn linear(
        &mut self,
        i: usize,
        w: &'static str,
        bias: Option<&'static str>,
        shape: (usize, usize),
        device: &Device,
    ) -> Result<Linear, String> {
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
pub fn build(cfg: ArchConfig, src: &mut Source, device: &Device) -> Result<CandleDecoder, String> {
    let (h, d) = (cfg.hidden, cfg.head_dim);
    let (qd, kvd) = (cfg.heads * d, cfg.kv_heads * d);
    if cfg.kv_heads == 0 || !cfg.heads.is_multiple_of(cfg.kv_heads) {
        return Err(format!(
            "{}: {} query heads are not a multiple of {} key/value heads",
            src.where_(),
            cfg.heads,
            cfg.kv_heads
        ));
    }
    let dtype = src.dtype();
    let (vocab, embed) = match src {
        Source::Gguf { .. } => {
            let dense = src.dense();
            let q = src.qtensor(Part::Embed, device)?;
            let dims = q.shape().dims().to_vec();
            if dims.len() != 2 || dims[1] != h {
                return Err(format!(
                    "{}: `token_embd.weight` has shape {dims:?}, expected [vocab, {h}]",
                    src.where_()
                ));
            }
            let embed = match dense {
                Some(dt) => {
                    Embedding::Dense(dequantized(&q, dt, device).map_err(|e| e.to_string())?)
                }
                None => {
                    Embedding::Quantized(QMatMul::from_arc(Arc::new(q)).map_err(|e| e.to_string())?)
                }
            };
            (dims[0], embed)
        }
        Source::Safetensors { vb, .. } => {
            let name = hf_name(Part::Embed);
            let t = vb
                .get_unchecked(&name)
                .map_err(|e| format!("{}: tensor `{name}`: {e}", src.where_()))?;
            let dims = t.dims().to_vec();
            if dims.len() != 2 || dims[1] != h {
                return Err(format!(
                    "{}: `{name}` has shape {dims:?}, expected [vocab, {h}]",
                    src.where_()
                ));
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
            | Embedding::Dense(t) => QMatMul::Tensor(t.to_dtype(dtype).map_err(|e| e.to_string())?),
        }
    };
    let mut layers = Vec::with_capacity(cfg.layers);
    for i in 0..cfg.layers {
        let l = |n| Part::Layer(i, n);
        let qkv = if src.has(l("qkv")) {
            Qkv::Fused(src.linear(i, "qkv", None, (qd + 2 * kvd, h), device)?)
        } else {
            Qkv::Separate(
                src.linear(i, "q", Some("q.bias"), (qd, h), device)?,
                src.linear(i, "k", Some("k.bias"), (kvd, h), device)?,
                src.linear(i, "v", Some("v.bias"), (kvd, h), device)?,
            )
        };
        let qk_norm = if matches!(cfg.arch, Arch::Qwen3 | Arch::Gemma3) {
            Some((
                Norm(src.vector(l("q_norm"), d, device)?),
                Norm(src.vector(l("k_norm"), d, device)?),
            ))
        } else {
            None
        };
        let gemma = cfg.arch == Arch::Gemma3;
        let ffn = ffn_width(src, i, h)?;
        let gate_up = if src.has(l("gate")) {
            GateUp::Separate(
                src.linear(i, "gate", None, (ffn, h), device)?,
                src.linear(i, "up", None, (ffn, h), device)?,
            )
        } else {
            GateUp::Fused(src.linear(i, "up", None, (2 * ffn, h), device)?)
        };
        layers.push(Layer {
            attn_norm: Norm(src.vector(l("attn_norm"), h, device)?),
            qkv,
            o: src.linear(i, "o", None, (h, qd), device)?,
            qk_norm,
            post_attn_norm: if gemma {
                Some(Norm(src.vector(l("post_attn_norm"), h, device)?))
            } else {
                None
            },
            ffn_norm: Norm(src.vector(l("ffn_norm"), h, device)?),
            gate_up,
            down: src.linear(i, "down", None, (h, ffn), device)?,
            post_ffn_norm: if gemma {
                Some(Norm(src.vector(l("post_ffn_norm"), h, device)?))
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
                    .map_err(|e| e.to_string())?,
            )
        } else {
            None
        };
    let freqs = |base| {
        let f = inv_freqs(&cfg, base, factors.as_deref());
        Tensor::new(f, device).map_err(|e| e.to_string())
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
fn ffn_width(src: &Source, i: usize, h: usize) -> Result<usize, String> {
    let part = Part::Layer(i, "down");
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
        _ => Err(format!(
            "{}: tensor `{name}` has shape {dims:?}, expected [{h}, ffn]",
            src.where_()
        )),
    }
}
