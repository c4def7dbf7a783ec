//! Batched decoding against decoding alone, with the real SmolLM2-135M-Instruct GGUF: the same
//! requests (tool calls under three grammars with jump-forward, free answers, a sampled one with
//! its seed) give exactly the tokens each gives decoded by itself, whatever batch they share, how
//! many run at once and how their prompts are chunked; and the threaded runtime cancels a request
//! without disturbing the others.

mod common;

use candle_core::Device;
use serde_json::{json, Value};
use structgen::frontend::tools::{parse_tools, style, FormatSet, ToolChoice, ToolOptions};
use structgen::runtime::batch::{Batch, BatchOptions, BatchRequest, Event, Runtime};
use structgen::runtime::generate::{generate, GenerateOptions};
use structgen::runtime::request::{grammar_compiler, prompt_tokens, stop_tokens, tools_matcher};
use structgen::runtime::sampler::Sampling;
use structgen::runtime::source::local_files;
use structgen::runtime::trace::Origin;
use structgen::runtime::{Model, WeightDtype};

fn model(test: &str) -> Option<Model> {
    let path = common::model_file(test)?;
    let files = local_files(&path).unwrap();
    Some(Model::load(&files, &Device::Cpu, WeightDtype::Auto).unwrap())
}

/// A request: (tools file or none, user text, sampling).
type Spec = (Option<&'static str>, &'static str, Sampling);

const SPECS: [Spec; 6] = [
    (
        Some("weather.json"),
        "What's the weather in Paris right now?",
        Sampling::Greedy,
    ),
    (
        Some("calendar.json"),
        "Put a meeting called Budget review on my calendar for 2025-03-04 at 10:00, one hour.",
        Sampling::Greedy,
    ),
    (
        Some("filesystem.json"),
        "List the files in the folder /tmp.",
        Sampling::Greedy,
    ),
    (None, "Count from one to ten in words.", Sampling::Greedy),
    (
        None,
        "Write one sentence about the sea.",
        Sampling::Random {
            temperature: 0.8,
            top_k: Some(40),
            top_p: Some(0.95),
        },
    ),
    (
        Some("weather.json"),
        "Is it raining in Oslo? Use celsius.",
        Sampling::Greedy,
    ),
];

fn request(model: &Model, (file, text, sampling): &Spec, i: usize) -> BatchRequest {
    let hermes = style("hermes").unwrap();
    let stop = stop_tokens(model, &[]);
    let messages = [json!({"role": "user", "content": text})];
    let (tools_json, matcher) = match file {
        Some(f) => {
            let v: Value =
                serde_json::from_str(&common::read(format!("grammars/tools/{f}"))).unwrap();
            let tools = parse_tools(&v).unwrap();
            let options = ToolOptions {
                tool_choice: ToolChoice::Required,
                parallel_tool_calls: false,
                reasoning: None,
                formats: FormatSet::All,
            };
            let (m, _) =
                tools_matcher(&grammar_compiler(model), &tools, hermes, &options, &stop).unwrap();
            (v.as_array().unwrap().clone(), Some(m))
        }
        None => (Vec::new(), None),
    };
    let (_, prompt) = prompt_tokens(model, None, &messages, &tools_json, hermes).unwrap();
    BatchRequest {
        prompt,
        matcher,
        stop_tokens: stop,
        opts: GenerateOptions {
            max_tokens: 48,
            sampling: *sampling,
            seed: 11 + i as u64,
            ..GenerateOptions::default()
        },
    }
}

/// Each request decoded alone (fresh cache each time).
fn alone(model: &mut Model) -> Vec<Vec<u32>> {
    (0..SPECS.len())
        .map(|i| {
            let r = request(model, &SPECS[i], i);
            model.decoder.truncate(0).unwrap();
            let gen = generate(
                model,
                &r.prompt,
                r.matcher,
                r.stop_tokens,
                r.opts,
                &mut |_| {},
            );
            gen.unwrap().tokens
        })
        .collect()
}

