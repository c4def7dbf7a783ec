//! The HTTP side of `structgen serve` (axum on tokio): routes, admission, API key, the drive of
//! one request from its body to its answer or its stream, and graceful shutdown.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::answer::{Reader, Stops, Stream};
use super::constraint::{Constraint, Grammars, SchemaPolicy, Spec};
use super::error::ApiError;
use super::metrics::Metrics;
use super::request::{chat_request, completion_request, Format, GenParams};
use super::shape::{self, Ids};
use crate::frontend::tools::{FormatSet, StyleSpec, ToolChoice, ToolOptions};
use crate::runtime::batch::{BatchOptions, BatchRequest, Event, Runtime};
use crate::runtime::chat::{ChatError, ChatTemplate};
use crate::runtime::generate::GenerateOptions;
use crate::runtime::request::grammar_compiler;
use crate::runtime::sampler::Sampling;
use crate::runtime::{Generation, Model};
use crate::util::TokenId;
use crate::vocab::Vocab;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on.
    pub host: String,
    /// Port (0: any free one, printed at start).
    pub port: u16,
    /// Sequences decoded at once.
    pub parallel: usize,
    /// Rows of one forward pass (decode rows first, then prompt chunks).
    pub step_tokens: usize,
    /// Requests admitted at once (waiting + decoding); more get 503.
    pub max_queue: usize,
    /// Largest request body (bytes).
    pub max_body_bytes: usize,
    /// Largest `max_tokens` a request may ask for.
    pub max_tokens_limit: usize,
    /// Required `Authorization: Bearer` key.
    pub api_key: Option<String>,
    /// Unenforceable schema keywords: warn or refuse.
    pub policy: SchemaPolicy,
    /// Feed grammar-forced text without sampling it.
    pub jump_forward: bool,
}

/// The model the server answers with.
pub struct ServedModel {
    /// The model.
    pub model: Model,
    /// The name clients use (`model` field, `/v1/models`).
    pub name: String,
    /// A chat template given instead of the model's own (source, origin).
    pub template: Option<(String, String)>,
    /// The model's tool-call style.
    pub style: &'static StyleSpec,
    /// Stop tokens.
    pub stop: Vec<u32>,
    /// The call formats read and allowed.
    pub formats: FormatSet,
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The model has no chat template.
    #[error("the model has no chat template; pass one (--chat-template FILE)")]
    NoTemplate,
    /// The chat template does not compile.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The HTTP runtime failed.
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}

struct AppState {
    runtime: Runtime,
    grammars: Grammars,
    template: ChatTemplate,
    tokenizer: tokenizers::Tokenizer,
    vocab: Arc<Vocab>,
    context: usize,
    name: String,
    formats: FormatSet,
    cfg: ServeConfig,
    metrics: Metrics,
    in_flight: AtomicUsize,
    created: u64,
}

type St = Arc<AppState>;

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Runs the server until SIGTERM or Ctrl-C, then lets admitted requests finish.
pub fn serve(m: ServedModel, cfg: ServeConfig) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("structgen-http")
        .enable_all()
        .build()?;
    rt.block_on(run(m, cfg))
}

