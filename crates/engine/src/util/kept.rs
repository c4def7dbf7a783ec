//! Memory a thread keeps between uses: a buffer is taken from a thread-local slot and kept there
//! again when done, so a hot path that needs a large buffer grows it once per thread instead of
//! once per use (fresh memory costs reallocation and page faults).
//!
//! Invariant: a taken slot holds `T::default()` until the value is kept again, so a nested user
//! gets a fresh value rather than a shared one; at thread exit, keeping simply drops the value.

use std::cell::RefCell;
use std::thread::LocalKey;

/// The value kept in `slot`, leaving the default in its place.
pub fn take<T: Default>(slot: &'static LocalKey<RefCell<T>>) -> T {
    slot.try_with(|cell| cell.try_borrow_mut().map(|mut v| std::mem::take(&mut *v)))
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// Keeps `value` in `slot` for the thread's next [`take`].
pub fn keep<T>(slot: &'static LocalKey<RefCell<T>>, value: T) {
    let _ = slot.try_with(|cell| {
        if let Ok(mut v) = cell.try_borrow_mut() {
            *v = value;
        }
    });
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::{keep, take};

    thread_local! {
        static SLOT: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    }

    #[test]
    fn a_kept_value_is_taken_once() {
        keep(&SLOT, vec![1, 2]);
        assert_eq!(take(&SLOT), vec![1, 2]);
        assert!(take(&SLOT).is_empty(), "the slot was left empty");
    }
}
