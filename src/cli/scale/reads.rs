//! How a scaled run reads, set up from the arguments: the feed's options (which the library's
//! parallel readers, `scale::reading`, take too), and process 0's feed of every `--input`.

use super::{Refused, fail};
use crate::cli::RunArgs;
use crate::cli::ops::View;
use crate::monitor::Spec;
use crate::pipeline;
use crate::pipeline::checkpoint::{self, barrier};
use crate::scale::feeding::{FeedReads, feed_source as feed_source_of};
use crate::scale::source::{AtBarriers, Source};
use crate::time::{TimeForm, TimeUnit};
use crate::trace::ReaderOptions;
use std::path::PathBuf;

/// What the set-up of process 0's feed needs to know.
pub(super) struct FeedSetup<'a> {
    pub(super) key: &'a str,
    pub(super) key_index: usize,
    pub(super) inputs: usize,
    pub(super) view: &'a View,
    pub(super) unit: TimeUnit,
    pub(super) schema: &'a crate::trace::InputSchema,
    pub(super) time_cell: Option<usize>,
    pub(super) ticking: crate::time::Ticking,
    pub(super) checkpoint: Option<&'a PathBuf>,
    pub(super) resumed: Option<&'a barrier::Resume>,
    pub(super) at_barriers: &'a AtBarriers,
}

/// How process 0's feed (or an input's own, read in parallel) stamps and merges a keyed run's
/// rows: the options' time field, lateness and malformed-row policy, each row a step of its own.
pub(super) fn feed_options(
    args: &RunArgs,
    spec: &Spec,
    f: &FeedSetup<'_>,
) -> Result<pipeline::FeedOptions, Refused> {
    let unit = f.unit;
    let lateness = match args.lateness.map(|l| (l, unit.duration(l))) {
        None => 0,
        Some((_, Some(ns))) => ns,
        Some((l, None)) => return Err(fail(format!("--lateness {l}: not a duration"))),
    };
    Ok(pipeline::FeedOptions {
        names: f.schema.names.clone(),
        time_cell: f.time_cell,
        unit,
        lateness,
        // A keyed row is one key's event: rows at one time stay apart.
        separate: true,
        malformed: args.on_malformed.into(),
        idle_timeout: args.idle_timeout.map(std::time::Duration::from_secs_f64),
        periods: Vec::new(),
        start: None,
        max_gap: None,
        on_gap: f.ticking.on_gap,
        max_ticks: args.max_ticks,
        on_reset: (spec.checked().on_reset).unwrap_or(crate::lang::ast::ResetPolicy::Cancel),
        // A rejected row is located by its source's position.
        positions: true,
        wall_clock: false,
    })
}

/// Process 0's feed of every `--input` (files, standard input, live sources, a `tcp://`
/// listener) as the scaled run's reader (`scale::feeding`), with its checkpoint period and
/// replay log from the arguments; whether the input is a stream; and the sources as its
/// checkpoints record them.
pub(super) fn feed_source(
    args: &RunArgs,
    spec: &Spec,
    f: &FeedSetup<'_>,
) -> Result<(Source, bool, Vec<checkpoint::Source>), Refused> {
    let options = feed_options(args, spec, f)?;
    let unit = f.unit;
    let record = args.record.as_ref().map(|path| {
        let header = crate::cli::log::Header {
            fingerprint: spec.fingerprint().to_string(),
            // (The feed's, once its inputs are open.)
            sources: Vec::new(),
            fields: f.schema.names.clone(),
            time: args.time.clone(),
            unit,
            form: TimeForm::Number(unit),
            key: args.key.clone(),
            start: f.ticking.start,
            max_gap: f.ticking.max_gap,
            on_gap: crate::cli::timed::gap_name(options.on_gap).to_string(),
            max_ticks: args.max_ticks,
            on_reset: crate::cli::timed::reset_name(options.on_reset).to_string(),
            lateness: options.lateness,
            wall_clock: false,
        };
        (path.clone(), header)
    });
    let every = f.checkpoint.map(|_| match f.time_cell {
        None => args.checkpoint_every,
        Some(_) => (args.checkpoint_every as i64)
            .saturating_mul(unit.nanos())
            .max(1) as u64,
    });
    let live = crate::cli::live::options(args, f.time_cell);
    let merge_options = crate::cli::checkpoint::merge_options(args);
    let reads = FeedReads {
        inputs: &args.input,
        input: pipeline::inputs::InputOptions {
            schema: f.schema,
            reader: ReaderOptions {
                max_step_gap: args.max_step_gap,
            },
            format: args.format.forced(),
            malformed: args.on_malformed.into(),
            live: &live,
            // A row without its key was skipped by the source (`scale::source`).
            key: Some(f.key_index),
        },
        feed: options,
        merge_options: &merge_options,
        every,
        record,
        first_barrier: matches!(args.output, crate::cli::OutputArg::Redis(_)),
        key: (f.key_index, f.key.to_string()),
        cells: (f.inputs, f.view.extra()),
        notify: crate::cli::timed::notices(),
    };
    feed_source_of(reads, f.resumed, f.at_barriers)
        .map_err(|refused| (refused.message, crate::cli::exit_of(refused.ended)))
}
