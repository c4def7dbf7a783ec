//! End-to-end generation with the real SmolLM2-135M-Instruct GGUF (greedy, short runs): tool calls
//! under the grammar parse and validate against their tool's schema (checked by the independent
//! `jsonschema` crate) with jump-forward on and off; jump-forward needs fewer forward passes; and a
//! forced re-tokenization rollback leaves the matcher, the KV cache and the logits in step.

mod common;

use candle_core::Device;
use serde_json::{json, Value};
use structgen::frontend::tool_calls::parse_calls;
use structgen::frontend::tools::FormatSet;
use structgen::frontend::tools::{parse_tools, style, Tool, ToolChoice, ToolOptions};
use structgen::runtime::generate::{generate, GenerateOptions, Generation, Session};
use structgen::runtime::request::{grammar_compiler, prompt_tokens, stop_tokens, tools_matcher};
use structgen::runtime::source::local_files;
use structgen::runtime::{Model, WeightDtype};

fn model(test: &str) -> Option<Model> {
    let path = common::model_file(test)?;
    Some(
        Model::load(
            &local_files(&path).unwrap(),
            &Device::Cpu,
            WeightDtype::Auto,
        )
        .unwrap(),
    )
}

fn tools(file: &str) -> (Vec<Value>, Vec<Tool>) {
    let v: Value = serde_json::from_str(&common::read(format!("grammars/tools/{file}"))).unwrap();
    let tools = parse_tools(&v).unwrap();
    (v.as_array().unwrap().clone(), tools)
}

const CASES: [(&str, &str); 3] = [
    ("weather.json", "What's the weather in Paris right now?"),
    (
        "calendar.json",
        "Put a meeting called Budget review on my calendar for 2025-03-04 at 10:00, one hour.",
    ),
    ("filesystem.json", "List the files in the folder /tmp."),
];

fn run_case(
    model: &mut Model,
    file: &str,
    prompt: &str,
    jump_forward: bool,
) -> (Generation, Vec<Tool>) {
    let opts = GenerateOptions {
        max_tokens: 160,
        jump_forward,
        verify_masks: true,
        ..GenerateOptions::default()
    };
    run_with(model, file, prompt, opts)
}

fn run_with(
    model: &mut Model,
    file: &str,
    prompt: &str,
    opts: GenerateOptions,
) -> (Generation, Vec<Tool>) {
    let hermes = style("hermes").unwrap();
    let (tools_json, tools) = tools(file);
    let messages = [json!({"role": "user", "content": prompt})];
    let (_, ids) = prompt_tokens(model, None, &messages, &tools_json, hermes).unwrap();
    let stop = stop_tokens(model, &[]);
    let options = ToolOptions {
        tool_choice: ToolChoice::Required,
        parallel_tool_calls: false,
        reasoning: None,
        formats: FormatSet::All,
    };
    let (matcher, _) =
        tools_matcher(&grammar_compiler(model), &tools, hermes, &options, &stop).unwrap();
    let gen = generate(model, &ids, Some(matcher), stop, opts, &mut |_| {}).unwrap();
    (gen, tools)
}

#[test]
fn constrained_calls_validate_with_and_without_jump_forward() {
    let Some(mut model) = model("constrained_calls_validate") else {
        return;
    };
    let hermes = style("hermes").unwrap();
    let (mut passes_on, mut passes_off, mut differ) = (0, 0, 0);
    for (file, prompt) in CASES {
        let mut texts = Vec::new();
        for jf in [true, false] {
            let (gen, tools) = run_case(&mut model, file, prompt, jf);
            let what = format!("{file} / jump-forward {jf}: {:?}", gen.text);
            assert_eq!(gen.summary.stop_reason, "grammar", "{what}");
            assert!(
                gen.summary.verified_tokens > Some(0),
                "{what}: --verify-masks ran"
            );
            let parsed = parse_calls(&gen.text, hermes, &tools, FormatSet::All);
            assert!(parsed.errors.is_empty(), "{what}: {:?}", parsed.errors);
            assert_eq!(parsed.calls.len(), 1, "{what}");
            for call in &parsed.calls {
                let tool = tools.iter().find(|t| t.name == call.name).unwrap();
                let validator = jsonschema::validator_for(&tool.parameters).unwrap();
                let errors: Vec<String> = validator
                    .iter_errors(&call.arguments)
                    .map(|e| e.to_string())
                    .collect();
                assert!(errors.is_empty(), "{what}: {errors:?}");
            }
            if jf {
                passes_on += gen.summary.forward_passes;
                assert!(gen.summary.tokens_forced > 0, "{what}");
            } else {
                passes_off += gen.summary.forward_passes;
                assert_eq!(gen.summary.tokens_forced, 0, "{what}");
            }
            texts.push(gen.text);
        }
        if texts[0] != texts[1] {
            differ += 1;
            eprintln!(
                "{file}: jump-forward changed the answer:\n  on:  {:?}\n  off: {:?}",
                texts[0], texts[1]
            );
        }
    }
    eprintln!("forward passes: {passes_on} with jump-forward, {passes_off} without; answers differ in {differ}/{}", CASES.len());
    assert!(passes_on < passes_off, "{passes_on} vs {passes_off}");
}

