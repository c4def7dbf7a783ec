//! Per loop class, one byte per sorted token: where its tail of class members begins
//! ([`LoopClass::tail_start`]), so that the mask walk accepts a token in one comparison when the
//! automaton loops on the class.
//!
//! [`ClassTails`] owns a bounded cache of these arrays, indexed like [`super::Vocab::sorted`].
//! Invariant: a stored value is exact, or [`UNKNOWN_TAIL`] (too large for a byte), which never
//! admits the shortcut.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::util::LoopClass;

/// A stored tail start that is too large for a byte: the shortcut never applies.
pub const UNKNOWN_TAIL: u8 = u8::MAX;

/// Most classes kept per vocabulary; a class past it gets no shortcut (the walk steps).
const MAX_CLASSES: usize = 64;

/// The cache of tail starts per loop class (see the module docs).
#[derive(Debug, Default)]
pub struct ClassTails {
    map: Mutex<FxHashMap<LoopClass, Arc<[u8]>>>,
}

impl Clone for ClassTails {
    /// A fresh, empty cache (the values are recomputed on demand).
    fn clone(&self) -> Self {
        ClassTails::default()
    }
}

impl ClassTails {
    /// The tail starts for `class`, computed on first use from the sorted tokens `tokens`; `None`
    /// once [`MAX_CLASSES`] other classes are kept.
    pub fn get<'v>(
        &self,
        class: &LoopClass,
        tokens: impl Iterator<Item = &'v [u8]>,
    ) -> Option<Arc<[u8]>> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = map.get(class) {
            return Some(t.clone());
        }
        if map.len() >= MAX_CLASSES {
            return None;
        }
        let starts: Arc<[u8]> = tokens
            .map(|bytes| {
                u8::try_from(class.tail_start(bytes))
                    .ok()
                    .filter(|&s| s != UNKNOWN_TAIL)
                    .unwrap_or(UNKNOWN_TAIL)
            })
            .collect();
        map.insert(*class, starts.clone());
        Some(starts)
    }
}
