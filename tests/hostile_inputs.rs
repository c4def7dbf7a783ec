//! Hostile inputs, one table: pathological grammars and schemas, malformed UTF-8 in grammars and
//! token pieces, truncated or corrupt GGUF files, tokenizer.json files with missing fields, huge
//! token ids, empty vocabularies. Each row ends in a correct result or a clear error (the row
//! names the words the error must contain), never a panic, and within its budget: compiles run
//! under `Limits::max_compile_ms`, and a watchdog fails a row that does not return at all.

mod common;

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::hostile::*;
use serde_json::{json, Value};
use structgen::frontend::json_schema::{json_schema_grammar, JsonSchemaOptions};
use structgen::frontend::structural_tag::structural_tag_grammar;
use structgen::grammar::regex::regex_grammar;
use structgen::vocab::hf;
use structgen::{ebnf, GrammarMatcher, Limits, TokenBitmask, TokenId, TokenKind, Vocab};

/// What a row must end in.
enum Expect {
    /// A result (the text describes it).
    Ok,
    /// An error containing every listed fragment.
    Err(&'static [&'static str]),
    /// A result, or an error containing every listed fragment (a limit).
    OkOrErr(&'static [&'static str]),
}

type Run = Box<dyn FnOnce() -> Result<String, String> + Send>;

struct Row {
    name: &'static str,
    expect: Expect,
    run: Run,
}

fn row(
    name: &'static str,
    expect: Expect,
    run: impl FnOnce() -> Result<String, String> + Send + 'static,
) -> Row {
    Row {
        name,
        expect,
        run: Box::new(run),
    }
}

