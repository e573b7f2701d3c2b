//! Criterion benches of the canonical tier beside hand-written baselines.

fn main() {}
