//! The Rust examples of docs/library.md, each run between `// guide` markers with the setup the
//! page leaves out; `every_rust_block_of_the_library_guide_runs` (tests/it/docs.rs) checks that
//! each block of the page appears here verbatim, so the guide's calls compile and run as written.

use std::error::Error;
use vigil::time::Time;
use vigil::{KeyedMonitor, Monitor, Sample, Spec, Tier, Value};

type Result = std::result::Result<(), Box<dyn Error>>;

fn sum_spec() -> std::result::Result<Spec, Box<dyn Error>> {
    Ok(Spec::parse(
        "sum.dsrv",
        "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x",
    )?)
}

#[test]
fn a_first_monitor() -> Result {
    // guide
    use vigil::{Monitor, Sample, Spec, Tier, Value};

    let spec = Spec::parse(
        "sum.dsrv",
        "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x",
    )?;
    let mut monitor = Monitor::builder(&spec).tier(Tier::Auto).build();
    let row = monitor.row().set("x", 5)?; // a row by input name, checked as it is built
    let outputs = monitor.step(&row)?; // a view of this step's printed outputs
    assert_eq!(
        (outputs.step(), outputs.get(0)),
        (0, Sample::Value(Value::Int(5)))
    );
    println!("{}", monitor.stats()); // rows per tier, declines by reason, promotions …
    // guide end
    Ok(())
}

#[test]
fn scalar_rows() -> Result {
    let spec = sum_spec()?;
    let mut monitor = Monitor::builder(&spec).build();
    // guide
    let mut row = monitor.scalar_row();
    let x = row.input("x")?;
    let total = monitor.output_index("total").expect("an output");
    for v in [1, 2, 3] {
        row.set_int(x, v)?;
        let out = monitor.step_scalars(&row)?;
        if let Some(t) = out.int(total) {
            println!("total = {t}");
        }
    }
    // guide end
    assert_eq!(monitor.output("total"), Some(Sample::Value(Value::Int(6))));
    Ok(())
}

#[test]
fn a_stepper() -> Result {
    let spec = sum_spec()?;
    let mut monitor = Monitor::builder(&spec).build();
    // guide
    let total = monitor.output_index("total").expect("an output");
    let mut stepper = monitor.stepper();
    let x = stepper.input("x")?;
    for v in [1, 2, 3] {
        stepper.set_int(x, v)?;
        if let Some(t) = stepper.step()?.int(total) {
            println!("total = {t}");
        }
    }
    // guide end
    drop(stepper);
    assert_eq!(monitor.output("total"), Some(Sample::Value(Value::Int(6))));
    Ok(())
}

#[test]
fn outputs_by_name() -> Result {
    let spec = Spec::parse(
        "hot.dsrv",
        "in temp: Float\nout hot: Bool\nhot = temp > 30.0",
    )?;
    let mut monitor = Monitor::builder(&spec).build();
    let row = monitor.row().set("temp", 31.5)?;
    let outputs = monitor.step(&row)?;
    // guide
    for (name, sample) in outputs.named() {
        println!("{name}[{}] = {sample}", outputs.step());
    }
    let hot = outputs.by_name("hot"); // Option<Sample>: None if no output is so named
    // guide end
    assert_eq!(hot, Some(Sample::Value(Value::Bool(true))));
    Ok(())
}

#[test]
fn snapshots() -> Result {
    let spec = sum_spec()?;
    let mut monitor = Monitor::builder(&spec).build();
    monitor.step([Some(Value::Int(4))])?;
    // guide
    let bytes = monitor.snapshot().to_bytes(); // save …
    let snapshot = vigil::Snapshot::from_bytes(&bytes)?; // … load, later
    let mut monitor = Monitor::builder(&spec)
        .tier(Tier::Auto)
        .restore(&snapshot)?
        .build();
    // guide end
    monitor.step([Some(Value::Int(1))])?;
    assert_eq!(monitor.output("total"), Some(Sample::Value(Value::Int(5))));
    Ok(())
}

#[test]
fn editing_a_running_monitor() -> Result {
    let spec = sum_spec()?;
    let mut monitor = Monitor::builder(&spec).build();
    monitor.step([Some(Value::Int(4))])?;
    let edited = Spec::parse(
        "sum.dsrv",
        "in x: Int\nout total: Int\nout twice: Int\ntotal = default(total[1], 0) + x\ntwice = total * 2",
    )?;
    // guide
    let (snapshot, repair) = monitor.repair(&edited)?;
    let mut monitor = Monitor::builder(&edited)
        .tier(Tier::Auto)
        .restore(&snapshot)?
        .build();
    // guide end
    let _ = repair;
    monitor.step([Some(Value::Int(1))])?;
    assert_eq!(monitor.output("twice"), Some(Sample::Value(Value::Int(10))));
    Ok(())
}

#[test]
fn keyed_monitors() -> Result {
    // guide
    use vigil::{Key, KeyedMonitor, Sample, Spec, Value};

    let spec = Spec::parse(
        "t.dsrv",
        "in host: Str\nin temp: Float\nout hot: Bool\nhot = temp > 30.0",
    )?;
    let mut monitor = KeyedMonitor::builder(&spec, "host").build()?;
    let row = monitor.row().set("host", "web-1")?.set("temp", 31.5)?;
    let outputs = monitor.step(&row)?; // the outputs of web-1's run
    assert_eq!(
        (outputs.key(), outputs.step()),
        (Some(&Key::new("web-1")), 0)
    );
    assert_eq!(
        monitor.output(&Key::new("web-1"), "hot"),
        Some(Sample::Value(Value::Bool(true)))
    );
    // guide end
    Ok(())
}

#[test]
fn keyed_ticks() -> Result {
    let spec = Spec::parse(
        "beat.dsrv",
        "in host: Str\nin x: Int\nout n: Int @ 1s\nn = default(n[1], 0) + 1",
    )?;
    let mut monitor = KeyedMonitor::builder(&spec, "host").build()?;
    let mut ticks = 0;
    for (t, x) in [(0, 1), (3_000_000_000, 2)] {
        let t = Time(t);
        let row = monitor.row().set("host", "a")?.set("x", x)?;
        // guide
        monitor.ticks_before(t, &row)?;
        while let Some(tick) = monitor.next_tick() {
            let tick = tick?; // a tick of the row's key, before the row
            println!(
                "{} at {:?}: {:?}",
                tick.key().unwrap(),
                tick.time(),
                tick.to_vec()
            );
        }
        let outputs = monitor.step_at(t, &row)?;
        // guide end
        let _ = outputs;
        ticks += 1;
    }
    assert_eq!(ticks, 2);
    Ok(())
}

#[test]
fn a_repl_session() -> Result {
    let spec = sum_spec()?;
    // guide
    use vigil::repl::{Ended, Session};

    let mut session = Session::new(spec, Tier::Auto);
    let mut answers = Vec::new();
    for (n, line) in ["x=1", ":tier quickened", "x=2"].into_iter().enumerate() {
        session.line(line, n + 1, &mut answers)?; // `Ok(false)`: the line was `:quit`
    }
    assert_eq!(session.finish(&mut answers)?, Ended::Clean);
    // guide end
    let text = String::from_utf8(answers)?;
    assert!(text.starts_with("total[0] = Int(1)\n"), "{text}");
    assert!(text.ends_with("total[1] = Int(3)\n"), "{text}");
    Ok(())
}
