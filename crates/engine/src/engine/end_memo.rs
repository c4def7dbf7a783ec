//! Rule ends in the root's context, decided once per structure and shared between grammars.
//!
//! An item whose rule can end inside a token leaves the rest of the token (its uncertain list's
//! suffix groups, [`Uncertain`]) to the items below it: the matcher completes the rule and walks
//! the suffixes through the full parse. Where every item the completion advances is a root item
//! from the start of the input (a tool call's end, back in a TagDispatch's free text), the set
//! the suffixes are walked from holds those root items and what they predict, nothing else. It is
//! fixed by the advanced root states, whose structural hashes ([`super::hash`]) describe every
//! rule the root reaches ([`Automaton::root_covered`]) but not the tag rules behind its opaque
//! calls, the tools that change with every request.
//!
//! So a group whose walk only ever read sets of covered items has the same verdict in every
//! grammar where the same list is completed into root states of the same hashes. [`EndMemo`]
//! keeps, under that key, the tokens of the groups so accepted and the groups whose walk met a tag
//! rule's item (a suffix running on into the next call's trigger and tool name). A later grammar
//! sets the first and walks only the second.
//!
//! Elsewhere (a string's end inside an object, inside an array...), the set the suffixes are
//! walked from is fixed by its items and, through their origins, by the sets of the rules still
//! open ([`EarleyParser::context_hash`]): a sequence meets the same stack again and again (every
//! value of an array's objects). [`ContextMemo`] keeps, per grammar, the groups a context
//! accepted under the list's fingerprint and that hash.
//!
//! Invariant: an [`EndWalk`]'s key determines it: the list's fingerprint names its groups, and
//! the hashes of the root states the walk's covered part. So does a [`ContextMemo`] key, within
//! its grammar.

use std::hash::Hasher;
use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxHashMap;

use super::automaton::Automaton;
use super::earley::EarleyParser;
use super::mask::{walk_sorted, walk_sorted_tracked};
use super::uncertain::Uncertain;
use crate::util::memo::{Memo, MemoStats, Weighed};
use crate::util::{Fingerprint, RuleId, StateId, TokenBitmaskMut, TokenId};

/// The decision of one uncertain list in one root context.
#[derive(Debug)]
pub struct EndWalk {
    /// Ids of the tokens of the groups accepted whatever the tag rules are.
    accepted: Box<[u32]>,
    /// The groups whose verdict read a tag rule's item (increasing indices).
    unsure: Box<[u32]>,
}

impl Weighed for EndWalk {
    fn bytes(&self) -> usize {
        (self.accepted.len() + self.unsure.len()) * 4 + 64
    }
}

/// Rule-end decisions shared by every grammar of a compiler (see the module docs).
pub type EndMemo = Memo<EndWalk>;

/// Whether every item that completing `rule` (started at `origin`) advances is a root item from
/// the start of the input, in a grammar whose root is not counted; if so, `targets` is set to the
/// states they advance to (sorted, without repeats). `parser` must hold set `origin`.
pub(super) fn root_context(
    a: &Automaton,
    parser: &EarleyParser,
    rule: RuleId,
    origin: usize,
    targets: &mut Vec<StateId>,
) -> bool {
    let fsm = a.fsm();
    let root = a.root();
    targets.clear();
    if a.counted(root).is_some() {
        return false;
    }
    for parent in parser.set(origin) {
        for &(r, t) in fsm.ref_edges(parent.state) {
            if r != rule || !parent.may_call(a) {
                continue;
            }
            if parent.origin != 0 || fsm.rule_of(parent.state) != root {
                return false;
            }
            targets.push(t);
        }
    }
    targets.sort_unstable();
    targets.dedup();
    !targets.is_empty()
}

