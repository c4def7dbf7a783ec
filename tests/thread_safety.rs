//! A compiled grammar shared by many matchers on many threads gives the masks one thread gives.
//! Every shared tool-calling workload (Llama 3 tokenizer) is stepped on one thread with one
//! compiler; then, with a fresh compiler, the same requests are compiled in parallel and each is
//! stepped by four matchers at once on an 8-thread rayon pool, so that lazily computed masks, the
//! cross-grammar pool and the compiler's caches are filled under contention. Every mask along
//! every output must match.

mod common;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rayon::prelude::*;
use structgen::engine::{CompileOptions, CompiledGrammar, GrammarCompiler, GrammarMatcher};
use structgen::vocab::LoadedVocab;
use structgen::{Limits, TokenBitmask, TokenId};

/// Matchers per request in the parallel pass.
const COPIES: usize = 4;

/// A workload request and its output's tokens.
struct Request {
    inner: common::WorkloadRequest,
    tokens: Vec<TokenId>,
}

fn requests(loaded: &LoadedVocab, file: &std::path::Path, n: usize) -> Vec<Request> {
    common::workload_requests(file, n)
        .into_iter()
        .map(|inner| Request {
            tokens: common::encode(loaded, &inner.output),
            inner,
        })
        .collect()
}

fn compile(compiler: &GrammarCompiler, r: &Request) -> Arc<CompiledGrammar> {
    compiler
        .compile(&r.inner.grammar(compiler))
        .unwrap_or_else(|e| panic!("{}: {e}", r.inner.id))
}

/// A hash of every mask along the request's output and stop token, up to the first refused token.
fn mask_trace(g: &Arc<CompiledGrammar>, r: &Request) -> Vec<u64> {
    let stop = g.vocab().stop_tokens()[0];
    let mut m = GrammarMatcher::with_stop_tokens(Arc::clone(g), vec![stop]);
    let mut mask = TokenBitmask::new(g.vocab().size());
    let mut out = Vec::new();
    for &t in r.tokens.iter().chain([&stop]) {
        m.fill_next_token_bitmask(&mut mask);
        let mut h = DefaultHasher::new();
        mask.words().hash(&mut h);
        out.push(h.finish());
        let allowed = mask.is_allowed(t);
        assert_eq!(
            m.accept_token(t),
            allowed,
            "{}: mask and accept disagree",
            r.inner.id
        );
        if !allowed {
            break;
        }
    }
    out
}

#[test]
fn shared_grammars_give_the_same_masks_on_many_threads() {
    let (Some(shared), Some(loaded)) = (
        common::shared_dir("shared_grammars_give_the_same_masks_on_many_threads"),
        common::llama3(),
    ) else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(shared.join("bench/requests"))
        .expect("bench/requests")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(8)
        .build()
        .expect("thread pool");
    let new_compiler = || {
        GrammarCompiler::new(
            Arc::new(loaded.vocab.clone()),
            Limits::default(),
            CompileOptions::default(),
        )
    };
    let mut steps = 0;
    for file in &files {
        let reqs = requests(&loaded, file, 8);
        let one = new_compiler();
        let expected: Vec<Vec<u64>> = reqs
            .iter()
            .map(|r| mask_trace(&compile(&one, r), r))
            .collect();
        let many = new_compiler();
        let (grammars, traces) = pool.install(|| {
            let grammars: Vec<Arc<CompiledGrammar>> =
                reqs.par_iter().map(|r| compile(&many, r)).collect();
            let traces: Vec<Vec<u64>> = (0..reqs.len() * COPIES)
                .into_par_iter()
                .map(|i| mask_trace(&grammars[i % reqs.len()], &reqs[i % reqs.len()]))
                .collect();
            (grammars, traces)
        });
        assert_eq!(grammars.len(), reqs.len());
        for (i, t) in traces.iter().enumerate() {
            let r = &reqs[i % reqs.len()];
            assert_eq!(
                t,
                &expected[i % reqs.len()],
                "{}: {}: masks differ between one thread and many",
                file.display(),
                r.inner.id
            );
            steps += t.len();
        }
    }
    eprintln!(
        "{steps} masks on 8 threads over {} files equal the single-threaded ones",
        files.len()
    );
}
