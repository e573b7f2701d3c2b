//! How a [`ScaledRun`] starts, in this order: its workers' monitors (restored from a resumed
//! checkpoint before any work, so that one that does not fit is an error first), process 0's
//! readers, the connection to the other processes (which agree on the job before anything is
//! emptied or cleared), a fresh run's stale checkpoints cleared, the sinks opened (cut back to a
//! resumed checkpoint's lengths), and the plan every worker shares.

use super::{AlertsTo, Cluster, Failed, Finished, OutputTo, Reads, ScaledRun, WorkerEnd};
use crate::keyed::KeyedMonitor;
use crate::pipeline::checkpoint::{self, barrier};
use crate::pipeline::drive::Ended;
use crate::pipeline::inputs::InputOptions;
use crate::scale::feeding::{self, FeedReads};
use crate::scale::peers::{self, Term};
use crate::scale::reading::{self, Parallel, ReadSetup};
use crate::scale::run::{self, Launch, Network, Plan, SharedSinks, Sink, worker_id};
use crate::scale::source::{AtBarriers, Reading, Source, StopAt, Tally};
use crate::scale::{MAX_TOTAL_WORKERS, ROUTE_HASH};
use crate::time::TimeForm;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A set-up step's failure: the run's, the environment's fault.
fn failure(message: String) -> Failed {
    Failed::Stopped(message, Ended::Failure)
}

/// What process 0's workers read: their readers, whether the input is a stream, the sources as
/// a checkpoint records them, and how they read in parallel (for the counts).
struct Readers {
    readers: Vec<Box<dyn Reading>>,
    streaming: bool,
    sources: Vec<checkpoint::Source>,
    reading: Option<String>,
    /// A checkpointed run reads a file in parts: its commit records say so.
    in_parts: bool,
}

