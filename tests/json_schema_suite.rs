//! The official JSON Schema Test Suite, draft 2020-12 (`../shared/json-schema-test-suite`, tests
//! of each keyword's meaning written by the JSON Schema organization): every file but
//! `refRemote.json` (which needs the suite's remote server). Each schema is converted with JSON
//! Schema's own semantics (unlisted properties allowed unless `additionalProperties` says
//! otherwise, members in any order, numbers compared by value; `format` as an annotation in
//! `format.json`, as the suite reads it) and compiled for the SmolLM2 vocabulary; every instance is checked in its compact
//! serialization, token by token with a mask at every step, and must pass the `uniqueItems` check
//! on the complete value too.
//!
//! Prints the per-file table: schemas compiled, valid instances accepted, invalid ones rejected,
//! and invalid ones accepted with a warning at a keyword they break (the `jsonschema` crate's
//! verdict, an outside reference). Asserts that what falls short (a schema refused, a valid
//! instance refused, an invalid one accepted without such a warning) is exactly the list in
//! `tests/data/json_schema_suite_gaps.txt`: a new gap fails, and so does a closed one until it
//! leaves the list (`STRUCTGEN_WRITE_SUITE_GAPS=1` rewrites the list from the run).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::explain::explaining;
use common::{encode, shared_dir};
use serde_json::Value;
use structgen::engine::check::check_tokens;
use structgen::frontend::json_schema::{
    json_schema_grammar, JsonSchemaOptions, PropertyOrder, SchemaError,
};
use structgen::grammar::GrammarError;
use structgen::vocab::LoadedVocab;
use structgen::{compile, Limits};

const GAPS: &str = "tests/data/json_schema_suite_gaps.txt";

#[derive(Default)]
struct Tally {
    schemas: usize,
    compiled: usize,
    valid: usize,
    valid_ok: usize,
    invalid: usize,
    invalid_rejected: usize,
    invalid_explained: usize,
    /// Schemas compiled to the empty language (no value satisfies them).
    unsatisfiable: usize,
    gaps: Vec<String>,
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.schemas += o.schemas;
        self.compiled += o.compiled;
        self.valid += o.valid;
        self.valid_ok += o.valid_ok;
        self.invalid += o.invalid;
        self.invalid_rejected += o.invalid_rejected;
        self.invalid_explained += o.invalid_explained;
        self.unsatisfiable += o.unsatisfiable;
        self.gaps.extend(o.gaps);
    }
}

/// One group of a file: its schema against its tests.
fn run_group(file: &str, group: &Value, loaded: &LoadedVocab, t: &mut Tally) {
    let name = group["description"].as_str().unwrap_or("?");
    let options = JsonSchemaOptions {
        strict: false,
        property_order: PropertyOrder::Flexible,
        format_assertion: file != "format",
        numbers_by_value: true,
        ..JsonSchemaOptions::default()
    };
    let limits = Limits::default();
    let schema = &group["schema"];
    t.schemas += 1;
    let compiled = json_schema_grammar(schema, &options, &limits)
        .map_err(|e| match e {
            SchemaError::Grammar(g) => refusal(g),
            other => Err(other.to_string()),
        })
        .and_then(|c| {
            let g = compile(&c.grammar, Arc::new(loaded.vocab.clone()), &limits);
            g.map(|g| (c, g)).map_err(refusal)
        });
    let tests = group["tests"].as_array().cloned().unwrap_or_default();
    let (converted, grammar) = match compiled {
        Ok(c) => c,
        // A schema no value satisfies: refusing it refuses every instance, as it should.
        Err(Ok(())) => {
            t.compiled += 1;
            t.unsatisfiable += 1;
            for case in &tests {
                if case["valid"] == Value::Bool(true) {
                    t.valid += 1;
                    let what = format!(
                        "{file} / {name} / {}",
                        case["description"].as_str().unwrap_or("?")
                    );
                    println!(
                        "  {what}: valid instance refused (the schema was found unsatisfiable)"
                    );
                    t.gaps.push(format!("valid refused: {what}"));
                } else {
                    t.invalid += 1;
                    t.invalid_rejected += 1;
                }
            }
            return;
        }
        Err(Err(e)) => {
            println!("  {file} / {name}: not compiled: {e}");
            t.gaps.push(format!("not compiled: {file} / {name}"));
            return;
        }
    };
    t.compiled += 1;
    let reference = jsonschema::options()
        .should_validate_formats(options.format_assertion)
        .build(schema)
        .map_err(|e| e.to_string());
    for case in &tests {
        let (data, valid) = (&case["data"], case["valid"] == Value::Bool(true));
        let what = format!(
            "{file} / {name} / {}",
            case["description"].as_str().unwrap_or("?")
        );
        let outcome = check_tokens(&grammar, &encode(loaded, &data.to_string()), None)
            .unwrap_or_else(|e| panic!("{what}: engine self-check failed: {e}"));
        let passes = outcome.accepted
            && outcome.completed
            && converted
                .post_check
                .as_ref()
                .is_none_or(|c| c.violation(data).is_none());
        if valid {
            t.valid += 1;
            if passes {
                t.valid_ok += 1;
            } else {
                println!("  {what}: valid instance refused: {data}");
                t.gaps.push(format!("valid refused: {what}"));
            }
            continue;
        }
        t.invalid += 1;
        if !passes {
            t.invalid_rejected += 1;
            continue;
        }
        match explaining(reference.as_ref(), data, &converted.warnings) {
            Ok(_) => t.invalid_explained += 1,
            Err(why) => {
                println!("  {what}: invalid instance accepted, {why}: {data}");
                t.gaps.push(format!("invalid accepted unexplained: {what}"));
            }
        }
    }
}

