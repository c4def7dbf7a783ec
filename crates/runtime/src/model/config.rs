//! Architecture hyper-parameters: GGUF metadata or a Hugging Face `config.json` → [`ArchConfig`].
//!
//! One struct describes every supported decoder (llama, qwen2, qwen3, gemma3, phi3); the
//! differences between them are fields (biases, per-head q/k norms, post-norms, fused projections,
//! interleaved RoPE, embedding scale, activation, sliding windows), not code paths. Missing
//! required keys are errors naming the key; optional ones take the defaults llama.cpp and
//! Transformers use.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use serde_json::Value as Json;

/// A supported architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Llama 2/3, SmolLM, Mistral-style dense decoders.
    Llama,
    /// Qwen 2 / 2.5 (q/k/v biases).
    Qwen2,
    /// Qwen 3 dense (per-head q/k norms).
    Qwen3,
    /// Gemma 3 text (scaled embedding, post-norms, GELU, sliding-window layers).
    Gemma3,
    /// Phi-3 (fused qkv and gate/up projections).
    Phi3,
}

impl Arch {
    /// The architecture called `name` (GGUF `general.architecture` or HF `model_type`).
    pub fn parse(name: &str) -> Option<Arch> {
        Some(match name {
            "llama" | "mistral" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" | "gemma3_text" => Arch::Gemma3,
            "phi3" => Arch::Phi3,
            _ => return None,
        })
    }

    /// The canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
            Arch::Phi3 => "phi3",
        }
    }
}

/// The MLP activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SiLU (swish).
    Silu,
    /// GELU, tanh approximation.
    GeluTanh,
}

/// Everything the decoder needs to know about the network's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchConfig {
    /// The architecture.
    pub arch: Arch,
    /// Residual width.
    pub hidden: usize,
    /// Decoder blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Per-head width.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub eps: f64,
    /// RoPE base (global layers).
    pub rope_base: f64,
    /// RoPE base of sliding-window layers (Gemma 3).
    pub rope_local_base: f64,
    /// Positions are divided by this on global layers (linear RoPE scaling).
    pub rope_linear_factor: f64,
    /// Llama 3 rope scaling: `(factor, low_freq_factor, high_freq_factor, original_context)`.
    pub rope_llama3: Option<(f64, f64, f64, f64)>,
    /// Interleaved (GPT-J) rather than rotate-half RoPE: llama GGUF files only.
    pub rope_interleaved: bool,
    /// Sliding-window size and the layer pattern (every `n`th layer is global).
    pub sliding_window: Option<(usize, usize)>,
    /// Multiply embeddings by `sqrt(hidden)`.
    pub scale_embeddings: bool,
    /// Attention score scale.
    pub attn_scale: f64,
    /// MLP activation.
    pub activation: Activation,
    /// Final logit soft-capping.
    pub final_softcap: Option<f64>,
    /// Longest context the model was trained for.
    pub context: usize,
}

impl ArchConfig {
    /// Whether layer `i` uses the sliding window (and the local RoPE base).
    pub fn is_local_layer(&self, i: usize) -> bool {
        self.sliding_window
            .is_some_and(|(_, every)| every > 0 && !(i + 1).is_multiple_of(every))
    }
}

fn md_f64(v: &Value) -> Option<f64> {
    Some(match v {
        Value::F32(x) => f64::from(*x),
        Value::F64(x) => *x,
        Value::U8(x) => f64::from(*x),
        Value::I8(x) => f64::from(*x),
        Value::U16(x) => f64::from(*x),
        Value::I16(x) => f64::from(*x),
        Value::U32(x) => f64::from(*x),
        Value::I32(x) => f64::from(*x),
        Value::U64(x) => *x as f64,
        Value::I64(x) => *x as f64,
        _ => return None,
    })
}

/// A hyper-parameter that is missing, malformed or not supported: its key (GGUF metadata key or
/// `config.json` field) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}` {problem}")]
pub struct ConfigError {
    /// The key, e.g. `qwen2.block_count` or `rope_scaling.factor`.
    pub key: String,
    /// What is wrong, e.g. `is missing`.
    pub problem: String,
}

fn bad(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        problem: problem.into(),
    }
}

/// Grouped-query attention needs the query heads to be a whole multiple of the key/value heads.
fn check_heads(heads: usize, kv_heads: usize, key: String) -> Result<(), ConfigError> {
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return Err(bad(
            key,
            format!("= {kv_heads}: the {heads} query heads are not a multiple of it"),
        ));
    }
    Ok(())
}

