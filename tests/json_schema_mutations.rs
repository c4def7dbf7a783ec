//! The official JSON Schema Test Suite's instances, mutated: in every draft-2020-12 file (but
//! `refRemote.json`, which needs the suite's server, and `vocabulary.json`, whose one known gap
//! `tests/json_schema_suite.rs` pins), every instance of every schema that compiles is varied two
//! levels deep (a member added, dropped or given another value; an item appended, dropped or
//! replaced), and each variant the `jsonschema` crate (an outside validator) finds valid must be
//! accepted by the grammar, token by token: the grammar never refuses a value its schema allows.
//! Formats are read as annotations, as the validator reads them.

mod common;

use std::sync::Arc;

use common::{encode, shared_dir};
use serde_json::{json, Value};
use structgen::engine::check::check_tokens;
use structgen::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions, PropertyOrder};
use structgen::vocab::LoadedVocab;
use structgen::{compile, Limits};

/// Values a member or an item is set to.
fn fillers() -> Vec<Value> {
    vec![
        json!(1),
        json!("a"),
        json!(true),
        json!(null),
        json!([]),
        json!({}),
        json!(2.5),
    ]
}

/// The variants of `v` one edit away, at any depth (bounded).
fn variants(v: &Value, names: &[String], depth: usize, out: &mut Vec<Value>) {
    if depth > 2 {
        return;
    }
    match v {
        Value::Object(map) => {
            for name in names.iter().chain(map.keys()) {
                for f in fillers() {
                    let mut m = map.clone();
                    m.insert(name.clone(), f);
                    out.push(Value::Object(m));
                }
            }
            for k in map.keys() {
                let mut m = map.clone();
                m.remove(k);
                out.push(Value::Object(m));
                let mut inner = Vec::new();
                variants(&map[k], names, depth + 1, &mut inner);
                for x in inner {
                    let mut m = map.clone();
                    m.insert(k.clone(), x);
                    out.push(Value::Object(m));
                }
            }
        }
        Value::Array(items) => {
            for f in fillers() {
                let mut a = items.clone();
                a.push(f.clone());
                out.push(Value::Array(a));
                for i in 0..items.len() {
                    let mut a = items.clone();
                    a[i] = f.clone();
                    out.push(Value::Array(a));
                }
            }
            for i in 0..items.len() {
                let mut a = items.clone();
                a.remove(i);
                out.push(Value::Array(a));
            }
        }
        _ => out.extend(fillers()),
    }
}

/// Every `properties` / `required` / `dependentSchemas` name in the schema, and one more.
fn names(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                match (k.as_str(), x) {
                    ("properties" | "dependentSchemas" | "dependentRequired", Value::Object(m)) => {
                        out.extend(m.keys().cloned())
                    }
                    ("required", Value::Array(r)) => {
                        out.extend(r.iter().filter_map(Value::as_str).map(str::to_string))
                    }
                    _ => {}
                }
                names(x, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|x| names(x, out)),
        _ => {}
    }
}

fn check_group(group: &Value, loaded: &LoadedVocab, refused: &mut Vec<String>) -> usize {
    let options = JsonSchemaOptions {
        strict: false,
        property_order: PropertyOrder::Flexible,
        numbers_by_value: true,
        format_assertion: false,
        ..JsonSchemaOptions::default()
    };
    let limits = Limits::default();
    let schema = &group["schema"];
    let Ok(converted) = json_schema_grammar(schema, &options, &limits) else {
        return 0;
    };
    let Ok(grammar) = compile(&converted.grammar, Arc::new(loaded.vocab.clone()), &limits) else {
        return 0;
    };
    let Ok(reference) = jsonschema::options().build(schema) else {
        return 0;
    };
    let mut known = Vec::new();
    names(schema, &mut known);
    known.push("zz".to_string());
    known.sort();
    known.dedup();
    let mut seen = std::collections::BTreeSet::new();
    let mut checked = 0;
    for case in group["tests"].as_array().into_iter().flatten() {
        let mut all = vec![case["data"].clone()];
        variants(&case["data"], &known, 0, &mut all);
        for v in all {
            let text = v.to_string();
            if !seen.insert(text.clone()) || !reference.is_valid(&v) {
                continue;
            }
            checked += 1;
            let outcome = check_tokens(&grammar, &encode(loaded, &text), None)
                .unwrap_or_else(|e| panic!("engine self-check failed: {e}"));
            let passes = outcome.accepted
                && outcome.completed
                && converted
                    .post_check
                    .as_ref()
                    .is_none_or(|c| c.violation(&v).is_none());
            if !passes {
                refused.push(format!(
                    "{}: refuses the valid {text}",
                    group["description"].as_str().unwrap_or("?")
                ));
            }
        }
    }
    checked
}

#[test]
fn mutated_suite_instances_that_are_valid_are_accepted() {
    let Some(shared) = shared_dir("mutated_suite_instances_that_are_valid_are_accepted") else {
        return;
    };
    let loaded = common::smollm2().expect("shared tokenizer");
    let dir = shared.join("json-schema-test-suite/draft2020-12");
    let mut refused = Vec::new();
    let mut checked = 0;
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| {
            p.file_stem()
                .is_some_and(|s| s != "refRemote" && s != "vocabulary")
        })
        .collect();
    files.sort();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let groups: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        for g in &groups {
            checked += check_group(g, &loaded, &mut refused);
        }
    }
    println!("{checked} valid variants checked");
    assert!(checked > 5000, "only {checked} valid variants");
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}