async fn run(m: ServedModel, cfg: ServeConfig) -> Result<(), ServeError> {
    let (src, origin) = m
        .template
        .as_ref()
        .or(m.model.chat_template.as_ref())
        .ok_or(ServeError::NoTemplate)?;
    let template = ChatTemplate::new(src, origin, &m.model.bos, &m.model.eos)?;
    let compiler = grammar_compiler(&m.model);
    let vocab = Arc::clone(compiler.vocab());
    let tokenizer = m.model.vocab.tokenizer.clone();
    let context = m.model.decoder.cfg.context;
    let metrics = Metrics::new();
    let observer = metrics.clone();
    let runtime = Runtime::start_observed(
        m.model,
        BatchOptions {
            max_seqs: cfg.parallel.max(1),
            step_tokens: cfg.step_tokens,
        },
        Box::new(move |p| observer.pass(p)),
    );
    let addr = format!("{}:{}", cfg.host, cfg.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: addr.clone(),
            source,
        })?;
    let local: SocketAddr = listener.local_addr()?;
    let st = Arc::new(AppState {
        runtime,
        grammars: Grammars {
            compiler,
            style: m.style,
            stop: m.stop,
            policy: cfg.policy,
        },
        template,
        tokenizer,
        vocab,
        context,
        name: m.name,
        formats: m.formats,
        cfg,
        metrics,
        in_flight: AtomicUsize::new(0),
        created: now_s(),
    });
    eprintln!(
        "structgen serve: {} on http://{local}/v1 ({} sequences at once, context {})",
        st.name, st.cfg.parallel, st.context
    );
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .method_not_allowed_fallback(wrong_method)
        .with_state(Arc::clone(&st));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    eprintln!("structgen serve: stopped");
    Ok(())
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
    eprintln!(
        "structgen serve: shutting down; finishing the requests in flight (a second signal stops at once)"
    );
    tokio::spawn(async {
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("structgen serve: stopped without finishing");
        std::process::exit(130);
    });
    if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        tokio::spawn(async move {
            s.recv().await;
            eprintln!("structgen serve: stopped without finishing");
            std::process::exit(143);
        });
    }
}

async fn not_found() -> ApiError {
    ApiError::invalid("", "no such endpoint: this server has POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health and GET /metrics")
        .with_status(StatusCode::NOT_FOUND)
        .with_code("not_found")
}

async fn wrong_method() -> ApiError {
    ApiError::invalid(
        "",
        "this endpoint does not take that HTTP method (completions are POST, the others GET)",
    )
    .with_status(StatusCode::METHOD_NOT_ALLOWED)
    .with_code("method_not_allowed")
}

async fn health(State(st): State<St>) -> Response {
    if st.runtime.is_alive() {
        Json(json!({"status": "ok"})).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "error", "message": "the model runtime has stopped"})),
        )
            .into_response()
    }
}

async fn metrics_text(State(st): State<St>) -> Response {
    let (queued, active) = st.runtime.load();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        st.metrics.render(queued, active),
    )
        .into_response()
}

async fn models(State(st): State<St>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&st, &headers) {
        return e.into_response();
    }
    Json(
        json!({"object": "list", "data": [{"id": st.name, "object": "model",
        "created": st.created, "owned_by": "structgen", "max_model_len": st.context}]}),
    )
    .into_response()
}

fn authorize(st: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &st.cfg.api_key else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given == Some(key.as_str()) {
        Ok(())
    } else {
        Err(ApiError::unauthorized())
    }
}

/// An admitted request: counted until dropped.
struct Admission {
    st: St,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.st.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.st.metrics.in_flight.dec();
    }
}

fn admit(st: &St) -> Result<Admission, ApiError> {
    let before = st.in_flight.fetch_add(1, Ordering::SeqCst);
    if before >= st.cfg.max_queue {
        st.in_flight.fetch_sub(1, Ordering::SeqCst);
        st.metrics.rejected_busy.inc();
        return Err(ApiError::busy(before));
    }
    st.metrics.in_flight.inc();
    Ok(Admission { st: Arc::clone(st) })
}

/// The body as JSON, within the size limit.
async fn read_body(st: &AppState, body: Body) -> Result<Value, ApiError> {
    let bytes = axum::body::to_bytes(body, st.cfg.max_body_bytes)
        .await
        .map_err(|_| {
            ApiError::bad_request(format!(
                "the request body is larger than {} bytes (--max-body-bytes) or could not be read",
                st.cfg.max_body_bytes
            ))
            .with_status(StatusCode::PAYLOAD_TOO_LARGE)
        })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "the request body is not valid JSON: {e} (line {}, column {})",
            e.line(),
            e.column()
        ))
    })
}