pub(super) fn run(r: ScaledRun) -> Result<Finished, Failed> {
    let (process, processes) = match &r.cluster {
        Some(c) => (c.process, c.addresses.len()),
        None => (0, 1),
    };
    let threads = r.workers;
    let total_workers = threads * processes;
    if process >= processes {
        return Err(failure(format!(
            "process {process} is not one of the cluster's {processes} processes (0 to {})",
            processes.saturating_sub(1)
        )));
    }
    if total_workers > MAX_TOTAL_WORKERS {
        return Err(failure(format!(
            "{processes} processes of {threads} workers make {total_workers} workers, and a run has at most {MAX_TOTAL_WORKERS}"
        )));
    }
    let checkpointed = r.checkpoint.is_some() || r.resume.is_some();
    if checkpointed && matches!(r.reads, Reads::Feed(_)) {
        return Err(failure(
            "a scaled run over a feed cannot checkpoint or resume (a resume could not put its sources back): give it its inputs by name".into(),
        ));
    }
    if checkpointed && r.unordered {
        return Err(failure(
            "an unordered run cannot checkpoint: a checkpoint records the length of the ordered output".into(),
        ));
    }
    // Rows with a time field show it; without one, a row stands at its index in the unit.
    let feed_options = match &r.reads {
        Reads::Feed(feed) => feed.options(),
        Reads::Inputs(inputs) => &inputs.feed,
    };
    // (Under the wall clock the rows show their arrival times.)
    let timed = feed_options.time_cell.is_some() || feed_options.wall_clock;
    let unit = feed_options.unit;
    // A sweep's ticks (a reset's `once` ticks, the run's ticks under the wall clock) are put in
    // the single-process order of keys by each key's place, which a resumed worker reads back.
    let sweeps = !r.monitor.periods().is_empty()
        && (feed_options.on_reset == crate::lang::ast::ResetPolicy::Once
            || feed_options.wall_clock);
    let (resumed, monitors) = monitors(&r, (process, threads, total_workers), sweeps)?;
    let at_barriers: AtBarriers = Arc::default();
    let stop_at: Arc<StopAt> = Arc::default();
    let ScaledRun {
        monitor: _,
        workers: _,
        reads,
        key,
        output,
        columns,
        names,
        triggers,
        has_triggers,
        out,
        alerts,
        alert_text,
        notify,
        stats,
        tally,
        spec_path,
        checkpoint,
        resume: _,
        merge_options,
        record,
        cluster,
        unordered,
    } = r;
    let key_index = monitors
        .first()
        .expect("a run has at least one worker")
        .key_index();
    let cells = (monitors[0].input_count(), columns.extra());
    let first_barrier = matches!(&out, OutputTo::Live(url, _) if url.starts_with("redis://"));
    let read = Read {
        key: (key_index, key.clone()),
        cells,
        threads,
        checkpoint: checkpoint.as_ref().map(|(_, every)| *every),
        merge_options: &merge_options,
        record,
        first_barrier,
        notify: notify.clone(),
        resumed: resumed.as_ref(),
        at_barriers: &at_barriers,
        stop_at: &stop_at,
    };
    // With every process holding the input, each process's workers read their share of a
    // file in parts; the processes check in their handshake that they read the same file.
    let shared = processes > 1 && matches!(&reads, Reads::Inputs(i) if i.on_every_process);
    let shared_term = match (&reads, shared) {
        (Reads::Inputs(inputs), true) => Some(shared_input_term(&inputs.names)),
        _ => None,
    };
    let share = match shared {
        true => (process * threads, total_workers),
        false => (0, threads),
    };
    let readers = readers(reads, read, (process, share))?;
    let remote_readers = process != 0 && !readers.readers.is_empty();
    let sinks: SharedSinks = Arc::new(Mutex::new(None));
    let resumed_at = resumed.as_ref().map(|r| r.barrier.time);
    let network = connect(cluster, (resumed_at, shared_term), &sinks)?;
    // A fresh run's checkpoints replace any left from an earlier run, so that a later resume
    // cannot pick a stale one of a later time. Process 0 clears them before its workers start,
    // so before any worker can write one of this run (barriers come from process 0's source).
    if let Some((dir, _)) = &checkpoint
        && resumed.is_none()
        && process == 0
    {
        barrier::remove(dir, |_| true);
    }
    let live_sink = matches!(out, OutputTo::Live(..));
    let alerts_json = alerts.is_some() || live_sink || alert_text.is_none();
    let opened = match process == 0 || unordered {
        true => Some(open_sinks(
            (out, alerts),
            (output, &names, &key),
            has_triggers,
            resumed.as_ref(),
        )?),
        false => None,
    };
    *sinks.lock().unwrap_or_else(PoisonError::into_inner) = opened;
    let plan = Plan {
        output,
        key,
        key_index,
        view: columns,
        names,
        alerts_json,
        streaming: readers.streaming,
        threads,
        total_workers,
        checkpoint: checkpoint.map(|(dir, _)| dir),
        spec_path,
        unordered,
        stats,
        summary: tally,
        live_sink,
        at_barriers,
        sources: readers.sources,
        // A checkpoint of a run read in parts is resumed in parts (`parts::checkpoint`).
        merge_options: match readers.in_parts {
            true => crate::scale::parts::checkpoint::in_parts(&merge_options),
            false => merge_options,
        },
        stop: AtomicBool::new(false),
        stop_at,
        unit_form: TimeForm::Number(unit),
        remote_readers,
        timed,
        notify,
        alert_text: alert_text.unwrap_or_else(|| Arc::new(|_: &str| {})),
        spares: Default::default(),
    };
    let launch = Launch {
        plan,
        monitors,
        readers: readers.readers,
        sinks,
        network,
        triggers,
    };
    match run::execute(launch) {
        Ok(f) => Ok(Finished {
            fired: f.fired,
            key_stopped: f.runtime,
            read: f.read.unwrap_or_default(),
            steps: f.steps,
            ticks: f.ticks,
            triggers: f.triggers,
            workers: (f.ends.into_iter())
                .map(|(worker, stats, keys)| WorkerEnd {
                    worker,
                    stats,
                    keys,
                })
                .collect(),
            reading: readers.reading,
        }),
        Err(run::Failed::Stopped(message, ended)) => Err(Failed::Stopped(message, ended)),
        Err(run::Failed::Computation(cause)) => Err(Failed::Computation(cause)),
    }
}

/// This process's workers' monitors (`share`s of the run's, or restored from the resumed
/// directory's newest committed barrier), with the resumed barrier; the checkpoint directory
/// made.
fn monitors(
    r: &ScaledRun,
    (process, threads, total_workers): (usize, usize, usize),
    sweeps: bool,
) -> Result<(Option<barrier::Resume>, Vec<KeyedMonitor>), Failed> {
    if let Some((dir, _)) = &r.checkpoint {
        std::fs::create_dir_all(dir).map_err(|e| {
            failure(format!(
                "cannot create the checkpoint directory `{}`: {e}",
                dir.display()
            ))
        })?;
    }
    let resumed = match &r.resume {
        None => None,
        Some(dir) => Some(
            barrier::resume(dir, ROUTE_HASH, worker_id(total_workers), &r.key).map_err(failure)?,
        ),
    };
    let mut monitors = Vec::with_capacity(threads);
    for t in 0..threads {
        let w = worker_id(process * threads + t);
        let mut monitor = match &resumed {
            None => r.monitor.share(),
            Some(resume) => resume.restore_worker(w, &r.monitor).map_err(failure)?,
        };
        // The keys' places, which a sweep's ticks are ordered by: kept from the first row, or
        // read back from the checkpoint that kept them.
        if sweeps {
            match &resumed {
                None => monitor.keep_places(),
                Some(resume) => {
                    let places = crate::scale::places::read(&resume.dir, w).map_err(failure)?;
                    monitor.set_places(places);
                }
            }
        }
        monitors.push(monitor);
    }
    Ok((resumed, monitors))
}

