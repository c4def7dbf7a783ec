//! Helpers shared by the integration tests: the data-driven grammar cases, the shared tokenizers, a
//! byte-level vocabulary, the brute-force mask oracle, a deterministic RNG, the shared workload
//! requests, the `structgen` binary run from the repository, and (`mock_hub`) a local stand-in for
//! the Hugging Face Hub.
#![allow(dead_code)]

pub mod explain;
pub mod hostile;
pub mod mock_hub;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use structgen::engine::GrammarCompiler;
use structgen::frontend::json_schema::JsonSchemaOptions;
use structgen::frontend::structural_tag::structural_tag_grammar;
use structgen::vocab::{self, LoadedVocab};
use structgen::{GrammarMatcher, TokenBitmask, TokenId, TokenKind, Vocab};

/// One grammar case from `tests/data/cases/*.toml`.
#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    pub name: String,
    pub grammar: String,
    #[serde(default)]
    pub accept: Vec<String>,
    #[serde(default)]
    pub reject: Vec<String>,
    #[serde(skip)]
    pub file: String,
}

#[derive(Deserialize)]
struct CaseFile {
    case: Vec<Case>,
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every case of every file in `tests/data/cases`, sorted by file then order of appearance.
pub fn load_cases() -> Vec<Case> {
    let dir = repo().join("tests/data/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let parsed: CaseFile =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let stem = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        cases.extend(parsed.case.into_iter().map(|mut c| {
            c.file = stem.clone();
            c
        }));
    }
    cases
}

/// Set (by `scripts/test.sh`, hence CI) when every test must run: a test whose data is missing
/// then fails instead of skipping, so a suite cannot pass without running.
pub const REQUIRE_DATA: &str = "STRUCTGEN_TESTS_REQUIRE_DATA";

/// Notes on stderr that `test` is skipped because `why`; fails it when [`REQUIRE_DATA`] is set.
pub fn skip(test: &str, why: &str) {
    if std::env::var_os(REQUIRE_DATA).is_some() {
        panic!("{test}: {why}, and {REQUIRE_DATA} is set: every test must run");
    }
    eprintln!("{test}: skipped: {why}");
}

/// `../shared`, or `None` (see [`skip`]) when this checkout has none beside it.
pub fn shared_dir(test: &str) -> Option<PathBuf> {
    let dir = repo().join("../shared");
    if dir.join("tokenizers").is_dir() {
        Some(dir)
    } else {
        skip(
            test,
            "../shared is not beside this checkout (CI always has it)",
        );
        None
    }
}

/// The default model file, or `None` (see [`skip`]) if `scripts/fetch-models.sh` has not run.
pub fn model_file(test: &str) -> Option<PathBuf> {
    let p = repo().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if p.is_file() {
        Some(p)
    } else {
        let why = format!("run scripts/fetch-models.sh to fetch {}", p.display());
        skip(test, &why);
        None
    }
}

/// The BFCL data folder, or `None` (see [`skip`]) if `scripts/fetch-bfcl.sh` has not run.
pub fn bfcl_data(test: &str) -> Option<PathBuf> {
    let dir = repo().join("data/bfcl");
    if dir.join("possible_answer").is_dir() {
        Some(dir)
    } else {
        skip(test, "run scripts/fetch-bfcl.sh to fetch the BFCL data");
        None
    }
}

fn load_shared(file: &str) -> Option<Arc<LoadedVocab>> {
    let path = repo().join("../shared/tokenizers").join(file);
    if !path.is_file() {
        skip(file, &format!("{} is missing", path.display()));
        return None;
    }
    Some(Arc::new(
        vocab::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    ))
}

/// The SmolLM2 tokenizer (49,152 ids), loaded once per test binary.
pub fn smollm2() -> Option<Arc<LoadedVocab>> {
    static CELL: OnceLock<Option<Arc<LoadedVocab>>> = OnceLock::new();
    CELL.get_or_init(|| load_shared("smollm2-135m.tokenizer.json"))
        .clone()
}

