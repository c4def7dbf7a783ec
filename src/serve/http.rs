//! The HTTP side of `structgen serve` (axum on tokio): the server's state, routes, API key,
//! admission, body reading and graceful shutdown. A request is then prepared (`prepare.rs`),
//! driven through the runtime (`driver.rs`) and answered whole or streamed (`reply.rs`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::constraint::{Grammars, SchemaPolicy};
use super::driver::Driver;
use super::error::ApiError;
use super::metrics::Metrics;
use super::prepare::{prepare_chat, prepare_text, Kind};
use super::reply::{stream_response, whole_response};
use crate::frontend::tools::{FormatSet, StyleSpec};
use crate::runtime::batch::{BatchOptions, Runtime};
use crate::runtime::chat::{ChatError, ChatTemplate};
use crate::runtime::request::grammar_compiler;
use crate::runtime::Model;
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
    /// Compute the masks requests are about to need while the model runs.
    pub warm_ahead: bool,
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

pub(super) struct AppState {
    pub(super) runtime: Runtime,
    pub(super) grammars: Grammars,
    pub(super) template: ChatTemplate,
    pub(super) tokenizer: tokenizers::Tokenizer,
    pub(super) vocab: Arc<Vocab>,
    pub(super) context: usize,
    pub(super) name: String,
    pub(super) formats: FormatSet,
    pub(super) cfg: ServeConfig,
    pub(super) metrics: Metrics,
    pub(super) in_flight: AtomicUsize,
    pub(super) created: u64,
}

pub(super) type St = Arc<AppState>;

pub(super) fn now_s() -> u64 {
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
            warm_ahead: cfg.warm_ahead,
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
pub(super) struct Admission {
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

pub(super) fn check_model(st: &AppState, model: Option<&str>) -> Result<(), ApiError> {
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
