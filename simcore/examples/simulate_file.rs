//! Engine-only timing of a whole-file simulation (no Python): for tuning the reader and the
//! bank. `cargo run --release --example simulate_file -- TRACE FORMAT POLICIES SIZES`
//! (comma-separated policies and byte sizes); prints the wall and CPU seconds.

use simcore::reader::Format;
use simcore::shadow::CacheSpec;
use std::time::Instant;

#[path = "util/cpu.rs"]
mod cpu;
use cpu::cpu_seconds;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 {
        eprintln!("usage: simulate_file TRACE csv|oracle-general POLICIES SIZES");
        std::process::exit(2);
    }
    let format = Format::parse(&a[2]).unwrap();
    let specs: Vec<CacheSpec> = a[3]
        .split(',')
        .flat_map(|p| a[4].split(',').map(move |s| CacheSpec::new(p, s.parse().unwrap())))
        .collect();
    let t = Instant::now();
    let run = simcore::run::simulate_file(&a[1], format, specs).unwrap();
    let hits: u128 = run.totals.chunks(simcore::stats::N_FIELDS).map(|c| c[simcore::stats::HITS]).sum();
    println!("{} rows, {} hits in all caches: {:.3} s wall, {:.2} s CPU", run.rows, hits, t.elapsed().as_secs_f64(), cpu_seconds());
}