/// The GPU decode path on the CPU device: masks filled during the forward pass (overlap) or
/// after it, and masks applied and tokens drawn with tensor ops (`on_device`) must give the same
/// greedy answer as the host path; every sampled step records its wait for the mask, which
/// without overlap is the whole fill time (with it, the fill thread's scheduling counts too, so
/// no bound is asserted).
#[test]
fn overlap_and_device_sampling_keep_the_answer() {
    let Some(mut model) = model("overlap_and_device_sampling") else {
        return;
    };
    for (file, prompt) in CASES {
        let run = |model: &mut Model, overlap, on_device| {
            let opts = GenerateOptions {
                max_tokens: 96,
                overlap,
                on_device,
                ..GenerateOptions::default()
            };
            run_with(model, file, prompt, opts).0
        };
        let serial = run(&mut model, false, false);
        let sampled: Vec<_> = serial
            .records
            .iter()
            .filter(|r| r.mask_us.is_some())
            .collect();
        assert!(!sampled.is_empty());
        for r in &sampled {
            assert_eq!(r.mask_wait_us, r.mask_us, "{file}: serial wait = fill time");
        }
        for (overlap, on_device) in [(true, false), (true, true), (false, true)] {
            let gen = run(&mut model, overlap, on_device);
            let what = format!("{file} overlap {overlap} on_device {on_device}");
            assert_eq!(gen.tokens, serial.tokens, "{what}");
            let (mut masks, mut waits) = (0.0, 0.0);
            for r in gen.records.iter().filter(|r| r.mask_us.is_some()) {
                let (mask, wait) = (r.mask_us.unwrap(), r.mask_wait_us.unwrap());
                if !overlap {
                    assert_eq!(wait, mask, "{what}");
                }
                masks += mask;
                waits += wait;
            }
            // Overlapped, a fill starts with its forward pass: the logits wait for what is left
            // of it, never more than the fills took in all.
            assert!(
                waits <= masks,
                "{what}: waited {waits:.1} µs for masks filled in {masks:.1} µs"
            );
            if on_device {
                assert!(gen.records.iter().any(|r| r.apply_us.is_some()), "{what}");
            }
        }
    }
}

#[test]
fn retokenization_rollback_keeps_matcher_and_kv_in_step() {
    let Some(mut model) = model("retokenization_rollback") else {
        return;
    };
    let hermes = style("hermes").unwrap();
    let (tools_json, tools) = tools("weather.json");
    let messages = [json!({"role": "user", "content": "Weather in Oslo?"})];
    let (_, prompt) = prompt_tokens(&model, None, &messages, &tools_json, hermes).unwrap();
    let stop = stop_tokens(&model, &[]);
    let options = ToolOptions {
        tool_choice: ToolChoice::Required,
        ..ToolOptions::default()
    };
    let (matcher, _) =
        tools_matcher(&grammar_compiler(&model), &tools, hermes, &options, &stop).unwrap();
    let single = |c: char| {
        model
            .vocab
            .vocab
            .find_token(&c.to_string())
            .unwrap_or_else(|| panic!("no single-character token for {c:?}"))
            .0
    };
    let typed = "<tool_call>\n{\"na";
    let chars: Vec<u32> = typed.chars().map(single).collect();
    let (roll, added, tokens, logits) = {
        let mut session = Session::new(
            &mut model,
            Some(matcher),
            stop.clone(),
            GenerateOptions::default(),
        )
        .unwrap();
        session.prefill(&prompt).unwrap();
        for &t in &chars {
            session.push_token(t).unwrap();
        }
        session.sync(&mut |_| {}).unwrap();
        assert_eq!(session.kv_len(), prompt.len() + chars.len());
        let (roll, added) = session.jump_forward(&mut |_| {}).unwrap();
        session.sync(&mut |_| {}).unwrap();
        let tokens = session.tokens().to_vec();
        assert_eq!(session.matcher().unwrap().num_steps(), tokens.len());
        assert_eq!(session.kv_len(), prompt.len() + tokens.len());
        let logits: Vec<f32> = session.logits().unwrap().to_vec1().unwrap();
        (roll, added, tokens, logits)
    };
    assert!(roll > 0, "the forced text must re-tokenize earlier tokens");
    assert!(added > roll, "jump-forward must add tokens");
    assert_eq!(&tokens[..chars.len() - roll], &chars[..chars.len() - roll]);
    let text: Vec<u8> = tokens
        .iter()
        .flat_map(|&t| {
            model
                .vocab
                .vocab
                .token_bytes(structgen::TokenId(t))
                .to_vec()
        })
        .collect();
    let text = String::from_utf8(text).unwrap();
    assert!(
        "<tool_call>\n{\"name\": \"get_".starts_with(&text),
        "{text:?}"
    );
    assert!(text.len() > typed.len(), "{text:?}");
    // A fresh run with the same passes (the prompt as a prompt, generated tokens as decode rows):
    // prompt, the kept typed tokens, the tokens jump-forward fed.
    let kept = chars.len() - roll;
    model.decoder.truncate(0).unwrap();
    model.decoder.forward(&prompt).unwrap();
    model.decoder.forward_generated(&tokens[..kept]).unwrap();
    let fresh: Vec<f32> = model
        .decoder
        .forward_generated(&tokens[kept..])
        .unwrap()
        .to_vec1()
        .unwrap();
    let diff = fresh
        .iter()
        .zip(&logits)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(
        diff < 1e-2,
        "logits after rollback differ from a fresh run by {diff}"
    );
}

