//! Vocabulary loaders against real files: the shared tokenizer.json files, the default model's GGUF
//! metadata (same vocabulary and tokenization as SmolLM2's tokenizer.json), a tiktoken rank file made
//! from Llama 3's vocabulary (same tokenization as its tokenizer.json), a SentencePiece byte-fallback
//! vocabulary, and broken inputs that must give errors naming the file.

mod common;

use std::io::Write;
use std::path::PathBuf;

use base64::Engine;
use common::{encode, model_file, shared_dir};
use structgen::vocab::{self, VocabError};
use structgen::{TokenId, TokenKind};

const SAMPLES: &[&str] = &[
    "Hello, world! The year 2024 had 366 days.",
    "  two leading spaces\n\ttab and\r\nCRLF   trailing   ",
    "naïve café — 你好，世界 😀🙏 Ελληνικά",
    "fn main() { println!(\"{}\", x[3] + 0x1F); }",
    r#"{"name": "get_weather", "arguments": {"city": "Zürich", "days": 12}}"#,
    "<|im_start|>user\nWhat's the weather?<|im_end|>",
    "I'm sure they'll say it's fine, we've done it, you'd agree.",
];

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("structgen-test-{}-{name}", std::process::id()))
}

#[test]
fn shared_tokenizers_load_with_specials_and_stops() {
    let Some(_) = shared_dir("shared_tokenizers_load_with_specials_and_stops") else {
        return;
    };
    let small = common::smollm2().expect("smollm2");
    assert_eq!(small.vocab.size(), 49_152);
    let im_end = small.vocab.find_token("<|im_end|>").expect("<|im_end|>");
    assert_eq!(small.vocab.kind(im_end), TokenKind::Special);
    assert!(small.vocab.stop_tokens().contains(&im_end));
    let specials = (0..49_152)
        .filter(|&i| small.vocab.kind(TokenId(i)) == TokenKind::Special)
        .count();
    assert_eq!(specials, 17);

    let large = common::llama3().expect("llama3");
    assert_eq!(large.vocab.size(), 128_256);
    let eot = large.vocab.find_token("<|eot_id|>").expect("<|eot_id|>");
    assert!(large.vocab.stop_tokens().contains(&eot));
    let specials = (0..128_256)
        .filter(|&i| large.vocab.kind(TokenId(i)) == TokenKind::Special)
        .count();
    assert_eq!(specials, 256);

    // Every token's bytes agree with what the tokenizer itself decodes (where that is valid UTF-8).
    for loaded in [&small, &large] {
        let mut compared = 0;
        for &t in loaded.vocab.sorted() {
            let bytes = loaded.vocab.token_bytes(t);
            if let Ok(text) = std::str::from_utf8(bytes) {
                let decoded = loaded.tokenizer.decode(&[t.0], false).expect("decodes");
                assert_eq!(decoded, text, "token {t}");
                compared += 1;
            }
        }
        assert!(compared > loaded.vocab.sorted().len() * 9 / 10);
    }
}

#[test]
fn gguf_vocabulary_matches_tokenizer_json() {
    let (Some(_), Some(model)) = (
        shared_dir("gguf_vocabulary_matches_tokenizer_json"),
        model_file("gguf_vocabulary_matches_tokenizer_json"),
    ) else {
        return;
    };
    let gguf = vocab::load(&model).expect("GGUF tokenizer");
    assert!(gguf.warnings.is_empty(), "{:?}", gguf.warnings);
    let json = common::smollm2().expect("smollm2");
    assert_eq!(gguf.vocab.size(), json.vocab.size());
    for i in 0..json.vocab.size() as u32 {
        let t = TokenId(i);
        assert_eq!(
            gguf.vocab.token_bytes(t),
            json.vocab.token_bytes(t),
            "token {i}"
        );
        assert_eq!(gguf.vocab.kind(t), json.vocab.kind(t), "kind of token {i}");
    }
    assert_eq!(gguf.vocab.stop_tokens(), &[TokenId(2)], "EOS <|im_end|>");
    for s in SAMPLES {
        assert_eq!(encode(&gguf, s), encode(&json, s), "{s:?}");
    }
}

