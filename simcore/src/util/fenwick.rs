//! Fenwick (binary indexed) tree of byte sums over positions 1..=n.
//!
//! Sums are exact: the tree holds u64 nodes while the total is below 2^64 (every node is a sum
//! of a part of it, so none wraps) and widens to u128 nodes the first time the total would pass
//! 2^64 (files near 2^63 bytes) — u128 nodes everywhere cost the LRU curve a third of its speed.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
enum Tree {
    Narrow(Vec<u64>),
    Wide(Vec<u128>),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fenwick {
    tree: Tree,
    /// Sum of all values.
    total: u128,
}

impl Default for Fenwick {
    fn default() -> Self {
        Fenwick::new(0)
    }
}

impl Fenwick {
    pub fn new(n: usize) -> Self {
        Fenwick { tree: Tree::Narrow(vec![0; n + 1]), total: 0 }
    }
    pub fn capacity(&self) -> usize {
        match &self.tree {
            Tree::Narrow(t) => t.len() - 1,
            Tree::Wide(t) => t.len() - 1,
        }
    }
    #[cold]
    fn widen(&mut self) {
        if let Tree::Narrow(t) = &self.tree {
            self.tree = Tree::Wide(t.iter().map(|&v| v as u128).collect());
        }
    }
    #[inline]
    pub fn add(&mut self, pos: usize, delta: u64) {
        self.total += delta as u128;
        if self.total > u64::MAX as u128 {
            self.widen();
        }
        match &mut self.tree {
            Tree::Narrow(t) => {
                let mut i = pos;
                while i < t.len() {
                    t[i] += delta;
                    i += i & i.wrapping_neg();
                }
            }
            Tree::Wide(t) => {
                let mut i = pos;
                while i < t.len() {
                    t[i] += delta as u128;
                    i += i & i.wrapping_neg();
                }
            }
        }
    }
    #[inline]
    pub fn sub(&mut self, pos: usize, delta: u64) {
        self.total -= delta as u128;
        match &mut self.tree {
            Tree::Narrow(t) => {
                let mut i = pos;
                while i < t.len() {
                    t[i] -= delta;
                    i += i & i.wrapping_neg();
                }
            }
            Tree::Wide(t) => {
                let mut i = pos;
                while i < t.len() {
                    t[i] -= delta as u128;
                    i += i & i.wrapping_neg();
                }
            }
        }
    }
    /// Sum of positions 1..=pos.
    #[inline]
    pub fn prefix(&self, pos: usize) -> u128 {
        let mut i = pos;
        match &self.tree {
            Tree::Narrow(t) => {
                let mut s = 0u64;
                while i > 0 {
                    s += t[i];
                    i &= i - 1;
                }
                s as u128
            }
            Tree::Wide(t) => {
                let mut s = 0u128;
                while i > 0 {
                    s += t[i];
                    i &= i - 1;
                }
                s
            }
        }
    }
    /// Build from dense values at positions 1..=values.len(), in O(n).
    pub fn from_values(values: &[u64], capacity: usize) -> Self {
        let total: u128 = values.iter().map(|&v| v as u128).sum();
        let mut tree = vec![0u128; capacity + 1];
        for (t, &v) in tree[1..=values.len()].iter_mut().zip(values) {
            *t = v as u128;
        }
        for i in 1..=capacity {
            let j = i + (i & i.wrapping_neg());
            if j <= capacity {
                tree[j] += tree[i];
            }
        }
        let tree = if total > u64::MAX as u128 { Tree::Wide(tree) } else { Tree::Narrow(tree.into_iter().map(|v| v as u64).collect()) };
        Fenwick { tree, total }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_rebuild_agree() {
        let vals = [5u64, 0, 3, 9, 1, 4];
        let mut f = Fenwick::new(8);
        for (i, v) in vals.iter().enumerate() {
            f.add(i + 1, *v);
        }
        let g = Fenwick::from_values(&vals, 8);
        for p in 0..=8 {
            let expect: u128 = vals.iter().take(p).map(|&v| v as u128).sum();
            assert_eq!(f.prefix(p), expect);
            assert_eq!(g.prefix(p), expect);
        }
        f.sub(4, 9);
        assert_eq!(f.prefix(6), 13);
    }
}
