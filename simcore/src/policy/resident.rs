//! The bookkeeping every policy shares: which files it holds (id → arena slot), their entries,
//! and for a single resident set its byte capacity and usage. Policies keep only their own
//! ordering (lists, buckets, heaps) and call these to insert, evict and drop files, so the
//! byte accounting and eviction reports are written once.

use super::{Evictions, Outcome, Request};
use crate::util::arena::{Arena, List};
use crate::util::slotmap::SlotMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the shared bookkeeping needs from a policy's entry type.
pub trait Entry: Copy + Default {
    fn id(&self) -> u64;
    fn size(&self) -> u64;
    fn tier(&self) -> u8;
    /// When the file came in (`Request::ts`; 0 = not known).
    fn born(&self) -> u32;
}

/// `entry!(struct Entry { own fields })` defines a policy's entry: `id`, `size`, `tier` and
/// `born` (arrival time) first, then the policy's own fields (the order is the snapshot
/// format), with `Entry::of(req)` for the file a request brings in (own fields at their
/// default) and the `Entry` trait. `entry!(Type)` implements the trait for a struct with
/// those four fields.
macro_rules! entry {
    (struct $name:ident { $($(#[$doc:meta])* $field:ident: $ty:ty,)* }) => {
        #[derive(Clone, Copy, Default, Serialize, Deserialize)]
        struct $name {
            id: u64,
            size: u64,
            tier: u8,
            /// Arrival time (`Request::ts`).
            born: u32,
            $($(#[$doc])* $field: $ty,)*
        }
        impl $name {
            /// The entry of the file `req` brings in.
            #[inline(always)]
            #[allow(dead_code)]
            fn of(req: &$crate::policy::Request) -> Self {
                $name { id: req.id, size: req.size, tier: req.tier, born: req.ts, ..Default::default() }
            }
        }
        $crate::policy::resident::entry!($name);
    };
    (@fields $($field:ident: $t:ty),*) => {
        $(
            #[inline]
            fn $field(&self) -> $t {
                self.$field
            }
        )*
    };
    ($ty:ty) => {
        impl $crate::policy::resident::Entry for $ty {
            $crate::policy::resident::entry!(@fields id: u64, size: u64, tier: u8, born: u32);
        }
    };
}
pub(crate) use entry;

/// Tables of fewer files (up to ~0.5 MB of map and entries) get no prefetch hints.
const PREFETCH_MIN_FILES: usize = 8192;

/// Files known to a policy (resident or ghost): id → slot, and the entries in one arena, so
/// an entry keeps its slot while it moves between the policy's lists.
#[derive(Clone, Serialize, Deserialize)]
pub struct Table<E> {
    pub map: SlotMap,
    pub arena: Arena<E>,
}

impl<E: Entry> Default for Table<E> {
    fn default() -> Self {
        Table { map: SlotMap::default(), arena: Arena::new() }
    }
}

impl<E: Entry> Table<E> {
    #[inline(always)]
    pub fn slot(&self, id: u64) -> Option<u32> {
        self.map.get(id)
    }
    /// Memory hints for a request coming soon (see `Policy::prefetch`): its place in the map,
    /// then its entry.
    #[inline(always)]
    pub fn prefetch(&self, id: u64, stage: super::Stage) {
        // a small table stays in the CPU's caches anyway: hints would only cost instructions
        if self.map.len() < PREFETCH_MIN_FILES {
            return;
        }
        match stage {
            super::Stage::Place => self.map.prefetch(id),
            super::Stage::Entry => {
                if let Some(slot) = self.map.get(id) {
                    self.arena.prefetch(slot);
                }
            }
        }
    }
    #[inline(always)]
    pub fn get(&self, slot: u32) -> &E {
        self.arena.get(slot)
    }
    /// Dense keys from now on (see `Policy::use_dense_ids`); only before the first file.
    pub fn use_dense_ids(&mut self) -> bool {
        if self.map.is_empty() {
            self.map = SlotMap::dense();
        }
        self.map.is_dense()
    }
    #[inline(always)]
    pub fn get_mut(&mut self, slot: u32) -> &mut E {
        self.arena.get_mut(slot)
    }
    /// A new entry, not yet in any list.
    #[inline(always)]
    pub fn insert(&mut self, e: E) -> u32 {
        let slot = self.arena.alloc(e);
        self.map.insert(e.id(), slot);
        slot
    }
    /// Forget an entry (unlinked from its list first); returns it.
    #[inline(always)]
    pub fn free(&mut self, slot: u32) -> E {
        let e = self.arena.release(slot);
        self.map.remove(e.id());
        e
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.map.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Lists of files keyed by a rank (LFU's frequency, LFUDA's key), lowest first; only
/// non-empty lists are kept. Head = newest arrival.
pub type Buckets = BTreeMap<u64, List>;

/// One resident set of byte capacity `capacity`: a `Table` plus the bytes it holds.
#[derive(Clone, Serialize, Deserialize)]
pub struct Resident<E> {
    pub capacity: u64,
    pub used: u64,
    pub table: Table<E>,
}

impl<E: Entry> Resident<E> {
    pub fn new(capacity: u64) -> Self {
        Resident { capacity, used: 0, table: Table::default() }
    }

    #[inline(always)]
    pub fn slot(&self, id: u64) -> Option<u32> {
        self.table.slot(id)
    }
    #[inline(always)]
    pub fn get(&self, slot: u32) -> &E {
        self.table.get(slot)
    }
    #[inline(always)]
    pub fn get_mut(&mut self, slot: u32) -> &mut E {
        self.table.get_mut(slot)
    }
    #[inline(always)]
    pub fn arena(&mut self) -> &mut Arena<E> {
        &mut self.table.arena
    }

    /// Larger than the whole cache: never inserted, evicts nothing (libCacheSim's rule).
    #[inline(always)]
    pub fn too_big(&self, size: u64) -> bool {
        size > self.capacity
    }

    /// `used + size > capacity`, without the sum (it may pass u64 near 2^64).
    #[inline(always)]
    pub fn must_evict(&self, size: u64) -> bool {
        size > self.capacity - self.used
    }

    /// Insert a file (the caller made room); returns its slot.
    #[inline(always)]
    pub fn insert(&mut self, e: E) -> u32 {
        self.used += e.size();
        self.table.insert(e)
    }

    /// Evict a file already unlinked from the policy's order, reporting it.
    #[inline(always)]
    pub fn evict(&mut self, slot: u32, ev: &mut Evictions) -> E {
        let e = self.drop_slot(slot);
        ev.push(e.size(), e.tier(), e.id(), e.born());
        e
    }

    /// Drop a file already unlinked from the policy's order (deleted at the source).
    #[inline(always)]
    pub fn drop_slot(&mut self, slot: u32) -> E {
        let e = self.table.free(slot);
        self.used -= e.size();
        e
    }

    /// The whole-file miss path: too big → not cached; else `evict_one` until the file fits,
    /// then `insert` it and `link` it into the policy's `order` (its lists, buckets or heap).
    #[inline(always)]
    pub fn admit<O: ?Sized>(
        &mut self,
        req: &Request,
        ev: &mut Evictions,
        entry: E,
        order: &mut O,
        mut evict_one: impl FnMut(&mut Self, &mut O, &mut Evictions),
        link: impl FnOnce(&mut Self, &mut O, u32),
    ) -> Outcome {
        if self.too_big(req.size) {
            return Outcome::miss(0);
        }
        while self.must_evict(req.size) {
            evict_one(self, order, ev);
        }
        let slot = self.insert(entry);
        link(self, order, slot);
        Outcome::admitted(req)
    }

    /// Evict the oldest file of `list` (the tail): the eviction of a policy with one queue.
    #[inline(always)]
    pub fn evict_tail(&mut self, list: &mut List, ev: &mut Evictions) {
        let victim = self.arena().pop_back(list).expect("used > 0 implies a resident file");
        self.evict(victim, ev);
    }

    /// Link a new file at the newest end of `list` (the head).
    #[inline(always)]
    pub fn push_head(&mut self, list: &mut List, slot: u32) {
        self.arena().push_front(list, slot);
    }

    /// Drop a file by id (deleted at the source) once `unlink` took it out of the policy's
    /// order; its arrival time if it was resident.
    #[inline]
    pub fn remove(&mut self, id: u64, unlink: impl FnOnce(&mut Self, u32)) -> Option<u32> {
        let slot = self.slot(id)?;
        unlink(self, slot);
        Some(self.drop_slot(slot).born())
    }

    /// Link `slot` at the newest end of bucket `key`.
    #[inline(always)]
    pub fn bucket_push(&mut self, buckets: &mut Buckets, key: u64, slot: u32) {
        self.arena().push_front(buckets.entry(key).or_default(), slot);
    }

    /// Unlink `slot` from bucket `key`, dropping the bucket when it empties.
    #[inline]
    pub fn bucket_unlink(&mut self, buckets: &mut Buckets, key: u64, slot: u32) {
        let list = buckets.get_mut(&key).expect("a resident file is in its bucket");
        self.arena().unlink(list, slot);
        if list.is_empty() {
            buckets.remove(&key);
        }
    }

    /// Evict the oldest file of the lowest bucket; returns that bucket's key.
    #[inline]
    pub fn bucket_evict_lowest(&mut self, buckets: &mut Buckets, ev: &mut Evictions) -> u64 {
        let mut lowest = buckets.first_entry().expect("used > 0 implies a resident file");
        let key = *lowest.key();
        let slot = self.arena().pop_back(lowest.get_mut()).expect("buckets are non-empty");
        if lowest.get().is_empty() {
            lowest.remove();
        }
        self.evict(slot, ev);
        key
    }

    #[inline(always)]
    pub fn contains(&self, id: u64) -> bool {
        self.table.map.contains_key(id)
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.table.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// `contains`, `used_bytes`, `capacity` and `len` of a policy whose files are all in the
/// `Resident` field named here; `resident_queries!(res, list: field)` also `remove` for a
/// policy that keeps them in the one `List` named.
macro_rules! resident_queries {
    ($field:ident, list: $list:ident) => {
        fn remove(&mut self, id: u64) -> Option<u32> {
            self.$field.remove(id, |r, slot| r.arena().unlink(&mut self.$list, slot))
        }
        $crate::policy::resident_queries!($field);
    };
    ($field:ident) => {
        fn contains(&self, id: u64) -> bool {
            self.$field.contains(id)
        }
        fn used_bytes(&self) -> u64 {
            self.$field.used
        }
        fn capacity(&self) -> u64 {
            self.$field.capacity
        }
        fn len(&self) -> usize {
            self.$field.len()
        }
        fn use_dense_ids(&mut self) -> bool {
            self.$field.table.use_dense_ids()
        }
        #[inline(always)]
        fn prefetch(&self, id: u64, stage: $crate::policy::Stage) {
            self.$field.table.prefetch(id, stage)
        }
    };
}
pub(crate) use resident_queries;

/// An entry that sits in one of several queues (S3-FIFO's small/main/ghost, 2Q's A1in/Am/A1out,
/// ARC's T1/T2/B1/B2): the queue it is in is part of the entry.
pub trait Queued: Entry {
    fn queue(&self) -> u8;
    fn set_queue(&mut self, q: u8);
}

/// Implements `Entry` and `Queued` for a struct with `id`, `size`, `tier`, `born` and a `u8`
/// queue field; `queued_entry!(struct Entry { … } queue: field)` also defines it (see `entry!`).
macro_rules! queued_entry {
    (struct $name:ident { $($body:tt)* } queue: $field:ident) => {
        $crate::policy::resident::entry!(struct $name { $($body)* });
        $crate::policy::resident::queued_entry!(@queued $name, $field);
    };
    (@queued $ty:ty, $field:ident) => {
        impl $crate::policy::resident::Queued for $ty {
            #[inline]
            fn queue(&self) -> u8 {
                self.$field
            }
            #[inline]
            fn set_queue(&mut self, q: u8) {
                self.$field = q;
            }
        }
    };
    ($ty:ty, $field:ident) => {
        $crate::policy::resident::entry!($ty);
        $crate::policy::resident::queued_entry!(@queued $ty, $field);
    };
}
pub(crate) use queued_entry;

/// What a request finds in a queued policy (`Queues::find`).
pub enum Found {
    /// A resident file, at this slot.
    Resident(u32),
    /// A ghost, forgotten now: the file comes back as new, with the history the hit tells.
    Ghost,
    New,
}

/// Up to four queues in one table, each with the bytes of its entries. Head = newest end.
/// Queues 0 and 1 hold resident files, 2 and 3 ghosts (ids only: evicted, remembered).
#[derive(Clone, Copy, Default, Serialize, Deserialize)]
pub struct Queues {
    pub lists: [List; 4],
    pub bytes: [u64; 4],
}

impl Queues {
    #[inline]
    pub fn len(&self, q: u8) -> usize {
        self.lists[q as usize].len()
    }
    #[inline]
    pub fn is_empty(&self, q: u8) -> bool {
        self.lists[q as usize].is_empty()
    }
    /// Link a detached entry at the newest end of queue `q`.
    #[inline]
    pub fn push<E: Queued>(&mut self, table: &mut Table<E>, q: u8, slot: u32) {
        let e = table.arena.get_mut(slot);
        e.set_queue(q);
        self.bytes[q as usize] += e.size();
        table.arena.push_front(&mut self.lists[q as usize], slot);
    }
    /// Unlink the oldest entry of queue `q` (it stays in the table).
    #[inline]
    pub fn pop_tail<E: Queued>(&mut self, table: &mut Table<E>, q: u8) -> u32 {
        let slot = table.arena.pop_back(&mut self.lists[q as usize]).expect("non-empty queue");
        self.bytes[q as usize] -= table.arena.get(slot).size();
        slot
    }
    /// Unlink an entry from whichever queue holds it (it stays in the table).
    #[inline]
    pub fn unlink<E: Queued>(&mut self, table: &mut Table<E>, slot: u32) {
        let e = *table.arena.get(slot);
        table.arena.unlink(&mut self.lists[e.queue() as usize], slot);
        self.bytes[e.queue() as usize] -= e.size();
    }
    #[inline]
    pub fn move_to_front<E: Queued>(&mut self, table: &mut Table<E>, slot: u32) {
        let q = table.arena.get(slot).queue();
        table.arena.move_to_front(&mut self.lists[q as usize], slot);
    }
    /// A new file (or ghost) at the newest end of queue `q`.
    #[inline]
    pub fn insert<E: Queued>(&mut self, table: &mut Table<E>, q: u8, e: E) {
        let slot = table.insert(e);
        self.push(table, q, slot);
    }
    /// Unlink an entry and forget it (a ghost that was hit, or dropped for room).
    #[inline]
    pub fn forget<E: Queued>(&mut self, table: &mut Table<E>, slot: u32) -> E {
        self.unlink(table, slot);
        table.free(slot)
    }
    /// The file `id` if resident; a ghost hit is forgotten (S3-FIFO and 2Q bring the file back
    /// into their main queue, as new).
    #[inline(always)]
    pub fn find<E: Queued>(&mut self, table: &mut Table<E>, id: u64) -> Found {
        match table.slot(id) {
            Some(slot) if Queues::is_resident(table.get(slot).queue()) => Found::Resident(slot),
            Some(slot) => {
                self.forget(table, slot);
                Found::Ghost
            }
            None => Found::New,
        }
    }
    /// Evict the oldest file of queue `q` without a ghost, reporting it.
    #[inline]
    pub fn evict_tail<E: Queued>(&mut self, table: &mut Table<E>, q: u8, ev: &mut Evictions) {
        let slot = self.pop_tail(table, q);
        let e = table.free(slot);
        ev.push(e.size(), e.tier(), e.id(), e.born());
    }
    /// Whether queue `q` holds resident files (not ghosts).
    #[inline(always)]
    pub fn is_resident(q: u8) -> bool {
        q < 2
    }
    /// Bytes of the resident files.
    #[inline(always)]
    pub fn resident_bytes(&self) -> u64 {
        self.bytes[0] + self.bytes[1]
    }
    #[inline]
    pub fn resident_len(&self) -> usize {
        self.lists[0].len() + self.lists[1].len()
    }
    /// Drop a file by id (deleted at the source): it leaves its queue and the table. Returns
    /// its arrival time if it was resident (not a ghost).
    #[inline]
    pub fn remove<E: Queued>(&mut self, table: &mut Table<E>, id: u64) -> Option<u32> {
        let slot = table.slot(id)?;
        let e = self.forget(table, slot);
        Queues::is_resident(e.queue()).then_some(e.born())
    }
}

/// `remove`, `contains`, `used_bytes`, `capacity`, `len`, `prefetch` and `use_dense_ids` of a
/// policy whose files are in the fields `table` (a `Table`) and `q` (its `Queues`), within the
/// byte capacity `capacity`.
macro_rules! queued_queries {
    () => {
        fn remove(&mut self, id: u64) -> Option<u32> {
            self.q.remove(&mut self.table, id)
        }
        fn contains(&self, id: u64) -> bool {
            self.table.slot(id).is_some_and(|s| Queues::is_resident($crate::policy::resident::Queued::queue(self.table.get(s))))
        }
        #[inline]
        fn used_bytes(&self) -> u64 {
            self.q.resident_bytes()
        }
        fn capacity(&self) -> u64 {
            self.capacity
        }
        fn len(&self) -> usize {
            self.q.resident_len()
        }
        fn use_dense_ids(&mut self) -> bool {
            self.table.use_dense_ids()
        }
        #[inline(always)]
        fn prefetch(&self, id: u64, stage: $crate::policy::Stage) {
            self.table.prefetch(id, stage)
        }
    };
}
pub(crate) use queued_queries;
