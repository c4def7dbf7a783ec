//! The shared tool-calling workloads (../shared/bench/requests: 18 files, three formats): every
//! request's structural tag compiles, its `output` is accepted token by token with both shared
//! tokenizers and the matcher then takes the stop token and terminates; corrupted calls are refused;
//! masks equal the brute-force reference on sampled steps of all three formats.
//!
//! Outputs are checked for all 1,800 requests; the corruption and mask tests sample them. Schema
//! fragments (a compiler's lowered tool schemas, shared rules merged) give the language of direct
//! lowering.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{brute_force_mask, encode, engine_mask, shared_dir, Rng};
use serde_json::Value;
use structgen::frontend::json_schema::{JsonSchemaOptions, SchemaFragments};
use structgen::frontend::structural_tag::{structural_tag_grammar, structural_tag_grammar_with};
use structgen::vocab::LoadedVocab;
use structgen::{compile, CompiledGrammar, GrammarMatcher, Limits, TokenId};

struct Request {
    id: String,
    tag: Value,
    output: String,
    format: String,
}

fn requests(shared: &std::path::Path, step: usize) -> Vec<Request> {
    let dir = shared.join("bench/requests");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("bench/requests")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    assert_eq!(files.len(), 18, "18 request files");
    let mut out = Vec::new();
    for f in files {
        let format = f
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split('-').next())
            .unwrap_or_default()
            .to_string();
        let text = std::fs::read_to_string(&f).expect("read requests");
        for line in text.lines().step_by(step) {
            let row: Value = serde_json::from_str(line).expect("request is JSON");
            out.push(Request {
                id: row["id"].as_str().unwrap_or_default().to_string(),
                tag: row["structural_tag"].clone(),
                output: row["output"].as_str().unwrap_or_default().to_string(),
                format: format.clone(),
            });
        }
    }
    out
}

/// Compiles each distinct tag once (static files repeat theirs).
struct Compiler<'a> {
    loaded: &'a LoadedVocab,
    vocab: Arc<structgen::Vocab>,
    cache: HashMap<String, Arc<CompiledGrammar>>,
}

impl<'a> Compiler<'a> {
    fn new(loaded: &'a LoadedVocab) -> Self {
        Compiler {
            loaded,
            vocab: Arc::new(loaded.vocab.clone()),
            cache: HashMap::new(),
        }
    }

    fn get(&mut self, tag: &Value) -> Arc<CompiledGrammar> {
        let key = tag.to_string();
        if let Some(g) = self.cache.get(&key) {
            return Arc::clone(g);
        }
        let limits = Limits::default();
        let converted = structural_tag_grammar(
            tag,
            Some(&self.loaded.vocab),
            &JsonSchemaOptions::default(),
            &limits,
        )
        .unwrap_or_else(|e| panic!("structural tag does not convert: {e}"));
        let g = compile(&converted.grammar, Arc::clone(&self.vocab), &limits)
            .unwrap_or_else(|e| panic!("structural tag does not compile: {e}"));
        self.cache.insert(key, Arc::clone(&g));
        g
    }
}

/// Whether the whole text is accepted and the stop token then ends it.
fn accepts(g: &Arc<CompiledGrammar>, loaded: &LoadedVocab, text: &str) -> bool {
    let mut m = GrammarMatcher::new(Arc::clone(g));
    let stop = loaded.vocab.stop_tokens()[0];
    encode(loaded, text).into_iter().all(|t| m.accept_token(t))
        && m.accept_token(stop)
        && m.is_terminated()
}

fn both_tokenizers() -> Vec<(&'static str, Arc<LoadedVocab>)> {
    vec![
        ("smollm2", common::smollm2().expect("smollm2 tokenizer")),
        ("llama3", common::llama3().expect("llama3 tokenizer")),
    ]
}

#[test]
fn bench_outputs_are_accepted_and_terminate() {
    let Some(shared) = shared_dir("bench_outputs_are_accepted_and_terminate") else {
        return;
    };
    let reqs = requests(&shared, 1);
    assert_eq!(reqs.len(), 1800);
    for (name, loaded) in both_tokenizers() {
        let start = std::time::Instant::now();
        let mut compiler = Compiler::new(&loaded);
        for r in &reqs {
            let g = compiler.get(&r.tag);
            assert!(
                accepts(&g, &loaded, &r.output),
                "{name}: {} refused its output",
                r.id
            );
        }
        println!(
            "{name}: {} requests, {} distinct tags, {:.1} s",
            reqs.len(),
            compiler.cache.len(),
            start.elapsed().as_secs_f64()
        );
    }
}

