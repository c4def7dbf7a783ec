//! A small fork-join pool for the forward pass: `run_chunks(n, f)` calls `f(0..n)` spread over
//! the calling thread and the pool's workers and returns when every call has returned.
//!
//! A decode step makes a few hundred such calls of tens of microseconds each, so workers spin
//! for a short while after each job before they sleep on a condition variable (a rayon job or a
//! thread wake-up per call would cost as much as the work).
//!
//! Invariants (one job runs at a time, `running`):
//! - Chunks are claimed from `next`, which holds the job's generation in its high 32 bits and
//!   the next chunk index in its low 32 bits; a claim is a compare-and-swap, so it can only take
//!   a chunk of the generation it read, and a claimer that read an older job claims nothing.
//! - A worker counts itself in `in_flight` before each claim and leaves once the claim failed
//!   or its chunk has returned; the caller returns once every chunk is claimed and `in_flight`
//!   is 0.
//!   So a job's pointer is called only while its `run_chunks` is waiting, and a worker that is
//!   asleep or descheduled when the job starts never delays it (the caller takes its chunks):
//!   on a machine shared with other processes a call costs its work, not a scheduler slice.

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
    job: Mutex<Option<(u64, usize, &'static Job)>>,
    /// `generation << 32 | next chunk index` (see the module invariants).
    next: AtomicU64,
    generation: AtomicU64,
    in_flight: AtomicUsize,
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
            next: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
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
        let generation = (s.generation.load(SeqCst) + 1) & u64::from(u32::MAX);
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some((generation, n, job));
        s.next.store(generation << 32, SeqCst);
        s.generation.store(generation, SeqCst);
        if s.sleepers.load(SeqCst) > 0 {
            let _g = s.sleep.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let mine = catch_unwind(AssertUnwindSafe(|| take_chunks(s, generation, n, f, false)));
        // Every chunk is claimed now; wait for the workers still running one.
        let mut spins = 0u32;
        while s.in_flight.load(SeqCst) > 0 {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            }
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

/// Claims and runs chunks of job `generation` (of `n` chunks) until none is left or another
/// job has started; a worker (`counted`) is in `in_flight` from before each claim until it has
/// failed or its chunk has returned.
fn take_chunks(
    s: &Shared,
    generation: u64,
    n: usize,
    f: &(dyn Fn(usize) + Sync + '_),
    counted: bool,
) {
    struct Leave<'a>(&'a Shared);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            // A panic is recorded before the caller can see this worker gone.
            if std::thread::panicking() {
                self.0.panicked.store(true, SeqCst);
            }
            self.0.in_flight.fetch_sub(1, SeqCst);
        }
    }
    let mut cur = s.next.load(SeqCst);
    loop {
        if cur >> 32 != generation || (cur & u64::from(u32::MAX)) as usize >= n {
            return;
        }
        // Left when this iteration ends, even by a panic in `f`.
        let _leave = counted.then(|| {
            s.in_flight.fetch_add(1, SeqCst);
            Leave(s)
        });
        match s.next.compare_exchange(cur, cur + 1, SeqCst, SeqCst) {
            Ok(_) => {
                f((cur & u64::from(u32::MAX)) as usize);
                cur = s.next.load(SeqCst);
            }
            Err(now) => cur = now,
        }
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
        if let Some((generation, n, job)) = job {
            // A panic was recorded by the claim it ended (see `take_chunks`).
            let run = || take_chunks(s, generation, n, job, true);
            let _ = catch_unwind(AssertUnwindSafe(run));
        }
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
