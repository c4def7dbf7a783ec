//! Strongly connected components of a graph given by a successor function (iterative Tarjan, so
//! deep graphs cannot overflow the stack).
//!
//! Invariant of [`for_each_component`]: every vertex is in exactly one component; a component comes
//! after every component it has an edge into (callees before callers); members are sorted.
//! [`Lists`] holds a graph's adjacency flat.

/// A list of nodes per node, stored flat (compressed rows): a large automaton has tens of
/// thousands of states and few reference edges, so a vector per state would cost more than the
/// lists.
pub struct Lists {
    /// Node `x`'s list is `items[ends[x - 1]..ends[x]]` (from 0 for the first).
    ends: Vec<u32>,
    items: Vec<u32>,
}

impl Lists {
    /// The lists of `n` nodes holding what `edges` adds: `add(x, y)` appends `y` to `x`'s list
    /// ([`Lists::from_pairs`] of the pairs added).
    pub fn build(n: usize, edges: impl FnOnce(&mut dyn FnMut(usize, u32))) -> Lists {
        let mut pairs = Vec::new();
        edges(&mut |x, y| pairs.push((x as u32, y)));
        Lists::from_pairs(n, &pairs)
    }

    /// The lists of `n` nodes holding `pairs`: `(x, y)` appends `y` to `x`'s list.
    pub fn from_pairs(n: usize, pairs: &[(u32, u32)]) -> Lists {
        let mut ends = vec![0u32; n];
        for &(x, _) in pairs {
            ends[x as usize] += 1;
        }
        let mut total = 0;
        for end in &mut ends {
            total += *end;
            *end = total;
        }
        let mut items = vec![0u32; total as usize];
        let mut fill = ends.clone();
        for &(x, y) in pairs {
            let at = &mut fill[x as usize];
            *at -= 1;
            items[*at as usize] = y;
        }
        Lists { ends, items }
    }

    /// Node `x`'s list.
    pub fn of(&self, x: usize) -> &[u32] {
        let lo = if x == 0 { 0 } else { self.ends[x - 1] };
        &self.items[lo as usize..self.ends[x] as usize]
    }
}

/// Calls `f` with the members of each strongly connected component of the graph on `0..n` whose
/// `i`-th edge out of `v` leads to `successor(v, i)` (`None` past the last one), without
/// allocating per component (a mostly acyclic automaton has as many components as states).
pub fn for_each_component(
    n: usize,
    successor: impl Fn(usize, usize) -> Option<usize>,
    mut f: impl FnMut(&[usize]),
) {
    let mut index = vec![u32::MAX; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut frames: Vec<(usize, usize)> = Vec::new();
    let mut members = Vec::new();
    let mut next = 0u32;
    for root in 0..n {
        if index[root] != u32::MAX {
            continue;
        }
        frames.push((root, 0));
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut i)) = frames.last_mut() {
            if let Some(w) = successor(v, *i) {
                *i += 1;
                if index[w] == u32::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    frames.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                members.clear();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                members.sort_unstable();
                f(&members);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_and_chains() {
        // 0 -> 1 -> 2 -> 1, 2 -> 3, 4 alone with a self edge.
        let edges: Vec<Vec<usize>> = vec![vec![1], vec![2], vec![1, 3], vec![], vec![4]];
        let mut c = Vec::new();
        for_each_component(5, |v, i| edges[v].get(i).copied(), |m| c.push(m.to_vec()));
        assert_eq!(c, vec![vec![3], vec![1, 2], vec![0], vec![4]]);
    }
}
