//! llguidance behind the [`Engine`] interface (cargo feature `llguidance`), run in the same process
//! on the same jobs as structgen.
//!
//! The token environment is built from the same `tokenizer.json` the way llguidance's HF helper
//! does (added tokens written `<...>` are special: their bytes start with 0xFF and text never
//! matches them), padded to structgen's vocabulary size, with the benchmark's stop token as the only
//! EOS. One `ParserFactory` serves the whole workload (its slicer is built once, as in a server).
//! Structural tags go through [`super::lark::structural_tag_to_lark`]; JSON Schemas through
//! llguidance's own JSON compiler with the same closed-object reading.

use std::path::Path;
use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::earley::SlicedBiasComputer;
use llguidance::toktrie::{
    InferenceCapabilities, SimpleVob, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv,
};
use llguidance::{Matcher, ParserFactory, TokenParser};

use super::engine::{Compiled, Engine, GrammarInput, InputKind, Sequence};
use super::lark::structural_tag_to_lark;

struct HfEnv {
    trie: TokTrie,
    hf: tokenizers::Tokenizer,
}

impl TokenizerEnv for HfEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.tokenize_with_greedy_fallback(s, |s| {
            self.hf
                .encode(s, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default()
        })
    }
}

/// llguidance with one parser factory for a workload.
pub struct LlgEngine {
    factory: ParserFactory,
    words: usize,
    stop: u32,
}

impl LlgEngine {
    /// Loads the token environment from `tokenizer` (a tokenizer.json), `size` ids, EOS `stop`.
    pub fn new(tokenizer: &Path, size: usize, stop: u32) -> Result<LlgEngine, String> {
        let text = std::fs::read_to_string(tokenizer)
            .map_err(|e| format!("{}: {e}", tokenizer.display()))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", tokenizer.display()))?;
        let mut words = llguidance::token_bytes_from_tokenizer_json(&json)
            .map_err(|e| format!("{}: {e}", tokenizer.display()))?;
        for t in json["added_tokens"].as_array().into_iter().flatten() {
            let (Some(id), Some(content)) = (t["id"].as_u64(), t["content"].as_str()) else {
                continue;
            };
            let id = id as usize;
            if content.starts_with('<')
                && content.ends_with('>')
                && id < words.len()
                && words[id].first() != Some(&0xFF)
            {
                words[id] = [&[0xFFu8][..], content.as_bytes()].concat();
            }
        }
        while words.len() < size {
            let mut w = format!(".<[{}]>", words.len()).into_bytes();
            w[0] = 0xFF;
            words.push(w);
        }
        let trie = TokTrie::from(&TokRxInfo::new(words.len() as u32, stop), &words)
            .with_eos_tokens(&[stop]);
        let hf = tokenizers::Tokenizer::from_file(tokenizer)
            .map_err(|e| format!("{}: {e}", tokenizer.display()))?;
        let env: TokEnv = Arc::new(HfEnv { trie, hf });
        let mut factory = ParserFactory::new(
            &env,
            InferenceCapabilities::default(),
            &SlicedBiasComputer::general_slices(),
        )
        .map_err(|e| e.to_string())?;
        factory.quiet();
        factory.limits_mut().verbose_errors = false;
        Ok(LlgEngine {
            factory,
            words: size.div_ceil(32),
            stop,
        })
    }
}

impl Engine for LlgEngine {
    fn name(&self) -> &'static str {
        "llguidance"
    }

    fn compile(&self, input: &GrammarInput) -> Result<Box<dyn Compiled>, String> {
        let grammar = match input.kind {
            InputKind::StructuralTag => {
                TopLevelGrammar::from_lark(structural_tag_to_lark(&input.value)?)
            }
            InputKind::JsonSchema => TopLevelGrammar::from_json_schema(input.value.clone()),
        };
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| e.to_string())?;
        Ok(Box::new(LlgCompiled {
            parser,
            words: self.words,
            stop: self.stop,
        }))
    }
}

struct LlgCompiled {
    parser: TokenParser,
    words: usize,
    stop: u32,
}

impl Compiled for LlgCompiled {
    fn start(&self) -> Box<dyn Sequence> {
        Box::new(LlgSequence {
            matcher: Matcher::new(Ok(self.parser.deep_clone())),
            mask: None,
            words: self.words,
            stop: self.stop,
        })
    }
}

struct LlgSequence {
    matcher: Matcher,
    mask: Option<SimpleVob>,
    words: usize,
    stop: u32,
}

impl Sequence for LlgSequence {
    fn fill_mask(&mut self) {
        self.mask = self.matcher.compute_mask_or_eos().ok();
    }

    fn allows(&self, token: u32) -> bool {
        (token as usize) < self.words * 32
            && self
                .mask
                .as_ref()
                .is_some_and(|m| m.is_allowed(token as TokenId))
    }

    fn accept(&mut self, token: u32) -> Result<(), String> {
        // llguidance stops by itself when nothing can follow (e.g. after a complete JSON value);
        // the stop token is then what its mask allows, and there is nothing left to consume.
        if self.matcher.is_stopped() {
            return if token == self.stop && self.matcher.stop_reason().is_ok() {
                Ok(())
            } else {
                Err(format!("token {token} after the matcher stopped"))
            };
        }
        self.matcher
            .consume_token(token as TokenId)
            .map_err(|e| e.to_string())
    }
}
