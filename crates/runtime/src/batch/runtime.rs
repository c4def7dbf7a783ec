//! [`Runtime`]: a [`Batch`] on a thread of its own, the API a server and the CLI share. Any thread
//! submits a request and gets a [`Handle`] that receives its events in order and can cancel it.
//!
//! A request's events go to a [`Sink`] that the runtime's thread calls; [`Runtime::submit`] makes
//! one that feeds a [`Handle`], and [`Runtime::submit_to`] takes the caller's (a server forwards
//! them to its async tasks without a thread per request). The runtime publishes its load
//! ([`Runtime::load`]) after every step and hands each pass's statistics to an observer.
//!
//! Invariants: the model lives on the runtime's thread and is handed back by
//! [`Runtime::shutdown`]; each submitted request gets exactly one [`Event::Done`], the last of
//! its events; a request whose sink refuses an event (its handle or receiver was dropped) is
//! cancelled in the same step, so its slot is free for the next one.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use super::{Batch, BatchOptions, BatchRequest, Event, PassStats};
use crate::generate::{GenerateError, Generation};
use crate::model::Model;

/// Passes kept for [`Runtime::passes`] (the oldest are dropped first).
const KEPT_PASSES: usize = 100_000;

/// Why the runtime could not take or finish a request.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The runtime's thread has stopped (shut down, or it panicked).
    #[error("the runtime has stopped")]
    Stopped,
    /// The request's events ended without its `Done`.
    #[error("request {0} ended without a result (the runtime stopped)")]
    Lost(u64),
}

/// Where a request's events go, called on the runtime's thread; `false`: nobody listens any
/// more, so the request is cancelled.
pub type Sink = Box<dyn FnMut(Event) -> bool + Send>;

/// Called on the runtime's thread with the statistics of every pass.
pub type PassObserver = Box<dyn FnMut(&PassStats) + Send>;

/// The runtime's load, as of its last step.
#[derive(Debug, Default)]
struct Load {
    queued: AtomicUsize,
    active: AtomicUsize,
}

enum Cmd {
    Submit(u64, Box<BatchRequest>, Sink),
    Cancel(u64),
    Shutdown,
}

/// A batch of sequences decoding on its own thread.
pub struct Runtime {
    tx: Sender<Cmd>,
    thread: Option<JoinHandle<Model>>,
    next_id: AtomicU64,
    passes: Arc<Mutex<VecDeque<PassStats>>>,
    load: Arc<Load>,
}

/// One submitted request: its id, its events, and a way to cancel it.
pub struct Handle {
    /// The request's id in this runtime.
    pub id: u64,
    events: Receiver<Event>,
    tx: Sender<Cmd>,
}

impl Handle {
    /// The next event, waiting for it; `None` once the request is done (after its `Done`).
    pub fn recv(&self) -> Option<Event> {
        self.events.recv().ok()
    }

    /// Asks the runtime to stop this request; its `Done` (with `StopReason::Cancelled`) follows.
    pub fn cancel(&self) {
        // A stopped runtime has nothing left to cancel.
        let _ = self.tx.send(Cmd::Cancel(self.id));
    }

    /// Waits for the result, passing each record to `on_record` as it comes.
    pub fn wait_with(
        self,
        on_record: &mut dyn FnMut(&crate::trace::StepRecord),
    ) -> Result<Result<Generation, GenerateError>, RuntimeError> {
        while let Some(ev) = self.recv() {
            match ev {
                Event::Record(r) => on_record(&r),
                Event::Done(result) => return Ok(result),
            }
        }
        Err(RuntimeError::Lost(self.id))
    }

    /// Waits for the result.
    pub fn wait(self) -> Result<Result<Generation, GenerateError>, RuntimeError> {
        self.wait_with(&mut |_| {})
    }
}

impl Runtime {
    /// Starts the runtime's thread on `model`.
    pub fn start(model: Model, opts: BatchOptions) -> Runtime {
        Runtime::start_observed(model, opts, Box::new(|_| {}))
    }