/// The next turn of a conversation keeps the KV cache of everything it shares with the last
/// one and prefills only the rest, and answers as a fresh prefill of the whole prompt does.
#[test]
fn a_following_turn_prefills_only_its_new_tokens() {
    let Some(mut model) = model("kv_reuse") else {
        return;
    };
    let hermes = style("hermes").unwrap();
    let stop = stop_tokens(&model, &[]);
    let opts = GenerateOptions {
        max_tokens: 12,
        ..GenerateOptions::default()
    };
    let first = [json!({"role": "user", "content": "Name a colour."})];
    let (_, a) = prompt_tokens(&model, None, &first, &[], hermes).unwrap();
    let one = generate(
        &mut model,
        &a,
        None,
        stop.clone(),
        opts.clone(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(one.summary.prompt_reused, 0);
    let second = [
        first[0].clone(),
        json!({"role": "assistant", "content": one.text}),
        json!({"role": "user", "content": "And another one?"}),
    ];
    let (_, b) = prompt_tokens(&model, None, &second, &[], hermes).unwrap();
    let shared = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    assert!(shared > 10 && shared < b.len());
    let two = generate(
        &mut model,
        &b,
        None,
        stop.clone(),
        opts.clone(),
        &mut |_| {},
    )
    .unwrap();
    let reused = two.summary.prompt_reused;
    assert!(
        reused >= shared && reused < b.len(),
        "{reused} of {} prompt tokens reused, {shared} shared with the first turn",
        b.len()
    );
    model.decoder.truncate(0).unwrap();
    let fresh = generate(&mut model, &b, None, stop, opts, &mut |_| {}).unwrap();
    assert_eq!(fresh.summary.prompt_reused, 0);
    assert_eq!(two.tokens, fresh.tokens);
}

/// Speculation changes how many steps share a pass, never a token: with SmolLM2 drafting for
/// itself, greedy and sampled (temperature 1, where the target often picks another token than
/// the greedy draft, so drafts are cut back) constrained answers equal plain decoding's.
#[test]
fn speculation_gives_the_plain_output() {
    use structgen::runtime::generate::generate_with_draft;
    use structgen::runtime::sampler::Sampling;
    let (Some(mut model), Some(mut draft)) = (model("speculation"), model("speculation")) else {
        return;
    };
    let hermes = style("hermes").unwrap();
    let stop = stop_tokens(&model, &[]);
    let options = ToolOptions {
        tool_choice: ToolChoice::Required,
        ..ToolOptions::default()
    };
    let sampled = Sampling::Random {
        temperature: 1.0,
        top_k: None,
        top_p: None,
    };
    let (mut drafted, mut accepted) = (0, 0);
    for (file, prompt) in CASES {
        let (tools_json, tools) = tools(file);
        let messages = [json!({"role": "user", "content": prompt})];
        let (_, ids) = prompt_tokens(&model, None, &messages, &tools_json, hermes).unwrap();
        for (sampling, seed) in [(Sampling::Greedy, 0), (sampled, 7), (sampled, 8)] {
            let opts = GenerateOptions {
                max_tokens: 80,
                sampling,
                seed,
                ..GenerateOptions::default()
            };
            let mut answer = |draft: Option<(&mut structgen::runtime::Model, usize)>| {
                let compiler = grammar_compiler(&model);
                let (matcher, _) =
                    tools_matcher(&compiler, &tools, hermes, &options, &stop).unwrap();
                model.decoder.truncate(0).unwrap();
                let (m, s, o) = (Some(matcher), stop.clone(), opts.clone());
                generate_with_draft(&mut model, draft, &ids, m, s, o, &mut |_| {}).unwrap()
            };
            let plain = answer(None);
            let spec = answer(Some((&mut draft, 3)));
            assert_eq!(plain.text, spec.text, "{file} {sampling:?} seed {seed}");
            let d = spec.summary.speculation.unwrap();
            assert!(d.accepted <= d.drafted && d.rounds > 0);
            drafted += d.drafted;
            accepted += d.accepted;
        }
    }
    assert!(
        accepted > 0 && accepted < drafted,
        "{accepted} of {drafted}"
    );
}
