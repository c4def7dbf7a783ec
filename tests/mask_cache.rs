//! The adaptive mask cache changes no mask: on every shared tool-calling workload (both tokenizers)
//! and a sample of JSONSchemaBench, the cached fill equals the uncached whole-vocabulary walk at
//! every step, with one compiler per file so that masks are shared across requests as in serving.
//! Also: ahead-of-time, JIT and unshared compiles agree; a tiny pool evicts and stays exact; the
//! rayon batch fill equals filling one by one.

mod common;

use std::sync::Arc;

use serde_json::Value;
use structgen::engine::batch::fill_next_token_bitmasks;
use structgen::engine::{CompileOptions, GrammarCompiler, GrammarMatcher, Precompute};
use structgen::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions, PropertyOrder};
use structgen::vocab::LoadedVocab;
use structgen::{Limits, TokenBitmask, TokenId};

fn compiler(loaded: &LoadedVocab, options: CompileOptions) -> GrammarCompiler {
    GrammarCompiler::new(Arc::new(loaded.vocab.clone()), Limits::default(), options)
}

/// Steps `tokens` (then the first stop token) comparing cached and uncached masks, until the end or
/// the first token the grammar refuses; returns the steps compared.
fn compare(
    compiler: &GrammarCompiler,
    key: &str,
    grammar: &structgen::Grammar,
    tokens: &[TokenId],
    what: &str,
) -> usize {
    let g = compiler
        .compile_cached(structgen::util::fingerprint(key), || {
            Ok::<_, structgen::grammar::GrammarError>(grammar.clone())
        })
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let stop = compiler.vocab().stop_tokens()[0];
    let mut m = GrammarMatcher::with_stop_tokens(Arc::clone(&g), vec![stop]);
    let size = compiler.vocab().size();
    let (mut cached, mut uncached) = (TokenBitmask::new(size), TokenBitmask::new(size));
    let all: Vec<TokenId> = tokens.iter().copied().chain([stop]).collect();
    for (step, &t) in all.iter().enumerate() {
        m.fill_next_token_bitmask(&mut cached);
        m.fill_next_token_bitmask_uncached(&mut uncached);
        if cached != uncached {
            let (c, u) = (cached.allowed_ids(), uncached.allowed_ids());
            let extra: Vec<_> = c.iter().filter(|x| !u.contains(x)).take(10).collect();
            let missing: Vec<_> = u.iter().filter(|x| !c.contains(x)).take(10).collect();
            panic!(
                "{what}, step {step}: cached mask differs: extra {extra:?}, missing {missing:?}"
            );
        }
        let allowed = cached.is_allowed(t);
        assert_eq!(
            m.accept_token(t),
            allowed,
            "{what}, step {step}: mask and accept disagree on {}",
            t.0
        );
        if !allowed {
            // An instance the grammar does not take (e.g. compact JSON where the schema keeps an
            // order or a keyword it cannot follow exactly): the masks up to here were compared.
            return step + 1;
        }
    }
    all.len()
}

fn workloads(loaded: &LoadedVocab, per_file: usize, name: &str) {
    let Some(shared) = common::shared_dir(name) else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(shared.join("bench/requests"))
        .expect("bench/requests")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 18, "the 18 workload files");
    let mut steps = 0;
    for file in &files {
        let compiler = compiler(loaded, CompileOptions::default());
        for r in common::workload_requests(file, per_file) {
            let grammar = r.grammar(&compiler);
            let tokens = common::encode(loaded, &r.output);
            steps += compare(&compiler, &r.tag.to_string(), &grammar, &tokens, &r.id);
        }
    }
    eprintln!(
        "{name}: {steps} steps over {} files, cached = uncached",
        files.len()
    );
}

#[test]
fn cached_masks_equal_uncached_on_every_workload_llama3() {
    if let Some(loaded) = common::llama3() {
        workloads(
            &loaded,
            6,
            "cached_masks_equal_uncached_on_every_workload_llama3",
        );
    }
}