/// What process 0's readers need besides the inputs.
struct Read<'a> {
    key: (usize, String),
    cells: (usize, usize),
    threads: usize,
    /// The checkpoint period, with checkpoints.
    checkpoint: Option<u64>,
    merge_options: &'a str,
    record: Option<(String, crate::pipeline::log::Header)>,
    first_barrier: bool,
    notify: crate::notice::Notify,
    resumed: Option<&'a barrier::Resume>,
    at_barriers: &'a AtBarriers,
    stop_at: &'a Arc<StopAt>,
}

/// This process's readers. Process 0's: its workers' in parallel where the inputs allow it and
/// the run neither checkpoints nor records (both record one reader's position), else one feed
/// of every input. Another process's: its workers' share of a file read in parts by every
/// process (`share`: this process's first worker among the readers, and their number), else
/// none.
fn readers(
    reads: Reads,
    read: Read<'_>,
    (process, share): (usize, (usize, usize)),
) -> Result<Readers, Failed> {
    let none = || Readers {
        readers: Vec::new(),
        streaming: false,
        sources: Vec::new(),
        reading: None,
        in_parts: false,
    };
    let inputs = match reads {
        Reads::Feed(_) if process != 0 => return Ok(none()),
        Reads::Feed(feed) => {
            let tally = Tally::new(feed.options().malformed, read.notify.clone());
            let source = Source::new(*feed, tally, read.key, read.cells);
            return Ok(Readers {
                readers: vec![Box::new(source)],
                streaming: false,
                sources: Vec::new(),
                reading: None,
                in_parts: false,
            });
        }
        Reads::Inputs(inputs) => inputs,
    };
    let serial = read.checkpoint.is_some() || read.resumed.is_some();
    // How several timed inputs read in parallel write their times, read once (from their
    // first rows) for the plan and for the header of a log in parts, whose times are written so;
    // only where process 0's workers may read them in parallel (not under the wall clock, nor
    // with checkpoints).
    let apart = read.threads > 1 && !serial && !inputs.feed.wall_clock;
    let time_form = match process == 0 && apart {
        true => reading::parallel_time_form(
            &inputs.names,
            inputs.format,
            &inputs.schema,
            inputs.feed.time_cell,
            inputs.feed.unit,
        ),
        false => None,
    };
    // A log written in parts names the inputs as a feed names them (a feed fills in its own
    // sources), and its times are written as numbers (an untimed run's stamps, the rows'
    // indices in units) or as several timed inputs' are.
    let parts_record = read.record.clone().map(|(path, mut header)| {
        header.sources = (inputs.names.iter())
            .map(|n| crate::trace::display_name(n).to_string())
            .collect();
        header.form = time_form.unwrap_or(TimeForm::Number(header.unit));
        (path, header)
    });
    let setup = ReadSetup {
        inputs: &inputs.names,
        format: inputs.format,
        reader: inputs.reader,
        feed: &inputs.feed,
        schema: &inputs.schema,
        live: &inputs.live,
        key_index: read.key.0,
        key: &read.key.1,
        cells: read.cells,
        notify: read.notify.clone(),
        stop_at: Arc::clone(read.stop_at),
        share,
        record: parts_record.as_ref(),
        time_form,
    };
    let shared = share.1 > read.threads;
    if process != 0 && !shared {
        return Ok(none());
    }
    // A run that checkpoints reads one file in parts (its readers send the barriers), else
    // through the feed; the commit records then name the file as a feed's do.
    let marked = crate::scale::parts::checkpoint::in_parts(read.merge_options);
    let mut kept = Vec::new();
    let parallel = match serial {
        false => reading::plan(&setup, read.threads).map_err(failure)?,
        true if process != 0 => None,
        true => {
            let ck = crate::scale::parts::checkpoint::PartCheckpoints {
                every: read.checkpoint,
                resumed: read.resumed,
                at_barriers: read.at_barriers,
                merge_options: &marked,
                schema: &inputs.schema,
                reader: inputs.reader,
                dropping: checkpoint::Dropping {
                    malformed: inputs.feed.malformed != crate::pipeline::Malformed::Stop,
                    key: Some(read.key.0),
                },
                record: parts_record.as_ref().map(|(path, _)| path.as_str()),
            };
            match reading::checkpointed_plan(&setup, read.threads, &ck).map_err(failure)? {
                Some((parallel, source)) => {
                    kept.push(source);
                    Some(parallel)
                }
                None => None,
            }
        }
    };
    match parallel {
        // Another process reads a file's parts only.
        Some(mut parallel) if process == 0 || matches!(parallel, Parallel::Parts(_)) => {
            if process == 0
                && let Some((path, header)) = &parts_record
            {
                let len = manifest(path, header, &parallel, (read.threads, share.1))?;
                if let Parallel::Parts(parts) = &parallel {
                    parts.set_log_len(len);
                }
            }
            return Ok(Readers {
                readers: parallel.readers(read.threads, &setup),
                streaming: parallel.streaming(),
                in_parts: !kept.is_empty(),
                sources: kept,
                reading: Some(parallel.describe(read.threads, share.1)),
            });
        }
        _ if process != 0 => return Ok(none()),
        _ => {}
    }
    let malformed = inputs.feed.malformed;
    let reads = FeedReads {
        inputs: &inputs.names,
        input: InputOptions {
            schema: &inputs.schema,
            reader: inputs.reader,
            format: inputs.format,
            malformed,
            live: &inputs.live,
            // A row without its key was skipped by the source (`scale::source`).
            key: Some(read.key.0),
        },
        feed: inputs.feed.clone(),
        merge_options: read.merge_options,
        every: read.checkpoint,
        record: read.record,
        first_barrier: read.first_barrier,
        key: read.key,
        cells: read.cells,
        notify: read.notify,
    };
    let (source, streaming, sources) = feeding::feed_source(reads, read.resumed, read.at_barriers)
        .map_err(|refused| Failed::Stopped(refused.message, refused.ended))?;
    Ok(Readers {
        readers: vec![Box::new(source)],
        streaming,
        sources,
        reading: None,
        in_parts: false,
    })
}

