//! Prints the statistics of a batch run of the chain scenario (a debugging aid for the batch kernel).

use vigil::{Monitor, OutputBatch, Spec, Tier, Value};

fn main() {
    let spec = Spec::parse("chain.dsrv", include_str!("chain.dsrv")).unwrap();
    let mut m = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
    let mut rows = m.batch();
    for i in 0..100_000i64 {
        rows.push_row([
            Some(Value::Int(i % 41 - 20)),
            Some(Value::Int(i % 37 - 18)),
            Some(Value::Bool(i % 3 == 0)),
        ])
        .unwrap();
    }
    let mut out = OutputBatch::new();
    m.run_batch(&rows, &mut out).unwrap();
    println!("{}", m.stats());
}