/// The requests in `order` through one batch; tokens by request index, and how many tokens
/// were forced and rolled back in all.
fn batched(
    model: &mut Model,
    opts: BatchOptions,
    order: &[usize],
) -> (Vec<Vec<u32>>, usize, usize) {
    let reqs: Vec<BatchRequest> = order
        .iter()
        .map(|&i| request(model, &SPECS[i], i))
        .collect();
    let mut batch = Batch::new(model, opts);
    for (&i, r) in order.iter().zip(reqs) {
        batch.submit(i as u64, r);
    }
    let mut out = vec![Vec::new(); SPECS.len()];
    let (mut forced, mut rolled) = (0, 0);
    let mut events = Vec::new();
    let mut steps = 0;
    while !batch.is_idle() {
        batch.step(&mut events);
        steps += 1;
        assert!(steps < 10_000, "the batch does not finish");
        for (id, ev) in events.drain(..) {
            match ev {
                Event::Record(r) => {
                    forced += usize::from(r.origin == Origin::Forced);
                    rolled += r.rolled_back;
                }
                Event::Done(g) => out[id as usize] = g.unwrap().tokens,
            }
        }
    }
    let most = batch.passes().iter().map(|p| p.seqs).max().unwrap_or(0);
    assert!(
        most >= opts.max_seqs.min(2),
        "passes never shared: at most {most} sequences"
    );
    (out, forced, rolled)
}

#[test]
fn batched_sequences_decode_exactly_as_alone() {
    let Some(mut model) = model("batched_sequences_decode_exactly_as_alone") else {
        return;
    };
    let solo = alone(&mut model);
    assert!(solo.iter().all(|t| !t.is_empty()));
    let all: Vec<usize> = (0..SPECS.len()).collect();
    let reversed: Vec<usize> = all.iter().rev().copied().collect();
    let compositions = [
        (
            BatchOptions {
                max_seqs: 8,
                step_tokens: 512,
                warm_ahead: true,
            },
            &all,
        ),
        // Requests join as others finish; prompts go in chunks of at most 64 rows.
        (
            BatchOptions {
                max_seqs: 3,
                step_tokens: 64,
                warm_ahead: true,
            },
            &reversed,
        ),
        (
            BatchOptions {
                max_seqs: 2,
                step_tokens: 13,
                warm_ahead: false,
            },
            &all,
        ),
    ];
    let mut forced_total = 0;
    for (opts, order) in compositions {
        let (got, forced, _) = batched(&mut model, opts, order);
        forced_total += forced;
        for (i, (g, s)) in got.iter().zip(&solo).enumerate() {
            assert_eq!(g, s, "request {i} differs in a batch ({opts:?}) from alone");
        }
    }
    assert!(forced_total > 0, "jump-forward never fed forced text");
}

#[test]
fn the_runtime_cancels_one_request_and_finishes_the_others() {
    let Some(mut model) = model("the_runtime_cancels_one_request_and_finishes_the_others") else {
        return;
    };
    let solo = alone(&mut model);
    let reqs: Vec<BatchRequest> = (0..3).map(|i| request(&model, &SPECS[i], i)).collect();
    let mut long = request(&model, &SPECS[3], 3);
    long.opts.max_tokens = 10_000;
    let rt = Runtime::start(
        model,
        BatchOptions {
            max_seqs: 4,
            step_tokens: 256,
            warm_ahead: true,
        },
    );
    let handles: Vec<_> = reqs.into_iter().map(|r| rt.submit(r).unwrap()).collect();
    let cancelled = rt.submit(long).unwrap();
    // Once it has produced a token, cancel it.
    match cancelled.recv() {
        Some(Event::Record(_)) => cancelled.cancel(),
        other => panic!("expected a record first, got {other:?}"),
    }
    let gen = cancelled.wait().unwrap().unwrap();
    assert_eq!(gen.summary.stop_reason, "cancelled");
    for (i, h) in handles.into_iter().enumerate() {
        let g = h.wait().unwrap().unwrap();
        assert_eq!(
            g.tokens, solo[i],
            "request {i} differs next to a cancelled one"
        );
    }
    let passes = rt.passes();
    assert!(passes.iter().any(|p| p.seqs >= 2), "no pass was shared");
    rt.shutdown().unwrap();
}