/// GGUF metadata → config. `head_dim_hint` is the width of the query projection divided by heads
/// when the file does not say; errors name the missing or malformed key.
pub fn from_gguf(md: &HashMap<String, Value>) -> Result<ArchConfig, ConfigError> {
    const ARCH: &str = "general.architecture";
    let name = match md.get(ARCH) {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(bad(ARCH, "is not a string")),
        None => return Err(bad(ARCH, "is missing")),
    };
    let arch = Arch::parse(&name).ok_or_else(|| {
        bad(
            ARCH,
            format!("{name:?} is not supported (supported: llama, qwen2, qwen3, gemma3, phi3)"),
        )
    })?;
    let num = |key: &str| -> Result<Option<f64>, ConfigError> {
        let full = format!("{name}.{key}");
        match md.get(&full) {
            None => Ok(None),
            Some(v) => md_f64(v)
                .map(Some)
                .ok_or_else(|| bad(full, "is not a number")),
        }
    };
    let need = |key: &str| -> Result<usize, ConfigError> {
        let full = format!("{name}.{key}");
        let v = num(key)?.ok_or_else(|| bad(&full, "is missing"))?;
        if v >= 1.0 && v.fract() == 0.0 && v < 1e9 {
            Ok(v as usize)
        } else {
            Err(bad(full, format!("= {v} is not a positive count")))
        }
    };
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?;
    let kv_heads = num("attention.head_count_kv")?.map_or(heads, |v| v as usize);
    check_heads(heads, kv_heads, format!("{name}.attention.head_count_kv"))?;
    let head_dim = num("attention.key_length")?.map_or(hidden / heads, |v| v as usize);
    let layers = need("block_count")?;
    let eps = num("attention.layer_norm_rms_epsilon")?.unwrap_or(1e-6);
    let default_base = if arch == Arch::Gemma3 { 1e6 } else { 1e4 };
    let rope_base = num("rope.freq_base")?.unwrap_or(default_base);
    let rope_dim = num("rope.dimension_count")?.map_or(head_dim, |v| v as usize);
    if rope_dim != head_dim {
        return Err(bad(
            format!("{name}.rope.dimension_count"),
            format!("= {rope_dim} differs from the head width {head_dim}: partial rotary embeddings are not supported"),
        ));
    }
    let linear = match md.get(&format!("{name}.rope.scaling.type")) {
        Some(Value::String(t)) if t == "linear" => num("rope.scaling.factor")?.unwrap_or(1.0),
        _ => 1.0,
    };
    let context = num("context_length")?.map_or(4096, |v| v as usize);
    let mut cfg = base_config(
        arch, hidden, layers, heads, kv_heads, head_dim, eps, rope_base,
    );
    cfg.rope_linear_factor = linear;
    cfg.context = context;
    cfg.rope_interleaved = arch == Arch::Llama;
    if arch == Arch::Gemma3 {
        let window = num("attention.sliding_window")?.map_or(4096, |v| v as usize);
        let every = num("attention.sliding_window_type")?.map_or(6, |v| v as usize);
        cfg.sliding_window = Some((window, every));
        cfg.rope_local_base = num("rope.local_freq_base")?.unwrap_or(1e4);
        cfg.final_softcap = num("final_logit_softcapping")?;
        if layers == 62 {
            cfg.attn_scale = 1.0 / ((hidden / heads) as f64).sqrt();
        }
    }
    Ok(cfg)
}

#[allow(clippy::too_many_arguments)]
fn base_config(
    arch: Arch,
    hidden: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f64,
    rope_base: f64,
) -> ArchConfig {
    ArchConfig {
        arch,
        hidden,
        layers,
        heads,
        kv_heads,
        head_dim,
        eps,
        rope_base,
        rope_local_base: rope_base,
        rope_linear_factor: 1.0,
        rope_llama3: None,
        rope_interleaved: false,
        sliding_window: None,
        scale_embeddings: arch == Arch::Gemma3,
        attn_scale: 1.0 / (head_dim as f64).sqrt(),
        activation: if arch == Arch::Gemma3 {
            Activation::GeluTanh
        } else {
            Activation::Silu
        },
        final_softcap: None,
        context: 4096,
    }
}

