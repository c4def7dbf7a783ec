//! One submitted request's events → its text so far (rebuilt by step across jump-forward
//! rollbacks), stop strings (cancelling the sequence), and its end.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use super::answer::{Reader, Stops};
use super::error::ApiError;
use super::http::St;
use super::prepare::Prepared;
use crate::runtime::batch::{BatchRequest, Event};
use crate::runtime::generate::GenerateOptions;
use crate::runtime::sampler::Sampling;
use crate::runtime::Generation;
use crate::util::TokenId;

/// What a request's events say so far.
pub(super) enum Step {
    /// The text so far (cut at a stop string) and how many bytes at its end to hold back.
    Text(String, usize),
    /// The generation ended.
    Done(Box<Generation>),
}

/// Drives one submitted request: its events → its text so far, stop strings, the end.
///
/// A step record is sent when its token is fed; jump-forward may later roll back up to a few fed
/// tokens and spell the same text again with other tokens, whose records come with the same
/// `step`. So the text is rebuilt from the tokens by position: a record at step `s` truncates the
/// tokens to `s` before its own is appended.
pub(super) struct Driver {
    st: St,
    id: u64,
    rx: mpsc::UnboundedReceiver<Event>,
    /// Kept tokens and the byte length of the text after each.
    tokens: Vec<u32>,
    ends: Vec<usize>,
    bytes: Vec<u8>,
    stop_tokens: Vec<u32>,
    stops: Stops,
    reader: Reader,
    /// Whether the text is looked at before the end (streaming, or stop strings to find).
    watch: bool,
    cut: bool,
    admitted: Instant,
    first: bool,
}

/// The length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence.
fn complete_utf8(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=n.min(4) {
        let b = bytes[n - back];
        if b & 0xC0 != 0x80 {
            let need = match b {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if back < need { n - back } else { n };
        }
    }
    n
}

impl Driver {
    pub(super) fn start(st: &St, p: &mut Prepared) -> Result<Driver, ApiError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let sampling = Sampling::from_flags(p.gen.temperature, p.gen.top_k, p.gen.top_p);
        let opts = GenerateOptions {
            max_tokens: p.max_tokens,
            sampling,
            seed: p.gen.seed.unwrap_or_else(rand::random),
            jump_forward: st.cfg.jump_forward,
            ..GenerateOptions::default()
        };
        let matcher = p.constraint.matcher.take();
        let req = BatchRequest {
            prompt: p.prompt.clone(),
            matcher,
            stop_tokens: st.grammars.stop.clone(),
            opts,
        };
        let id = st
            .runtime
            .submit_to(req, Box::new(move |ev| tx.send(ev).is_ok()))
            .map_err(|e| ApiError::internal(format!("the model runtime: {e}")))?;
        Ok(Driver {
            st: Arc::clone(st),
            id,
            rx,
            tokens: Vec::new(),
            ends: Vec::new(),
            bytes: Vec::new(),
            stop_tokens: st.grammars.stop.clone(),
            stops: Stops(p.gen.stop.clone()),
            reader: p.reader.clone(),
            watch: p.stream || !p.gen.stop.is_empty(),
            cut: false,
            admitted: Instant::now(),
            first: true,
        })
    }

    /// Takes one step record into the kept tokens.
    fn take(&mut self, r: &crate::runtime::trace::StepRecord) {
        if r.replaced || self.stop_tokens.contains(&r.token) || r.step > self.tokens.len() {
            return;
        }
        if self.first {
            self.first = false;
            self.st
                .metrics
                .ttft_s
                .observe(self.admitted.elapsed().as_secs_f64());
        }
        self.tokens.truncate(r.step);
        self.ends.truncate(r.step);
        self.bytes.truncate(self.ends.last().copied().unwrap_or(0));
        self.bytes
            .extend_from_slice(self.st.vocab.token_bytes(TokenId(r.token)));
        self.tokens.push(r.token);
        self.ends.push(self.bytes.len());
    }

    /// The text of the tokens so far, without an unfinished UTF-8 sequence at the end.
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes[..complete_utf8(&self.bytes)]).into_owned()
    }

    /// The next news: the text so far (after every event already waiting), or the end.
    pub(super) async fn next(&mut self) -> Result<Step, ApiError> {
        loop {
            let mut ev = self.rx.recv().await;
            loop {
                match ev {
                    None => return Err(ApiError::internal("the model runtime stopped")),
                    Some(Event::Done(Ok(gen))) => return Ok(Step::Done(Box::new(gen))),
                    Some(Event::Done(Err(e))) => {
                        return Err(ApiError::internal(format!("generation failed: {e}")))
                    }
                    Some(Event::Record(r)) => self.take(&r),
                }
                match self.rx.try_recv() {
                    Ok(e) => ev = Some(e),
                    Err(_) => break,
                }
            }
            if !self.watch || self.cut {
                continue;
            }
            let mut text = self.text();
            if let Some(at) = self.stops.find(&self.reader, &text, false) {
                self.cut = true;
                self.st.runtime.cancel(self.id);
                text.truncate(at);
                return Ok(Step::Text(text, 0));
            }
            let pending = self.stops.pending(&text);
            return Ok(Step::Text(text, pending));
        }
    }

    /// The final text (cut before the first stop string), and the generated tokens it holds
    /// when a stop string cut it.
    pub(super) fn final_text(&self, gen: &Generation) -> (String, Option<usize>) {
        match self.stops.find(&self.reader, &gen.text, true) {
            Some(at) => {
                let mut len = 0;
                let used = gen
                    .tokens
                    .iter()
                    .take_while(|&&t| {
                        let before = len;
                        len += self.st.vocab.token_bytes(TokenId(t)).len();
                        before < at
                    })
                    .count();
                (gen.text[..at].to_string(), Some(used))
            }
            None => (gen.text.clone(), None),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Cancels a request whose answer is no longer wanted (a no-op once it is done).
        self.st.runtime.cancel(self.id);
    }
}