/// Sets in `mask` the tokens of `uncertain` whose suffix the parser's current set accepts, that set
/// being the completion [`root_context`] found, whose key is `key`: from `memo` when kept there
/// (walking only the unsure groups), else by a tracked walk whose result is kept.
pub(super) fn fill_root_ends(
    a: &Automaton,
    memo: &EndMemo,
    key: u128,
    parser: &mut EarleyParser,
    uncertain: &Uncertain,
    mask: &mut TokenBitmaskMut,
) {
    if let Some(known) = memo.get(key) {
        for &t in known.accepted.iter() {
            mask.set(TokenId(t));
        }
        let unsure = &known.unsure;
        walk_sorted(
            a,
            parser,
            unsure.len(),
            |i| uncertain.suffix(unsure[i] as usize),
            |i| uncertain.allow(unsure[i] as usize, mask),
        );
        return;
    }
    let mut passed = Vec::new();
    let mut unsure = Vec::new();
    walk_sorted_tracked(
        a,
        parser,
        uncertain.len(),
        |i| uncertain.suffix(i),
        a.root_covered(),
        |i| passed.push(i as u32),
        |i| unsure.push(i as u32),
    );
    let mut accepted = Vec::new();
    for &i in &passed {
        uncertain.allow(i as usize, mask);
        if unsure.binary_search(&i).is_err() {
            accepted.extend_from_slice(uncertain.tokens(i as usize));
        }
    }
    memo.insert(
        key,
        EndWalk {
            accepted: accepted.into(),
            unsure: unsure.into(),
        },
    );
}

/// Rule-end decisions of one grammar by context (see the module docs): the groups each context
/// accepted (increasing indices), all dropped at once past [`CONTEXT_MEMO_BYTES`] (a sequence's
/// contexts repeat within a stretch of it). Lean on purpose: most lookups of a short sequence
/// miss, and a miss must cost little next to the walk it leads to.
#[derive(Debug, Default)]
pub struct ContextMemo {
    inner: Mutex<ContextInner>,
}

#[derive(Debug, Default)]
struct ContextInner {
    map: FxHashMap<u128, Box<[u32]>>,
    bytes: usize,
    reused: u64,
    kept: u64,
}

impl ContextMemo {
    fn lock(&self) -> MutexGuard<'_, ContextInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lookups answered, decisions kept, and bytes held.
    pub fn stats(&self) -> MemoStats {
        let inner = self.lock();
        MemoStats {
            reused: inner.reused,
            kept: inner.kept,
            bytes: inner.bytes,
        }
    }
}

/// Most bytes a grammar's [`ContextMemo`] holds.
pub const CONTEXT_MEMO_BYTES: usize = 1 << 19;

/// Bytes a kept decision counts besides its indices.
const CONTEXT_ENTRY_BYTES: usize = 48;

/// Lists shorter than this are walked without the memo: hashing the context costs about as much.
pub const MIN_CONTEXT_GROUPS: usize = 8;