/// The Llama 3 tokenizer (128,256 ids), loaded once per test binary.
pub fn llama3() -> Option<Arc<LoadedVocab>> {
    static CELL: OnceLock<Option<Arc<LoadedVocab>>> = OnceLock::new();
    CELL.get_or_init(|| load_shared("llama3.tokenizer.json"))
        .clone()
}

/// A vocabulary of the 256 single bytes (id = byte value) plus a stop token at id 256.
pub fn byte_vocab() -> Arc<Vocab> {
    let entries = (0..=255u8).map(|b| (u32::from(b), vec![b], TokenKind::Normal));
    let stop = (256, b"<eos>".to_vec(), TokenKind::Special);
    Arc::new(Vocab::new(257, entries.chain([stop]), vec![TokenId(256)]))
}

/// Encodes text without special tokens.
pub fn encode(loaded: &LoadedVocab, text: &str) -> Vec<TokenId> {
    loaded
        .tokenizer
        .encode(text, false)
        .unwrap_or_else(|e| panic!("encoding {text:?}: {e}"))
        .get_ids()
        .iter()
        .map(|&id| TokenId(id))
        .collect()
}

/// The brute-force reference: try every token id on a fork of `m`.
pub fn brute_force_mask(m: &GrammarMatcher) -> Vec<u32> {
    let size = m.grammar().vocab().size() as u32;
    let mut probe = m.fork();
    (0..size)
        .filter(|&t| {
            let ok = probe.accept_token(TokenId(t));
            if ok {
                probe.rollback(1).expect("one step to undo");
            }
            ok
        })
        .collect()
}

/// The engine's mask as sorted ids.
pub fn engine_mask(m: &mut GrammarMatcher) -> Vec<u32> {
    let mut mask = TokenBitmask::new(m.grammar().vocab().size());
    m.fill_next_token_bitmask(&mut mask);
    mask.allowed_ids()
}

/// xorshift64*: a deterministic RNG so failures reproduce.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Reads a UTF-8 file under the repository.
pub fn read(rel: impl AsRef<Path>) -> String {
    let p = repo().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One request of a shared tool-calling workload (`../shared/bench/requests/*.jsonl`).
pub struct WorkloadRequest {
    pub id: String,
    pub tag: serde_json::Value,
    pub output: String,
}

impl WorkloadRequest {
    /// The grammar of the request's structural tag.
    pub fn grammar(&self, compiler: &GrammarCompiler) -> structgen::Grammar {
        structural_tag_grammar(
            &self.tag,
            Some(compiler.vocab()),
            &JsonSchemaOptions::default(),
            &structgen::Limits::default(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", self.id))
        .grammar
    }
}

/// The first `n` requests of a workload file.
pub fn workload_requests(file: &Path, n: usize) -> Vec<WorkloadRequest> {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .take(n)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("workload line is JSON");
            WorkloadRequest {
                id: v["id"].as_str().expect("id").to_string(),
                tag: v["structural_tag"].clone(),
                output: v["output"].as_str().expect("output").to_string(),
            }
        })
        .collect()
}

/// Runs the `structgen` binary of this build from the repository root.
pub fn structgen(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_structgen"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run structgen")
}

/// `run(item, tally of its key)` for every `(key, item)`, the items dealt out to two threads, each
/// keeping a tally per key; the threads' tallies merged per key with `merge`.
pub fn tally_on_two_threads<I: Sync, T: Default + Send>(
    items: &[(String, I)],
    run: impl Fn(&I, &mut T) + Sync,
    merge: impl Fn(&mut T, T),
) -> std::collections::BTreeMap<String, T> {
    use std::collections::BTreeMap;
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|k| {
                let run = &run;
                s.spawn(move || {
                    let mut local: BTreeMap<String, T> = BTreeMap::new();
                    for (key, item) in items.iter().skip(k).step_by(2) {
                        run(item, local.entry(key.clone()).or_default());
                    }
                    local
                })
            })
            .collect();
        let mut merged: BTreeMap<String, T> = BTreeMap::new();
        for w in workers {
            for (key, t) in w.join().expect("worker") {
                merge(merged.entry(key).or_default(), t);
            }
        }
        merged
    })
}
