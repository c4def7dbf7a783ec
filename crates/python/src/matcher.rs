//! [`Matcher`]: one sequence's position in a compiled grammar, and the mask kernels that write
//! into caller memory ([`batch_fill`], [`apply_mask`]).
//!
//! Invariant: a buffer reaches Rust as an address and a length in elements that the Python layer
//! derived from a live, C-contiguous CPU array of the right dtype (`structgen/_buffers.py`); the
//! caller holds a reference to that array for the whole call, so the memory stays valid while the
//! GIL is released. Nothing here keeps an address past the call.

use std::sync::{Arc, OnceLock};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;
use structgen_engine::engine::ahead::{Warmer, DEFAULT_REACH};
use structgen_engine::engine::check::MaskVerifier;
use structgen_engine::engine::DraftTree;
use structgen_engine::{GrammarMatcher, TokenBitmask, TokenId};

use crate::compile::Compiled;
use crate::error;
use crate::vocab::token_ids;

/// A C-contiguous run of `len` elements at `addr` in a caller's array.
#[derive(Clone, Copy)]
struct Raw {
    addr: usize,
    len: usize,
}

impl Raw {
    /// # Safety
    /// `addr` must point to `len` writable, aligned `T`s that nothing else touches during the
    /// borrow (guaranteed by the Python layer, see the module invariant).
    unsafe fn slice<'a, T>(self) -> &'a mut [T] {
        std::slice::from_raw_parts_mut(self.addr as *mut T, self.len)
    }
}

/// Fills `words` (a row of a bitmask) for `m`; whether any token is masked out.
fn fill_row(m: &mut GrammarMatcher, words: &mut [u32], vocab_size: usize) -> PyResult<bool> {
    let held = words.len();
    let mut mask = TokenBitmask::from_words(words, vocab_size).ok_or_else(|| {
        error(format!(
            "bitmask: a row holds {held} int32 words, {} are needed for a vocabulary of {vocab_size}",
            vocab_size.div_ceil(32)
        ))
    })?;
    m.fill_next_token_bitmask(&mut mask);
    Ok(refuses_any(mask.words(), vocab_size))
}

/// Whether a filled mask refuses any of the first `vocab_size` tokens (stops at the first word
/// with a refused token: almost always the first).
fn refuses_any(words: &[u32], vocab_size: usize) -> bool {
    let full = vocab_size / 32;
    if words[..full].iter().any(|&w| w != u32::MAX) {
        return true;
    }
    let tail = vocab_size % 32;
    let low = (1u32 << tail).wrapping_sub(1);
    tail != 0 && words[full] & low != low
}

/// The error of a mask asked for after the stop token (xgrammar's wording).
const TERMINATED: &str = "GrammarMatcher has terminated after accepting the stop token, but is trying to find the next token mask";

/// The matcher of one sequence.
#[pyclass(module = "structgen._core")]
pub struct Matcher {
    inner: GrammarMatcher,
    compiled: Py<Compiled>,
    /// The sequence ends where the grammar is complete, without a stop token.
    terminate_without_stop_token: bool,
}

impl Matcher {
    /// Whether a stop token has been accepted (nothing more can be).
    fn stopped(&self) -> bool {
        self.inner.is_terminated()
    }

    fn vocab_size(&self) -> usize {
        self.inner.grammar().vocab().size()
    }
}

#[pymethods]
impl Matcher {
    /// A matcher at the start of `compiled`; `override_stop_tokens` replaces the vocabulary's stop
    /// tokens; with `terminate_without_stop_token` the sequence ends as soon as the grammar is
    /// complete (no stop token is allowed or needed).
    #[new]
    #[pyo3(signature = (compiled, override_stop_tokens=None, terminate_without_stop_token=false))]
    fn new(
        compiled: Py<Compiled>,
        override_stop_tokens: Option<Vec<i64>>,
        terminate_without_stop_token: bool,
    ) -> PyResult<Self> {
        let grammar = Arc::clone(&compiled.get().compiled);
        let size = grammar.vocab().size();
        let stop = match (terminate_without_stop_token, override_stop_tokens) {
            (true, _) => Vec::new(),
            (false, None) => grammar.vocab().stop_tokens().to_vec(),
            (false, Some(ids)) => token_ids("override_stop_tokens", &ids, size)?,
        };
        Ok(Matcher {
            inner: GrammarMatcher::with_stop_tokens(grammar, stop),
            compiled,
            terminate_without_stop_token,
        })
    }