#[test]
fn cached_masks_equal_uncached_on_every_workload_smollm2() {
    if let Some(loaded) = common::smollm2() {
        workloads(
            &loaded,
            6,
            "cached_masks_equal_uncached_on_every_workload_smollm2",
        );
    }
}

#[test]
fn cached_masks_equal_uncached_on_json_schema_sample() {
    let (Some(shared), Some(loaded)) =
        (common::shared_dir("json_schema_sample"), common::smollm2())
    else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(shared.join("jsonschema"))
        .expect("jsonschema")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let compiler = compiler(&loaded, CompileOptions::default());
    let (mut schemas, mut steps) = (0, 0);
    for file in &files {
        for line in std::fs::read_to_string(file)
            .expect("readable")
            .lines()
            .take(3)
        {
            let v: Value = serde_json::from_str(line).expect("JSON line");
            let Ok(sg) = json_schema_grammar(
                &v["schema"],
                &JsonSchemaOptions::default(),
                &Limits::default(),
            ) else {
                continue;
            };
            let what = v["id"].as_str().unwrap_or_default().to_string();
            for instance in v["valid"].as_array().expect("valid").iter().take(2) {
                let tokens = common::encode(&loaded, &instance.to_string());
                steps += compare(
                    &compiler,
                    &v["schema"].to_string(),
                    &sg.grammar,
                    &tokens,
                    &what,
                );
            }
            schemas += 1;
        }
    }
    assert!(schemas >= 30, "only {schemas} schemas compiled");
    eprintln!("json schema sample: {schemas} schemas, {steps} steps, cached = uncached");
}

#[test]
fn objects_with_other_names_share_their_free_key_runs() {
    // Key states differ between these schemas in their known names, but every other first byte of
    // a key enters the same free rest and the same value: the second and third schemas take those
    // runs from the memo, and their masks still equal the uncached walk's.
    let Some(loaded) = common::smollm2() else {
        return;
    };
    let compiler = compiler(&loaded, CompileOptions::default());
    let schemas = [
        (
            r#"{"type":"object","properties":{"alpha":{"type":"integer"},"beta":{"type":"string"}}}"#,
            r#"{"beta": "x", "other key": [1, {"a": null}], "alpha": 3}"#,
        ),
        (
            r#"{"type":"object","properties":{"gamma":{"type":"boolean"}}}"#,
            r#"{"zeta": "free \" text", "gamma": true, "": 0}"#,
        ),
        (
            r#"{"type":"object","properties":{"name":{"type":"string"},"size":{"type":"number"}}}"#,
            r#"{"size": 1.5, "name": "n", "note": {"x": "y"}}"#,
        ),
    ];
    let mut steps = 0;
    for (i, (schema, instance)) in schemas.iter().enumerate() {
        let schema: Value = serde_json::from_str(schema).expect("schema");
        let options = JsonSchemaOptions {
            strict: false,
            property_order: PropertyOrder::Flexible,
            ..JsonSchemaOptions::default()
        };
        let sg = json_schema_grammar(&schema, &options, &Limits::default()).expect("compiles");
        let tokens = common::encode(&loaded, instance);
        let what = format!("schema {i}");
        let compared = compare(&compiler, &schema.to_string(), &sg.grammar, &tokens, &what);
        assert_eq!(compared, tokens.len() + 1, "{what}: instance refused");
        steps += compared;
    }
    let stats = compiler.pool_stats().expect("pool");
    assert!(
        stats.runs_reused > 0 && stats.runs_walked > 0,
        "no key state reused another schema's runs ({steps} steps): {stats:?}"
    );
}

/// Every mask of the first requests of one workload under `options`.
fn masks_under(
    loaded: &LoadedVocab,
    file: &std::path::Path,
    options: CompileOptions,
    limits: Limits,
) -> (Vec<Vec<u32>>, GrammarCompiler) {
    let compiler = GrammarCompiler::new(Arc::new(loaded.vocab.clone()), limits, options);
    let mut out = Vec::new();
    for r in common::workload_requests(file, 4) {
        let grammar = r.grammar(&compiler);
        let g = compiler.compile(&grammar).expect("compiles");
        let mut m = GrammarMatcher::new(g);
        let mut mask = TokenBitmask::new(compiler.vocab().size());
        for t in common::encode(loaded, &r.output) {
            m.fill_next_token_bitmask(&mut mask);
            out.push(mask.words().to_vec());
            assert!(m.accept_token(t));
        }
    }
    (out, compiler)
}

