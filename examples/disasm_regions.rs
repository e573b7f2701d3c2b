//! Prints the quickened code of every fused region of a spec (a tool for tuning superinstructions).
//!
//! `cargo run --example disasm_regions -- examples/fusion.dsrv`

use vigil::{Monitor, Spec, Tier};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: disasm_regions SPEC")?;
    let source = std::fs::read_to_string(&path)?;
    let spec = Spec::parse(&path, &source).map_err(|d| d.render())?;
    let monitor = Monitor::builder(&spec).tier(Tier::Quickened).build();
    for (i, lowered) in monitor.engine().lowered().enumerate() {
        let code = scalar_ir::QuickCode::compile(&lowered.program)?;
        println!("region r{i}:\n{}", code.disasm());
    }
    Ok(())
}
