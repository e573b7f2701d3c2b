//! `vigil run` of an STL property file (`--language stl`, or a `.mstlo`/`.stl` file): the
//! options read into the library's `stl` monitor (or, with `--tier`, its plan tier `StlRun`),
//! the trace read into its samples, its verdicts
//! written by the library's `stl::VerdictWriter` in the checker's text format or as
//! CSV/JSON-lines columns.

use super::{Exit, FormatArg, LanguageArg, OutputArg, RunArgs, error, output_error, say};
use crate::monitor::Tier;
use crate::stl::{
    self, Semantics, StlMonitor, StlRun, StlSample, StlSpec, Synchronization, VerdictForm,
    VerdictWriter,
};
use crate::time::TimeUnit;
use crate::trace::{self, InputSchema, TraceError, TraceFormat};
use crate::value::Value;
use std::io::{self, Write};

/// Whether `spec` is an STL property file: `--language stl`, or `auto` and a `.mstlo` or
/// `.stl` extension.
pub(super) fn is_stl(spec: &str, language: LanguageArg) -> bool {
    match language {
        LanguageArg::Stl => true,
        LanguageArg::Dsrv => false,
        LanguageArg::Auto => std::path::Path::new(spec)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("mstlo") || e.eq_ignore_ascii_case("stl")),
    }
}

/// The STL options given to a DSRV run, which it refuses.
pub(super) fn stl_only_options(args: &RunArgs) -> Option<&'static str> {
    if args.semantics.is_some() {
        Some("--semantics")
    } else if args.sync.is_some() {
        Some("--mstlo-synchronization")
    } else if args.mstlo_vars.is_some() {
        Some("--mstlo-vars")
    } else {
        None
    }
}

/// Reads and parses a property file (diagnostics printed, exit status 2).
pub(super) fn load(path: &str) -> Result<StlSpec, Exit> {
    let bytes = std::fs::read(path).map_err(|e| {
        error(format_args!("cannot read the property file `{path}`: {e}"));
        Exit::Failure
    })?;
    StlSpec::parse_bytes(path, &bytes).map_err(|d| {
        say(format_args!("{d}\n"));
        Exit::Spec
    })
}

/// The DSRV run options an STL run has no use for, named as given.
fn refused(args: &RunArgs) -> Option<&'static str> {
    let given = [
        ("--record", args.record.is_some()),
        ("--lateness", args.lateness.is_some()),
        ("--start", args.start.is_some()),
        ("--max-gap", args.max_gap.is_some()),
        ("--on-gap", args.on_gap.is_some()),
        ("--on-reset", args.on_reset.is_some()),
        ("--idle-timeout", args.idle_timeout.is_some()),
        ("--mqtt-rows", args.mqtt_rows.is_some()),
        ("--mqtt-output-rows", args.mqtt_output_rows.is_some()),
        ("--mqtt-topics", args.mqtt_topics.is_some()),
        ("--group", args.group.is_some()),
        ("--checkpoint", args.checkpoint.is_some()),
        ("--resume", args.resume.is_some()),
        ("--key", args.key.is_some()),
        ("--alerts", args.alerts.is_some()),
        ("--fail-on-trigger", args.fail_on_trigger),
        ("--only", args.only.is_some()),
        ("--pass", args.pass.is_some()),
        ("--workers", args.workers.is_some()),
        ("--processes", args.processes.is_some()),
        ("--strict-tier", args.strict_tier),
        ("--clock wall", args.clock == super::ClockArg::Wall),
        ("--summary", args.summary),
        ("--quiet", args.quiet),
        (
            "--on-malformed",
            args.on_malformed != super::ops::OnMalformed::Stop,
        ),
        ("--max-keys", args.max_keys.is_some()),
    ];
    given.iter().find(|(_, on)| *on).map(|(name, _)| *name)
}

/// Options that make no sense together with the STL run's own.
fn check_options(args: &RunArgs) -> Result<(), String> {
    if let Some(name) = refused(args) {
        return Err(format!(
            "{name} applies to DSRV specifications; an STL property file is run without it"
        ));
    }
    if matches!(args.output, OutputArg::Mqtt(_) | OutputArg::Redis(_)) {
        return Err("--output: an STL run writes text, csv or jsonl".into());
    }
    match args.input.as_slice() {
        [one] if !crate::live::is_url(one) => Ok(()),
        [one] => Err(format!(
            "--input {one}: an STL run reads a file or standard input"
        )),
        [] => Err("the trace is missing: pass --input FILE (or - for standard input)".into()),
        _ => Err("an STL run reads one trace (--input once)".into()),
    }
}