#[test]
fn ahead_of_time_jit_unshared_and_evicting_compiles_agree() {
    let (Some(shared), Some(loaded)) = (
        common::shared_dir("compile_options_agree"),
        common::smollm2(),
    ) else {
        return;
    };
    let file = shared.join("bench/requests/qwen-dynamic-5.jsonl");
    let base = CompileOptions::default();
    let (jit, _) = masks_under(
        &loaded,
        &file,
        CompileOptions {
            precompute: Precompute::Top(0),
            ..base.clone()
        },
        Limits::default(),
    );
    let (aot, _) = masks_under(
        &loaded,
        &file,
        CompileOptions {
            precompute: Precompute::All,
            cross_grammar_cache: false,
            ..base.clone()
        },
        Limits::default(),
    );
    let (tiny, compiler) = masks_under(
        &loaded,
        &file,
        base.clone(),
        Limits {
            max_mask_cache_bytes: 64 << 10,
            ..Limits::default()
        },
    );
    assert!(jit == aot, "ahead-of-time masks differ from JIT masks");
    assert!(jit == tiny, "masks differ with a 64 KiB pool");
    let stats = compiler.pool_stats().expect("pool");
    assert!(
        stats.evicted > 0 && stats.bytes <= 64 << 10 || stats.entries == 1,
        "{stats:?}"
    );
}

#[test]
fn structurally_equal_grammars_share_masks() {
    let (Some(shared), Some(loaded)) = (common::shared_dir("share_masks"), common::smollm2())
    else {
        return;
    };
    let file = shared.join("bench/requests/llama-dynamic-5.jsonl");
    let (_, compiler) = masks_under(&loaded, &file, CompileOptions::default(), Limits::default());
    let stats = compiler.pool_stats().expect("pool");
    assert!(
        stats.perfect_hits > 0,
        "no state of a later request reused a mask: {stats:?}"
    );
}

#[test]
fn batch_fill_equals_one_by_one() {
    let (Some(shared), Some(loaded)) = (common::shared_dir("batch_fill"), common::smollm2()) else {
        return;
    };
    let compiler = compiler(&loaded, CompileOptions::default());
    let reqs = common::workload_requests(&shared.join("bench/requests/harmony-dynamic-5.jsonl"), 8);
    let mut matchers: Vec<GrammarMatcher> = Vec::new();
    let mut texts = Vec::new();
    for r in &reqs {
        let grammar = r.grammar(&compiler);
        matchers.push(GrammarMatcher::new(
            compiler.compile(&grammar).expect("compiles"),
        ));
        texts.push(common::encode(&loaded, &r.output));
    }
    let size = compiler.vocab().size();
    let mut batch: Vec<TokenBitmask> = (0..matchers.len())
        .map(|_| TokenBitmask::new(size))
        .collect();
    let mut single = TokenBitmask::new(size);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .expect("pool");
    for step in 0..texts.iter().map(Vec::len).max().unwrap_or(0) {
        pool.install(|| fill_next_token_bitmasks(&mut matchers, &mut batch));
        for (i, m) in matchers.iter_mut().enumerate() {
            let Some(&t) = texts[i].get(step) else {
                continue;
            };
            m.fill_next_token_bitmask(&mut single);
            assert_eq!(batch[i], single, "request {i}, step {step}");
            assert!(m.accept_token(t));
        }
    }
}