/// Why a schema has no grammar: `Ok` when no value satisfies it, else the error's text.
fn refusal(e: GrammarError) -> Result<(), String> {
    match e {
        GrammarError::EmptyLanguage { .. } => Ok(()),
        other => Err(other.to_string()),
    }
}

fn pct(a: usize, b: usize) -> f64 {
    if b == 0 {
        100.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

#[test]
fn json_schema_test_suite_draft_2020_12() {
    let Some(shared) = shared_dir("json_schema_test_suite_draft_2020_12") else {
        return;
    };
    let loaded = common::smollm2().expect("shared tokenizer");
    let dir = shared.join("json-schema-test-suite/draft2020-12");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| p.file_stem().is_some_and(|s| s != "refRemote"))
        .collect();
    files.sort();
    let groups: Vec<(String, (String, Value))> = files
        .iter()
        .flat_map(|f| {
            let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{f:?}: {e}"));
            let groups: Vec<Value> =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{f:?}: {e}"));
            groups
                .into_iter()
                .map(move |g| (stem.clone(), (stem.clone(), g)))
        })
        .collect();
    let per_file = common::tally_on_two_threads(
        &groups,
        |group, t: &mut Tally| {
            let file = group.0.as_str();
            run_group(file, &group.1, &loaded, t)
        },
        |m, t| m.add(t),
    );
    println!("| file | schemas compiled | valid accepted | invalid rejected | invalid accepted, with a warning |");
    println!("|---|--:|--:|--:|--:|");
    let mut total = Tally::default();
    for (file, t) in &per_file {
        println!(
            "| {file} | {}/{} | {}/{} | {}/{} | {} |",
            t.compiled,
            t.schemas,
            t.valid_ok,
            t.valid,
            t.invalid_rejected,
            t.invalid,
            t.invalid_explained
        );
        total.add(Tally {
            gaps: t.gaps.clone(),
            ..*t
        });
    }
    println!(
        "| total | {}/{} ({:.1}%) | {}/{} ({:.1}%) | {}/{} ({:.1}%) | {} |",
        total.compiled,
        total.schemas,
        pct(total.compiled, total.schemas),
        total.valid_ok,
        total.valid,
        pct(total.valid_ok, total.valid),
        total.invalid_rejected,
        total.invalid,
        pct(total.invalid_rejected, total.invalid),
        total.invalid_explained
    );
    println!(
        "({} of the compiled schemas admit no value: the engine refuses them, and every instance with them)",
        total.unsatisfiable
    );
    assert!(total.schemas > 300 && total.valid > 500 && total.invalid > 400);
    let found: BTreeSet<String> = total.gaps.into_iter().collect();
    let path = common::repo().join(GAPS);
    if std::env::var("STRUCTGEN_WRITE_SUITE_GAPS").is_ok_and(|v| v == "1") {
        let head = "# What the official JSON Schema Test Suite (draft 2020-12) finds short, one line\n\
                    # each, kept by tests/json_schema_suite.rs (STRUCTGEN_WRITE_SUITE_GAPS=1 rewrites it).\n";
        let body: String = found.iter().map(|g| format!("{g}\n")).collect();
        let body = format!("{head}{body}");
        std::fs::write(&path, body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let listed: BTreeSet<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let new: Vec<_> = found.difference(&listed).collect();
    let closed: Vec<_> = listed.difference(&found).collect();
    assert!(
        new.is_empty() && closed.is_empty(),
        "the suite's gaps differ from {GAPS}:\n  new: {new:#?}\n  closed (remove them from the list): {closed:#?}"
    );
}
