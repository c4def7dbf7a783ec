//! Running third-party parsers that may panic on corrupt input (a tensor library's GGUF reader,
//! the `tokenizers` crate's deserializers) so that their panics become error values: the program
//! never panics on input, and the panic hook stays quiet while a guarded call runs.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Set while [`catch_quiet`] runs its closure on this thread.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`; a panic inside it is returned as its message instead of unwinding further, and is not
/// printed. Other threads' panics are reported as before.
pub fn catch_quiet<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let was = QUIET.with(|q| q.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "the parser failed".into())
    })
}

#[cfg(test)]
mod tests {
    use super::catch_quiet;

    #[test]
    fn a_panic_becomes_its_message() {
        assert_eq!(catch_quiet(|| 7), Ok(7));
        let err = catch_quiet(|| -> u32 { panic!("bad header {}", 3) }).unwrap_err();
        assert_eq!(err, "bad header 3");
        assert_eq!(catch_quiet(|| 1), Ok(1), "still usable after a panic");
    }
}