    /// Accepts one token; `False` (nothing changes) when the grammar does not allow it.
    fn accept_token(&mut self, token_id: i64) -> bool {
        if self.stopped() {
            return false;
        }
        match u32::try_from(token_id) {
            Ok(t) if (t as usize) < self.vocab_size() => self.inner.accept_token(TokenId(t)),
            _ => false,
        }
    }

    /// Accepts text (`str` as UTF-8, or `bytes`) as one step; `False` (nothing changes) when the
    /// grammar does not allow all of it. The empty text is accepted (no step) until a stop token.
    fn accept_bytes(&mut self, text: &[u8]) -> bool {
        !self.stopped() && (text.is_empty() || self.inner.accept_bytes(text))
    }

    /// Writes the next-token mask into `len` int32 words at `addr` (one bitmask row); whether
    /// any token is masked out.
    fn fill_raw(&mut self, py: Python<'_>, addr: usize, len: usize) -> PyResult<bool> {
        if self.stopped() {
            return Err(error(TERMINATED));
        }
        let raw = Raw { addr, len };
        let size = self.vocab_size();
        let m = &mut self.inner;
        py.detach(|| {
            // SAFETY: the module invariant.
            let words = unsafe { raw.slice::<u32>() };
            fill_row(m, words, size)
        })
    }

    /// `--verify-masks` for the next step: fills the mask and tries `sample` random allowed and
    /// `sample` random refused tokens (drawn from `seed` and the step) on forks with
    /// `accept_token`; the tokens tried, or an error naming the token on which mask and
    /// `accept_token` disagree (an engine bug).
    fn verify_mask(&mut self, py: Python<'_>, sample: usize, seed: u64) -> PyResult<u64> {
        if self.stopped() {
            return Err(error(TERMINATED));
        }
        let m = &mut self.inner;
        py.detach(|| {
            let mut mask = TokenBitmask::new(m.grammar().vocab().size());
            m.fill_next_token_bitmask(&mut mask);
            let step = m.num_steps();
            let mut verifier = MaskVerifier::new(seed ^ step as u64, sample);
            verifier
                .check_step(m, &mask, step, None, true)
                .map(|()| verifier.tokens)
                .map_err(error)
        })
    }

    /// The allowed token ids for the next token, increasing.
    fn allowed_token_ids(&mut self, py: Python<'_>) -> Vec<u32> {
        let mut mask = TokenBitmask::new(self.vocab_size());
        let m = &mut self.inner;
        py.detach(|| m.fill_next_token_bitmask(&mut mask));
        mask.allowed_ids()
    }

