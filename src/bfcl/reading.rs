//! The leaderboard's reading of an answer: the calls the BFCL handler of the model's family
//! decodes from it (run in the [`Bridge`]), judged as BFCL's `eval_runner` judges them.
//!
//! structgen's own reader is more lenient (Markdown blocks, bare JSON, `"parameters"`, missing
//! newlines); BFCL's decoders read only their handler's format, so the same answer may be right
//! under one and wrong under the other. Both verdicts are kept: `correct` is structgen's,
//! [`Reading`] the handler's.
//!
//! Rules, as in `eval_runner`: a decoder that raises means no call (right in the irrelevance
//! categories, wrong elsewhere); in the relevance categories a decoded list that is empty
//! (`is_empty_output`) is no call; in the AST categories the decoded calls go to the checker.
//! A case that could not run is, as BFCL stores it, an error text: its decoding fails.

use serde_json::{Map, Value};

use super::bridge::{Bridge, BridgeError};
use super::checker::{check, Call};
use super::data::{Case, CheckKind};
use super::lang::Language;
use super::run::{CaseResult, Reading};

/// The BFCL handler (`module.Class` under `bfcl_eval.model_handler`) whose decoder reads the
/// answers of a call style: the local-model handler of the family that writes it.
pub fn handler_for(style: &str) -> Option<&'static str> {
    match style {
        "qwen" | "hermes" => Some("local_inference.qwen_fc.QwenFCHandler"),
        "llama" | "llama_json" => Some("local_inference.llama_3_1.LlamaHandler_3_1"),
        "mistral" => Some("local_inference.mistral_fc.MistralFCHandler"),
        _ => None,
    }
}

fn language_name(language: Language) -> &'static str {
    match language {
        Language::Python => "python",
        Language::Java => "java",
        Language::JavaScript => "javascript",
    }
}

/// The reading of single-turn result `r` of `case` by `handler`.
pub fn single_turn(
    bridge: &mut Bridge,
    handler: &str,
    case: &Case,
    r: &CaseResult,
) -> Result<Reading, BridgeError> {
    let kind = case.category.check_kind();
    let reading = |calls: usize, correct: bool, verdict: String| Reading {
        handler: handler.to_string(),
        calls,
        correct,
        verdict,
    };
    let decoded = if r.error.is_some() {
        Err(format!(
            "the case did not run: {}",
            r.error.as_deref().unwrap_or_default()
        ))
    } else {
        let language = language_name(case.category.language());
        match bridge.decode_text(handler, &r.text, "ast", language) {
            Ok(d) => Ok(d),
            Err(BridgeError::Failed(e)) => Err(e),
            Err(e) => return Err(e),
        }
    };
    let (calls, empty) = match decoded {
        Ok(d) => d,
        Err(e) => {
            let right = kind == CheckKind::NoCall;
            let verdict = if right {
                "correct".to_string()
            } else {
                format!("ast_decoder:decoder_failed: {e}")
            };
            return Ok(reading(0, right, verdict));
        }
    };
    let n = calls.len();
    match kind {
        CheckKind::NoCall => Ok(reading(
            n,
            empty,
            if empty {
                "correct".into()
            } else {
                "irrelevance_error:decoder_success: a call was decoded".into()
            },
        )),
        CheckKind::AnyCall => Ok(reading(
            n,
            !empty,
            if empty {
                "relevance_error:decoder_failed: no call was decoded".into()
            } else {
                "correct".into()
            },
        )),
        _ => {
            let calls: Vec<Call> = calls.iter().flat_map(as_calls).collect();
            Ok(match check(case, &calls) {
                Ok(()) => reading(n, true, "correct".into()),
                Err(m) => reading(n, false, format!("{}: {}", m.kind, m.message)),
            })
        }
    }
}

/// A decoded `{name: arguments}` object as calls.
fn as_calls(v: &Value) -> Vec<Call> {
    let Some(m) = v.as_object() else {
        return Vec::new();
    };
    m.iter()
        .map(|(name, args)| Call {
            name: name.clone(),
            arguments: match args {
                Value::Object(a) => a.clone(),
                _ => Map::new(),
            },
        })
        .collect()
}