fn rows() -> Vec<Row> {
    let d = Limits::default;
    let tight = || Limits {
        max_compile_ms: 0,
        ..Limits::default()
    };
    // The truncated-GGUF row cuts the real model file; without it (noted, and a failure under
    // STRUCTGEN_TESTS_REQUIRE_DATA) it cuts a synthetic header instead.
    let smollm = common::model_file("hostile_inputs: GGUF truncated to 1,000 bytes");
    vec![
        // Pathological grammars and schemas.
        row(
            "10 nested oneOf of 10 branches, one nesting",
            Expect::OkOrErr(&["limit"]),
            move || schema_row(nested_one_of(10, 10, false), d()),
        ),
        row(
            "10 nested oneOf of 10 branches, all nesting ($ref)",
            Expect::OkOrErr(&["limit"]),
            move || schema_row(nested_one_of(10, 10, true), d()),
        ),
        row(
            "1 MB schema (20,000 properties)",
            Expect::OkOrErr(&["limit"]),
            move || {
                let props: serde_json::Map<String, Value> = (0..20_000)
                    .map(|i| {
                        (
                            format!("property_number_{i:06}"),
                            json!({"type": "string", "description": "x".repeat(20)}),
                        )
                    })
                    .collect();
                let schema = json!({"type": "object", "properties": props});
                assert!(schema.to_string().len() > 1_000_000);
                schema_row(schema, d())
            },
        ),
        row(
            "{0,100000} in EBNF",
            Expect::Err(&["1:", "max_repeat", "100000"]),
            move || ebnf_row("root ::= \"a\"{0,100000}".into(), d()),
        ),
        row(
            "{0,100000} in a regex",
            Expect::Err(&["max_repeat", "100000"]),
            move || {
                regex_grammar("a{0,100000}", &d())
                    .map(|g| format!("{} rules", g.rules().len()))
                    .map_err(|e| e.to_string())
            },
        ),
        row(
            "maxLength 100000 string",
            Expect::OkOrErr(&["max_repeat"]),
            move || schema_row(json!({"type": "string", "maxLength": 100000}), d()),
        ),
        row(
            "maxItems 100000 array",
            Expect::OkOrErr(&["max_repeat"]),
            move || {
                schema_row(
                    json!({"type": "array", "items": {"type": "integer"}, "maxItems": 100000}),
                    d(),
                )
            },
        ),
        row("10,000 tools", Expect::OkOrErr(&["limit"]), move || {
            let tools: Vec<Value> = (0..10_000)
                .map(|i| tool(&format!("tool_{i}"), json!({"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]})))
                .collect();
            tools_row(Value::Array(tools), "auto")
        }),
        row(
            "1 MB tag begin string",
            Expect::OkOrErr(&["limit"]),
            move || {
                let tag = json!({"type": "structural_tag", "format": {"type": "tag", "begin": "<".repeat(1 << 20), "content": {"type": "any_text"}, "end": ">"}});
                let limits = d();
                let g = structural_tag_grammar(&tag, None, &JsonSchemaOptions::default(), &limits)
                    .map_err(|e| e.to_string())?;
                compile(g.grammar, common::byte_vocab(), limits)
            },
        ),
        row(
            "10,000 nested parentheses",
            Expect::Err(&["1:", "max_nesting"]),
            move || {
                ebnf_row(
                    format!("root ::= {}\"a\"{}", "(".repeat(10_000), ")".repeat(10_000)),
                    d(),
                )
            },
        ),
        row(
            "schema nested 1,000 deep",
            Expect::Err(&["max_schema_depth"]),
            move || {
                let mut s = json!({"type": "integer"});
                for _ in 0..1000 {
                    s = json!({"type": "array", "items": s});
                }
                schema_row(s, d())
            },
        ),
        row(
            "JSON nested 100,000 deep",
            Expect::Err(&["recursion limit"]),
            move || {
                let text = "[".repeat(100_000) + &"]".repeat(100_000);
                serde_json::from_str::<Value>(&text)
                    .map(|_| "parsed".into())
                    .map_err(|e| e.to_string())
            },
        ),
        row(
            "self-referencing $ref",
            Expect::OkOrErr(&["cannot match any finite string"]),
            move || schema_row(json!({"$ref": "#"}), d()),
        ),
        row(
            "allOf of 12 two-way anyOf: members past the limit left out, with warnings",
            Expect::Ok,
            move || {
                let parts: Vec<Value> = (0..12).map(|i| json!({"anyOf": [{"required": [format!("a{i}")]}, {"required": [format!("b{i}")]}]})).collect();
                let schema = json!({"type": "object", "allOf": parts});
                let g = json_schema_grammar(&schema, &JsonSchemaOptions::default(), &d())
                    .map_err(|e| e.to_string())?;
                let left_out = g
                    .warnings
                    .iter()
                    .filter(|w| w.message.contains("max_schema_alternatives"))
                    .count();
                if left_out != 4 {
                    return Err(format!(
                        "{left_out} members left out, not 4: {:?}",
                        g.warnings
                    ));
                }
                schema_row(schema, d())
            },
        ),
        row(
            "highly ambiguous grammar, 400 bytes",
            Expect::OkOrErr(&["max_earley_items"]),
            move || {
                let limits = Limits {
                    max_earley_items: 5_000,
                    ..d()
                };
                let mut m = ebnf_matcher("root ::= s\ns ::= s s | \"a\" | \"\"", limits)?;
                for i in 0..400 {
                    if !m.accept_token(TokenId(u32::from(b'a'))) {
                        return Err(m
                            .limit_error()
                            .map_or_else(|| format!("refused at {i}"), |e| e.to_string()));
                    }
                }
                Ok("400 bytes".into())
            },
        ),
        row(
            "Earley set over max_earley_items = 50",
            Expect::Err(&["max_earley_items", "> 50", "matcher step"]),
            move || {
                let limits = Limits {
                    max_earley_items: 50,
                    ..d()
                };
                let mut m = ebnf_matcher("root ::= s\ns ::= s s | \"a\"", limits)?;
                let mut mask = TokenBitmask::new(m.grammar().vocab().size());
                for _ in 0..400 {
                    if !m.accept_token(TokenId(u32::from(b'a'))) {
                        m.fill_next_token_bitmask(&mut mask);
                        assert_eq!(mask.count_allowed(), 0, "nothing allowed past the limit");
                        let err = m
                            .limit_error()
                            .map(ToString::to_string)
                            .ok_or("refused without a limit")?;
                        m.rollback(1).map_err(|e| e.to_string())?;
                        assert!(m.limit_error().is_none(), "a rollback clears the limit");
                        return Err(err);
                    }
                }
                Ok("400 bytes".into())
            },
        ),
        row(
            "compile budget of 0 ms",
            Expect::Err(&["max_compile_ms", "> 0"]),
            move || {
                std::thread::sleep(Duration::from_millis(2));
                ebnf_row("root ::= [a-z]+ \"x\" [0-9]{3}".into(), tight())
            },
        ),
        row(
            "grammar over max_grammar_nodes",
            Expect::Err(&["max_grammar_nodes", "rule `root`"]),
            move || {
                ebnf_row(
                    format!("root ::= {}", vec!["\"a\""; 100].join(" | ")),
                    Limits {
                        max_grammar_nodes: 50,
                        ..d()
                    },
                )
            },
        ),
        row(
            "grammar over max_fsm_states",
            Expect::Err(&["max_fsm_states"]),
            move || {
                ebnf_row(
                    format!("root ::= \"{}\"", "ab".repeat(100)),
                    Limits {
                        max_fsm_states: 100,
                        ..d()
                    },
                )
            },
        ),
        row(
            "grammar over max_rules",
            Expect::Err(&["max_rules"]),
            move || {
                let src: String = (0..50)
                    .map(|i| format!("r{i} ::= \"x\"\n"))
                    .collect::<String>()
                    + "root ::= r0";
                ebnf_row(
                    src,
                    Limits {
                        max_rules: 10,
                        ..d()
                    },
                )
            },
        ),
        // Malformed UTF-8 and odd text.
        row(
            "grammar file with invalid UTF-8",
            Expect::Err(&["not valid UTF-8 at byte 10"]),
            || {
                let p = temp_file("bad.ebnf", b"root ::= \"\xff\xfe\"");
                cli(&["grammar", "--ebnf", p.to_str().expect("path")])
            },
        ),
        row(
            "schema file with invalid UTF-8",
            Expect::Err(&["not valid UTF-8"]),
            || {
                let p = temp_file("bad.json", b"{\"type\": \"str\xc3ng\"}");
                cli(&["grammar", "--json-schema", p.to_str().expect("path")])
            },
        ),
        row(
            "tokenizer.json with invalid UTF-8",
            Expect::Err(&["tokenizer.json"]),
            || load_vocab_file("tokenizer.json", b"{\"model\": \"\xff\"}"),
        ),
        row(
            "NUL and lone surrogate escape in EBNF",
            Expect::Err(&["1:", "U+D800"]),
            move || ebnf_row("root ::= \"\\x00\" \"\\uD800\"".into(), d()),
        ),
        row("token pieces of lone UTF-8 bytes", Expect::Ok, move || {
            let pieces: Vec<Vec<u8>> = vec![
                vec![0xC3],
                vec![0xA9],
                vec![0xE2, 0x82],
                vec![0xAC],
                b"a".to_vec(),
                vec![0xFF],
            ];
            let n = pieces.len() as u32;
            let entries = pieces
                .into_iter()
                .enumerate()
                .map(|(i, p)| (i as u32, p, TokenKind::Normal));
            let v = Arc::new(Vocab::new(
                n as usize + 1,
                entries.chain([(n, b"</s>".to_vec(), TokenKind::Special)]),
                vec![TokenId(n)],
            ));
            let limits = d();
            let g = ebnf::parse("root ::= (\"é\" | \"€\" | \"a\")+", "root", &limits)
                .map_err(|e| e.to_string())?;
            let mut m = matcher_for(&g, v, limits)?;
            let mut mask = TokenBitmask::new(n as usize + 1);
            for t in [0u32, 1, 2, 3, 4] {
                m.fill_next_token_bitmask(&mut mask);
                assert!(
                    !mask.is_allowed(TokenId(5)),
                    "0xFF allowed before token {t}"
                );
                for probe in 0..=n {
                    assert_eq!(
                        mask.is_allowed(TokenId(probe)),
                        m.fork().accept_token(TokenId(probe)),
                        "token {probe}"
                    );
                }
                assert!(m.accept_token(TokenId(t)), "token {t}");
            }
            m.fill_next_token_bitmask(&mut mask);
            assert!(!mask.is_allowed(TokenId(5)), "0xFF allowed at the end");
            Ok("é€a accepted from split bytes, 0xFF never allowed".into())
        }),
        // GGUF.
        row(
            "GGUF truncated to 1,000 bytes",
            Expect::Err(&["not a readable GGUF file"]),
            move || {
                let bytes = match &smollm {
                    Some(model) => std::fs::read(model)
                        .map_err(|e| format!("{}: {e}", model.display()))?[..1000]
                        .to_vec(),
                    None => gguf_bytes(&[("general.architecture", 8, gguf_string("llama"))])[..20]
                        .to_vec(),
                };
                load_vocab_file("truncated.gguf", &bytes)
            },
        ),
        row(
            "GGUF magic only",
            Expect::Err(&["not a readable GGUF file"]),
            || load_vocab_file("magic.gguf", b"GGUF"),
        ),
        row(
            "GGUF general.alignment 0",
            Expect::Err(&["not a readable GGUF file"]),
            || {
                gguf_row(gguf_bytes(&[
                    ("general.alignment", 4, 0u32.to_le_bytes().to_vec()),
                    ("tokenizer.ggml.model", 8, gguf_string("gpt2")),
                ]))
            },
        ),
        row(
            "GGUF array claiming 2^60 items",
            Expect::Err(&["not a readable GGUF file"]),
            || {
                let mut payload = 8u32.to_le_bytes().to_vec();
                payload.extend_from_slice(&(1u64 << 60).to_le_bytes());
                gguf_row(gguf_bytes(&[("tokenizer.ggml.tokens", 9, payload)]))
            },
        ),
        row(
            "GGUF without tokenizer.ggml.tokens",
            Expect::Err(&["tokenizer.ggml.tokens", "missing"]),
            || {
                gguf_row(gguf_bytes(&[(
                    "tokenizer.ggml.model",
                    8,
                    gguf_string("llama"),
                )]))
            },
        ),
        row(
            "GGUF with an unknown tokenizer model",
            Expect::Err(&["tokenizer.ggml.model", "not supported"]),
            || {
                gguf_row(gguf_bytes(&[
                    ("tokenizer.ggml.model", 8, gguf_string("rwkv")),
                    ("tokenizer.ggml.tokens", 9, gguf_tokens(&["a"])),
                ]))
            },
        ),
        row(
            "GGUF eos id past the vocabulary",
            Expect::OkOrErr(&["eos"]),
            || {
                gguf_row(gguf_bytes(&[
                    ("tokenizer.ggml.model", 8, gguf_string("llama")),
                    ("tokenizer.ggml.tokens", 9, gguf_tokens(&["a", "b"])),
                    (
                        "tokenizer.ggml.eos_token_id",
                        4,
                        4_000_000_000u32.to_le_bytes().to_vec(),
                    ),
                ]))
                .map(|s| s + " (out-of-range eos ignored)")
            },
        ),
        row(
            "GGUF with an empty token list",
            Expect::Err(&["no tokens"]),
            || {
                let bytes = gguf_bytes(&[
                    ("tokenizer.ggml.model", 8, gguf_string("llama")),
                    ("tokenizer.ggml.tokens", 9, gguf_tokens(&[])),
                ]);
                load_vocab_file("empty.gguf", &bytes)
            },
        ),
        row("empty tokenizer file", Expect::Err(&["no tokens"]), || {
            load_vocab_file("empty.txt", b"")
        }),
        // tokenizer.json.
        row(
            "tokenizer.json `{}`",
            Expect::Err(&["not a usable tokenizer.json"]),
            || tokenizer_json(json!({})),
        ),
        row(
            "tokenizer.json without model.vocab",
            Expect::Err(&["not a usable tokenizer.json"]),
            || {
                let mut t = bpe_tokenizer();
                t["model"].as_object_mut().expect("model").remove("vocab");
                tokenizer_json(t)
            },
        ),
        row(
            "tokenizer.json without model.merges",
            Expect::OkOrErr(&["not a usable tokenizer.json"]),
            || {
                let mut t = bpe_tokenizer();
                t["model"].as_object_mut().expect("model").remove("merges");
                tokenizer_json(t)
            },
        ),
        row(
            "tokenizer.json with an empty vocab",
            Expect::Err(&["no tokens"]),
            || {
                let mut t = bpe_tokenizer();
                t["model"]["vocab"] = json!({});
                t["model"]["merges"] = json!([]);
                tokenizer_json(t)
            },
        ),
        row(
            "tokenizer.json added token at id 4,000,000,000",
            Expect::OkOrErr(&["tokenizer.json"]),
            || {
                let mut t = bpe_tokenizer();
                t["added_tokens"] = json!([{"id": 4_000_000_000u32, "content": "<x>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}]);
                tokenizer_json(t)
            },
        ),
        row(
            "tokenizer.json that is an array",
            Expect::Err(&["not a usable tokenizer.json", "expected struct"]),
            || load_vocab_file("tokenizer.json", b"[1, 2, 3]"),
        ),
        row(
            "tokenizer.json through hf::from_tokenizer with no decoder",
            Expect::Ok,
            || {
                let mut t = bpe_tokenizer();
                t["decoder"] = Value::Null;
                let tok = tokenizers::Tokenizer::from_bytes(serde_json::to_vec(&t).expect("json"))
                    .map_err(|e| e.to_string())?;
                Ok(format!("{} tokens", hf::from_tokenizer(&tok, None).size()))
            },
        ),
        // Huge token ids.
        row("accept_token(u32::MAX)", Expect::Ok, move || {
            let a = ebnf_matcher("root ::= \"a\"", d())?;
            let mut m =
                GrammarMatcher::with_stop_tokens(a.grammar().clone(), vec![TokenId(u32::MAX)]);
            assert!(!m.accept_token(TokenId(u32::MAX)) && m.stop_tokens().is_empty());
            assert!(m.accept_token(TokenId(u32::from(b'a'))));
            Ok("refused; stop id outside the vocabulary dropped".into())
        }),
        row(
            "token set <[4294967295]>",
            Expect::Err(&["1:", "token"]),
            move || ebnf_row("root ::= <[4294967295]>".into(), d()),
        ),
        row(
            "trace --tokens with ids past the vocabulary",
            Expect::Ok,
            || trace_a(&["--tokens", "0,4294967295", "--verify-masks"]),
        ),
        row(
            "trace --tokens with an id over u32",
            Expect::Err(&["--tokens", "not a token id"]),
            || trace_a(&["--tokens", "99999999999"]),
        ),
        row(
            "--stop-token past the vocabulary",
            Expect::Err(&["99999"]),
            || trace_a(&["--text", "a", "--stop-token", "99999"]),
        ),
        // Empty vocabularies.
        row(
            "compile for a vocabulary of size 0",
            Expect::Ok,
            move || {
                let limits = d();
                let g =
                    ebnf::parse("root ::= \"a\"*", "root", &limits).map_err(|e| e.to_string())?;
                let r = compile(g, Arc::new(Vocab::new(0, Vec::new(), Vec::new())), limits)?;
                assert!(r.ends_with("0 tokens allowed first"), "{r}");
                Ok(r)
            },
        ),
        row("vocabulary of special tokens only", Expect::Ok, move || {
            let v = Arc::new(Vocab::new(
                2,
                [
                    (0, b"<s>".to_vec(), TokenKind::Special),
                    (1, b"</s>".to_vec(), TokenKind::Special),
                ],
                vec![TokenId(1)],
            ));
            let limits = d();
            let g =
                ebnf::parse("root ::= \"\" | \"a\"", "root", &limits).map_err(|e| e.to_string())?;
            let r = compile(g, v, limits)?;
            assert!(
                r.ends_with("1 tokens allowed first"),
                "only the stop token: {r}"
            );
            Ok(r)
        }),
        // Inputs that parse but mean nothing.
        row("empty grammar", Expect::Err(&["root"]), move || {
            ebnf_row(String::new(), d())
        }),
        row(
            "schema `false`",
            Expect::Err(&["cannot match any finite string"]),
            move || schema_row(json!(false), d()),
        ),
        row(
            "unsatisfiable required tool parameter",
            Expect::Err(&[
                "/0/function/parameters/properties/metrics",
                "\"metrics\"",
                "\"get_metrics\"",
            ]),
            || {
                tools_row(
                    json!([
                        tool(
                            "get_metrics",
                            json!({"type": "object", "properties": {"metrics": {"type": "array", "enum": ["a", "b"]}}, "required": ["metrics"]})
                        ),
                        tool("ok", json!({"type": "object"}))
                    ]),
                    "auto",
                )
            },
        ),
        row(
            "unsatisfiable tool parameters as a whole",
            Expect::Err(&["/0/function/parameters", "\"t\""]),
            || {
                tools_row(
                    json!([tool(
                        "t",
                        json!({"type": "object", "required": ["x"], "additionalProperties": false})
                    )]),
                    "required",
                )
            },
        ),
        row(
            "structural tag of unknown type",
            Expect::Err(&["/format/type"]),
            move || {
                let tag = json!({"type": "structural_tag", "format": {"type": "teleport"}});
                structural_tag_grammar(&tag, None, &JsonSchemaOptions::default(), &d())
                    .map(|_| "ok".into())
                    .map_err(|e| e.to_string())
            },
        ),
        row(
            "regex with a backreference",
            Expect::Err(&["Backreference"]),
            move || {
                regex_grammar(r"(a)\1", &d())
                    .map(|_| "ok".into())
                    .map_err(|e| e.to_string())
            },
        ),
        row("regex (a*)*b*", Expect::Ok, move || {
            let limits = d();
            let g = regex_grammar("(a*)*b*", &limits).map_err(|e| e.to_string())?;
            compile(g, common::byte_vocab(), limits)
        }),
    ]
}

#[test]
fn hostile_inputs_end_in_a_result_or_a_clear_error() {
    let rows = rows();
    assert!(rows.len() >= 40, "only {} rows", rows.len());
    let mut failures = Vec::new();
    for Row { name, expect, run } in rows {
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
            let _ = tx.send(r);
        });
        // A watchdog for hangs, far above every limit's budget; not a performance check.
        let outcome = match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => {
                failures.push(format!("{name}: panicked"));
                continue;
            }
            Err(_) => {
                failures.push(format!("{name}: did not finish in 120 s"));
                continue;
            }
        };
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let shown = |s: &str| s.chars().take(200).collect::<String>();
        match (&expect, &outcome) {
            (Expect::Ok | Expect::OkOrErr(_), Ok(r)) => {
                eprintln!("ok    {name} ({ms:.0} ms): {}", shown(r))
            }
            (Expect::Err(words) | Expect::OkOrErr(words), Err(e))
                if words.iter().all(|w| e.contains(w)) =>
            {
                eprintln!("error {name} ({ms:.0} ms): {}", shown(e.trim()))
            }
            _ => failures.push(format!("{name}: unexpected {outcome:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