fn check_model(st: &AppState, model: Option<&str>) -> Result<(), ApiError> {
    match model {
        Some(m) if m != st.name => Err(ApiError::invalid(
            "model",
            format!(
                "the model `{m}` does not exist; this server serves `{}`",
                st.name
            ),
        )
        .with_status(StatusCode::NOT_FOUND)
        .with_code("model_not_found")),
        _ => Ok(()),
    }
}

/// Which endpoint a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Text,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Chat => "chat",
            Kind::Text => "completions",
        }
    }
}

/// A request ready for the runtime.
struct Prepared {
    kind: Kind,
    prompt: Vec<u32>,
    constraint: Constraint,
    reader: Reader,
    gen: GenParams,
    max_tokens: usize,
    stream: bool,
    include_usage: bool,
    ids: Ids,
    /// The output must be JSON checked afterwards (`response_format` schemas).
    json_output: bool,
    /// Whether a grammar constrains it.
    constrained: bool,
}

fn ids(kind: Kind, name: &str) -> Ids {
    let r: u64 = rand::random();
    Ids {
        id: match kind {
            Kind::Chat => format!("chatcmpl-{r:016x}"),
            Kind::Text => format!("cmpl-{r:016x}"),
        },
        created: now_s(),
        model: name.to_string(),
        call_prefix: format!("call_{r:016x}_"),
    }
}

/// `max_tokens` within the context left after the prompt.
fn token_budget(
    st: &AppState,
    prompt: usize,
    gen: &GenParams,
    prompt_param: &str,
) -> Result<usize, ApiError> {
    if prompt >= st.context {
        return Err(ApiError::invalid(
            prompt_param,
            format!(
                "the prompt is {prompt} tokens, and this model's context is {} tokens",
                st.context
            ),
        )
        .with_code("context_length_exceeded"));
    }
    let room = st.context - prompt;
    match gen.max_tokens {
        Some((n, field)) if n > room => Err(ApiError::invalid(
            field,
            format!(
                "this model's context is {} tokens; the prompt takes {prompt}, so `{field}` can be at most {room}, not {n}",
                st.context
            ),
        )
        .with_code("context_length_exceeded")),
        Some((n, _)) => Ok(n),
        None => Ok(room.min(st.cfg.max_tokens_limit)),
    }
}

fn prepare_chat(st: &AppState, body: &Value) -> Result<Prepared, ApiError> {
    let req = chat_request(body, st.cfg.max_tokens_limit)?;
    check_model(st, req.model.as_deref())?;
    let style = st.grammars.style;
    let text = st
        .template
        .render(&req.messages, &req.tools_json, style)
        .map_err(|e| ApiError::invalid("messages", format!("the chat template failed: {e}")))?;
    let prompt = st
        .tokenizer
        .encode(text.as_str(), false)
        .map_err(|e| ApiError::internal(format!("tokenizing the prompt: {e}")))?
        .get_ids()
        .to_vec();
    let max_tokens = token_budget(st, prompt.len(), &req.gen, "messages")?;
    let calls = !req.tools.is_empty() && req.tool_choice != ToolChoice::None;
    let options = ToolOptions {
        tool_choice: req.tool_choice.clone(),
        parallel_tool_calls: req.parallel_tool_calls,
        reasoning: None,
        formats: st.formats,
    };
    // With a response format, calls are read in the style's own syntax only: an answer in the
    // format (JSON with a "name" key, say) must not be taken for a call.
    let (spec, formats) = if req.tools.is_empty() {
        (Spec::Format(&req.format), st.formats)
    } else if req.format == Format::Text {
        (Spec::Tools(&req.tools, options), st.formats)
    } else if calls {
        (
            Spec::ToolsOr(&req.tools, options, &req.format),
            FormatSet::Canonical,
        )
    } else {
        (Spec::Format(&req.format), st.formats)
    };
    let constraint = st.grammars.build(spec)?;
    let constrained = constraint.matcher.is_some();
    Ok(Prepared {
        kind: Kind::Chat,
        prompt,
        constraint,
        reader: Reader::new(style, req.tools.clone(), calls, formats, false),
        json_output: matches!(req.format, Format::JsonObject | Format::JsonSchema { .. }),
        constrained,
        gen: req.gen,
        max_tokens,
        stream: req.stream,
        include_usage: req.include_usage,
        ids: ids(Kind::Chat, &st.name),
    })
}