    /// The longest text every continuation starts with (UTF-8 bytes).
    fn find_jump_forward_bytes<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.find_jump_forward_bytes())
    }

    /// How many of `tokens`, from the first, the grammar accepts in a row; nothing changes.
    fn validate_tokens(&mut self, py: Python<'_>, tokens: Vec<i64>) -> usize {
        if self.stopped() {
            return 0;
        }
        let ids: Vec<TokenId> = tokens
            .iter()
            .map_while(|&t| u32::try_from(t).ok().map(TokenId))
            .collect();
        let m = &mut self.inner;
        py.detach(|| m.validate_tokens(&ids))
    }

    /// One mask per node of a draft-token tree into `rows` rows of `words` int32 words at
    /// `addr` (see `structgen_engine::engine::speculative`); `False` when `time_threshold`
    /// seconds (> 0) passed first.
    #[allow(clippy::too_many_arguments)]
    fn traverse_raw(
        &mut self,
        py: Python<'_>,
        next_token: Vec<i64>,
        next_sibling: Vec<i64>,
        tokens: Vec<i64>,
        addr: usize,
        words: usize,
        rows: usize,
        time_threshold: f64,
    ) -> PyResult<bool> {
        if self.stopped() {
            return Err(error(TERMINATED));
        }
        let deadline = (time_threshold > 0.0)
            .then(|| std::time::Duration::try_from_secs_f64(time_threshold).ok())
            .flatten()
            .map(|d| std::time::Instant::now() + d);
        let raw = Raw {
            addr,
            len: words * rows,
        };
        let until_complete = self.terminate_without_stop_token;
        let m = &mut self.inner;
        py.detach(|| {
            // SAFETY: the module invariant.
            let masks = unsafe { raw.slice::<u32>() };
            let tree = DraftTree {
                next_token: &next_token,
                next_sibling: &next_sibling,
                tokens: &tokens,
            };
            let ended = |m: &GrammarMatcher| until_complete && m.is_completed();
            m.traverse_draft_tree(tree, masks, words, &ended, deadline)
                .map_err(error)
        })
    }

    /// Undoes the last `num_tokens` steps.
    fn rollback(&mut self, num_tokens: usize) -> PyResult<()> {
        self.inner.rollback(num_tokens).map_err(error)
    }

    /// Whether the sequence has ended (a stop token accepted, or with
    /// `terminate_without_stop_token` the grammar complete).
    fn is_terminated(&self) -> bool {
        self.stopped() || (self.terminate_without_stop_token && self.inner.is_completed())
    }

    /// Whether a stop token has been accepted.
    fn stop_accepted(&self) -> bool {
        self.stopped()
    }

    /// Whether the input so far is a complete match (a stop token may follow).
    fn is_completed(&self) -> bool {
        self.inner.is_completed()
    }

    /// Back to the start of the grammar.
    fn reset(&mut self) {
        self.inner.reset();
    }

    /// An independent copy at the same position.
    fn fork(&self, py: Python<'_>) -> Matcher {
        Matcher {
            inner: self.inner.fork(),
            compiled: self.compiled.clone_ref(py),
            terminate_without_stop_token: self.terminate_without_stop_token,
        }
    }

    /// The stop tokens this matcher accepts.
    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        self.inner.stop_tokens().iter().map(|t| t.0).collect()
    }

    /// The compiled grammar.
    #[getter]
    fn compiled(&self, py: Python<'_>) -> Py<Compiled> {
        self.compiled.clone_ref(py)
    }

    /// Steps accepted so far (tokens and strings), what `rollback` can undo.
    #[getter]
    fn num_steps(&self) -> usize {
        self.inner.num_steps()
    }

    /// A one-line description of the parser's position, for error messages and debugging.
    fn describe_state(&self) -> String {
        self.inner.describe_state()
    }
}

/// The process's warmer for batch fills, shared by every `BatchGrammarMatcher` (a serving
/// engine fills one batch a step); `None` if its thread could not start.
fn warmer() -> Option<&'static Warmer> {
    static WARMER: OnceLock<Option<Warmer>> = OnceLock::new();
    WARMER
        .get_or_init(|| Warmer::new(Warmer::default_threads()).ok())
        .as_ref()
}

