//! How a scaled run reads, set up from the arguments: the feed's options (which the library's
//! parallel readers, `scale::reading`, take too), and process 0's feed of every `--input`.

use super::{Refused, fail};
use crate::cli::RunArgs;
use crate::cli::ops::View;
use crate::monitor::Spec;
use crate::pipeline::checkpoint::{self, barrier};
use crate::pipeline::{self, Feed};
use crate::scale::source::{AtBarriers, Source, Tally, resume_record};
use crate::time::{TimeForm, TimeUnit};
use crate::trace::ReaderOptions;
use std::path::PathBuf;
use std::sync::Arc;

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
/// listener), stamped and merged, as the scaled run's reader, with its checkpoint barriers,
/// replay log and resume position; whether the input is a stream; and the sources as its
/// checkpoints record them.
pub(super) fn feed_source(
    args: &RunArgs,
    spec: &Spec,
    f: &FeedSetup<'_>,
) -> Result<(Source, bool, Vec<checkpoint::Source>), Refused> {
    let FeedSetup {
        key,
        key_index,
        inputs,
        view,
        unit,
        schema,
        time_cell,
        ticking,
        checkpoint,
        resumed,
        at_barriers,
    } = *f;
    let crate::time::Ticking {
        start: origin,
        max_gap,
        ..
    } = ticking;
    if args.input.is_empty() {
        return Err(fail(
            "the trace is missing: pass --input FILE (or - for standard input)".into(),
        ));
    }
    // A resumed run puts its sources back where the commit record says
    // they stood (`positioned`), as a single-process run's resume does: a
    // regular file at its position (checked to be the same trace), a Redis
    // Stream (or consumer group) after its last entry taken, standard input
    // with the rows taken dropped. An MQTT broker keeps no history: what it
    // delivered before the checkpoint is not delivered again (and what was
    // published while the run was down is lost).
    //
    // A commit record without positions (an earlier vigil's) is resumed as
    // it was then: the sources read again from their start, the rows
    // before the checkpoint skipped and their digest checked; untimed rows
    // of a source that cannot be read again are numbered on from it.
    let positioned = resumed.filter(|r| r.record.clock().is_some());
    let merge_options = crate::cli::checkpoint::merge_options(args);
    // Checked before any source is opened; the feed resumes from it below.
    let clock = match positioned {
        Some(r) => Some(r.record.check_commit(&merge_options).map_err(fail)?),
        None => None,
    };
    let replayable = !args.input.iter().any(|i| i.starts_with("mqtt://"));
    let feed_options = feed_options(args, spec, f)?;
    let (lateness, feed_on_gap, feed_on_reset) = (
        feed_options.lateness,
        feed_options.on_gap,
        feed_options.on_reset,
    );
    let mut feed = Feed::new(feed_options, crate::cli::timed::notices());
    let live = crate::cli::live::options(args, time_cell);
    let input_options = pipeline::inputs::InputOptions {
        schema,
        reader: ReaderOptions {
            max_step_gap: args.max_step_gap,
        },
        format: args.format.forced(),
        malformed: args.on_malformed.into(),
        live: &live,
        // A row without its key was skipped by the source (`scale::source`).
        key: Some(key_index),
    };
    let opened = pipeline::inputs::open(&args.input, &input_options, positioned.map(|r| &r.record))
        .map_err(|refused| (refused.message, crate::cli::exit_of(refused.ended)))?;
    let notify = crate::cli::timed::notices();
    let (kept, streaming) = opened.join(&mut feed, schema, args.on_malformed.into(), &notify);
    let every = checkpoint.as_ref().map(|_| match time_cell {
        None => args.checkpoint_every,
        Some(_) => (args.checkpoint_every as i64)
            .saturating_mul(unit.nanos())
            .max(1) as u64,
    });
    if let (Some(r), Some(clock)) = (positioned, clock) {
        let at: Vec<pipeline::At> = (0..kept.len()).map(|i| r.record.at(i)).collect();
        feed.resume(&clock.feed, &at);
    }
    let skip_before = resumed.as_ref().map_or(0, |r| r.barrier.time);
    // Untimed rows are numbered on from the checkpoint when nothing before
    // it is read again; those of a source read again from its start are
    // numbered from 0 and skipped up to it.
    let (first_seq, skip_before) = match (positioned.is_some() || !replayable, time_cell) {
        (true, None) => (skip_before, 0),
        (true, Some(_)) => (0, 0),
        (false, _) => (0, skip_before),
    };
    let mut record = args.record.as_ref().map(|path| {
        let header = crate::cli::log::Header {
            fingerprint: spec.fingerprint().to_string(),
            sources: feed.source_names().map(String::from).collect(),
            fields: schema.names.clone(),
            time: args.time.clone(),
            unit,
            form: TimeForm::Number(unit),
            key: args.key.clone(),
            start: origin,
            max_gap,
            on_gap: crate::cli::timed::gap_name(feed_on_gap).to_string(),
            max_ticks: args.max_ticks,
            on_reset: crate::cli::timed::reset_name(feed_on_reset).to_string(),
            lateness,
            wall_clock: false,
        };
        crate::cli::timed::Record::new(path.clone(), header, streaming)
    });
    if let Some(r) = &resumed {
        resume_record(
            record.as_mut(),
            r.commit.record_len,
            args.record.as_deref(),
            &r.dir,
        )
        .map_err(fail)?;
    }
    let tally = Tally::new(args.on_malformed.into(), crate::cli::timed::notices());
    let mut source = Source::new(
        feed,
        tally,
        (key_index, key.to_string()),
        (inputs, view.extra()),
    );
    source.record = record;
    source.seq = first_seq;
    source.every = every;
    source.first_barrier = resumed.is_none()
        && every.is_some()
        && matches!(args.output, crate::cli::OutputArg::Redis(_));
    source.skip_before = skip_before;
    // An earlier vigil's timed barrier is a stamp (`scale::timely_time`, at or past 2^63 for
    // any time since 1970); this one's is a row's index, far below it.
    source.skip_by_stamp = time_cell.is_some() && skip_before >= 1 << 63;
    source.expect_digest = resumed
        .as_ref()
        .filter(|_| replayable && positioned.is_none())
        .map(|r| r.commit.input_digest);
    source.at_barriers = Arc::clone(at_barriers);
    Ok((source, streaming, kept))
}