/// The replay log at `path` of a run whose readers (`threads` of process 0, `all` of the
/// run reading a file's parts) each write a part of it: the manifest naming the parts, and its
/// length.
fn manifest(
    path: &str,
    header: &crate::pipeline::log::Header,
    parallel: &Parallel,
    (threads, all): (usize, usize),
) -> Result<u64, Failed> {
    let readers = match parallel {
        Parallel::Parts(_) => all.max(threads),
        _ => threads,
    };
    let names: Vec<String> = (0..readers)
        .map(|w| {
            let part = crate::scale::parts::part_path(path, w);
            let name = std::path::Path::new(&part)
                .file_name()
                .map(|n| n.to_string_lossy());
            name.map_or(part.clone(), |n| n.into_owned())
        })
        .collect();
    let failed = |e: std::io::Error| failure(format!("cannot write the replay log `{path}`: {e}"));
    crate::pipeline::log::LogWriter::write_manifest(path, header, &names).map_err(failed)?;
    Ok(std::fs::metadata(path).map_err(failed)?.len())
}

/// What every process reading its share of the inputs must agree on: each input's length and
/// a digest of its first and last 64 KiB (the same file, or a copy of it, at the same path),
/// or that it cannot read it.
fn shared_input_term(names: &[String]) -> Term {
    use std::io::{Read, Seek, SeekFrom};
    let mut value = String::new();
    let mut shown = Vec::new();
    for name in names {
        let described = (|| -> std::io::Result<String> {
            let mut file = std::fs::File::open(name)?;
            let len = file.metadata()?.len();
            let mut hasher = xxhash_rust::xxh3::Xxh3::new();
            let mut head = vec![0; 64 << 10];
            let n = file.read(&mut head)?;
            hasher.update(&head[..n]);
            file.seek(SeekFrom::Start(len.saturating_sub(64 << 10)))?;
            let mut tail = Vec::new();
            file.read_to_end(&mut tail)?;
            hasher.update(&tail);
            Ok(format!("{len} bytes, digest {:016x}", hasher.digest()))
        })()
        .unwrap_or_else(|e| format!("cannot read it: {e}"));
        value.push_str(&format!("{name}: {described}; "));
        shown.push(format!("`{name}` ({described})"));
    }
    Term::new(
        "input on every process",
        value,
        format!("the input on every process: {}", shown.join(", ")),
    )
}

