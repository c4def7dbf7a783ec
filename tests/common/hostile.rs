//! Helpers of the hostile-input table (`tests/hostile_inputs.rs`): compiling what a row builds,
//! writing temporary files, running the binary, and building GGUF and tokenizer.json files by hand.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};
use structgen::engine::{CompileOptions, GrammarCompiler};
use structgen::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions};
use structgen::frontend::structural_tag::structural_tag_grammar;
use structgen::frontend::tool_tag::tools_structural_tag;
use structgen::frontend::tools::{parse_tools, style, ToolOptions};
use structgen::vocab::{self, gguf};
use structgen::{ebnf, Grammar, GrammarMatcher, Limits, TokenBitmask, Vocab};

/// A matcher at the start of `g` compiled for `vocab` under `limits`.
pub fn matcher_for(
    g: &Grammar,
    vocab: Arc<Vocab>,
    limits: Limits,
) -> Result<GrammarMatcher, String> {
    let compiler = GrammarCompiler::new(vocab, limits, CompileOptions::default());
    Ok(GrammarMatcher::new(
        compiler.compile(g).map_err(|e| e.to_string())?,
    ))
}

/// A matcher for EBNF `src` over the byte vocabulary under `limits`.
pub fn ebnf_matcher(src: &str, limits: Limits) -> Result<GrammarMatcher, String> {
    let g = ebnf::parse(src, "root", &limits).map_err(|e| e.to_string())?;
    matcher_for(&g, super::byte_vocab(), limits)
}

/// Compiles `g` for `vocab` under `limits`; a result describes the grammar and its first mask.
pub fn compile(g: Grammar, vocab: Arc<Vocab>, limits: Limits) -> Result<String, String> {
    let mut m = matcher_for(&g, vocab, limits)?;
    let mut mask = TokenBitmask::new(m.grammar().vocab().size());
    m.fill_next_token_bitmask(&mut mask);
    Ok(format!(
        "{} rules, {} states, {} tokens allowed first",
        g.rules().len(),
        m.grammar().automaton().fsm().num_states(),
        mask.count_allowed()
    ))
}

pub fn ebnf_row(src: String, limits: Limits) -> Result<String, String> {
    let g = ebnf::parse(&src, "root", &limits).map_err(|e| e.to_string())?;
    compile(g, super::byte_vocab(), limits)
}

pub fn schema_row(schema: Value, limits: Limits) -> Result<String, String> {
    let g = json_schema_grammar(&schema, &JsonSchemaOptions::default(), &limits)
        .map_err(|e| e.to_string())?;
    compile(g.grammar, super::byte_vocab(), limits)
}

pub fn tools_row(tools: Value, choice: &str) -> Result<String, String> {
    let tools = parse_tools(&tools).map_err(|e| e.to_string())?;
    let options = ToolOptions {
        tool_choice: structgen::frontend::tools::ToolChoice::parse(choice),
        ..ToolOptions::default()
    };
    let tag = tools_structural_tag(&tools, style("hermes").expect("hermes"), &options)
        .map_err(|e| e.to_string())?;
    let limits = Limits::default();
    let g = structural_tag_grammar(&tag, None, &JsonSchemaOptions::default(), &limits)
        .map_err(|e| e.to_string())?;
    compile(g.grammar, super::byte_vocab(), limits)
}

/// `depth` levels of `oneOf` with `width` object branches each; one branch of each level nests
/// the next level (a chain), or with `shared` every branch refers to the next level through a
/// `$ref` (a DAG standing for width^depth paths).
pub fn nested_one_of(depth: usize, width: usize, shared: bool) -> Value {
    let level = |d: usize| -> Value {
        let branches: Vec<Value> = (0..width)
            .map(|i| {
                let inner = if d + 1 == depth {
                    json!({"type": "string", "maxLength": 8})
                } else if shared || i == 0 {
                    json!({"$ref": format!("#/$defs/l{}", d + 1)})
                } else {
                    json!({"type": "integer"})
                };
                json!({"type": "object", "properties": {format!("k{d}_{i}"): inner}, "required": [format!("k{d}_{i}")]})
            })
            .collect();
        json!({ "oneOf": branches })
    };
    let defs: serde_json::Map<String, Value> =
        (1..depth).map(|d| (format!("l{d}"), level(d))).collect();
    let mut root = level(0);
    root["$defs"] = Value::Object(defs);
    root
}

pub fn tool(name: &str, params: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "parameters": params}})
}

/// A file under a fresh temporary folder.
pub fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("structgen-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write temp file");
    path
}

pub fn load_vocab_file(name: &str, bytes: &[u8]) -> Result<String, String> {
    let path = temp_file(name, bytes);
    vocab::load(&path)
        .map(|l| format!("{} tokens", l.vocab.size()))
        .map_err(|e| e.to_string())
}

pub fn tokenizer_json(v: Value) -> Result<String, String> {
    let bytes = serde_json::to_vec(&v).expect("json");
    load_vocab_file("tokenizer.json", &bytes)
}

/// Runs the binary; a result is its stdout, an error its stderr (exit code 2 = error).
pub fn cli(args: &[&str]) -> Result<String, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_structgen"))
        .args(args)
        .output()
        .expect("run structgen");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "structgen panicked: {stderr}");
    match out.status.code() {
        Some(0 | 1) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        _ => Err(stderr),
    }
}

pub fn gguf_string(s: &str) -> Vec<u8> {
    let mut b = (s.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(s.as_bytes());
    b
}

/// A GGUF v3 file of metadata only; each entry is (key, type, payload).
pub fn gguf_bytes(kvs: &[(&str, u32, Vec<u8>)]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for (k, t, payload) in kvs {
        b.extend(gguf_string(k));
        b.extend_from_slice(&t.to_le_bytes());
        b.extend_from_slice(payload);
    }
    b
}

pub fn gguf_tokens(tokens: &[&str]) -> Vec<u8> {
    let mut b = 8u32.to_le_bytes().to_vec();
    b.extend_from_slice(&(tokens.len() as u64).to_le_bytes());
    for t in tokens {
        b.extend(gguf_string(t));
    }
    b
}

pub fn gguf_row(bytes: Vec<u8>) -> Result<String, String> {
    gguf::from_reader(&mut std::io::Cursor::new(bytes))
        .map(|l| format!("{} tokens", l.vocab.size()))
}

pub fn bpe_tokenizer() -> Value {
    json!({
        "version": "1.0", "added_tokens": [], "normalizer": null, "post_processor": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}
    })
}

/// `structgen trace` on grammar `root ::= "a"` with the small BPE tokenizer, plus `args`.
pub fn trace_a(args: &[&str]) -> Result<String, String> {
    let g = temp_file("a.ebnf", b"root ::= \"a\"");
    let tok = temp_file(
        "tokenizer.json",
        serde_json::to_vec(&bpe_tokenizer())
            .expect("json")
            .as_slice(),
    );
    let mut all = vec![
        "trace",
        "--tokenizer",
        tok.to_str().expect("path"),
        "--ebnf",
        g.to_str().expect("path"),
    ];
    all.extend_from_slice(args);
    cli(&all)
}
