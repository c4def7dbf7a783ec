//! Rule DFAs shared between the grammars of one compiler, and a rule's DFA as the automaton is
//! built from them.
//!
//! [`DfaCache`] keeps each rule DFA under the fingerprint of its body with references numbered in
//! order of appearance (reference `i` of a kept DFA is "the `i`-th rule the body names"), so equal
//! bodies with different rule names share one DFA. A [`RuleDfa`] is either a DFA of this grammar
//! or a kept one with the names of its references; the steps after construction (productivity,
//! trimming, freezing) read a kept DFA through those names and copy it only when trimming changes
//! it.
//!
//! Invariant: a [`CachedDfa`]'s facts are those of its DFA, whatever rules its references name:
//! `all_live` and `productive_alone` hold for every renaming.

use std::hash::Hasher;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::grammar::fsm::{CompactFsm, Dfa};
use crate::grammar::intern::hash_expr;
use crate::grammar::{Expr, GrammarError};
use crate::util::{Budget, Fingerprint, RuleId};

/// A kept DFA and what every grammar using it asks first.
#[derive(Debug)]
pub struct CachedDfa {
    dfa: Dfa,
    /// Every state reaches acceptance when every reference is productive.
    all_live: bool,
    /// The start reaches acceptance by bytes alone: productive whatever its callees.
    productive_alone: bool,
}

impl CachedDfa {
    fn new(dfa: Dfa) -> CachedDfa {
        CachedDfa {
            all_live: dfa.all_live(),
            productive_alone: dfa.is_productive_with(|_| false),
            dfa,
        }
    }
}

/// One rule's DFA while the automaton is built.
#[derive(Debug)]
pub enum RuleDfa {
    /// Built for this grammar, references by their own rule ids.
    Own(Dfa),
    /// Kept in a [`DfaCache`]; reference `i` calls rule `names[i]`.
    Shared(Arc<CachedDfa>, Vec<RuleId>),
}

impl RuleDfa {
    /// Calls `f` with the rule of every reference edge.
    pub fn for_each_callee(&self, mut f: impl FnMut(RuleId)) {
        let (dfa, names) = self.parts();
        for st in &dfa.states {
            for &(r, _) in &st.refs {
                f(names.map_or(r, |n| n[r.index()]));
            }
        }
    }

    /// Whether some path from the start reaches acceptance using only `productive` rules.
    pub fn is_productive(&self, productive: &[bool]) -> bool {
        match self {
            RuleDfa::Own(d) => d.is_productive(productive),
            RuleDfa::Shared(c, names) => {
                c.productive_alone
                    || c.dfa
                        .is_productive_with(|r| productive[names[r.index()].index()])
            }
        }
    }

    /// [`Dfa::trim`] by the `productive` rules; a kept DFA that trimming leaves as it is stays
    /// shared.
    pub fn trim(self, productive: &[bool]) -> Option<RuleDfa> {
        match self {
            RuleDfa::Shared(c, names)
                if c.all_live && names.iter().all(|r| productive[r.index()]) =>
            {
                Some(RuleDfa::Shared(c, names))
            }
            RuleDfa::Shared(c, names) => {
                let mut dfa = c.dfa.clone();
                for state in &mut dfa.states {
                    for (r, _) in &mut state.refs {
                        *r = names[r.index()];
                    }
                    state.refs.sort_unstable();
                }
                dfa.trim(productive).map(RuleDfa::Own)
            }
            RuleDfa::Own(d) => d.trim(productive).map(RuleDfa::Own),
        }
    }

    /// Number of states.
    pub fn num_states(&self) -> usize {
        self.parts().0.states.len()
    }

    /// The DFA and, when it is shared, the names of its references.
    fn parts(&self) -> (&Dfa, Option<&[RuleId]>) {
        match self {
            RuleDfa::Own(d) => (d, None),
            RuleDfa::Shared(c, names) => (&c.dfa, Some(names)),
        }
    }
}

