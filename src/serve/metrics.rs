//! `GET /metrics`: the server's counters and histograms in Prometheus' text format
//! (prometheus-client): requests by endpoint and status, prompt and completion tokens, queue depth
//! and decoding sequences, and per forward pass the batch size, the slowest mask fill, the wait
//! for masks and the step time; per request the grammar's share of decode time and the schema
//! keywords not enforced.

use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::runtime::batch::PassStats;

/// The server's metrics (cheap to clone: every metric is shared).
#[derive(Clone)]
pub struct Metrics {
    /// Requests by `endpoint` and HTTP `status`.
    pub requests: Family<Vec<(String, String)>, Counter>,
    /// Prompt tokens of answered requests.
    pub prompt_tokens: Counter,
    /// Generated tokens.
    pub completion_tokens: Counter,
    /// Requests waiting for a slot.
    pub queue_depth: Gauge,
    /// Sequences decoding.
    pub active: Gauge,
    /// Requests admitted and not finished (waiting, decoding, or compiling their grammar).
    pub in_flight: Gauge,
    /// Sequences per forward pass.
    pub batch_size: Histogram,
    /// The slowest mask fill of a pass (µs).
    pub mask_fill_us: Histogram,
    /// How long a pass's logits waited for its masks (µs).
    pub mask_wait_us: Histogram,
    /// Step time (ms).
    pub step_ms: Histogram,
    /// Per constrained request: grammar time as a share of its decode time (%).
    pub grammar_overhead_pct: Histogram,
    /// Grammar compile time per request (ms).
    pub compile_ms: Histogram,
    /// Time to the first generated token (s).
    pub ttft_s: Histogram,
    /// Schema keywords answered as not enforced (`--schema-policy warn`).
    pub unenforced: Counter,
    /// Requests refused because the queue was full.
    pub rejected_busy: Counter,
    registry: std::sync::Arc<Mutex<Registry>>,
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let mut r = Registry::with_prefix("structgen");
        let m = Metrics {
            requests: Family::default(),
            prompt_tokens: Counter::default(),
            completion_tokens: Counter::default(),
            queue_depth: Gauge::default(),
            active: Gauge::default(),
            in_flight: Gauge::default(),
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 9)),
            mask_fill_us: Histogram::new(exponential_buckets(1.0, 4.0, 10)),
            mask_wait_us: Histogram::new([0.0, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5]),
            step_ms: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
            grammar_overhead_pct: Histogram::new([0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0]),
            compile_ms: Histogram::new(exponential_buckets(0.1, 4.0, 10)),
            ttft_s: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            unenforced: Counter::default(),
            rejected_busy: Counter::default(),
            registry: std::sync::Arc::new(Mutex::new(Registry::default())),
        };
        r.register(
            "requests",
            "Requests by endpoint and HTTP status",
            m.requests.clone(),
        );
        r.register(
            "prompt_tokens",
            "Prompt tokens of answered requests",
            m.prompt_tokens.clone(),
        );
        r.register(
            "completion_tokens",
            "Generated tokens",
            m.completion_tokens.clone(),
        );
        r.register(
            "queue_depth",
            "Requests waiting for a decoding slot",
            m.queue_depth.clone(),
        );
        r.register("active_sequences", "Sequences decoding", m.active.clone());
        r.register(
            "in_flight_requests",
            "Requests admitted and not finished",
            m.in_flight.clone(),
        );
        r.register(
            "batch_size",
            "Sequences per forward pass",
            m.batch_size.clone(),
        );
        r.register(
            "mask_fill_us",
            "Slowest grammar mask fill of a pass (microseconds)",
            m.mask_fill_us.clone(),
        );
        r.register(
            "mask_wait_us",
            "Wait of a pass's logits for its grammar masks (microseconds)",
            m.mask_wait_us.clone(),
        );
        r.register(
            "step_ms",
            "Batch step time (milliseconds)",
            m.step_ms.clone(),
        );
        r.register(
            "grammar_overhead_pct",
            "Grammar time as a share of a request's decode time (percent)",
            m.grammar_overhead_pct.clone(),
        );
        r.register(
            "grammar_compile_ms",
            "Grammar compile time per request (milliseconds)",
            m.compile_ms.clone(),
        );
        r.register(
            "time_to_first_token_seconds",
            "Time from admission to the first generated token",
            m.ttft_s.clone(),
        );
        r.register(
            "unenforced_keywords",
            "Schema keywords answered as not enforced",
            m.unenforced.clone(),
        );
        r.register(
            "rejected_busy",
            "Requests refused because the queue was full",
            m.rejected_busy.clone(),
        );
        *m.registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = r;
        m
    }

    /// Counts a request's answer.
    pub fn answered(&self, endpoint: &str, status: u16) {
        self.requests
            .get_or_create(&vec![
                ("endpoint".to_string(), endpoint.to_string()),
                ("status".to_string(), status.to_string()),
            ])
            .inc();
    }

    /// Records one forward pass.
    pub fn pass(&self, p: &PassStats) {
        self.batch_size.observe(p.seqs as f64);
        if p.masks > 0 {
            self.mask_fill_us.observe(p.mask_fill_max_us);
            self.mask_wait_us.observe(p.mask_wait_us);
        }
        self.step_ms.observe(p.step_ms);
    }

    /// The text exposition, with the load gauges set to `(queued, active)`.
    pub fn render(&self, queued: usize, active: usize) -> String {
        self.queue_depth.set(queued as i64);
        self.active.set(active as i64);
        let mut out = String::new();
        let r = self
            .registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &r);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
