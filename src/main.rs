use std::ffi::{c_int, c_long};
use std::process::ExitCode;

use clap::Parser;
use structgen::cli::{self, Cli};

/// mimalloc: allocation-heavy grammar compiles are a quarter faster than with glibc's malloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay`: its place in `mi_option_e` (mimalloc.h, v2, which the `v2` feature
/// of the mimalloc crate builds). The `libmimalloc-sys` bindings name no constant for it.
const MI_OPTION_PURGE_DELAY: c_int = 15;

extern "C" {
    /// mimalloc's `void mi_option_set(mi_option_t option, long value)`, linked by the allocator.
    fn mi_option_set(option: c_int, value: c_long);
}

fn main() -> ExitCode {
    // Memory mimalloc frees is kept for reuse instead of being handed back to the OS 10 ms later
    // (its default). The OS hands it back as transparent huge pages, each zeroed whole on its
    // first touch: with the default, a third of a JSONSchemaBench run's time went to zeroing
    // pages freed moments before. Peak memory is unchanged (the high-water mark is the same).
    // SAFETY: a plain setter of a global option, called before any thread is started.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    cli::run(Cli::parse())
}