/// Freezes the rules' DFAs (indexed by rule id) into one automaton.
pub fn freeze(dfas: &[RuleDfa]) -> CompactFsm {
    let parts: Vec<(&Dfa, Option<&[RuleId]>)> = dfas.iter().map(RuleDfa::parts).collect();
    CompactFsm::freeze_renaming(&parts)
}

/// Rule DFAs by the fingerprint of their rule body with its references renumbered in order of
/// appearance, shared by the grammars of one compiler (tools that repeat between requests build
/// their DFAs once).
#[derive(Debug, Default)]
pub struct DfaCache {
    map: Mutex<FxHashMap<u128, Arc<CachedDfa>>>,
}

/// Most rule DFAs a [`DfaCache`] keeps before it starts over.
const DFA_CACHE_ENTRIES: usize = 1 << 16;

/// The fingerprint of `body` with its references numbered in order of appearance, and those
/// references (`refs[i]` is the rule numbered `i`; a TagDispatch's tag rules count as references,
/// in the order [`Expr::map_refs`] visits them).
fn canonical_key(body: &Expr) -> (u128, Vec<RuleId>) {
    let mut refs = Vec::new();
    let mut number = |r: RuleId, h: &mut Fingerprint| {
        let i = refs.iter().position(|&x| x == r).unwrap_or_else(|| {
            refs.push(r);
            refs.len() - 1
        });
        h.write_usize(i);
    };
    let mut h = Fingerprint::new();
    hash_expr(body, &mut h, &mut number);
    (h.finish128(), refs)
}

impl DfaCache {
    /// The DFA of `body`, from the cache or built (and kept).
    pub(super) fn dfa(
        &self,
        body: &Expr,
        name: &str,
        limit: usize,
        budget: &Budget,
    ) -> Result<RuleDfa, GrammarError> {
        let (key, refs) = canonical_key(body);
        let canonical = self.get_or_build(key, || {
            let mut numbered = body.clone();
            numbered.map_refs(&mut |r| {
                let i = refs.iter().position(|&x| x == r).unwrap_or(0);
                Expr::Ref(RuleId(i as u32))
            });
            Dfa::from_expr_within(&numbered, name, limit, budget)
        })?;
        Ok(RuleDfa::Shared(canonical, refs))
    }

    /// The DFA of rule `this` with its tail calls inlined ([`Dfa::from_expr_inlining`]), from the
    /// cache or built (and kept). The key is the bodies of `this` and of every inlined rule they
    /// reach, in order of discovery, with all references numbered in order of appearance and
    /// marked as inlined or not: equal keys are the same group of rules up to their names.
    pub(super) fn inlining_dfa<'a>(
        &self,
        this: RuleId,
        name: &str,
        limit: usize,
        inline: &[bool],
        body_of: impl Fn(RuleId) -> &'a Expr,
        budget: &Budget,
    ) -> Result<RuleDfa, GrammarError> {
        let inlined = |r: RuleId| r == this || inline.get(r.index()) == Some(&true);
        let mut refs = vec![this];
        let mut group = 0;
        let mut h = Fingerprint::new();
        h.write_u64(INLINING_KEY);
        while group < refs.len() {
            let r = refs[group];
            group += 1;
            if !inlined(r) {
                continue;
            }
            h.write_usize(group);
            let mut number = |r: RuleId, h: &mut Fingerprint| {
                let i = refs.iter().position(|&x| x == r).unwrap_or_else(|| {
                    refs.push(r);
                    refs.len() - 1
                });
                h.write_usize(i);
                h.write_u8(u8::from(inlined(r)));
            };
            hash_expr(body_of(r), &mut h, &mut number);
        }
        let key = h.finish128();
        let canonical = self.get_or_build(key, || {
            let canon = |r: RuleId| RuleId(refs.iter().position(|&x| x == r).unwrap_or(0) as u32);
            let bodies: Vec<Option<Expr>> = refs
                .iter()
                .map(|&r| {
                    inlined(r).then(|| {
                        let mut body = body_of(r).clone();
                        body.map_refs(&mut |x| Expr::Ref(canon(x)));
                        body
                    })
                })
                .collect();
            let inline_canon: Vec<bool> = refs.iter().map(|&r| inlined(r)).collect();
            let empty = Expr::Empty;
            Dfa::from_expr_inlining(
                bodies[0].as_ref().unwrap_or(&empty),
                RuleId(0),
                name,
                limit,
                &inline_canon,
                |r| bodies[r.index()].as_ref().unwrap_or(&empty),
                budget,
            )
        })?;
        Ok(RuleDfa::Shared(canonical, refs))
    }

    /// The DFA kept under `key`, or `build`'s (then kept).
    fn get_or_build(
        &self,
        key: u128,
        build: impl FnOnce() -> Result<Dfa, GrammarError>,
    ) -> Result<Arc<CachedDfa>, GrammarError> {
        let cached = self
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        if let Some(d) = cached {
            return Ok(d);
        }
        let d = Arc::new(CachedDfa::new(build()?));
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= DFA_CACHE_ENTRIES {
            map.clear();
        }
        map.insert(key, Arc::clone(&d));
        Ok(d)
    }
}

