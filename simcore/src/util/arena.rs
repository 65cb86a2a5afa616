//! Intrusive doubly linked lists in one slab (`Arena`), addressed by `u32` slots.
//!
//! Several lists (ARC's T1/T2/B1/B2, SLRU segments, S3-FIFO queues) can live in one arena,
//! so an entry moves between lists without changing its slot and its map entry stays valid.

use serde::{Deserialize, Serialize};

pub const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Node<T> {
    val: T,
    prev: u32,
    next: u32,
}

/// Head/tail of one list inside an arena. Head is the most recently inserted end.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct List {
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for List {
    fn default() -> Self {
        List { head: NIL, tail: NIL, len: 0 }
    }
}

impl List {
    pub fn head(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }
    pub fn tail(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Arena<T> {
    nodes: Vec<Node<T>>,
    free: Vec<u32>,
}

impl<T: Copy + Default> Default for Arena<T> {
    fn default() -> Self {
        Arena { nodes: Vec::new(), free: Vec::new() }
    }
}

impl<T: Copy + Default> Arena<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Allocate a detached node holding `val`.
    #[inline]
    pub fn alloc(&mut self, val: T) -> u32 {
        let node = Node { val, prev: NIL, next: NIL };
        if let Some(i) = self.free.pop() {
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        }
    }

    /// Release a detached node (unlink it first) and return its value.
    #[inline]
    pub fn release(&mut self, i: u32) -> T {
        let v = self.nodes[i as usize].val;
        self.nodes[i as usize].val = T::default();
        self.free.push(i);
        v
    }

    /// Memory hint: load node `i` (no effect on results; `i` may be out of range).
    #[inline(always)]
    pub fn prefetch(&self, i: u32) {
        if let Some(n) = self.nodes.get(i as usize) {
            crate::util::slotmap::prefetch(n as *const Node<T>);
        }
    }

    #[inline]
    pub fn get(&self, i: u32) -> &T {
        &self.nodes[i as usize].val
    }

    #[inline]
    pub fn get_mut(&mut self, i: u32) -> &mut T {
        &mut self.nodes[i as usize].val
    }

    /// Next node towards the tail (older end).
    #[inline]
    pub fn next(&self, i: u32) -> Option<u32> {
        let n = self.nodes[i as usize].next;
        (n != NIL).then_some(n)
    }

    /// Previous node towards the head (newer end).
    #[inline]
    pub fn prev(&self, i: u32) -> Option<u32> {
        let p = self.nodes[i as usize].prev;
        (p != NIL).then_some(p)
    }

    #[inline]
    pub fn push_front(&mut self, l: &mut List, i: u32) {
        self.push::<true>(l, i);
    }

    #[inline]
    pub fn push_back(&mut self, l: &mut List, i: u32) {
        self.push::<false>(l, i);
    }

    /// Link the detached node `i` in at the head of `l` (`FRONT`) or at its tail: one body for
    /// both ends, the branches on `FRONT` fold away when compiled.
    #[inline(always)]
    fn push<const FRONT: bool>(&mut self, l: &mut List, i: u32) {
        let old = if FRONT { l.head } else { l.tail };
        let n = &mut self.nodes[i as usize];
        (n.prev, n.next) = if FRONT { (NIL, old) } else { (old, NIL) };
        if old == NIL {
            (l.head, l.tail) = (i, i);
        } else if FRONT {
            self.nodes[old as usize].prev = i;
            l.head = i;
        } else {
            self.nodes[old as usize].next = i;
            l.tail = i;
        }
        l.len += 1;
    }

    #[inline]
    pub fn unlink(&mut self, l: &mut List, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            l.head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            l.tail = prev;
        }
        let n = &mut self.nodes[i as usize];
        n.prev = NIL;
        n.next = NIL;
        l.len -= 1;
    }

    #[inline]
    pub fn move_to_front(&mut self, l: &mut List, i: u32) {
        if l.head != i {
            self.unlink(l, i);
            self.push_front(l, i);
        }
    }

    /// Unlink and return the tail slot (the node stays allocated).
    #[inline]
    pub fn pop_back(&mut self, l: &mut List) -> Option<u32> {
        let t = l.tail;
        if t == NIL {
            return None;
        }
        self.unlink(l, t);
        Some(t)
    }

    pub fn len(&self) -> usize {
        self.nodes.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_share_an_arena() {
        let mut a: Arena<u64> = Arena::new();
        let (mut l1, mut l2) = (List::default(), List::default());
        let x = a.alloc(1);
        let y = a.alloc(2);
        let z = a.alloc(3);
        a.push_front(&mut l1, x);
        a.push_front(&mut l1, y);
        a.push_back(&mut l1, z);
        // l1: y x z
        assert_eq!(l1.head(), Some(y));
        assert_eq!(l1.tail(), Some(z));
        a.unlink(&mut l1, x);
        a.push_front(&mut l2, x);
        assert_eq!((l1.len(), l2.len()), (2, 1));
        assert_eq!(a.next(y), Some(z));
        a.move_to_front(&mut l1, z);
        assert_eq!(a.pop_back(&mut l1), Some(y));
        assert_eq!(a.release(y), 2);
        assert_eq!(*a.get(x), 1);
        assert_eq!(a.alloc(9), y); // freed slots are reused
    }
}
