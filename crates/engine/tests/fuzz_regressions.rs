//! The fuzz targets in the ordinary test build (no nightly, no instrumentation): every input under
//! `fuzz/regressions/<target>/` (crashes the fuzzers found, named after what they found) and the
//! committed minimized corpus `fuzz/seeds/<target>/` is replayed, then each target runs for
//! `STRUCTGEN_FUZZ_SECONDS` (default 30) on random mutations of that corpus. An input that panics
//! is written to `target/fuzz-failures/` and named in the failure.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use structgen_engine::fuzzing::TARGETS;

/// The engine crate's folder (`fuzz/` is inside it).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// xorshift64*: a deterministic RNG so failures reproduce.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1) as u64) as usize
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn target(name: &str) -> fn(&[u8]) {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap_or_else(|| panic!("no fuzz target {name}"))
}

/// Runs `input`; on a panic, saves it and fails naming the file.
fn run_one(name: &str, f: fn(&[u8]), input: &[u8], origin: &str) {
    if panic::catch_unwind(AssertUnwindSafe(|| f(input))).is_ok() {
        return;
    }
    let dir = repo().join("../../target/fuzz-failures");
    std::fs::create_dir_all(&dir).expect("create target/fuzz-failures");
    let hash = input.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    });
    let path = dir.join(format!("{name}-{hash:016x}"));
    std::fs::write(&path, input).expect("write failing input");
    panic!(
        "fuzz target {name} panicked on {origin}; input saved to {}",
        path.display()
    );
}

/// Byte strings worth inserting: syntax of every input language.
const DICTIONARY: &[&[u8]] = &[
    b"::=",
    b"|",
    b"(",
    b")",
    b"*",
    b"+",
    b"?",
    b"{2,5}",
    b"{0,100000}",
    b"[^",
    b"]",
    b"\\",
    b"\"",
    b"{",
    b"}",
    b"\"type\":",
    b"\"oneOf\":[",
    b"\"$ref\":\"#\"",
    b"\"pattern\":",
    b"\"minItems\":",
    b"\"anyOf\":",
    b"\"allOf\":",
    b"\"enum\":[",
    b",",
    b":",
    b"null",
    b"1e308",
    b"-0",
    b"\xff",
    b"\xc3",
    b"\x00",
    b"TagDispatch(",
    b"<[",
    b"]>",
    b"\"triggered_tags\"",
    b"\"sequence\"",
    b"GGUF",
    b"\xff\xff\xff\xff\xff\xff\xff\x7f",
];

fn mutate(input: &mut Vec<u8>, corpus: &[Vec<u8>], rng: &mut Rng) {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(input.len() + 1);
        match rng.below(6) {
            0 if at < input.len() => input[at] ^= 1 << rng.below(8),
            1 if at < input.len() => {
                let end = (at + 1 + rng.below(16)).min(input.len());
                input.drain(at..end);
            }
            2 => {
                let piece = DICTIONARY[rng.below(DICTIONARY.len())];
                input.splice(at..at, piece.iter().copied());
            }
            3 if at < input.len() => {
                let end = (at + 1 + rng.below(32)).min(input.len());
                let copy = input[at..end].to_vec();
                let to = rng.below(input.len() + 1);
                input.splice(to..to, copy);
            }
            4 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                input.truncate(at);
                input.extend_from_slice(&other[from..]);
            }
            _ => input.insert(at, rng.below(256) as u8),
        }
    }
    input.truncate(1 << 16);
}

fn fuzz_for(name: &str) {
    let f = target(name);
    let dirs = [
        repo().join("fuzz/regressions").join(name),
        repo().join("fuzz/seeds").join(name),
    ];
    let seeds = files(&dirs[1]);
    assert!(
        !seeds.is_empty(),
        "{name}: no seed corpus in {} (the committed minimized corpus is missing or empty)",
        dirs[1].display()
    );
    let mut corpus = Vec::new();
    for dir in &dirs {
        for path in files(dir) {
            let input = std::fs::read(&path).expect("read corpus file");
            run_one(name, f, &input, &path.display().to_string());
            corpus.push(input);
        }
    }
    let seconds: u64 = std::env::var("STRUCTGEN_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut rng = Rng::new(name.bytes().map(u64::from).sum());
    let mut execs = 0u64;
    while Instant::now() < deadline {
        let mut input = if corpus.is_empty() {
            Vec::new()
        } else {
            corpus[rng.below(corpus.len())].clone()
        };
        mutate(&mut input, &corpus, &mut rng);
        run_one(name, f, &input, &format!("mutation {execs}"));
        execs += 1;
    }
    eprintln!(
        "{name}: {} corpus inputs replayed, {execs} mutations in {seconds} s",
        corpus.len()
    );
}

#[test]
fn ebnf() {
    fuzz_for("ebnf");
}

#[test]
fn json_schema() {
    fuzz_for("json_schema");
}

#[test]
fn structural_tag() {
    fuzz_for("structural_tag");
}

#[test]
fn regex() {
    fuzz_for("regex");
}

#[test]
fn gguf() {
    fuzz_for("gguf");
}

#[test]
fn tokenizer_json() {
    fuzz_for("tokenizer_json");
}

#[test]
fn matcher_ops() {
    fuzz_for("matcher_ops");
}

#[test]
fn every_target_has_a_test_here() {
    let here = include_str!("fuzz_regressions.rs");
    for (name, _) in TARGETS {
        assert!(
            here.contains(&format!("fuzz_for(\"{name}\")")),
            "no test runs fuzz target {name}"
        );
    }
}