#[test]
fn grammar_cache_keeps_within_its_byte_bound() {
    let grammar = |n: usize| {
        let alts: Vec<String> = (0..n).map(|i| format!("\"word{i}\"")).collect();
        structgen::grammar::ebnf::parse(
            &format!("root ::= ({})+", alts.join(" | ")),
            "root",
            &Limits::default(),
        )
        .expect("parses")
    };
    let options = |bytes| CompileOptions {
        precompute: Precompute::Top(0),
        cross_grammar_cache: false,
        grammar_cache_bytes: bytes,
        ..CompileOptions::default()
    };
    let compile = |c: &GrammarCompiler, n: usize| {
        c.compile_cached(n as u128, || {
            Ok::<_, structgen::grammar::GrammarError>(grammar(n))
        })
        .expect("compiles")
    };
    // Unbounded: every grammar is kept and counted.
    let all = GrammarCompiler::new(common::byte_vocab(), Limits::default(), options(None));
    let sizes: Vec<usize> = (20..23).map(|n| compile(&all, n).heap_bytes()).collect();
    assert!(sizes.iter().all(|&b| b > 0));
    assert_eq!(all.cache_bytes(), sizes.iter().sum::<usize>());
    // Room for two: the least recently used goes, and compiling it again is a miss.
    let bound = sizes[1] + sizes[2];
    let two = GrammarCompiler::new(
        common::byte_vocab(),
        Limits::default(),
        options(Some(bound)),
    );
    for n in 20..23 {
        compile(&two, n);
    }
    assert_eq!(two.cache_bytes(), bound);
    compile(&two, 22);
    assert_eq!(two.grammar_cache_hits(), 1);
    compile(&two, 20);
    assert_eq!(
        two.grammar_cache_hits(),
        1,
        "the oldest grammar was evicted"
    );
    assert!(two.cache_bytes() <= bound);
}

/// Under the default [`Precompute::Auto`], what a trigger leads into in a new tool list — the
/// tags' common beginning, then the name trie, the slowest masks a request would meet — is
/// computed while compiling: filling those masks is a lookup, the shared pool computes nothing.
#[test]
fn name_trie_after_a_trigger_is_computed_at_compile_time() {
    let Some(loaded) = common::smollm2() else {
        return;
    };
    let c = compiler(&loaded, CompileOptions::default());
    let tag = |name: &str| {
        serde_json::json!({"type": "tag",
            "begin": format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": "),
            "content": {"type": "json_schema", "json_schema": {"type": "object",
                "properties": {"q": {"type": "string"}}, "required": ["q"]}},
            "end": "}\n</tool_call>"})
    };
    let names = [
        "get_weather",
        "search_web",
        "book_flight",
        "send_mail",
        "play_song",
    ];
    let structural = serde_json::json!({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<tool_call>"],
        "tags": names.iter().map(|n| tag(n)).collect::<Vec<_>>()}});
    let grammar = structgen::frontend::structural_tag::structural_tag_grammar(
        &structural,
        Some(&loaded.vocab),
        &JsonSchemaOptions::default(),
        &Limits::default(),
    )
    .expect("converts")
    .grammar;
    let g = c.compile(&grammar).expect("compiles");
    let mut m = GrammarMatcher::new(g);
    let computed = || c.pool_stats().expect("a shared pool").misses;
    let mut mask = TokenBitmask::new(loaded.vocab.size());
    for t in common::encode(&loaded, "Sure. <tool_call>") {
        assert!(m.accept_token(t));
    }
    // Every mask along the tags' common beginning, then the name trie's.
    let prefix = common::encode(&loaded, "\n{\"name\": \"");
    for (step, next) in prefix.iter().map(Some).chain([None]).enumerate() {
        let before = computed();
        m.fill_next_token_bitmask(&mut mask);
        assert_eq!(
            computed(),
            before,
            "mask {step} after the trigger was computed on first use"
        );
        if let Some(&t) = next {
            assert!(mask.is_allowed(t) && m.accept_token(t));
        }
    }
    assert!(prefix.len() >= 2, "the common beginning spans tokens");
    let allowed = |text: &str| mask.is_allowed(common::encode(&loaded, text)[0]);
    assert!(allowed("get") && allowed("search") && !allowed("foo"));
}
