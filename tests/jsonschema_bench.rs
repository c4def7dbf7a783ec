//! JSONSchemaBench (../shared/jsonschema, schemas and instances nobody here wrote): every schema is
//! converted with JSON Schema's own semantics (`strict` off: unlisted properties are allowed unless
//! `additionalProperties` says otherwise; flexible member order, as the instances were written by
//! others) and compiled for the SmolLM2 vocabulary; every valid and
//! invalid instance is checked in its compact serialization, token by token with a mask at every
//! step. Asserts: >= 97% of schemas compile; 100% of valid instances of compiled schemas are
//! accepted; >= 99% of invalid ones are rejected (by the grammar, or by the `uniqueItems` check on the
//! complete value), and each invalid one accepted is explained by a warning at a keyword it breaks
//! (which keywords it breaks is the `jsonschema` crate's verdict, an outside reference).
//! Prints the per-category table, with the grammar's own rejection rate beside it.

mod common;

use std::sync::Arc;

use common::explain::explaining;
use common::{encode, shared_dir};
use serde_json::Value;
use structgen::engine::check::{check_tokens, MaskVerifier};
use structgen::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions, PropertyOrder};
use structgen::vocab::LoadedVocab;
use structgen::{compile, Limits};

#[derive(Default, Clone)]
struct Tally {
    schemas: usize,
    compiled: usize,
    valid: usize,
    valid_ok: usize,
    invalid: usize,
    invalid_rejected: usize,
    invalid_rejected_by_grammar: usize,
    /// Tokens the mask verifier tried on forks (all agreed, or the test panicked).
    verified: u64,
    compile_ms: Vec<f64>,
    total_ms: Vec<(f64, String)>,
    failures: Vec<String>,
    unexplained: Vec<String>,
    explained: Vec<String>,
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.schemas += o.schemas;
        self.compiled += o.compiled;
        self.valid += o.valid;
        self.valid_ok += o.valid_ok;
        self.invalid += o.invalid;
        self.invalid_rejected += o.invalid_rejected;
        self.invalid_rejected_by_grammar += o.invalid_rejected_by_grammar;
        self.verified += o.verified;
        self.compile_ms.extend(o.compile_ms);
        self.total_ms.extend(o.total_ms);
        self.failures.extend(o.failures);
        self.unexplained.extend(o.unexplained);
        self.explained.extend(o.explained);
    }
}

