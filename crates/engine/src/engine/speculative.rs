//! Speculative decoding: checking a draft without keeping it, and the masks of a tree of drafts.
//!
//! - [`GrammarMatcher::validate_tokens`]: the longest prefix of a draft the grammar accepts from
//!   the current state (what MTP / EAGLE verification asks before sampling).
//! - [`GrammarMatcher::traverse_draft_tree`]: one mask per node of a draft-token tree in one call
//!   (vLLM's and SGLang's tree speculation): a node's mask is the mask after accepting the draft
//!   tokens on the path from the root down to it, the root's own token left out (the root is the
//!   current state). A node whose token the grammar refuses, that the sequence ends at, or that
//!   lies below such a node, gets a mask that allows nothing.
//!
//! Invariant: both leave the matcher exactly as they found it (every step they take is rolled
//! back), whatever they return.

use std::time::Instant;

use super::GrammarMatcher;
use crate::util::{TokenBitmask, TokenId};

/// A tree of draft tokens in the layout vLLM and SGLang use: node `i` holds `tokens[i]`, its first
/// child is `next_token[i]` and its next sibling `next_sibling[i]` (`-1`: none). Node 0 is the
/// root.
#[derive(Debug, Clone, Copy)]
pub struct DraftTree<'a> {
    /// First child of each node, or -1.
    pub next_token: &'a [i64],
    /// Next sibling of each node, or -1.
    pub next_sibling: &'a [i64],
    /// The draft token of each node (the root's is not used).
    pub tokens: &'a [i64],
}

/// A draft tree or mask buffer that does not fit together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DraftTreeError {
    /// The three arrays differ in length, or are empty.
    #[error("draft tree: next_token, next_sibling and draft_tokens hold {0}, {1} and {2} nodes (they must be equal and at least 1)")]
    Lengths(usize, usize, usize),
    /// A child or sibling index outside the tree.
    #[error("draft tree: node {node}'s {field} is {value}, not -1 or a node index below {nodes}")]
    BadIndex {
        /// The node.
        node: usize,
        /// `next_token` or `next_sibling`.
        field: &'static str,
        /// The index written.
        value: i64,
        /// Nodes in the tree.
        nodes: usize,
    },
    /// The root with a sibling.
    #[error("draft tree: the root (node 0) has a sibling ({0}); the root must have none")]
    RootSibling(i64),
    /// A node reached twice (the links do not form a tree).
    #[error("draft tree: node {0} is reached twice (the links must form a tree)")]
    Revisited(usize),
    /// The mask buffer's shape.
    #[error("draft tree: the bitmask holds {rows} rows of {words} words; {nodes} rows of at least {need} words are needed")]
    Masks {
        /// Rows given.
        rows: usize,
        /// Words per row given.
        words: usize,
        /// Nodes in the tree.
        nodes: usize,
        /// Words a row needs for the vocabulary.
        need: usize,
    },
}

impl GrammarMatcher {
    /// How many of `tokens`, from the first, the grammar accepts in a row from the current state;
    /// the matcher is left unchanged. An id outside the vocabulary ends the run.
    pub fn validate_tokens(&mut self, tokens: &[TokenId]) -> usize {
        let size = self.grammar().vocab().size();
        let taken = tokens
            .iter()
            .take_while(|t| (t.0 as usize) < size && self.accept_token(**t))
            .count();
        self.undo_to(self.num_steps() - taken);
        taken
    }