/// `(begin, end)` of the first call's arguments in an output of `format`.
fn first_args(format: &str, output: &str) -> Option<(usize, usize)> {
    let (open, close) = match format {
        "llama" => (">", "</function>"),
        "qwen" => ("\"arguments\": ", "}\n</tool_call>"),
        _ => ("json<|message|>", "<|call|>"),
    };
    let call = match format {
        "llama" => output.find("<function=")?,
        "qwen" => output.find("<tool_call>")?,
        _ => output.find("<|constrain|>")?,
    };
    let begin = call + output[call..].find(open)? + open.len();
    let end = begin + output[begin..].find(close)?;
    Some((begin, end))
}

/// The tool name of the first call.
fn first_name(format: &str, output: &str) -> Option<(usize, usize)> {
    let (open, close) = match format {
        "llama" => ("<function=", ">"),
        "qwen" => ("\"name\": \"", "\""),
        _ => ("to=functions.", " "),
    };
    let begin = output.find(open)? + open.len();
    Some((begin, begin + output[begin..].find(close)?))
}

fn mutate_type(v: &Value) -> Value {
    match v {
        Value::String(_) => Value::from(12345),
        _ => Value::from("not the right type"),
    }
}

#[test]
fn corrupted_calls_are_refused() {
    let Some(shared) = shared_dir("corrupted_calls_are_refused") else {
        return;
    };
    let pool: Value = serde_json::from_str(
        &std::fs::read_to_string(shared.join("bench/tools-pool.json")).expect("pool"),
    )
    .expect("pool JSON");
    let schemas: HashMap<String, Value> = pool
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let f = &t["function"];
            (
                f["name"].as_str().unwrap_or_default().to_string(),
                f["parameters"].clone(),
            )
        })
        .collect();
    let loaded = common::smollm2().expect("smollm2 tokenizer");
    let mut compiler = Compiler::new(&loaded);
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for r in requests(&shared, 4).iter().step_by(3) {
        let g = compiler.get(&r.tag);
        let out = &r.output;
        let mut refuse = |what: &'static str, bad: String| {
            assert!(
                !accepts(&g, &loaded, &bad),
                "{}: {what} accepted: {bad}",
                r.id
            );
            *counts.entry(what).or_default() += 1;
        };
        let (nb, ne) = first_name(&r.format, out).expect("a call");
        refuse(
            "unknown tool",
            format!("{}no_such_tool{}", &out[..nb], &out[ne..]),
        );
        let (ab, ae) = first_args(&r.format, out).expect("arguments");
        refuse(
            "text inside a call",
            format!("{}hello {}", &out[..ab], &out[ab..]),
        );
        let args: Value = serde_json::from_str(&out[ab..ae]).expect("arguments are JSON");
        let schema = &schemas[&out[nb..ne]];
        let typed: Vec<&String> = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, p)| p.get("type").is_some() && p.get("enum").is_none())
            .map(|(k, _)| k)
            .collect();
        if let Some(key) = typed.iter().find(|k| args.get(k.as_str()).is_some()) {
            let mut bad = args.clone();
            bad[key.as_str()] = mutate_type(&args[key.as_str()]);
            refuse(
                "wrong argument type",
                format!("{}{bad}{}", &out[..ab], &out[ae..]),
            );
        }
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        if let Some(key) = required.first().and_then(Value::as_str) {
            let mut bad = args.clone();
            if let Some(map) = bad.as_object_mut() {
                map.shift_remove(key);
            }
            refuse(
                "missing required argument",
                format!("{}{bad}{}", &out[..ab], &out[ae..]),
            );
        }
        // A second call where only one is allowed.
        let mut single = r.tag.clone();
        let calls = if r.format == "harmony" {
            &mut single["format"]["elements"][1]
        } else {
            &mut single["format"]
        };
        calls["stop_after_first"] = Value::Bool(true);
        let one = compiler.get(&single);
        let call_count = ["<function=", "<tool_call>", "<|constrain|>"]
            .iter()
            .map(|m| out.matches(m).count())
            .sum::<usize>();
        assert_eq!(
            accepts(&one, &loaded, out),
            call_count == 1,
            "{}: stop_after_first",
            r.id
        );
        if call_count > 1 {
            *counts
                .entry("second call with stop_after_first")
                .or_default() += 1;
        }
    }
    println!("refused corruptions: {counts:?}");
    for what in [
        "unknown tool",
        "text inside a call",
        "wrong argument type",
        "missing required argument",
        "second call with stop_after_first",
    ] {
        assert!(
            counts.get(what).copied().unwrap_or(0) >= 5,
            "too few `{what}` cases"
        );
    }
}