/// The values of `--mstlo-vars name=value,…`.
fn variables(args: &RunArgs) -> Result<Vec<(String, f64)>, String> {
    let mut out = Vec::new();
    for item in args.mstlo_vars.iter().flatten() {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| format!("--mstlo-vars: `{item}` is not NAME=VALUE"))?;
        let value: f64 = value
            .trim()
            .parse()
            .map_err(|_| format!("--mstlo-vars: `{value}` (for `{name}`) is not a number"))?;
        out.push((name.trim().trim_start_matches('$').to_string(), value));
    }
    Ok(out)
}

/// How a row of the trace becomes samples.
enum Rows {
    /// `.input`: each signal's cell is a timed value.
    Timed,
    /// CSV/JSON lines: the time field (cell `time`, in `unit`) and each signal's number.
    Columns { time: usize, unit: TimeUnit },
}

/// `vigil run` of a property file.
pub(super) fn run(args: &RunArgs) -> Exit {
    let spec = match load(&args.spec) {
        Ok(s) => s,
        Err(exit) => return exit,
    };
    if let Err(m) = check_options(args) {
        error(m);
        return Exit::Failure;
    }
    let semantics = args
        .semantics
        .as_deref()
        .map_or(Some(Semantics::default()), Semantics::from_name)
        .unwrap_or_default();
    let sync = args
        .sync
        .as_deref()
        .map_or(Some(Synchronization::default()), Synchronization::from_name)
        .unwrap_or_default();
    let vars = match variables(args) {
        Ok(v) => v,
        Err(m) => {
            error(m);
            return Exit::Failure;
        }
    };
    let mut monitor = match Run::new(&spec, semantics, sync, &vars, args.tier) {
        Ok(m) => m,
        Err(e) => {
            error(e);
            return Exit::Failure;
        }
    };
    let input = args.input[0].as_str();
    let format = match args.format {
        FormatArg::Tc => TraceFormat::Tc,
        FormatArg::Csv => TraceFormat::Csv,
        FormatArg::Jsonl => TraceFormat::Jsonl,
        FormatArg::Auto if input == "-" => TraceFormat::Jsonl,
        FormatArg::Auto => trace::format_from_path(input).unwrap_or(TraceFormat::Tc),
    };
    let mut schema = InputSchema {
        names: spec.signals().to_vec(),
        types: vec![crate::Type::Any; spec.signals().len()],
    };
    let rows = if format == TraceFormat::Tc {
        if args.time.is_some() {
            error(
                "--time: an `.input` trace's samples carry their own times ({\"time\": T, \"value\": V})",
            );
            return Exit::Failure;
        }
        Rows::Timed
    } else {
        let Some(field) = &args.time else {
            error(
                "a CSV or JSON-lines trace of STL signals needs --time FIELD: the field of each row that holds its time",
            );
            return Exit::Failure;
        };
        // A signal's field cannot be the time too: the reader fills one cell per name, and
        // the time's would stay empty (`the row has no time` at every row).
        if spec.signal(field).is_some() {
            error(format_args!(
                "--time {field}: `{field}` is a signal of the properties; the time is another field"
            ));
            return Exit::Failure;
        }
        schema.names.push(field.clone());
        schema.types.push(crate::Type::Any);
        Rows::Columns {
            time: spec.signals().len(),
            unit: TimeUnit::from_name(&args.time_unit).expect("clap allows only known units"),
        }
    };
    let mut reader = match trace::open_reader(input, format, &schema) {
        Ok(r) => r,
        Err(e) => {
            error(e);
            return Exit::Failure;
        }
    };
    let mut out = match open_out(args, &spec, semantics) {
        Ok(o) => o,
        Err(exit) => return exit,
    };
    let mut row = vec![None; schema.names.len()];
    // The samples and verdicts of a row, buffers kept from row to row: on the plan tier a row
    // allocates nothing on its way to the plan and back.
    let mut samples = Vec::new();
    let mut verdicts = Vec::new();
    let mut number = 0u64;
    let mut tally = Tally::default();
    let status = loop {
        row.iter_mut().for_each(|c| *c = None);
        // Where the row starts, to locate an error in its samples (the reader has passed it
        // once the row is read).
        let at = reader.position();
        match reader.next_row(&mut row) {
            Ok(true) => {}
            Ok(false) => break Exit::Success,
            Err(e) => break trace_error(&e),
        }
        if let Err(m) = samples_into(&spec, &rows, &row, &mut samples) {
            match at {
                Some(p) => error(format_args!("{input}:{}: row {number}: {m}", p.line + 1)),
                None => error(format_args!("{input}: row {number}: {m}")),
            }
            break Exit::Trace;
        }
        number += 1;
        tally.samples += samples.len() as u64;
        monitor.step_into(&mut samples, &mut verdicts);
        tally.verdicts += verdicts.len() as u64;
        // `held` walks every property's operators: only for `--stats`.
        if args.stats {
            tally.most_held = tally.most_held.max(monitor.held());
        }
        for w in monitor.take_warnings() {
            say(format_args!("warning: {input}: {w}\n"));
        }
        if let Err(e) = out.write(&verdicts) {
            return output_error(&e);
        }
    };
    if let Run::Plan(run) = &monitor
        && let Some(why) = run.declined()
    {
        say(format_args!(
            "note: --tier {}: the properties ran on the STL evaluator: {why}\n",
            args.tier
        ));
    }
    if args.stats {
        say(format_args!(
            "stl: {} semantics, {} synchronization, {}\nrows: {number}, samples: {}, verdicts: {}\nheld: at most {} values at once, {} at the end (the properties' horizons bound it)\n",
            semantics.name(),
            sync.name(),
            monitor.tier_line(),
            tally.samples,
            tally.verdicts,
            tally.most_held,
            monitor.held(),
        ));
    }
    match out.finish() {
        Ok(_) => status,
        Err(e) => output_error(&e),
    }
}