/// Salts the keys of [`DfaCache::inlining_dfa`] apart from single bodies'.
const INLINING_KEY: u64 = 0x5EED_1A11_0F7A_11C5;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::fsm::{ByteEdges, DState};
    use crate::util::StateId;

    /// State 0 calls reference 0 or reads `a` then reference 1 (state 2), both into state 1,
    /// which accepts; reference `i` is rule `names[i]`.
    fn shared(names: &[u32]) -> RuleDfa {
        let dfa = Dfa {
            states: vec![
                DState {
                    accept: false,
                    bytes: smallvec::smallvec![(b'a', b'a', 2)],
                    refs: smallvec::smallvec![(RuleId(0), 1)],
                },
                DState {
                    accept: true,
                    ..DState::default()
                },
                DState {
                    accept: false,
                    bytes: ByteEdges::new(),
                    refs: smallvec::smallvec![(RuleId(0), 1), (RuleId(1), 1)],
                },
            ],
        };
        let names = names.iter().map(|&r| RuleId(r)).collect();
        RuleDfa::Shared(Arc::new(CachedDfa::new(dfa)), names)
    }

    #[test]
    fn shared_dfas_are_read_through_their_names() {
        let d = shared(&[5, 3]);
        let mut callees = Vec::new();
        d.for_each_callee(|r| callees.push(r.0));
        assert_eq!(callees, [5, 5, 3]);
        let mut productive = vec![false; 6];
        assert!(!d.is_productive(&productive));
        productive[3] = true;
        assert!(d.is_productive(&productive));
        // Rule 5 unproductive: its edges go, the copy is this grammar's own.
        let trimmed = d.trim(&productive).unwrap();
        let RuleDfa::Own(own) = &trimmed else {
            panic!("trimming dropped edges, yet the DFA stayed shared");
        };
        // Renumbered breadth first: start, the state after `a`, the accepting one.
        assert_eq!(own.states.len(), 3);
        assert_eq!(own.states[0].refs.len(), 0);
        assert_eq!(own.states[1].refs.as_slice(), [(RuleId(3), 2)]);
        assert!(own.states[2].accept);
        // Everything productive: nothing to trim, still shared.
        let all = vec![true; 6];
        assert!(matches!(
            shared(&[5, 3]).trim(&all),
            Some(RuleDfa::Shared(..))
        ));
    }

    #[test]
    fn frozen_shared_dfas_name_their_calls_in_rule_order() {
        let fsm = freeze(&[shared(&[5, 3])]);
        let s0 = fsm.start(RuleId(0));
        assert_eq!(fsm.ref_edges(s0), [(RuleId(5), StateId(1))]);
        assert_eq!(
            fsm.ref_edges(StateId(2)),
            [(RuleId(3), StateId(1)), (RuleId(5), StateId(1))]
        );
        assert_eq!(fsm.byte_edges(s0).len(), 1);
        assert!(fsm.is_accept(StateId(1)));
    }
}
