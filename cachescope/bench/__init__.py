"""Benchmarks for the performance targets of DESIGN.md (`cachescope bench …`)."""