/// Fills the rows `rows[i]` of a bitmask (`addr`: its first word; `row_words` words per row,
/// `total` words in all) for `matchers[i]`, in parallel; per matcher, whether any token is
/// masked out. With `warm_ahead`, the states each matcher can reach next then go to the
/// process's warmer, which computes the masks no fill has needed yet in the background
/// (`structgen_engine::engine::ahead`), replacing the work of the batch before.
#[pyfunction]
#[pyo3(signature = (matchers, addr, row_words, total, rows, pool=None, warm_ahead=false))]
#[allow(clippy::too_many_arguments)]
pub fn batch_fill(
    py: Python<'_>,
    matchers: Vec<PyRefMut<'_, Matcher>>,
    addr: usize,
    row_words: usize,
    total: usize,
    rows: Vec<usize>,
    pool: Option<PyRef<'_, Pool>>,
    warm_ahead: bool,
) -> PyResult<Vec<bool>> {
    if matchers.len() != rows.len() {
        return Err(error(format!(
            "indices: {} given for {} matchers",
            rows.len(),
            matchers.len()
        )));
    }
    let mut seen = vec![false; total.div_ceil(row_words.max(1))];
    for &r in &rows {
        if (r + 1) * row_words > total {
            return Err(error(format!("indices: row {r} is outside the bitmask")));
        }
        if std::mem::replace(&mut seen[r], true) {
            return Err(error(format!("indices: row {r} is given twice")));
        }
    }
    let mut matchers = matchers;
    let jobs: Vec<(&mut Matcher, usize)> = matchers
        .iter_mut()
        .map(|m| &mut **m)
        .zip(rows.iter().copied())
        .collect();
    let fill = move || -> PyResult<Vec<bool>> {
        let mut jobs = jobs;
        let filled = jobs
            .par_iter_mut()
            .map(|(m, row)| {
                let raw = Raw {
                    addr: addr + *row * row_words * 4,
                    len: row_words,
                };
                // SAFETY: the module invariant; rows are distinct and inside the buffer (checked
                // above), so no two jobs share a word.
                let words = unsafe { raw.slice::<u32>() };
                let size = m.vocab_size();
                fill_row(&mut m.inner, words, size)
            })
            .collect();
        if let Some(w) = warm_ahead.then(warmer).flatten() {
            w.submit(
                jobs.iter()
                    .filter_map(|(m, _)| m.inner.ahead(DEFAULT_REACH))
                    .collect(),
            );
        }
        filled
    };
    let pool = pool.as_deref().map(|p| &p.inner);
    py.detach(|| match pool {
        Some(pool) => pool.install(fill),
        None => fill(),
    })
}

/// Threads of their own for batch mask filling (`BatchGrammarMatcher(max_threads=N)`); without
/// one, batches run on rayon's global pool (one thread per core).
#[pyclass(module = "structgen._core", frozen)]
pub struct Pool {
    inner: rayon::ThreadPool,
}

#[pymethods]
impl Pool {
    /// A pool of `threads` worker threads (at least 1).
    #[new]
    fn new(threads: usize) -> PyResult<Self> {
        if threads == 0 {
            return Err(error("max_threads must be at least 1"));
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("structgen-batch-{i}"))
            .build()
            .map(|inner| Pool { inner })
            .map_err(|e| {
                error(format!(
                    "max_threads {threads}: cannot start the threads: {e}"
                ))
            })
    }

    /// How many worker threads the pool runs.
    #[getter]
    fn threads(&self) -> usize {
        self.inner.current_num_threads()
    }
}

/// Sets to -inf every logit below `vocab_size` (float32 rows of `width` at `logits`, `stride`
/// elements apart) whose token the bitmask (int32, `row_words` words per row at `mask`) refuses,
/// for the logits rows `indices` (logits row `indices[i]` takes mask row `mask_rows[i]`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn apply_mask(
    py: Python<'_>,
    logits: usize,
    rows: usize,
    stride: usize,
    mask: usize,
    row_words: usize,
    indices: Vec<usize>,
    mask_rows: Vec<usize>,
    vocab_size: usize,
) -> PyResult<()> {
    if indices.len() != mask_rows.len() || indices.iter().any(|&i| i >= rows) {
        return Err(error("indices: a row index is outside the logits"));
    }
    if vocab_size > row_words * 32 || (rows > 0 && vocab_size > stride) {
        return Err(error(format!(
            "vocab_size {vocab_size} exceeds the bitmask ({} tokens) or the logits row ({stride})",
            row_words * 32
        )));
    }
    let mask_total = mask_rows.iter().map(|&r| r + 1).max().unwrap_or(0) * row_words;
    let logits = Raw {
        addr: logits,
        len: if rows == 0 {
            0
        } else {
            (rows - 1) * stride + vocab_size
        },
    };
    let mask = Raw {
        addr: mask,
        len: mask_total,
    };
    py.detach(|| {
        // SAFETY: the module invariant (the Python layer checked both shapes and strides).
        let (logits, mask) = unsafe { (logits.slice::<f32>(), mask.slice::<u32>()) };
        for (&i, &r) in indices.iter().zip(&mask_rows) {
            let row = &mut logits[i * stride..i * stride + vocab_size];
            let words = &mask[r * row_words..(r + 1) * row_words];
            for (t, x) in row.iter_mut().enumerate() {
                if words[t / 32] & (1 << (t % 32)) == 0 {
                    *x = f32::NEG_INFINITY;
                }
            }
        }
    });
    Ok(())
}