/// Where the workers run: threads of this process, or its part of a cluster, connected to the
/// other processes once they agree on the job. A peer that falls silent has the lines written
/// so far flushed, then the caller's `on_silent` called, once.
fn connect(
    cluster: Option<Cluster>,
    (resumed_at, shared_input): (Option<u64>, Option<Term>),
    sinks: &SharedSinks,
) -> Result<Network, Failed> {
    let Some(cluster) = cluster else {
        return Ok(Network::Local);
    };
    let version = concat!("vigil ", env!("CARGO_PKG_VERSION"));
    let mut job = vec![
        Term::new(
            "route",
            ROUTE_HASH,
            format!("keys routed by `{ROUTE_HASH}`"),
        ),
        Term::new("version", version, version),
    ];
    job.extend(cluster.job);
    job.extend(shared_input);
    // A process resumed from another checkpoint than the others runs its keys from another
    // state.
    job.push(match resumed_at {
        Some(t) => Term::new(
            "--resume",
            t.to_string(),
            format!("`--resume` from the checkpoint at {t}"),
        ),
        None => Term::new("--resume", "-", "without `--resume`"),
    });
    let ending = Arc::new(AtomicBool::new(false));
    let (sinks, caller) = (Arc::clone(sinks), cluster.on_silent);
    let on_silent: peers::OnSilent = Arc::new(move |peer, silence| {
        if ending.swap(true, Ordering::SeqCst) {
            // Another peer's watcher is ending the run already.
            return;
        }
        // The lines written so far are whole rows in order: written out, as a run that lost a
        // peer writes them.
        run::flush_sinks(&sinks, std::time::Duration::from_secs(1));
        caller(peer, silence);
    });
    let connected = peers::connect(
        &cluster.addresses,
        cluster.process,
        &job,
        cluster.timeouts,
        on_silent,
    )
    .map_err(failure)?;
    Ok(Network::Cluster {
        process: cluster.process,
        sockets: connected.data,
    })
}

/// The output and the alerts, opened (cut back to a resumed checkpoint's lengths, the CSV
/// header written once) in a process that writes them.
fn open_sinks(
    (out, alerts): (OutputTo, Option<AlertsTo>),
    (output, names, key): (crate::trace::OutputFormat, &[String], &str),
    has_triggers: bool,
    resumed: Option<&barrier::Resume>,
) -> Result<run::Sinks, Failed> {
    let lens = resumed.map(|r| (r.commit.output_len, r.commit.alerts_len));
    let header = |mut sink: Sink| -> Result<Sink, Failed> {
        // The CSV header, once, before any worker writes (a resumed run's file has it).
        if resumed.is_none() {
            (sink.header(output, names.to_vec(), key))
                .map_err(|e| failure(format!("cannot write output: {e}")))?;
        }
        Ok(sink)
    };
    let mut live_alerts = None;
    let out = match out {
        OutputTo::Nowhere => None,
        OutputTo::Writer(to) => Some(header(Sink::writer(to))?),
        OutputTo::File(path) => Some(header(
            run::open_sink(Some(&path), lens.map(|l| l.0), "output file").map_err(failure)?,
        )?),
        OutputTo::Live(url, options) => {
            // A Redis Stream sink gets no entry twice: the resumed run does not send again
            // those the checkpoint counted (nor, as a single-process run, those past it
            // already in the stream).
            let resume = crate::live::Resume {
                token: None,
                written: resumed.and_then(|r| r.commit.sink_entries),
            };
            let live = crate::live::open_output(&url, names.to_vec(), &options, &resume)
                .map_err(failure)?;
            live_alerts = Some((url, options));
            Some(Sink::live(live))
        }
    };
    let alerts = match (alerts, live_alerts) {
        (Some(AlertsTo::Writer(to)), _) => Some(Sink::writer(to)),
        (Some(AlertsTo::File(path)), _) => {
            Some(run::open_sink(Some(&path), lens.map(|l| l.1), "alerts file").map_err(failure)?)
        }
        // A run publishing to MQTT or Redis sends its alerts there too (as JSON lines,
        // `PREFIX/alerts`, `STREAM:alerts`).
        (None, Some((url, options))) if has_triggers => Some(Sink::writer(
            crate::live::alerts_sink(&url, &options).map_err(failure)?,
        )),
        (None, _) => None,
    };
    Ok((out, alerts))
}
