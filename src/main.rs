//! The `vigil` command-line tool.

fn main() {}
