//! Process 0's feed of a scaled run: every input opened (at a resumed barrier's positions) and
//! given to one [`Feed`], which stamps and merges them, as the run's one reader, with its
//! checkpoint period, its replay log and where a resumed run goes on from. The parallel readers
//! (`reading.rs`) are the other way a scaled run reads.

use super::source::{AtBarriers, Source, Tally, resume_record};
use crate::notice::Notify;
use crate::pipeline::checkpoint::{self, barrier};
use crate::pipeline::inputs::{self, InputOptions, Refused};
use crate::pipeline::log::Header;
use crate::pipeline::run_loop::Record;
use crate::pipeline::{self, Feed, FeedOptions};
use std::sync::Arc;

/// What process 0's feed reads, and how it checkpoints and records.
pub(crate) struct FeedReads<'a> {
    /// The inputs as given (paths, `-`, live URLs, one `tcp://` listener).
    pub inputs: &'a [String],
    /// How they are opened (the key among them: a resumed stream drops the keyless rows it
    /// had skipped).
    pub input: InputOptions<'a>,
    /// How the feed stamps, merges and schedules (each row a step of its own).
    pub feed: FeedOptions,
    /// The options that shape the merge, as a checkpoint records them and a resume compares.
    pub merge_options: &'a str,
    /// With checkpoints, their period on the source's axis: rows, or ns with a time field.
    pub every: Option<u64>,
    /// The replay log to write, and its header (its sources are filled in here).
    pub record: Option<(String, Header)>,
    /// Whether a fresh run's first barrier comes before its first row (a Redis Stream
    /// output, which may append entries before the first periodic checkpoint).
    pub first_barrier: bool,
    /// The key's cell and name.
    pub key: (usize, String),
    /// The monitor's inputs and the cells past them (passed fields, the time field).
    pub cells: (usize, usize),
    /// Where the feed's and the source's notices go.
    pub notify: Notify,
}

/// Process 0's feed of `reads.inputs` as the scaled run's reader, put back where `resumed`
/// left it; whether an input is a stream; and the sources as its checkpoints record them.
pub(crate) fn feed_source(
    reads: FeedReads<'_>,
    resumed: Option<&barrier::Resume>,
    at_barriers: &AtBarriers,
) -> Result<(Source, bool, Vec<checkpoint::Source>), Refused> {
    if reads.inputs.is_empty() {
        return Err(
            "the trace is missing: pass --input FILE (or - for standard input)"
                .to_string()
                .into(),
        );
    }
    // A resumed run puts its sources back where the commit record says they stood
    // (`positioned`), as a single-process run's resume does: a regular file at its position
    // (checked to be the same trace), a Redis Stream (or consumer group) after its last entry
    // taken, standard input with the rows taken dropped. An MQTT broker keeps no history: what
    // it delivered before the checkpoint is not delivered again (and what was published while
    // the run was down is lost).
    //
    // A commit record without positions (an earlier vigil's) is resumed as it was then: the
    // sources read again from their start, the rows before the checkpoint skipped and their
    // digest checked; untimed rows of a source that cannot be read again are numbered on from
    // it.
    let positioned = resumed.filter(|r| r.record.clock().is_some());
    // Checked before any source is opened; the feed resumes from it below.
    let clock = match positioned {
        Some(r) => Some(r.record.check_commit(reads.merge_options)?),
        None => None,
    };
    let replayable = !reads.inputs.iter().any(|i| i.starts_with("mqtt://"));
    let timed = reads.feed.time_cell.is_some();
    let mut feed = Feed::new(reads.feed, reads.notify.clone());
    let opened = inputs::open(reads.inputs, &reads.input, positioned.map(|r| &r.record))?;
    let (schema, malformed) = (reads.input.schema, reads.input.malformed);
    let (kept, streaming) = opened.join(&mut feed, schema, malformed, &reads.notify);
    if let (Some(r), Some(clock)) = (positioned, clock) {
        let at: Vec<pipeline::At> = (0..kept.len()).map(|i| r.record.at(i)).collect();
        feed.resume(&clock.feed, &at);
    }
    let skip_before = resumed.map_or(0, |r| r.barrier.time);
    // Rows are numbered on from the checkpoint when nothing before it is read again (the
    // barrier's time is an index: a later checkpoint must have a later time, or a resume would
    // take the earlier one for the newest); those of a source read again from its start are
    // numbered from 0 and skipped up to it. An earlier vigil's timed barrier was a stamp, which
    // numbers nothing.
    let stamped = timed && skip_before >= 1 << 63;
    let (first_seq, skip_before) = match (positioned.is_some() || !replayable, stamped) {
        (true, false) => (skip_before, 0),
        (true, true) => (0, 0),
        (false, _) => (0, skip_before),
    };
    let record_path = reads.record.as_ref().map(|(path, _)| path.clone());
    let mut record = reads.record.map(|(path, mut header)| {
        header.sources = feed.source_names().map(String::from).collect();
        Record::new(path, header, streaming)
    });
    if let Some(r) = resumed {
        let len = r.commit.record_len;
        resume_record(record.as_mut(), len, record_path.as_deref(), &r.dir)?;
    }
    let tally = Tally::new(malformed, reads.notify);
    let mut source = Source::new(feed, tally, reads.key, reads.cells);
    source.record = record;
    (source.seq, source.clock) = (first_seq, first_seq);
    source.every = reads.every;
    source.first_barrier = resumed.is_none() && reads.every.is_some() && reads.first_barrier;
    source.skip_before = skip_before;
    // An earlier vigil's timed barrier is a stamp (`scale::timely_time`, at or past 2^63 for
    // any time since 1970); this one's is a row's index, far below it.
    source.skip_by_stamp = timed && skip_before >= 1 << 63;
    source.expect_digest = resumed
        .filter(|_| replayable && positioned.is_none())
        .map(|r| r.commit.input_digest);
    source.at_barriers = Arc::clone(at_barriers);
    Ok((source, streaming, kept))
}