/// Sets in `mask` the tokens of `uncertain` whose suffix the parser's current set accepts, from
/// `memo` when kept there under the list and the set's [`EarleyParser::context_hash`], else by a
/// walk whose result is kept.
pub(super) fn fill_context_ends(
    a: &Automaton,
    memo: &ContextMemo,
    parser: &mut EarleyParser,
    uncertain: &Uncertain,
    mask: &mut TokenBitmaskMut,
) {
    let mut f = Fingerprint::new();
    f.write_u128(uncertain.fingerprint());
    f.write_u128(parser.context_hash(parser.num_sets() - 1));
    let key = f.finish128();
    {
        let mut inner = memo.lock();
        if let Some(known) = inner.map.get(&key) {
            for &i in known.iter() {
                uncertain.allow(i as usize, mask);
            }
            inner.reused += 1;
            return;
        }
    }
    let mut accepted = Vec::new();
    walk_sorted(
        a,
        parser,
        uncertain.len(),
        |i| uncertain.suffix(i),
        |i| {
            uncertain.allow(i, mask);
            accepted.push(i as u32);
        },
    );
    let bytes = accepted.len() * 4 + CONTEXT_ENTRY_BYTES;
    let mut inner = memo.lock();
    if inner.bytes + bytes > CONTEXT_MEMO_BYTES {
        inner.map.clear();
        inner.bytes = 0;
    }
    if inner.map.insert(key, accepted.into()).is_none() {
        inner.bytes += bytes;
        inner.kept += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::engine::{CompileOptions, GrammarCompiler, GrammarMatcher};
    use crate::grammar::ebnf;
    use crate::util::{Limits, TokenBitmask, TokenId};
    use crate::vocab::Vocab;

    /// Single bytes, and tokens that end a call and run on into free text, into the next
    /// trigger, or through it into a tool's name.
    const TOKENS: &[&str] = &[
        "<",
        "t",
        "=",
        "a",
        "b",
        ">",
        "/",
        "1",
        "2",
        "x",
        "</t>",
        "</t>x",
        "</t><t",
        "</t><t=",
        "</t><t=a",
        "</t><t=b",
        "1</t><t=a>",
        "1</t><t=b>",
        "2</t>",
        "[",
        "]",
        "{",
        "}",
        ",",
        "\"",
        "\"]",
        "\"],",
        "\"]]",
        "\",",
        "\",\"",
        "\",1",
        "\"}",
        "\"}]",
        "\"}}",
        "\"},",
    ];

    fn vocab() -> Arc<Vocab> {
        Vocab::of_texts(TOKENS)
    }

    fn id(token: &str) -> TokenId {
        TokenId(
            TOKENS
                .iter()
                .position(|t| *t == token)
                .expect("a test token") as u32,
        )
    }

    fn compiler() -> GrammarCompiler {
        GrammarCompiler::new(vocab(), Limits::default(), CompileOptions::default())
    }

    /// A TagDispatch calling one tool, `name`, whose call is `<t=NAME>` digits `</t>`.
    fn grammar(name: &str) -> String {
        format!(
            "root ::= TagDispatch((\"<t=\", call), stop_eos=true, stop_str=(), \
             loop_after_dispatch=true, excludes=())\ncall ::= \"{name}>\" [12]+ \"</t>\""
        )
    }

    /// The mask inside a call's digits, cached and uncached, after `text`, under EBNF `src`.
    fn masks_after(compiler: &GrammarCompiler, src: &str, text: &str) -> (Vec<u32>, Vec<u32>) {
        let grammar = ebnf::parse(src, "root", &Limits::default()).expect("grammar");
        let g = compiler.compile(&grammar).expect("compiles");
        let mut m = GrammarMatcher::new(g);
        assert!(m.accept_string(text), "{text}");
        let size = compiler.vocab().size();
        let (mut cached, mut uncached) = (TokenBitmask::new(size), TokenBitmask::new(size));
        m.fill_next_token_bitmask(&mut cached);
        m.fill_next_token_bitmask_uncached(&mut uncached);
        (cached.allowed_ids(), uncached.allowed_ids())
    }

    /// Compiles the one-tool grammar of tool `name` after those `compiler` compiled, checks its
    /// mask inside the call's digits after `text` against the uncached one, the memo's
    /// (reused, walked) counts after it, and that a call end running into the next call's name
    /// is allowed for `name` and refused for `other`.
    fn check_call_end(
        compiler: &GrammarCompiler,
        (name, other): (&str, &str),
        text: &str,
        counts: (u64, u64),
        what: &str,
    ) {
        let (cached, uncached) = masks_after(compiler, &grammar(name), text);
        assert_eq!(cached, uncached, "{what}");
        let stats = compiler.pool_stats().expect("a pool");
        assert_eq!((stats.ends_reused, stats.ends_walked), counts);
        let allowed = ["</t>", "</t>x", "</t><t="].map(String::from);
        let own = [format!("</t><t={name}"), format!("1</t><t={name}>")];
        for t in allowed.iter().chain(&own) {
            assert!(cached.contains(&id(t).0), "{t} allowed with tool {name}");
        }
        for t in [format!("</t><t={other}"), format!("1</t><t={other}>")] {
            assert!(!cached.contains(&id(&t).0), "{t} refused with tool {name}");
        }
    }

    #[test]
    fn a_call_end_is_decided_once_and_a_run_into_the_next_name_every_time() {
        let compiler = compiler();
        let first = "the first grammar walks and keeps";
        check_call_end(&compiler, ("a", "b"), "hi <t=a>1", (0, 1), first);
        let second = "the second grammar reuses the decision";
        check_call_end(&compiler, ("b", "a"), "<t=b>2", (1, 1), second);
    }

    #[test]
    fn a_context_is_decided_once_and_only_for_itself() {
        // The string rule ends inside `"]`, `",`, `"}`...: a list element accepts the first two
        // kinds, an object's value the last. The second element repeats the first's context.
        let src = "root ::= \"a\" list | \"b\" obj\nlist ::= \"[\" s (\",\" s)* \"]\"\n\
                   obj ::= \"{\" s \"}\"\ns ::= \"\\\"\" [12]* \"\\\"\"";
        let grammar = ebnf::parse(src, "root", &Limits::default()).expect("grammar");
        let g = compiler().compile(&grammar).expect("compiles");
        let size = g.vocab().size();
        let mask_after = |m: &mut GrammarMatcher, text: &str| {
            assert!(m.accept_string(text), "{text}");
            let (mut cached, mut uncached) = (TokenBitmask::new(size), TokenBitmask::new(size));
            m.fill_next_token_bitmask(&mut cached);
            m.fill_next_token_bitmask_uncached(&mut uncached);
            assert_eq!(cached.allowed_ids(), uncached.allowed_ids(), "after {text}");
            cached.allowed_ids()
        };
        let mut list = GrammarMatcher::new(Arc::clone(&g));
        let first = mask_after(&mut list, "a[\"1");
        let second = mask_after(&mut list, "\",\"2");
        for mask in [&first, &second] {
            assert!(mask.contains(&id("\"]").0) && mask.contains(&id("\",\"").0));
            assert!(!mask.contains(&id("\"}").0) && !mask.contains(&id("\"],").0));
        }
        let stats = g.context_ends().stats();
        assert_eq!(
            (stats.kept, stats.reused),
            (1, 1),
            "the second element reused the first"
        );
        let mut obj = GrammarMatcher::new(Arc::clone(&g));
        let value = mask_after(&mut obj, "b{\"1");
        assert!(value.contains(&id("\"}").0));
        assert!(!value.contains(&id("\"]").0) && !value.contains(&id("\",").0));
        assert_eq!(
            g.context_ends().stats().kept,
            2,
            "an object's value is another context"
        );
        // Sets rebuilt at the same positions after a rollback are hashed again.
        list.rollback(2).expect("two steps");
        let rebuilt = mask_after(&mut list, "b{\"1");
        assert_eq!(rebuilt, value);
        assert_eq!(g.context_ends().stats().reused, 2);
    }

    #[test]
    fn a_tag_rule_also_called_directly_is_still_walked() {
        // Both grammars call rule `call` (tool `a`) directly from the root through `y`; the first
        // also dispatches to it, the second to `call2` (tool `b`). The root states hash the same
        // (a TagDispatch's call is a call to some rule), so a run into the next tool's name must
        // not be decided from the first grammar's walk.
        let src = |tag: &str| {
            format!(
                "root ::= TagDispatch((\"<t=\", {tag}), stop_eos=true, stop_str=(), \
                 loop_after_dispatch=true, excludes=()) | y\ny ::= \"!\" call \";\"\n\
                 call ::= \"a>\" [12]+ \"</t>\"\ncall2 ::= \"b>\" [12]+ \"</t>\""
            )
        };
        let compiler = compiler();
        let (cached, uncached) = masks_after(&compiler, &src("call"), "<t=a>1");
        assert_eq!(cached, uncached);
        assert!(cached.contains(&id("</t><t=a").0));
        let (cached, uncached) = masks_after(&compiler, &src("call2"), "<t=b>2");
        assert_eq!(cached, uncached, "the run into a tool name is walked again");
        assert!(cached.contains(&id("</t><t=b").0));
        assert!(!cached.contains(&id("</t><t=a").0));
        let stats = compiler.pool_stats().expect("a pool");
        assert_eq!(stats.ends_reused, 1, "the second grammar used the memo");
    }
}
