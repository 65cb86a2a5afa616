//! Engine-only timing of a bank on a trace held in memory (no reader, no Python): for tuning
//! the policies and the bank loop. `cargo run --release --example bank_memory -- TRACE FORMAT
//! POLICIES SIZES [REPEAT]`; prints CPU ns per cache-request of the best run (one thread:
//! run with RAYON_NUM_THREADS=1 to see one core's cost).

use simcore::bank::{Bank, Events, OP_READ};
use simcore::reader::{read_all, Format, BATCH_ROWS};
use simcore::shadow::CacheSpec;
use std::time::Instant;

#[path = "util/cpu.rs"]
mod cpu;
use cpu::cpu_seconds;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: bank_memory TRACE csv|oracle-general POLICIES SIZES [REPEAT]");
        std::process::exit(2);
    }
    let (cols, _) = read_all(&a[1], Format::parse(&a[2]).unwrap()).unwrap();
    let repeat: usize = a.get(5).map_or(3, |r| r.parse().unwrap());
    let specs: Vec<CacheSpec> = a[3]
        .split(',')
        .flat_map(|p| a[4].split(',').map(move |s| CacheSpec::new(p, s.parse().unwrap())))
        .collect();
    let n_caches = specs.len();
    let rows = BATCH_ROWS * n_caches.clamp(1, 4);
    let ops = vec![OP_READ; rows];
    // TIMED=1: event times (100 events a second) so the caches also count residence ages
    let ts: Option<Vec<u32>> = std::env::var("TIMED").ok().map(|_| (0..cols.len() as u32).map(|i| 1_000_000 + i / 100).collect());
    let mut best = f64::MAX;
    for _ in 0..repeat {
        let mut bank = Bank::new(specs.clone(), 256).unwrap();
        let (t, c) = (Instant::now(), cpu_seconds());
        let mut i = 0;
        while i < cols.len() {
            let j = (i + rows).min(cols.len());
            let ev = Events {
                id: &cols.id[i..j],
                size: &cols.size[i..j],
                bytes_read: &cols.bytes_read[i..j],
                tier: &cols.tier[i..j],
                op: &ops[..j - i],
                next_access: None,
                window: None,
                ts: ts.as_ref().map(|t| &t[i..j]),
                key: None,
                duration_us: None,
            };
            bank.feed_totals(&ev).unwrap();
            i = j;
        }
        let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
        let hits: u128 = bank.totals().chunks(simcore::stats::N_FIELDS).map(|c| c[simcore::stats::HITS]).sum();
        let per = cpu * 1e9 / (cols.len() * n_caches) as f64;
        println!("{n_caches} caches, {} requests, {hits} hits: {wall:.3} s wall, {cpu:.2} s CPU, {per:.1} ns CPU per cache-request", cols.len());
        best = best.min(per);
    }
    println!("best: {best:.1} ns CPU per cache-request");
}
