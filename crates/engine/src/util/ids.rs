//! Dense `u32` identifiers. Each is a transparent newtype so that a rule id can never be used where a
//! state id is meant; `new` checks the `usize → u32` conversion instead of truncating.

use std::fmt;

/// A `usize` index did not fit the `u32` id space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{kind} index {index} does not fit in a u32 id")]
pub struct IdOverflow {
    /// Which id kind overflowed.
    pub kind: &'static str,
    /// The index that was given.
    pub index: usize,
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u32);

        impl $name {
            /// Checked conversion from a `usize` index.
            pub fn new(index: usize) -> Result<Self, IdOverflow> {
                u32::try_from(index)
                    .map($name)
                    .map_err(|_| IdOverflow { kind: $kind, index })
            }

            /// The id as a `usize` index into its dense table.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// Index of a rule in a grammar's rule table.
    RuleId,
    "rule"
);
id_type!(
    /// Index of a state in an FSM (per-rule while building, global once compiled).
    StateId,
    "state"
);
id_type!(
    /// A token id of a vocabulary.
    TokenId,
    "token"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_constructor_rejects_overflow() {
        assert_eq!(RuleId::new(7).map(RuleId::index), Ok(7));
        assert!(TokenId::new(u32::MAX as usize + 1).is_err());
    }
}