    /// Starts the runtime's thread on `model`, calling `observer` with every pass.
    pub fn start_observed(model: Model, opts: BatchOptions, observer: PassObserver) -> Runtime {
        let (tx, rx) = mpsc::channel();
        let passes = Arc::new(Mutex::new(VecDeque::new()));
        let load = Arc::new(Load::default());
        let (kept, published) = (Arc::clone(&passes), Arc::clone(&load));
        let thread = std::thread::Builder::new()
            .name("structgen-batch".into())
            .spawn(move || serve(model, opts, &rx, &kept, &published, observer))
            .ok();
        Runtime {
            tx,
            thread,
            next_id: AtomicU64::new(0),
            passes,
            load,
        }
    }

    /// Queues a request; its events come through the handle.
    pub fn submit(&self, req: BatchRequest) -> Result<Handle, RuntimeError> {
        let (etx, erx) = mpsc::channel();
        let id = self.submit_to(req, Box::new(move |ev| etx.send(ev).is_ok()))?;
        Ok(Handle {
            id,
            events: erx,
            tx: self.tx.clone(),
        })
    }

    /// Queues a request whose events go to `sink`; returns its id (for [`Runtime::cancel`]).
    pub fn submit_to(&self, req: BatchRequest, sink: Sink) -> Result<u64, RuntimeError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.tx
            .send(Cmd::Submit(id, Box::new(req), sink))
            .map_err(|_| RuntimeError::Stopped)?;
        Ok(id)
    }

    /// Asks the runtime to stop request `id`; its `Done` (with `StopReason::Cancelled`) follows.
    pub fn cancel(&self, id: u64) {
        // A stopped runtime has nothing left to cancel.
        let _ = self.tx.send(Cmd::Cancel(id));
    }

    /// `(waiting, decoding)` requests as of the last step (submitted ones not yet seen by the
    /// runtime's thread are not counted).
    pub fn load(&self) -> (usize, usize) {
        (
            self.load.queued.load(Ordering::Relaxed),
            self.load.active.load(Ordering::Relaxed),
        )
    }

    /// Whether the runtime's thread is still running (false after a panic in it).
    pub fn is_alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// The passes run so far (the last 100,000).
    pub fn passes(&self) -> Vec<PassStats> {
        let kept = self.passes.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter().copied().collect()
    }

    /// Finishes every request already submitted, stops the thread and returns the model.
    pub fn shutdown(mut self) -> Result<Model, RuntimeError> {
        // The thread may already have stopped; joining tells.
        let _ = self.tx.send(Cmd::Shutdown);
        let thread = self.thread.take().ok_or(RuntimeError::Stopped)?;
        thread.join().map_err(|_| RuntimeError::Stopped)
    }
}

/// The runtime's thread: takes commands, steps the batch, routes events.
fn serve(
    mut model: Model,
    opts: BatchOptions,
    rx: &Receiver<Cmd>,
    kept: &Mutex<VecDeque<PassStats>>,
    load: &Load,
    mut observer: PassObserver,
) -> Model {
    let mut batch = Batch::new(&mut model, opts);
    let mut routes: HashMap<u64, Sink> = HashMap::new();
    let mut events = Vec::new();
    let mut stopping = false;
    loop {
        let mut take = |cmd: Cmd, batch: &mut Batch, stopping: &mut bool| match cmd {
            Cmd::Submit(id, req, tx) => {
                routes.insert(id, tx);
                batch.submit(id, *req);
            }
            Cmd::Cancel(id) => {
                batch.cancel(id);
            }
            Cmd::Shutdown => *stopping = true,
        };
        if batch.is_idle() {
            if stopping {
                break;
            }
            match rx.recv() {
                Ok(cmd) => take(cmd, &mut batch, &mut stopping),
                Err(_) => break,
            }
        }
        while let Ok(cmd) = rx.try_recv() {
            take(cmd, &mut batch, &mut stopping);
        }
        batch.step(&mut events);
        let new = batch.drain_passes();
        new.iter().for_each(&mut observer);
        if !new.is_empty() {
            let mut k = kept.lock().unwrap_or_else(PoisonError::into_inner);
            k.extend(new);
            while k.len() > KEPT_PASSES {
                k.pop_front();
            }
        }
        for (id, ev) in events.drain(..) {
            let done = matches!(ev, Event::Done(_));
            let gone = routes.get_mut(&id).is_none_or(|sink| !sink(ev));
            if done {
                routes.remove(&id);
            } else if gone {
                batch.cancel(id);
            }
        }
        load.queued.store(batch.queued(), Ordering::Relaxed);
        load.active.store(batch.active(), Ordering::Relaxed);
    }
    drop(batch);
    model
}
