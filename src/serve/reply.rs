//! A driven request → its answer: the whole chat or text completion, or its SSE stream of
//! chunks; the bookkeeping (metrics, the `structgen` extension, the unenforced-keyword header).

use std::convert::Infallible;

use axum::http::HeaderValue;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::answer::{Answer, Stream};
use super::driver::{Driver, Step};
use super::error::ApiError;
use super::http::{Admission, AppState, St};
use super::prepare::{Kind, Prepared};
use super::shape;
use crate::runtime::Generation;

/// The finished request's answer, extension and bookkeeping.
struct Finished {
    answer: Answer,
    text: String,
    finish: &'static str,
    usage: Value,
    ext: Value,
    header: Option<HeaderValue>,
}

fn finish(
    st: &AppState,
    p: &Prepared,
    gen: &Generation,
    text: String,
    cut_tokens: Option<usize>,
) -> Finished {
    let by_string = cut_tokens.is_some();
    let answer = p.reader.read(&text);
    let finish = shape::finish_reason(gen, &answer, by_string);
    let post = p.constraint.post_check.as_ref().and_then(|c| {
        serde_json::from_str::<Value>(&answer.content)
            .ok()
            .and_then(|v| c.violation(&v))
    });
    let post = post.or_else(|| {
        (p.json_output
            && answer.calls.is_empty()
            && finish != "length"
            && serde_json::from_str::<Value>(&answer.content).is_err())
        .then(|| "the output is not JSON".to_string())
    });
    let mut ext = shape::extension(
        gen,
        p.constrained,
        p.constraint.compile_ms,
        &p.constraint.unenforced,
        post,
    );
    if !answer.errors.is_empty() {
        ext["unread_calls"] = json!(answer.errors);
    }
    let m = &st.metrics;
    m.prompt_tokens.inc_by(p.prompt.len() as u64);
    m.completion_tokens
        .inc_by(cut_tokens.unwrap_or(gen.tokens.len()) as u64);
    m.unenforced.inc_by(p.constraint.unenforced.len() as u64);
    if p.constrained {
        m.grammar_overhead_pct
            .observe(gen.summary.grammar_overhead_pct);
    }
    m.answered(p.kind.name(), 200);
    let header = p.constraint.unenforced.first().and_then(|u| {
        let v = format!(
            "{}; first: {} {}",
            p.constraint.unenforced.len(),
            u.param,
            if u.path.is_empty() { "/" } else { &u.path }
        );
        HeaderValue::from_str(&v.replace(|c: char| !c.is_ascii_graphic() && c != ' ', "?")).ok()
    });
    Finished {
        answer,
        text,
        finish,
        usage: shape::usage(p.prompt.len(), cut_tokens.unwrap_or(gen.tokens.len())),
        ext,
        header,
    }
}

pub(super) async fn whole_response(
    st: &St,
    p: Prepared,
    mut driver: Driver,
) -> Result<Response, ApiError> {
    let gen = loop {
        if let Step::Done(gen) = driver.next().await? {
            break gen;
        }
    };
    let (text, cut) = driver.final_text(&gen);
    let f = finish(st, &p, &gen, text, cut);
    let body = match p.kind {
        Kind::Chat => shape::chat_completion(&p.ids, &f.answer, f.finish, f.usage, f.ext),
        Kind::Text => shape::text_completion(&p.ids, &f.text, f.finish, f.usage, f.ext),
    };
    let mut r = Json(body).into_response();
    if let Some(h) = f.header {
        r.headers_mut().insert("x-structgen-unenforced", h);
    }
    Ok(r)
}

pub(super) fn stream_response(
    st: St,
    p: Prepared,
    mut driver: Driver,
    admission: Admission,
) -> Response {
    let (tx, rx) = mpsc::channel::<SseEvent>(64);
    let header = p
        .constraint
        .unenforced
        .first()
        .map(|_| p.constraint.unenforced.len());
    tokio::spawn(async move {
        let _admission = admission;
        let send = |v: Value| {
            let tx = tx.clone();
            async move {
                tx.send(SseEvent::default().data(v.to_string()))
                    .await
                    .is_ok()
            }
        };
        let usage = p.include_usage;
        let chunk = |delta: Value, fin: Option<&str>| match p.kind {
            Kind::Chat => shape::chat_chunk(&p.ids, delta, fin, usage),
            Kind::Text => shape::text_chunk(
                &p.ids,
                delta["content"].as_str().unwrap_or_default(),
                fin,
                usage,
            ),
        };
        if p.kind == Kind::Chat
            && !send(chunk(json!({"role": "assistant", "content": ""}), None)).await
        {
            return;
        }
        let mut stream = Stream::new(p.reader.clone());
        loop {
            // A client that went away is noticed at once, not only at the next chunk sent.
            let step = tokio::select! {
                () = tx.closed() => return,
                step = driver.next() => step,
            };
            match step {
                Ok(Step::Text(text, pending)) => {
                    for d in stream.update(&text, pending, false) {
                        if !send(chunk(shape::delta(&p.ids, &d), None)).await {
                            return;
                        }
                    }
                }
                Ok(Step::Done(gen)) => {
                    let (text, cut) = driver.final_text(&gen);
                    for d in stream.update(&text, 0, true) {
                        if !send(chunk(shape::delta(&p.ids, &d), None)).await {
                            return;
                        }
                    }
                    let f = finish(&st, &p, &gen, text, cut);
                    let mut last = chunk(json!({}), Some(f.finish));
                    last["structgen"] = f.ext;
                    if stream.diverged {
                        last["structgen"]["stream_diverged"] = json!(true);
                    }
                    if !send(last).await {
                        return;
                    }
                    if usage {
                        let object = match p.kind {
                            Kind::Chat => "chat.completion.chunk",
                            Kind::Text => "text_completion",
                        };
                        if !send(shape::usage_chunk(&p.ids, object, f.usage)).await {
                            return;
                        }
                    }
                    break;
                }
                Err(e) => {
                    st.metrics.answered(p.kind.name(), e.status.as_u16());
                    if !send(e.body()).await {
                        return;
                    }
                    break;
                }
            }
        }
        let _ = tx.send(SseEvent::default().data("[DONE]")).await;
    });
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    let mut r = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    if let Some(n) = header {
        if let Ok(h) = HeaderValue::from_str(&n.to_string()) {
            r.headers_mut().insert("x-structgen-unenforced", h);
        }
    }
    r
}