    /// Fills row `i` of `masks` (`rows` rows of `words` words each) with node `i`'s mask (see the
    /// module docs); `ended` says whether the sequence ends in a state (a stop token accepted is
    /// always an end). Returns `Ok(false)` if `deadline` passed before every node was visited
    /// (the root's mask is always filled; rows not reached allow nothing), `Ok(true)` otherwise.
    pub fn traverse_draft_tree(
        &mut self,
        tree: DraftTree<'_>,
        masks: &mut [u32],
        words: usize,
        ended: &dyn Fn(&GrammarMatcher) -> bool,
        deadline: Option<Instant>,
    ) -> Result<bool, DraftTreeError> {
        let n = tree.tokens.len();
        if n == 0 || tree.next_token.len() != n || tree.next_sibling.len() != n {
            return Err(DraftTreeError::Lengths(
                tree.next_token.len(),
                tree.next_sibling.len(),
                n,
            ));
        }
        let size = self.grammar().vocab().size();
        let need = size.div_ceil(32);
        if words < need || words == 0 || masks.len() != n * words {
            return Err(DraftTreeError::Masks {
                rows: masks.len().checked_div(words).unwrap_or(0),
                words,
                nodes: n,
                need,
            });
        }
        let link = |node: usize, field: &'static str, value: i64| match value {
            -1 => Ok(None),
            v if v >= 0 && (v as usize) < n => Ok(Some(v as usize)),
            value => Err(DraftTreeError::BadIndex {
                node,
                field,
                value,
                nodes: n,
            }),
        };
        for i in 0..n {
            link(i, "next_token", tree.next_token[i])?;
            link(i, "next_sibling", tree.next_sibling[i])?;
        }
        if tree.next_sibling[0] != -1 {
            return Err(DraftTreeError::RootSibling(tree.next_sibling[0]));
        }
        // Every node is reached at most once: walk the links first, so that a malformed tree is
        // refused before any work.
        let mut seen = vec![false; n];
        let mut stack = vec![0usize];
        seen[0] = true;
        while let Some(node) = stack.pop() {
            let mut child = link(node, "next_token", tree.next_token[node])?;
            while let Some(c) = child {
                if std::mem::replace(&mut seen[c], true) {
                    return Err(DraftTreeError::Revisited(c));
                }
                stack.push(c);
                child = link(c, "next_sibling", tree.next_sibling[c])?;
            }
        }
        masks.fill(0);
        let start = self.num_steps();
        let done = self.fill_tree(tree, masks, words, ended, deadline, size);
        self.undo_to(start);
        Ok(done)
    }

    /// The traversal of a checked tree (steps are left for the caller to undo).
    fn fill_tree(
        &mut self,
        tree: DraftTree<'_>,
        masks: &mut [u32],
        words: usize,
        ended: &dyn Fn(&GrammarMatcher) -> bool,
        deadline: Option<Instant>,
        size: usize,
    ) -> bool {
        let start = self.num_steps();
        let fill = |m: &mut GrammarMatcher, masks: &mut [u32], node: usize| {
            if m.is_terminated() || ended(m) {
                return false;
            }
            let row = &mut masks[node * words..(node + 1) * words];
            if let Some(mut mask) = TokenBitmask::from_words(row, size) {
                m.fill_next_token_bitmask(&mut mask);
            }
            true
        };
        let children = |node: usize, base: usize, stack: &mut Vec<(usize, usize)>| {
            let mut child = tree.next_token[node];
            while child >= 0 {
                stack.push((child as usize, base));
                child = tree.next_sibling[child as usize];
            }
        };
        let mut stack = Vec::new();
        if fill(self, masks, 0) {
            children(0, start, &mut stack);
        }
        while let Some((node, base)) = stack.pop() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            self.undo_to(base);
            let ok = u32::try_from(tree.tokens[node])
                .ok()
                .filter(|&t| (t as usize) < size)
                .is_some_and(|t| self.accept_token(TokenId(t)));
            if ok && fill(self, masks, node) {
                children(node, self.num_steps(), &mut stack);
            }
        }
        true
    }

    /// Rolls back to `steps` steps taken (never more than were taken since).
    fn undo_to(&mut self, steps: usize) {
        let extra = self.num_steps().saturating_sub(steps);
        // Rolling back steps this matcher took itself cannot fail.
        let _ = self.rollback(extra);
    }
}