#[test]
fn tiktoken_file_matches_llama3() {
    let Some(_) = shared_dir("tiktoken_file_matches_llama3") else {
        return;
    };
    let llama = common::llama3().expect("llama3");
    let path = temp_path("llama3.tiktoken");
    let mut out = String::new();
    for id in 0..128_000u32 {
        let bytes = llama.vocab.token_bytes(TokenId(id));
        out.push_str(&base64::engine::general_purpose::STANDARD.encode(bytes));
        out.push_str(&format!(" {id}\n"));
    }
    std::fs::write(&path, out).expect("write temp tiktoken file");
    let tk = vocab::load(&path).expect("tiktoken file");
    let _ = std::fs::remove_file(&path);
    assert_eq!(tk.vocab.size(), 128_000);
    for id in (0..128_000u32).step_by(97) {
        assert_eq!(
            tk.vocab.token_bytes(TokenId(id)),
            llama.vocab.token_bytes(TokenId(id))
        );
    }
    for s in SAMPLES.iter().filter(|s| !s.contains("<|")) {
        assert_eq!(encode(&tk, s), encode(&llama, s), "{s:?}");
    }
}

#[test]
fn sentencepiece_byte_fallback_vocabulary() {
    let mut vocab = serde_json::Map::new();
    let pieces = [
        "<unk>", "<s>", "</s>", "▁", "▁the", "the", "▁c", "at", "▁cat", "é", "c",
    ];
    for (i, p) in pieces.iter().enumerate() {
        vocab.insert(p.to_string(), serde_json::json!(i));
    }
    for b in 0..=255u32 {
        vocab.insert(
            format!("<0x{b:02X}>"),
            serde_json::json!(pieces.len() as u32 + b),
        );
    }
    let doc = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [
            {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
            {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
            {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
        ],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": null, "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
                  "vocab": vocab, "merges": [["▁", "the"], ["▁c", "at"], ["▁", "c"]]}
    });
    let dir = temp_path("spm");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, doc.to_string()).expect("write");
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"eos_token": "</s>"}"#,
    )
    .expect("write");
    let loaded = vocab::load(&path).expect("sentencepiece tokenizer.json");
    let _ = std::fs::remove_dir_all(&dir);
    let v = &loaded.vocab;
    assert_eq!(v.token_bytes(TokenId(4)), b" the");
    assert_eq!(v.token_bytes(TokenId(9)), "é".as_bytes());
    assert_eq!(v.token_bytes(TokenId(11 + 0xE2)), &[0xE2]);
    assert_eq!(v.kind(TokenId(2)), TokenKind::Special);
    assert_eq!(
        v.stop_tokens(),
        &[TokenId(2)],
        "eos from tokenizer_config.json"
    );
}

#[test]
fn broken_inputs_name_the_file() {
    let missing = PathBuf::from("/nonexistent/tokenizer.json");
    assert!(matches!(vocab::load(&missing), Err(VocabError::Io { .. })));

    let bad_json = temp_path("bad.json");
    std::fs::write(&bad_json, r#"{"version": "1.0", "added_tokens": []}"#).expect("write");
    let err = vocab::load(&bad_json)
        .err()
        .expect("tokenizer.json without a model");
    assert!(matches!(err, VocabError::Tokenizer { .. }), "{err}");
    assert!(err.to_string().contains("bad.json"), "{err}");

    let tik = temp_path("bad.tiktoken");
    std::fs::write(&tik, "IQ== 0\nnot-base64!! 1\n").expect("write");
    let err = vocab::load(&tik).err().expect("bad tiktoken line");
    assert!(matches!(err, VocabError::Tiktoken { line: 2, .. }), "{err}");

    let empty = temp_path("empty.tiktoken");
    std::fs::write(&empty, "\n\n").expect("write");
    assert!(matches!(vocab::load(&empty), Err(VocabError::Empty { .. })));

    if let Some(model) = model_file("broken_inputs_name_the_file") {
        let head = std::fs::read(&model)
            .expect("model")
            .into_iter()
            .take(100_000)
            .collect::<Vec<_>>();
        let truncated = temp_path("truncated.gguf");
        std::fs::File::create(&truncated)
            .and_then(|mut f| f.write_all(&head))
            .expect("write");
        let err = vocab::load(&truncated).err().expect("truncated GGUF");
        assert!(matches!(err, VocabError::Gguf { .. }), "{err}");
        let _ = std::fs::remove_file(&truncated);
    }
    for p in [bad_json, tik, empty] {
        let _ = std::fs::remove_file(p);
    }
}
