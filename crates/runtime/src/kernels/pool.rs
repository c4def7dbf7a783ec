//! A small fork-join pool for the forward pass: `run_chunks(n, f)` calls `f(0..n)` spread over
//! the calling thread and the pool's workers and returns when every call has returned.
//!
//! A decode step makes a few hundred such calls of tens of microseconds each, so workers spin
//! for a short while after each job before they sleep on a condition variable (a rayon job or a
//! thread wake-up per call would cost as much as the work). Invariant: the job pointer a worker
//! reads stays valid until it has decremented `active`, and `run_chunks` waits for `active` to
//! reach zero before it returns; one job runs at a time (`running`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps.
const SPIN: Duration = Duration::from_micros(300);

type Job = dyn Fn(usize) + Sync;

struct Shared {
    /// The current job, lifetime erased (see the module invariant).
    job: Mutex<Option<&'static Job>>,
    chunks: AtomicUsize,
    next: AtomicUsize,
    generation: AtomicU64,
    active: AtomicUsize,
    sleepers: AtomicUsize,
    panicked: AtomicBool,
    stop: AtomicBool,
    sleep: Mutex<()>,
    wake: Condvar,
}

/// Worker threads for the kernels; `threads` counts the calling thread.
pub struct Pool {
    threads: usize,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    running: Mutex<()>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({} threads)", self.threads)
    }
}

/// Physical cores of this machine (hyper-threads share a core's SIMD units, so the kernels gain
/// nothing from them); the logical CPU count where the topology is unknown.
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return logical;
    };
    let mut cores = std::collections::BTreeSet::new();
    let mut package = "";
    for line in info.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "physical id" => package = value.trim(),
            "core id" => {
                cores.insert((package.to_string(), value.trim().to_string()));
            }
            _ => {}
        }
    }
    if cores.is_empty() {
        logical
    } else {
        cores.len().min(logical)
    }
}

impl Pool {
    /// A pool of `threads` threads in all (at least 1: the caller).
    pub fn new(threads: usize) -> Pool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            job: Mutex::new(None),
            chunks: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
        });
        let workers = (1..threads)
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("structgen-kernel-{i}"))
                    .spawn(move || worker(&shared))
                    .expect("spawning a kernel thread")
            })
            .collect();
        Pool {
            threads,
            shared,
            workers,
            running: Mutex::new(()),
        }
    }

    /// Threads in all, the caller included.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Calls `f(i)` for every `i < n`, spread over the threads; returns when all have returned.
    /// A panic in any call is raised again here.
    pub fn run_chunks<'a>(&self, n: usize, f: &'a (dyn Fn(usize) + Sync + 'a)) {
        if self.threads == 1 || n <= 1 {
            (0..n).for_each(f);
            return;
        }
        let _one = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: the reference is erased to 'static only for the workers of this call, and this
        // function does not return before every worker has finished with it (`active` = 0).
        let job: &'static Job =
            unsafe { std::mem::transmute::<&'a (dyn Fn(usize) + Sync + 'a), &'static Job>(f) };
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
        s.chunks.store(n, SeqCst);
        s.next.store(0, SeqCst);
        s.active.store(self.workers.len(), SeqCst);
        s.generation.fetch_add(1, SeqCst);
        if s.sleepers.load(SeqCst) > 0 {
            let _g = s.sleep.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let mine = catch_unwind(AssertUnwindSafe(|| take_chunks(s, f)));
        while s.active.load(SeqCst) > 0 {
            std::hint::spin_loop();
        }
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if let Err(p) = mine {
            std::panic::resume_unwind(p);
        }
        if s.panicked.swap(false, SeqCst) {
            panic!("a kernel thread panicked");
        }
    }
}

fn take_chunks(s: &Shared, f: &(dyn Fn(usize) + Sync + '_)) {
    let n = s.chunks.load(SeqCst);
    loop {
        let i = s.next.fetch_add(1, SeqCst);
        if i >= n {
            break;
        }
        f(i);
    }
}

fn worker(s: &Shared) {
    let mut seen = 0u64;
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        while s.generation.load(SeqCst) == seen && !s.stop.load(SeqCst) {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) && start.elapsed() > SPIN {
                let mut g = s.sleep.lock().unwrap_or_else(|e| e.into_inner());
                s.sleepers.fetch_add(1, SeqCst);
                while s.generation.load(SeqCst) == seen && !s.stop.load(SeqCst) {
                    g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                s.sleepers.fetch_sub(1, SeqCst);
            }
        }
        if s.stop.load(SeqCst) {
            return;
        }
        seen = s.generation.load(SeqCst);
        let job = *s.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(job) = job {
            if catch_unwind(AssertUnwindSafe(|| take_chunks(s, job))).is_err() {
                s.panicked.store(true, SeqCst);
            }
        }
        s.active.fetch_sub(1, SeqCst);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.stop.store(true, SeqCst);
        {
            let _g = self.shared.sleep.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// A raw pointer to an output that the calls of one [`Pool::run_chunks`] write in disjoint
/// parts (rows, columns, heads), while `run_chunks` waits for all of them.
pub struct SharedOut<T = f32>(*mut T);

impl<T> Clone for SharedOut<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SharedOut<T> {}

// SAFETY: every user writes disjoint elements, and `run_chunks` does not return before every
// call has, so the buffer outlives the writes.
unsafe impl<T: Send> Send for SharedOut<T> {}
unsafe impl<T: Send> Sync for SharedOut<T> {}

impl<T> SharedOut<T> {
    /// Shares `out` with the calls of one `run_chunks`.
    pub fn new(out: &mut [T]) -> SharedOut<T> {
        SharedOut(out.as_mut_ptr())
    }

    /// The first element.
    pub fn ptr(self) -> *mut T {
        self.0
    }

    /// Elements `i..i + len`.
    ///
    /// # Safety
    /// They must lie inside the buffer and be written by this call only.
    pub unsafe fn slice<'a>(self, i: usize, len: usize) -> &'a mut [T] {
        std::slice::from_raw_parts_mut(self.0.add(i), len)
    }
}