/// A Hugging Face `config.json` → config (llama, qwen2, qwen3 checkpoints).
pub fn from_hf(config: &Json) -> Result<ArchConfig, ConfigError> {
    let model_type = config["model_type"]
        .as_str()
        .ok_or_else(|| bad("model_type", "is missing or not a string"))?;
    let arch = match Arch::parse(model_type) {
        Some(a @ (Arch::Llama | Arch::Qwen2 | Arch::Qwen3)) => a,
        _ => {
            return Err(bad(
                "model_type",
                format!("{model_type:?} is not supported for safetensors (supported: llama, mistral, qwen2, qwen3)"),
            ))
        }
    };
    let count = |key: &str| -> Result<usize, ConfigError> {
        config[key]
            .as_u64()
            .filter(|&v| v >= 1)
            .map(|v| v as usize)
            .ok_or_else(|| bad(key, "is missing or not a positive integer"))
    };
    let hidden = count("hidden_size")?;
    let heads = count("num_attention_heads")?;
    let kv_heads = config["num_key_value_heads"]
        .as_u64()
        .map_or(heads, |v| v as usize);
    check_heads(heads, kv_heads, "num_key_value_heads".into())?;
    let head_dim = config["head_dim"]
        .as_u64()
        .map_or(hidden / heads, |v| v as usize);
    let layers = count("num_hidden_layers")?;
    let eps = config["rms_norm_eps"].as_f64().unwrap_or(1e-6);
    // Transformers 5 writes the RoPE settings as one `rope_parameters` object.
    let rope_params = &config["rope_parameters"];
    let rope_base = config["rope_theta"]
        .as_f64()
        .or(rope_params["rope_theta"].as_f64())
        .unwrap_or(1e4);
    let mut cfg = base_config(
        arch, hidden, layers, heads, kv_heads, head_dim, eps, rope_base,
    );
    cfg.context = config["max_position_embeddings"]
        .as_u64()
        .map_or(4096, |v| v as usize);
    let scaling = if config["rope_scaling"].is_object() {
        &config["rope_scaling"]
    } else {
        rope_params
    };
    let kind = scaling["rope_type"].as_str().or(scaling["type"].as_str());
    match kind {
        None | Some("default") => {}
        Some("llama3") => {
            let f = |k: &str| {
                scaling[k]
                    .as_f64()
                    .ok_or_else(|| bad(format!("rope_scaling.{k}"), "is missing"))
            };
            cfg.rope_llama3 = Some((
                f("factor")?,
                f("low_freq_factor")?,
                f("high_freq_factor")?,
                f("original_max_position_embeddings")?,
            ));
        }
        Some("linear") => cfg.rope_linear_factor = scaling["factor"].as_f64().unwrap_or(1.0),
        Some(other) => {
            return Err(bad(
                "rope_scaling.rope_type",
                format!("{other:?} is not supported (supported: llama3, linear)"),
            ))
        }
    }
    Ok(cfg)
}

/// Inverse RoPE frequencies for one head width, with Llama 3 scaling and per-frequency factors
/// (GGUF `rope_freqs.weight`) applied.
pub fn inv_freqs(cfg: &ArchConfig, base: f64, factors: Option<&[f32]>) -> Vec<f32> {
    let d = cfg.head_dim;
    (0..d / 2)
        .map(|i| {
            let mut f = 1.0 / base.powf(2.0 * i as f64 / d as f64);
            if let Some((factor, low, high, orig)) = cfg.rope_llama3 {
                let wavelen = 2.0 * std::f64::consts::PI / f;
                if wavelen > orig / low {
                    f /= factor;
                } else if wavelen >= orig / high {
                    let s = (orig / wavelen - low) / (high - low);
                    f = (1.0 - s) * f / factor + s * f;
                }
            }
            if let Some(&k) = factors.and_then(|fs| fs.get(i)) {
                f /= f64::from(k);
            }
            f as f32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_config_and_errors() {
        let c = from_hf(
            &serde_json::json!({"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 32, "num_hidden_layers": 2, "rope_theta": 1e6}),
        )
        .unwrap();
        assert_eq!(
            (c.arch, c.head_dim, c.kv_heads, c.rope_interleaved),
            (Arch::Qwen3, 32, 2, false)
        );
        let e =
            from_hf(&serde_json::json!({"model_type": "llama", "hidden_size": 64})).unwrap_err();
        assert_eq!(e.key, "num_attention_heads", "{e}");
        let e = from_hf(&serde_json::json!({"model_type": "gpt2"})).unwrap_err();
        assert!(e.key == "model_type" && e.problem.contains("gpt2"), "{e}");
        let e = from_hf(
            &serde_json::json!({"model_type": "llama", "hidden_size": 64,
            "num_attention_heads": 6, "num_key_value_heads": 4, "num_hidden_layers": 2}),
        )
        .unwrap_err();
        assert_eq!(e.key, "num_key_value_heads", "{e}");
    }

    #[test]
    fn llama3_scaling_keeps_high_and_divides_low_frequencies() {
        let mut c = from_hf(
            &serde_json::json!({"model_type": "llama", "hidden_size": 128, "num_attention_heads": 1,
            "num_hidden_layers": 1, "rope_theta": 500000.0}),
        )
        .unwrap();
        let plain = inv_freqs(&c, c.rope_base, None);
        c.rope_llama3 = Some((8.0, 1.0, 4.0, 8192.0));
        let scaled = inv_freqs(&c, c.rope_base, None);
        assert_eq!(plain[0], scaled[0]);
        let last = plain.len() - 1;
        assert!((plain[last] / 8.0 - scaled[last]).abs() < 1e-12);
    }
}