fn prepare_text(st: &AppState, body: &Value) -> Result<Prepared, ApiError> {
    let req = completion_request(body, st.cfg.max_tokens_limit)?;
    check_model(st, req.model.as_deref())?;
    let prompt = st
        .tokenizer
        .encode(req.prompt.as_str(), true)
        .map_err(|e| ApiError::internal(format!("tokenizing the prompt: {e}")))?
        .get_ids()
        .to_vec();
    if prompt.is_empty() {
        return Err(ApiError::invalid("prompt", "`prompt` must not be empty"));
    }
    let max_tokens = token_budget(st, prompt.len(), &req.gen, "prompt")?;
    let constraint = st.grammars.build(Spec::Format(&req.format))?;
    let constrained = constraint.matcher.is_some();
    Ok(Prepared {
        kind: Kind::Text,
        prompt,
        constraint,
        reader: Reader::new(st.grammars.style, Vec::new(), false, st.formats, true),
        json_output: matches!(req.format, Format::JsonObject | Format::JsonSchema { .. }),
        constrained,
        gen: req.gen,
        max_tokens,
        stream: req.stream,
        include_usage: req.include_usage,
        ids: ids(Kind::Text, &st.name),
    })
}

async fn chat(State(st): State<St>, headers: HeaderMap, body: Body) -> Response {
    handle(st, headers, body, Kind::Chat).await
}

async fn completions(State(st): State<St>, headers: HeaderMap, body: Body) -> Response {
    handle(st, headers, body, Kind::Text).await
}

async fn handle(st: St, headers: HeaderMap, body: Body, kind: Kind) -> Response {
    match respond(&st, &headers, body, kind).await {
        Ok(r) => r,
        Err(e) => {
            st.metrics.answered(kind.name(), e.status.as_u16());
            e.into_response()
        }
    }
}

async fn respond(
    st: &St,
    headers: &HeaderMap,
    body: Body,
    kind: Kind,
) -> Result<Response, ApiError> {
    authorize(st, headers)?;
    let body = read_body(st, body).await?;
    let admission = admit(st)?;
    let st2 = Arc::clone(st);
    let mut prepared = tokio::task::spawn_blocking(move || match kind {
        Kind::Chat => prepare_chat(&st2, &body),
        Kind::Text => prepare_text(&st2, &body),
    })
    .await
    .map_err(|e| ApiError::internal(format!("preparing the request failed: {e}")))??;
    st.metrics
        .compile_ms
        .observe(prepared.constraint.compile_ms);
    let driver = Driver::start(st, &mut prepared)?;
    if prepared.stream {
        Ok(stream_response(Arc::clone(st), prepared, driver, admission))
    } else {
        let r = whole_response(st, prepared, driver).await;
        drop(admission);
        r
    }
}

/// What a request's events say so far.
enum Step {
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
struct Driver {
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
    fn start(st: &St, p: &mut Prepared) -> Result<Driver, ApiError> {
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
    async fn next(&mut self) -> Result<Step, ApiError> {
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
    fn final_text(&self, gen: &Generation) -> (String, Option<usize>) {
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

/// The finished request's answer, extension and bookkeeping.
struct Finished {
    answer: super::answer::Answer,
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

async fn whole_response(st: &St, p: Prepared, mut driver: Driver) -> Result<Response, ApiError> {
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

fn stream_response(st: St, p: Prepared, mut driver: Driver, admission: Admission) -> Response {
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
