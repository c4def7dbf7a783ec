//! `structgen run --model owner/name` through hf-hub against a local server that answers the way
//! the Hugging Face Hub does: a tiny randomly initialised llama safetensors checkpoint, its
//! config.json, the SmolLM2 tokenizer.json and a tokenizer_config.json with a chat template are
//! fetched into the hub cache (`HF_HOME`), loaded and used to generate a tool call. A second run
//! is served from the cache without a request; an unknown repo is a clear error.

mod common;

use std::collections::HashMap;
use std::process::Command;

use candle_core::{Device, Tensor};
use common::mock_hub::{MockHub, MockRepo};
use serde_json::{json, Value};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn tiny_llama(vocab: usize) -> Vec<u8> {
    let (hidden, ffn, heads, kv, layers) = (32usize, 64usize, 2usize, 1usize, 2usize);
    let d = hidden / heads;
    let mut seed = 0x0005_DEEC_E66D_u64;
    let mut t = |shape: &[usize], offset: f32| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.5 + offset
            })
            .collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    };
    let mut w: HashMap<String, Tensor> = HashMap::new();
    w.insert("model.embed_tokens.weight".into(), t(&[vocab, hidden], 0.0));
    w.insert("model.norm.weight".into(), t(&[hidden], 1.0));
    for i in 0..layers {
        let p = format!("model.layers.{i}");
        w.insert(format!("{p}.input_layernorm.weight"), t(&[hidden], 1.0));
        w.insert(
            format!("{p}.post_attention_layernorm.weight"),
            t(&[hidden], 1.0),
        );
        w.insert(
            format!("{p}.self_attn.q_proj.weight"),
            t(&[heads * d, hidden], 0.0),
        );
        w.insert(
            format!("{p}.self_attn.k_proj.weight"),
            t(&[kv * d, hidden], 0.0),
        );
        w.insert(
            format!("{p}.self_attn.v_proj.weight"),
            t(&[kv * d, hidden], 0.0),
        );
        w.insert(
            format!("{p}.self_attn.o_proj.weight"),
            t(&[hidden, heads * d], 0.0),
        );
        w.insert(format!("{p}.mlp.gate_proj.weight"), t(&[ffn, hidden], 0.0));
        w.insert(format!("{p}.mlp.up_proj.weight"), t(&[ffn, hidden], 0.0));
        w.insert(format!("{p}.mlp.down_proj.weight"), t(&[hidden, ffn], 0.0));
    }
    let path =
        std::env::temp_dir().join(format!("structgen-hub-{}.safetensors", std::process::id()));
    candle_core::safetensors::save(&w, &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    bytes
}

fn run(hub: &MockHub, home: &std::path::Path, model: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_structgen"))
        .current_dir(common::repo())
        .env("HF_ENDPOINT", &hub.endpoint)
        .env("HF_HOME", home)
        .env_remove("HF_TOKEN")
        .args(["run", "--model", model, "--prompt", "Weather in Rome?"])
        .args([
            "--tools",
            "grammars/tools/weather.json",
            "--style",
            "hermes",
            "--tool-choice",
            "required",
            // The style's own syntax, forced by jump-forward, fits the token budget even with
            // random weights (which may wander through the other formats' free whitespace).
            "--call-formats",
            "canonical",
        ])
        .args([
            "--max-tokens",
            "24",
            "--json",
            "--temperature",
            "0.8",
            "--seed",
            "3",
        ])
        .output()
        .unwrap()
}

#[test]
fn run_fetches_a_safetensors_model_through_hf_hub() {
    let Some(shared) = common::shared_dir("run_fetches_a_safetensors_model_through_hf_hub") else {
        return;
    };
    let tokenizer = std::fs::read(shared.join("tokenizers/smollm2-135m.tokenizer.json")).unwrap();
    let vocab: Value = serde_json::from_slice(&tokenizer).unwrap();
    let size = vocab["model"]["vocab"].as_object().unwrap().len();
    let config = json!({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
        "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 2, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "max_position_embeddings": 512, "vocab_size": size, "tie_word_embeddings": true});
    let template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    let tok_config =
        json!({"chat_template": template, "eos_token": "<|im_end|>", "bos_token": null});
    let weights = tiny_llama(size);
    let config_bytes = config.to_string().into_bytes();
    let tok_config_bytes = tok_config.to_string().into_bytes();
    let repo = MockRepo::new(
        "structgen-test/tiny-llama",
        COMMIT,
        &[
            ("config.json", &config_bytes),
            ("tokenizer.json", &tokenizer),
            ("tokenizer_config.json", &tok_config_bytes),
            ("model.safetensors", &weights),
        ],
    );
    let hub = MockHub::start(vec![repo]).unwrap();
    let home = std::env::temp_dir().join(format!("structgen-hf-home-{}", std::process::id()));
    std::fs::remove_dir_all(&home).ok();

    let out = run(&hub, &home, "structgen-test/tiny-llama");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert!(
        v["summary"]["tokens_generated"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .starts_with("<tool_call>\n{\"name\": \"get_"),
        "{v}"
    );
    assert!(stderr.contains("llama, safetensors, 2 layers"), "{stderr}");
    let snapshot = home
        .join("hub/models--structgen-test--tiny-llama/snapshots")
        .join(COMMIT);
    for f in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model.safetensors",
    ] {
        assert!(snapshot.join(f).is_file(), "{f} not in the hub cache");
    }
    let fetched = hub.requests().len();
    assert!(hub
        .requests()
        .iter()
        .any(|r| r.ends_with("/resolve/main/model.safetensors")));

    let again = run(&hub, &home, "structgen-test/tiny-llama");
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let new: Vec<String> = hub.requests()[fetched..].to_vec();
    assert!(
        new.iter().all(|r| !r.ends_with("/model.safetensors")),
        "weights fetched twice: {new:?}"
    );

    let missing = run(&hub, &home, "structgen-test/no-such-model");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("structgen-test/no-such-model@main: cannot fetch config.json"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&home).ok();
}
