//! How a scaled run reads, from the arguments: its inputs by name with the feed's options
//! (which the library, `scale::ScaledRun`, reads in parallel or through process 0's feed), the
//! checkpoint period, and the replay log's header.

use super::{Refused, fail};
use crate::cli::RunArgs;
use crate::monitor::Spec;
use crate::pipeline::{self, log::Header};
use crate::scale::Inputs;
use crate::time::{Ticking, TimeForm, TimeUnit};
use crate::trace::{InputSchema, ReaderOptions};

/// The inputs of `args` as a scaled run opens them: each row a step of its own (a keyed row
/// is one key's event), stamped by the time field with the options' lateness, a malformed row
/// dropped or stopping the run as `--on-malformed` says.
pub(super) fn inputs(
    args: &RunArgs,
    spec: &Spec,
    (schema, time_cell): (InputSchema, Option<usize>),
    unit: TimeUnit,
    (ticking, periods): (&Ticking, &[i64]),
) -> Result<Inputs, Refused> {
    let lateness = match args.lateness.map(|l| (l, unit.duration(l))) {
        None => 0,
        Some((_, Some(ns))) => ns,
        Some((l, None)) => return Err(fail(format!("--lateness {l}: not a duration"))),
    };
    let wall = args.clock == crate::cli::ClockArg::Wall;
    let feed = pipeline::FeedOptions {
        names: schema.names.clone(),
        time_cell,
        unit,
        lateness,
        separate: true,
        malformed: args.on_malformed.into(),
        idle_timeout: args.idle_timeout.map(std::time::Duration::from_secs_f64),
        // A key's ticks are its monitor's, made due by its rows (`KeyedMonitor::ticking`);
        // under the wall clock the feed ticks too, and every worker ticks each of its keys on
        // the run's ticks (`scale::Event::Advance`), from the same origin as the keys.
        periods: match wall {
            true => periods.to_vec(),
            false => Vec::new(),
        },
        start: ticking.start.filter(|_| wall),
        max_gap: ticking.max_gap.filter(|_| wall),
        on_gap: ticking.on_gap,
        max_ticks: args.max_ticks,
        // The flag, else the spec's choice, else cancel, as a single-process run's.
        on_reset: (args
            .on_reset
            .as_deref()
            .map(crate::cli::timed::reset_policy))
        .or(spec.checked().on_reset)
        .unwrap_or(crate::lang::ast::ResetPolicy::Cancel),
        // A rejected row is located by its source's position.
        positions: true,
        wall_clock: wall,
    };
    Ok(Inputs {
        names: args.input.clone(),
        schema,
        format: args.format.forced(),
        reader: ReaderOptions {
            max_step_gap: args.max_step_gap,
        },
        live: crate::cli::live::options(args, time_cell),
        feed,
        on_every_process: args.input_on_every_process,
    })
}

/// `--checkpoint-every` on the source's axis: rows, or ns with a time field.
pub(super) fn checkpoint_every(args: &RunArgs, inputs: &Inputs) -> u64 {
    match inputs.feed.time_cell {
        None => args.checkpoint_every,
        Some(_) => (args.checkpoint_every as i64)
            .saturating_mul(inputs.feed.unit.nanos())
            .max(1) as u64,
    }
}

/// The header of `--record`'s replay log (its sources are the feed's, filled in by the run).
pub(super) fn record_header(
    args: &RunArgs,
    spec: &Spec,
    inputs: &Inputs,
    ticking: &Ticking,
) -> Header {
    let (feed, unit) = (&inputs.feed, inputs.feed.unit);
    Header {
        fingerprint: spec.fingerprint().to_string(),
        sources: Vec::new(),
        fields: inputs.schema.names.clone(),
        time: args.time.clone(),
        unit,
        form: TimeForm::Number(unit),
        key: args.key.clone(),
        start: ticking.start,
        max_gap: ticking.max_gap,
        on_gap: crate::cli::timed::gap_name(feed.on_gap).to_string(),
        max_ticks: args.max_ticks,
        on_reset: crate::cli::timed::reset_name(feed.on_reset).to_string(),
        lateness: feed.lateness,
        wall_clock: feed.wall_clock,
    }
}