/// What runs the properties: the evaluator (`--tier auto`, the default: nothing to compile,
/// and the verdicts are the same), or the plan tier on the tier asked for, which declines to
/// the evaluator where it would not be exact.
enum Run {
    Evaluator(StlMonitor),
    Plan(Box<StlRun>),
}

impl Run {
    fn new(
        spec: &StlSpec,
        semantics: Semantics,
        sync: Synchronization,
        vars: &[(String, f64)],
        tier: Tier,
    ) -> Result<Run, stl::StlError> {
        Ok(match tier {
            Tier::Auto => Run::Evaluator(StlMonitor::new(spec, semantics, sync, vars)?),
            tier => Run::Plan(Box::new(StlRun::new(spec, semantics, sync, vars, tier)?)),
        })
    }

    /// A row's verdicts, in `out` (what it held is dropped).
    fn step_into(&mut self, samples: &mut [StlSample], out: &mut Vec<stl::Emitted>) {
        match self {
            Run::Evaluator(m) => *out = m.step(samples),
            Run::Plan(r) => r.step_into(samples, out),
        }
    }

    fn take_warnings(&mut self) -> Vec<String> {
        match self {
            Run::Evaluator(m) => m.take_warnings(),
            Run::Plan(r) => r.take_warnings(),
        }
    }

    fn held(&self) -> usize {
        match self {
            Run::Evaluator(m) => m.held(),
            Run::Plan(r) => r.held(),
        }
    }

    /// Where the run ended, for `--stats`.
    fn tier_line(&self) -> String {
        match self {
            Run::Evaluator(_) => "on the STL evaluator".into(),
            Run::Plan(r) => match (r.plan_tier(), r.declined()) {
                (Some(t), _) => format!("on the plan, tier {t}"),
                (None, Some(why)) => format!("on the STL evaluator ({why})"),
                (None, None) => "on the STL evaluator (fewer than two steps)".into(),
            },
        }
    }
}

/// What `--stats` reports of an STL run.
#[derive(Default)]
struct Tally {
    samples: u64,
    verdicts: u64,
    /// The most values the monitor held after a row (`StlMonitor::held`).
    most_held: usize,
}

fn trace_error(e: &TraceError) -> Exit {
    error(e);
    match e.kind {
        trace::TraceErrorKind::Malformed => Exit::Trace,
        trace::TraceErrorKind::Io => Exit::Failure,
    }
}

/// A row's samples, in `out` (what it held is dropped).
fn samples_into(
    spec: &StlSpec,
    rows: &Rows,
    row: &[Option<Value>],
    out: &mut Vec<StlSample>,
) -> Result<(), String> {
    match *rows {
        Rows::Timed => stl::row_samples_into(spec, row, out),
        Rows::Columns { time, unit } => stl::column_samples_into(spec, row, time, unit, out),
    }
}

/// Opens where the verdicts go (`--output-file`, else standard output) in the form `--output`
/// asks for.
fn open_out(
    args: &RunArgs,
    spec: &StlSpec,
    semantics: Semantics,
) -> Result<VerdictWriter<Box<dyn Write>>, Exit> {
    let sink: Box<dyn Write> = match &args.output_file {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Box::new(io::BufWriter::new(f)),
            Err(e) => {
                error(format_args!("cannot create `{path}`: {e}"));
                return Err(Exit::Failure);
            }
        },
        None => Box::new(io::BufWriter::new(io::stdout())),
    };
    let form = match args.output {
        OutputArg::Csv => VerdictForm::Csv,
        OutputArg::Jsonl => VerdictForm::Jsonl,
        _ => VerdictForm::Text,
    };
    VerdictWriter::new(sink, spec, semantics, form).map_err(|e| output_error(&e))
}