fn pct(a: usize, b: usize) -> f64 {
    if b == 0 {
        100.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

fn run_line(line: &str, loaded: &LoadedVocab, t: &mut Tally) {
    let row: Value = serde_json::from_str(line).expect("bench line is JSON");
    let id = row["id"].as_str().unwrap_or("?").to_string();
    let limits = Limits::default();
    let options = JsonSchemaOptions {
        strict: false,
        property_order: PropertyOrder::Flexible,
        ..JsonSchemaOptions::default()
    };
    t.schemas += 1;
    let start = std::time::Instant::now();
    let converted = match json_schema_grammar(&row["schema"], &options, &limits) {
        Ok(c) => c,
        Err(e) => {
            t.failures.push(format!("{id}: does not compile: {e}"));
            return;
        }
    };
    let compiled = match compile(&converted.grammar, Arc::new(loaded.vocab.clone()), &limits) {
        Ok(c) => c,
        Err(e) => {
            t.failures.push(format!("{id}: does not compile: {e}"));
            return;
        }
    };
    t.compile_ms.push(start.elapsed().as_secs_f64() * 1e3);
    t.compiled += 1;
    // (grammar accepts, the uniqueItems post-check passes too)
    // --verify-masks on every instance: 4 allowed and 4 refused tokens per step tried on forks.
    let mut verifier = MaskVerifier::new(t.compiled as u64, 4);
    let mut passes = |v: &Value| {
        let tokens = encode(loaded, &v.to_string());
        let outcome = check_tokens(&compiled, &tokens, Some(&mut verifier))
            .unwrap_or_else(|e| panic!("{id}: engine self-check failed: {e}"));
        let grammar_ok = outcome.accepted && outcome.completed;
        let unique_ok = converted
            .post_check
            .as_ref()
            .is_none_or(|c| c.violation(v).is_none());
        (grammar_ok, grammar_ok && unique_ok)
    };
    // The outside reference for which keywords an invalid instance breaks, built for the
    // schemas whose grammar accepts one.
    let reference = std::cell::OnceCell::new();
    let checking = std::time::Instant::now();
    for v in row["valid"].as_array().into_iter().flatten() {
        t.valid += 1;
        if passes(v).1 {
            t.valid_ok += 1;
        } else {
            t.failures
                .push(format!("{id}: valid instance rejected: {}", truncate(v)));
        }
    }
    for v in row["invalid"].as_array().into_iter().flatten() {
        t.invalid += 1;
        let (grammar_ok, ok) = passes(v);
        t.invalid_rejected_by_grammar += usize::from(!grammar_ok);
        if !ok {
            t.invalid_rejected += 1;
        } else {
            let reference = reference.get_or_init(|| {
                jsonschema::options()
                    .should_validate_formats(true)
                    .build(&row["schema"])
                    .map_err(|e| e.to_string())
            });
            match explaining(reference.as_ref(), v, &converted.warnings) {
                Ok(w) => t.explained.push(format!(
                    "{id}: invalid instance accepted ({}): {}",
                    w.join("; "),
                    truncate(v)
                )),
                Err(why) => t.unexplained.push(format!(
                    "{id}: invalid instance accepted, {why}: {}",
                    truncate(v)
                )),
            }
        }
    }
    t.verified += verifier.tokens;
    let (all, checks) = (
        start.elapsed().as_secs_f64(),
        checking.elapsed().as_secs_f64(),
    );
    t.total_ms
        .push((all * 1e3, format!("{id} (checking {:.0} ms)", checks * 1e3)));
}

fn truncate(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 160 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(160).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

#[test]
fn jsonschemabench_soundness_and_completeness() {
    let Some(shared) = shared_dir("jsonschemabench_soundness_and_completeness") else {
        return;
    };
    // CI uses SmolLM2; STRUCTGEN_BENCH_TOKENIZER=llama3 reruns it with the 128K vocabulary.
    let llama = std::env::var("STRUCTGEN_BENCH_TOKENIZER").is_ok_and(|v| v == "llama3");
    let loaded = if llama {
        common::llama3()
    } else {
        common::smollm2()
    }
    .expect("shared tokenizer");
    println!("tokenizer: {} ids", loaded.vocab.size());
    let mut files: Vec<_> = std::fs::read_dir(shared.join("jsonschema"))
        .expect("jsonschema dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let lines: Vec<(String, String)> = files
        .iter()
        .flat_map(|f| {
            let cat = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            std::fs::read_to_string(f)
                .expect("read category")
                .lines()
                .map(move |l| (cat.clone(), l.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    let per_cat = common::tally_on_two_threads(
        &lines,
        |line, t: &mut Tally| run_line(line, &loaded, t),
        |m, t| m.add(t),
    );
    let mut total = Tally::default();
    println!("| category | schemas | compiled % | valid accepted % | invalid rejected % | by the grammar alone % |");
    println!("|---|--:|--:|--:|--:|--:|");
    for (cat, t) in &per_cat {
        println!(
            "| {cat} | {} | {:.1} | {:.1} ({}/{}) | {:.1} ({}/{}) | {:.1} |",
            t.schemas,
            pct(t.compiled, t.schemas),
            pct(t.valid_ok, t.valid),
            t.valid_ok,
            t.valid,
            pct(t.invalid_rejected, t.invalid),
            t.invalid_rejected,
            t.invalid,
            pct(t.invalid_rejected_by_grammar, t.invalid)
        );
        total.add(t.clone());
    }
    total.compile_ms.sort_by(f64::total_cmp);
    let p = |q: f64| total.compile_ms[((total.compile_ms.len() - 1) as f64 * q) as usize];
    println!(
        "| total | {} | {:.1} | {:.1} | {:.1} | {:.1} |\ncompile ms: p50 {:.2} p99 {:.2}",
        total.schemas,
        pct(total.compiled, total.schemas),
        pct(total.valid_ok, total.valid),
        pct(total.invalid_rejected, total.invalid),
        pct(total.invalid_rejected_by_grammar, total.invalid),
        p(0.5),
        p(0.99)
    );
    println!(
        "--verify-masks: {} tokens tried on forks, no disagreement",
        total.verified
    );
    assert!(total.verified > 0);
    total.total_ms.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (ms, id) in total.total_ms.iter().take(5) {
        println!("slowest: {ms:.0} ms {id}");
    }
    for f in total.failures.iter().chain(&total.unexplained) {
        println!("  {f}");
    }
    println!("invalid instances accepted, each with its schema's warnings:");
    for f in &total.explained {
        println!("  {f}");
    }
    assert!(pct(total.compiled, total.schemas) >= 97.0, "compile rate");
    assert_eq!(total.valid_ok, total.valid, "every valid instance accepted");
    // Rejected by the grammar, or (uniqueItems, which is not context-free) by the check on the
    // complete value; the grammar alone is printed above.
    assert!(
        pct(total.invalid_rejected, total.invalid) >= 99.0,
        "invalid rejection rate"
    );
    assert!(
        total.unexplained.is_empty(),
        "accepted invalid instances without a warning"
    );
}