#[test]
fn masks_equal_brute_force_on_sampled_steps() {
    let Some(shared) = shared_dir("masks_equal_brute_force_on_sampled_steps") else {
        return;
    };
    let reqs = requests(&shared, 4);
    let mut rng = Rng::new(7);
    let mut compared: HashMap<String, usize> = HashMap::new();
    for (name, loaded) in both_tokenizers() {
        let mut compiler = Compiler::new(&loaded);
        // SmolLM2 masks are cheap to brute-force; Llama 3 gets a smaller share.
        let (per_request, stride) = if name == "smollm2" { (20, 3) } else { (4, 6) };
        for r in reqs.iter().step_by(stride) {
            let g = compiler.get(&r.tag);
            let tokens = encode(&loaded, &r.output);
            let mut m = GrammarMatcher::new(Arc::clone(&g));
            let picks: Vec<usize> = (0..per_request)
                .map(|_| rng.below(tokens.len() + 1))
                .collect();
            for (step, &t) in tokens
                .iter()
                .chain(std::iter::once(&TokenId(u32::MAX)))
                .enumerate()
            {
                if picks.contains(&step) {
                    let engine = engine_mask(&mut m);
                    assert_eq!(engine, brute_force_mask(&m), "{name} {} step {step}", r.id);
                    *compared.entry(format!("{name}/{}", r.format)).or_default() += 1;
                }
                if t.0 != u32::MAX {
                    assert!(m.accept_token(t), "{name} {} step {step}", r.id);
                }
            }
        }
    }
    println!("masks compared: {compared:?}");
    let total: usize = compared.values().sum();
    assert!(total >= 1000, "only {total} masks compared");
    for format in ["llama", "qwen", "harmony"] {
        assert!(
            compared.keys().any(|k| k.ends_with(format)),
            "no {format} masks"
        );
    }
}

/// Tools' schemas imported from the compiler's fragments, with the rules the tools share merged,
/// give the language of lowering each in place: along every sampled request's output (the first
/// time, lowered and kept, and after, imported) both grammars accept each token, terminate, and
/// give the same mask at every step, which at sampled steps is also the brute-force mask; the
/// warnings are the same, and the merged grammar has fewer rules.
#[test]
fn schema_fragments_give_the_language_of_direct_lowering() {
    let Some(shared) = shared_dir("schema_fragments_give_the_language_of_direct_lowering") else {
        return;
    };
    let Some(loaded) = common::smollm2() else {
        return;
    };
    let vocab = Arc::new(loaded.vocab.clone());
    let (options, limits) = (JsonSchemaOptions::default(), Limits::default());
    let fragments = SchemaFragments::new();
    let all = requests(&shared, 25);
    let mut rng = Rng::new(11);
    let (mut steps, mut brute, mut fewer) = (0usize, 0usize, 0usize);
    for pass in 0..2 {
        for r in &all {
            let direct = structural_tag_grammar(&r.tag, Some(&loaded.vocab), &options, &limits)
                .expect("compiles");
            let from = structural_tag_grammar_with(
                &r.tag,
                Some(&loaded.vocab),
                &options,
                &limits,
                &fragments,
            )
            .expect("compiles with fragments");
            assert_eq!(direct.warnings, from.warnings, "{} (pass {pass})", r.id);
            let (d, f) = (direct.grammar.rules().len(), from.grammar.rules().len());
            assert!(f <= d, "{}: {f} rules merged against {d} in place", r.id);
            fewer += usize::from(f < d);
            let a = compile(&direct.grammar, Arc::clone(&vocab), &limits).expect("direct");
            let b = compile(&from.grammar, Arc::clone(&vocab), &limits).expect("fragments");
            let (mut ma, mut mb) = (GrammarMatcher::new(a), GrammarMatcher::new(b));
            let stop = loaded.vocab.stop_tokens()[0];
            let tokens = encode(&loaded, &r.output);
            let pick = rng.below(tokens.len() + 1);
            for (step, &t) in tokens.iter().chain(std::iter::once(&stop)).enumerate() {
                let mask = engine_mask(&mut mb);
                assert_eq!(engine_mask(&mut ma), mask, "{} step {step}", r.id);
                if step == pick {
                    assert_eq!(mask, brute_force_mask(&mb), "{} step {step}", r.id);
                    brute += 1;
                }
                assert!(
                    ma.accept_token(t) && mb.accept_token(t),
                    "{} step {step}",
                    r.id
                );
                steps += 1;
            }
            assert!(ma.is_terminated() && mb.is_terminated(), "{}", r.id);
        }
    }
    println!("{steps} steps, {brute} brute-force masks, {fewer} grammars with merged rules");
    assert!(fragments.hits() > 0, "the second pass imports");
    assert!(fewer * 2 > all.len(), "most tool lists share rules");
}
