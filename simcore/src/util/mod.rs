pub mod arena;
pub mod fenwick;
pub mod hash;
pub mod slotmap;
pub mod pool;
