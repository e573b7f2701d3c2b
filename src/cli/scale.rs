//! `vigil run --key K --workers W [--processes N --process I]`: the options of a keyed run on
//! timely workers, turned into the library's scaled run ([`crate::scale`]'s `run`), and what it
//! counted printed.
//!
//! This file decides how the run reads (process 0's feed of every `--input`, or a regular file
//! in parts), opens the sinks, restores the workers' monitors from `--resume DIR`, and connects
//! the processes through `crate::scale::peers`, which first checks that every one runs the same
//! job (`job` describes it) and then watches them: a peer that stops running ends the run
//! (`on_silent_peer`) instead of blocking it.

use super::ops;
use super::{Exit, RunArgs, error, say};
use crate::keyed::KeyedMonitor;
use crate::monitor::Spec;
use crate::pipeline::checkpoint::barrier;

use crate::scale::MAX_TOTAL_WORKERS;
use crate::scale::peers;
use crate::scale::run::{self, Network, Plan, SharedSinks, Sink, worker_id};
use crate::scale::source::{AtBarriers, Reading, StopAt};
use crate::time::{TimeForm, TimeUnit};
use crate::trace::{OutputFormat, ReaderOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// `vigil run … --workers W` / `--processes N --process I`.
pub(super) fn run(args: &RunArgs, spec: &Spec, output: OutputFormat) -> Exit {
    match prepare_and_run(args, spec, output) {
        Ok(exit) => exit,
        Err((message, exit)) => {
            error(message);
            exit
        }
    }
}

fn refuse(args: &RunArgs) -> Result<(), String> {
    if args.clock == super::ClockArg::Wall {
        return Err(
            "--clock wall does not work with --workers or --processes yet: a key's ticks follow its own rows there (run without them)"
                .into(),
        );
    }
    // A time reset makes times start again, and a timely timestamp cannot
    // go back: the fragment would need an epoch in its timestamps, and the
    // writer the single-process order of every key's `once` ticks.
    if args.on_reset.is_some() {
        return Err(
            "--on-reset does not work with --workers or --processes yet: a scaled run stops at a time reset (run without them)"
                .into(),
        );
    }
    let checkpointed = args.checkpoint.is_some() || args.resume.is_some();
    if checkpointed && let Some(tcp) = args.input.iter().find(|i| i.starts_with("tcp://")) {
        return Err(format!(
            "--checkpoint and --resume do not work with a tcp:// input (`{tcp}`): its connections cannot be read again from a checkpoint's position"
        ));
    }
    if args.unordered && checkpointed {
        return Err(
            "--unordered cannot checkpoint: a checkpoint records the length of the ordered output"
                .into(),
        );
    }
    Ok(())
}

/// Where the workers run: threads of this process, or this process's part
/// of a cluster (its index, and every process's address).
enum Placement {
    Local,
    Cluster {
        process: usize,
        addresses: Vec<String>,
    },
}

/// The launch the options ask for, with the threads per process and this
/// process's index.
fn launch(args: &RunArgs) -> Result<(Placement, usize, usize), String> {
    let threads = args.workers.map_or(1, std::num::NonZeroUsize::get);
    let processes = args.processes.map_or(1, std::num::NonZeroUsize::get);
    let process = args.process.unwrap_or(0);
    if process >= processes {
        return Err(format!(
            "--process {process} is not one of the {processes} processes (0 to {})",
            processes - 1
        ));
    }
    if threads * processes > MAX_TOTAL_WORKERS {
        return Err(format!(
            "{processes} processes of {threads} workers make {} workers, and a run has at most {MAX_TOTAL_WORKERS}: every process holds channels to every worker of the run, so memory grows with the product; use fewer workers per process",
            threads * processes
        ));
    }
    if processes == 1 {
        return Ok((Placement::Local, threads, 0));
    }
    if args.process.is_none() {
        return Err("--processes N needs --process I (this process's index, 0 to N-1)".into());
    }
    let addresses: Vec<String> = match &args.hostfile {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the hostfile `{path}`: {e}"))?;
            let hosts: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from)
                .collect();
            if hosts.len() != processes {
                return Err(format!(
                    "the hostfile `{path}` names {} processes (one host:port per line), but --processes is {processes}",
                    hosts.len()
                ));
            }
            hosts
        }
        None => (0..processes)
            .map(|i| format!("127.0.0.1:{}", 2101 + i))
            .collect(),
    };
    Ok((Placement::Cluster { process, addresses }, threads, process))
}

/// What every process of a run must agree on (the handshake compares them,
/// `peers::connect`): everything that changes what a worker computes or
/// formats, or how the workers are wired. Left out, since only process 0
/// uses them or they change no result: the trace and how it is read
/// (`--input`, `--format`, `--max-step-gap`), where the output goes
/// (`--output-file`), `--hostfile`, `--tier`, `--strict-tier`,
/// `--checkpoint-every`, `--fail-on-trigger` and the timeouts.
fn job(args: &RunArgs, spec: &Spec, resumed_at: Option<u64>) -> Vec<peers::Term> {
    use peers::Term;
    // The fingerprint leaves out the triggers' messages (they are not run
    // state), but they are what an alert line says.
    let mut spec_text = spec.fingerprint().to_string();
    for t in &spec.checked().triggers {
        spec_text.push_str(&format!("\n{}: {:?}", t.name, t.message));
    }
    let digest: String = crate::snapshot::sha256(spec_text.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut terms = vec![
        Term::new(
            "route",
            crate::scale::ROUTE_HASH,
            format!("keys routed by `{}`", crate::scale::ROUTE_HASH),
        ),
        Term::new(
            "version",
            concat!("vigil ", env!("CARGO_PKG_VERSION")),
            concat!("vigil ", env!("CARGO_PKG_VERSION")),
        ),
        Term::new(
            "spec",
            digest.clone(),
            format!("the specification `{}` (digest {digest})", args.spec),
        ),
    ];
    // An option as given, or its absence.
    let mut option = |flag: &str, value: Option<String>| {
        let shown = match &value {
            Some(v) if v.is_empty() => format!("`{flag}`"),
            Some(v) => format!("`{flag} {v}`"),
            None => format!("without `{flag}`"),
        };
        terms.push(Term::new(flag, value.unwrap_or_else(|| "-".into()), shown));
    };
    let flag = |on: bool| on.then(String::new);
    let count = |n: Option<std::num::NonZeroUsize>| n.map_or(1, |n| n.get()).to_string();
    option("--key", args.key.clone());
    option("--workers", Some(count(args.workers)));
    option("--processes", Some(count(args.processes)));
    let output = match &args.output {
        super::OutputArg::Text => "text",
        super::OutputArg::Csv => "csv",
        super::OutputArg::Jsonl => "jsonl",
        super::OutputArg::Mqtt(url) | super::OutputArg::Redis(url) => url,
    };
    option("--output", Some(output.to_string()));
    // The alerts' form (JSON lines, or readable lines on standard error);
    // where they go is process 0's.
    option("--alerts", flag(args.alerts.is_some()));
    option("--only", args.only.as_ref().map(|o| o.join(",")));
    option("--quiet", flag(args.quiet));
    option("--pass", args.pass.as_ref().map(|p| p.join(",")));
    option("--max-keys", args.max_keys.map(|n| n.to_string()));
    option(
        "--max-string-bytes",
        Some(args.max_string_bytes.to_string()),
    );
    option(
        "--on-malformed",
        Some(format!("{:?}", args.on_malformed).to_lowercase()),
    );
    option("--time", args.time.clone());
    option("--time-unit", Some(args.time_unit.clone()));
    option("--lateness", args.lateness.map(|l| l.to_string()));
    option("--start", args.start.clone());
    option("--max-gap", args.max_gap.map(|g| g.to_string()));
    option("--on-gap", args.on_gap.clone());
    option("--on-reset", args.on_reset.clone());
    option("--max-ticks", Some(args.max_ticks.to_string()));
    option("--unordered", flag(args.unordered));
    // A process that writes no snapshot at a barrier leaves the checkpoint
    // incomplete; one resumed from another checkpoint than the others runs
    // its keys from another state.
    option("--checkpoint", flag(args.checkpoint.is_some()));
    terms.push(match resumed_at {
        Some(t) => Term::new(
            "--resume",
            t.to_string(),
            format!("`--resume` from the checkpoint at {t}"),
        ),
        None => Term::new("--resume", "-", "without `--resume`"),
    });
    terms
}

fn on_silent_peer(
    process: usize,
    checkpoint: Option<String>,
    sinks: SharedSinks,
) -> peers::OnSilent {
    static ENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    Arc::new(move |peer, silence| {
        if ENDING.swap(true, std::sync::atomic::Ordering::SeqCst) {
            // Another peer's watcher is ending the process already.
            return;
        }
        // The lines written so far are whole rows in order: written out,
        // as a run that lost a peer writes them.
        run::flush_sinks(&sinks, std::time::Duration::from_secs(1));
        let hint = match &checkpoint {
            Some(dir) => format!(
                "; restart every process with --resume {dir} to go on from its last complete checkpoint"
            ),
            None => String::new(),
        };
        error(format_args!(
            "the computation failed in process {process}: process {peer} sent no heartbeat for {} (stopped, hung, or cut off from this process; --peer-timeout sets how long to wait){hint}",
            peers::seconds(silence)
        ));
        std::process::exit(Exit::Failure as i32);
    })
}

mod reads;

use crate::scale::reading::{self, Parallel, ReadSetup};
use reads::{FeedSetup, feed_options, feed_source};

/// A run that could not go on: its message and exit status.
type Refused = (String, Exit);

/// A set-up step's failure as the run's.
fn fail(message: String) -> Refused {
    (message, Exit::Failure)
}

/// Where the workers run: threads of this process, or its part of a cluster, connected to the
/// other processes once they agree on the job (before anything is emptied or cleared, so that a
/// process refused for running another job has changed nothing).
fn connect(
    args: &RunArgs,
    spec: &Spec,
    placement: Placement,
    (resumed_at, sinks): (Option<u64>, &SharedSinks),
) -> Result<Network, Refused> {
    Ok(match placement {
        Placement::Local => Network::Local,
        Placement::Cluster { process, addresses } => {
            let job = job(args, spec, resumed_at);
            let timeouts = peers::Timeouts {
                connect: args.connect_timeout,
                peer: args.peer_timeout,
            };
            let on_silent = on_silent_peer(process, args.checkpoint.clone(), Arc::clone(sinks));
            let connected =
                peers::connect(&addresses, process, &job, timeouts, on_silent).map_err(fail)?;
            Network::Cluster {
                process,
                sockets: connected.data,
            }
        }
    })
}

/// The keyed monitor every worker of this process runs a `share` of (built — planned, lowered,
/// compiled — once per process), with the rules of its keys' ticks; `Ok(Err(exit))` when
/// `--strict-tier` refuses the tier it got.
fn template(
    args: &RunArgs,
    spec: &Spec,
    key: &str,
    unit: TimeUnit,
) -> Result<Result<(KeyedMonitor, crate::time::Ticking), Exit>, Refused> {
    let mut builder = KeyedMonitor::builder(spec, key)
        .tier(args.tier)
        .max_string_bytes(args.max_string_bytes);
    // `--max-keys` bounds each worker's live keys (every worker's monitor
    // is a `share` of this one, bound included): a global bound would need
    // the workers to agree on recency across threads and processes for
    // every row.
    if let Some(n) = args.max_keys {
        builder = builder.max_keys(n);
    }
    // A key's ticks are made due by its own rows and evaluated just before
    // them by the worker owning the key (`Evaluated::Tick`), so they travel
    // with the row and are written at its place: the single-process order.
    // The rules are a single-process keyed run's: the flags, else the
    // spec's gap policy.
    let (start, max_gap) = super::timed::scheduling(args, unit, None).map_err(fail)?;
    let on_gap = (args.on_gap.as_deref().map(super::timed::gap_policy))
        .or(spec.checked().on_gap)
        .unwrap_or(crate::lang::ast::GapPolicy::CatchUp);
    let ticking = crate::time::Ticking {
        start,
        max_gap,
        on_gap,
        max_ticks: args.max_ticks,
    };
    let mut template = builder
        .ticking(ticking)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    // Without `--time` a key's row stands at its index in `--time-unit`.
    template.set_index_unit(unit.nanos());
    if let Err(exit) = super::check_tier(args, &template.stats()) {
        return Ok(Err(exit));
    }
    Ok(Ok((template, ticking)))
}

/// This process's workers' monitors (`share`s of `template`, or restored from `--resume`'s
/// newest committed barrier, made before any work so that a checkpoint that does not fit is an
/// error first), with the resumed barrier; the checkpoint directory made.
fn monitors(
    args: &RunArgs,
    key: &str,
    template: KeyedMonitor,
    (process, threads, total_workers): (usize, usize, usize),
) -> Result<(Option<barrier::Resume>, Vec<KeyedMonitor>), Refused> {
    if let Some(dir) = &args.checkpoint {
        std::fs::create_dir_all(dir).map_err(|e| {
            fail(format!(
                "cannot create the checkpoint directory `{dir}`: {e}"
            ))
        })?;
    }
    let resumed = match &args.resume {
        None => None,
        Some(dir) => Some(
            barrier::resume(
                Path::new(dir),
                crate::scale::ROUTE_HASH,
                worker_id(total_workers),
                key,
            )
            .map_err(fail)?,
        ),
    };
    let mut monitors = Vec::with_capacity(threads);
    for t in 0..threads {
        let w = worker_id(process * threads + t);
        let monitor = match &resumed {
            None => template.share(),
            Some(resume) => resume.restore_worker(w, &template).map_err(fail)?,
        };
        monitors.push(monitor);
    }
    Ok((resumed, monitors))
}

fn prepare_and_run(args: &RunArgs, spec: &Spec, output: OutputFormat) -> Result<Exit, Refused> {
    let Some(key) = args.key.clone() else {
        return Err(fail(
            "--workers and --processes run a keyed monitor: pass --key FIELD (the input whose values the workers share out)".into(),
        ));
    };
    refuse(args).map_err(fail)?;
    let (launch, threads, process) = launch(args).map_err(fail)?;
    let processes = args.processes.map_or(1, std::num::NonZeroUsize::get);
    let total_workers = threads * processes;
    let view = ops::view(args, spec, output).map_err(fail)?;
    let unit = TimeUnit::from_name(&args.time_unit).expect("clap allows only known units");
    let (template, ticking) = match template(args, spec, &key, unit)? {
        Ok(built) => built,
        Err(exit) => return Ok(exit),
    };
    let crate::time::Ticking {
        start: origin,
        max_gap,
        on_gap,
        ..
    } = ticking;
    let key_index = template.key_index();
    let inputs = template.input_count();
    let names = view.writer_names(&template.output_names(), output);

    let checkpoint = args.checkpoint.as_ref().map(PathBuf::from);
    let (resumed, monitors) = monitors(args, &key, template, (process, threads, total_workers))?;

    // The source and the writer live in process 0's first worker.
    let (schema, time_cell) = ops::timed_schema(args, spec);
    let at_barriers: AtBarriers = Arc::default();
    let setup = FeedSetup {
        key: &key,
        key_index,
        inputs,
        view: &view,
        unit,
        schema: &schema,
        time_cell,
        ticking: crate::time::Ticking {
            start: origin,
            max_gap,
            on_gap,
            max_ticks: args.max_ticks,
        },
        checkpoint: checkpoint.as_ref(),
        resumed: resumed.as_ref(),
        at_barriers: &at_barriers,
    };
    // Regular files and a stream are read in parallel by process 0's workers
    // (`scale::reading`) where the options allow it; anything else by process 0's feed.
    // Checkpoints and a replay log record one reader's position: they read through the feed.
    let stop_at: Arc<StopAt> = Arc::default();
    let notify = super::timed::notices();
    let template_options = feed_options(args, spec, &setup)?;
    let reading = ReadSetup {
        inputs: &args.input,
        format: args.format.forced(),
        reader: ReaderOptions {
            max_step_gap: args.max_step_gap,
        },
        feed: &template_options,
        schema: &schema,
        key_index,
        key: &key,
        cells: (inputs, view.extra()),
        notify: notify.clone(),
        stop_at: Arc::clone(&stop_at),
    };
    let serial = args.checkpoint.is_some() || args.resume.is_some() || args.record.is_some();
    let mut parts = match process {
        0 if !serial => reading::plan(&reading, threads).map_err(fail)?,
        _ => None,
    };
    let mut streaming = parts.as_ref().is_some_and(Parallel::streaming);
    let (source, sources) = if process == 0 && parts.is_none() {
        let (source, stream, sources) = feed_source(args, spec, &setup)?;
        streaming = stream;
        (Some(source), sources)
    } else {
        (None, Vec::new())
    };

    // The processes connect and agree on the job before anything is
    // emptied or cleared: a process refused for running another job has
    // changed nothing.
    let sinks: SharedSinks = Arc::new(Mutex::new(None));
    let resumed_at = resumed.as_ref().map(|r| r.barrier.time);
    let network = connect(args, spec, launch, (resumed_at, &sinks))?;
    // A fresh run's checkpoints replace any left from an earlier run, so
    // that a later resume cannot pick a stale one of a later time. Process 0
    // clears them before its workers start, so before any worker can write
    // one of this run (barriers come from process 0's source).
    if let Some(dir) = &checkpoint
        && args.resume.is_none()
        && process == 0
    {
        barrier::remove(dir, |_| true);
    }
    let opened = open_sinks(args, spec, output, (&key, &names), resumed.as_ref())?;
    let mut readers: Vec<Box<dyn Reading>> = match &mut parts {
        Some(parallel) => parallel.readers(threads, &reading),
        None => Vec::new(),
    };
    if let Some(s) = source {
        readers.push(Box::new(s));
    }
    let plan = Plan {
        output,
        key: key.clone(),
        key_index,
        view,
        names,
        alerts_json: args.alerts.is_some()
            || matches!(
                args.output,
                super::OutputArg::Mqtt(_) | super::OutputArg::Redis(_)
            ),
        streaming,
        threads,
        total_workers,
        checkpoint,
        spec_path: args.spec.clone(),
        unordered: args.unordered,
        stats: args.stats,
        summary: args.summary || args.fail_on_trigger,
        live_sink: args.output.live().is_some(),
        at_barriers,
        sources,
        merge_options: super::checkpoint::merge_options(args),
        stop: std::sync::atomic::AtomicBool::new(false),
        stop_at,
        unit_form: TimeForm::Number(unit),
        timed: args.time.is_some(),
        notify,
        alert_text: Arc::new(|text: &str| say(format_args!("{text}"))),
    };
    *sinks.lock().unwrap_or_else(PoisonError::into_inner) = opened;
    // The summary's clock starts with the run (its rate is rows a second).
    let summary = ops::Tally::new(ops::Progress::new(true, None));
    crate::scale::install_quiet_panics();
    let launched = run::Launch {
        plan,
        monitors,
        readers,
        sinks,
        network,
        triggers: ops::TriggerTally::of(spec),
    };
    let outcome = match run::execute(launched) {
        Ok(finished) => finished,
        Err(run::Failed::Stopped(message, ended)) => return Err((message, super::exit_of(ended))),
        Err(run::Failed::Computation(cause)) => {
            let hint = match &args.checkpoint {
                Some(dir) => format!(
                    "; restart every process with --resume {dir} to go on from its last complete checkpoint"
                ),
                None => String::new(),
            };
            return Err(fail(format!(
                "the computation failed in process {process}: {cause}{hint}"
            )));
        }
    };
    Ok(report(
        args,
        spec,
        &outcome,
        summary,
        parts.as_ref(),
        total_workers,
    ))
}

/// The output and the alerts, opened (cut back to a resumed checkpoint's lengths), in the
/// process that writes them: process 0, or every process of an unordered run.
fn open_sinks(
    args: &RunArgs,
    spec: &Spec,
    output: OutputFormat,
    (key, names): (&str, &[String]),
    resumed: Option<&barrier::Resume>,
) -> Result<Option<run::Sinks>, Refused> {
    let process = args.process.unwrap_or(0);
    let writes = process == 0 || args.unordered;
    let resume_lens = resumed
        .as_ref()
        .map(|r| (r.commit.output_len, r.commit.alerts_len));
    Ok(if writes {
        let out = if args.quiet {
            None
        } else if let Some(url) = args.output.live() {
            let options = super::live::options(args, None);
            // A Redis Stream sink gets no entry twice: the resumed run does
            // not send again those the checkpoint counted (nor, as a
            // single-process run, those past it already in the stream).
            let resume = super::live::Resume {
                token: None,
                written: resumed.as_ref().and_then(|r| r.commit.sink_entries),
            };
            let live =
                crate::live::open_output(url, names.to_vec(), &options, &resume).map_err(fail)?;
            Some(Sink::live(live))
        } else {
            let mut sink = run::open_sink(
                args.output_file.as_deref(),
                resume_lens.map(|l| l.0),
                "output file",
            )
            .map_err(fail)?;
            // The CSV header, once, before any worker writes (a resumed
            // run's file has it).
            if resumed.is_none() {
                sink.header(output, names.to_vec(), key)
                    .map_err(|e| fail(format!("cannot write output: {e}")))?;
            }
            Some(sink)
        };
        let alerts = match (args.alerts.as_deref(), &args.output) {
            // A run publishing to MQTT or Redis sends its alerts there too
            // (as JSON lines, `PREFIX/alerts`, `STREAM:alerts`).
            (None, super::OutputArg::Mqtt(url) | super::OutputArg::Redis(url))
                if !spec.trigger_names().is_empty() =>
            {
                let options = super::live::options(args, None);
                Some(Sink::writer(
                    super::live::alerts_sink(url, &options).map_err(fail)?,
                ))
            }
            (None, _) => None,
            (Some(path), _) => Some(
                run::open_sink(Some(path), resume_lens.map(|l| l.1), "alerts file")
                    .map_err(fail)?,
            ),
        };
        Some((out, alerts))
    } else {
        None
    })
}

/// What a finished run counted, printed: `--summary` (process 0's) and `--stats` (every
/// worker's, by the process that writes the rows), and the exit status with
/// `--fail-on-trigger`.
fn report(
    args: &RunArgs,
    spec: &Spec,
    outcome: &run::Finished,
    mut summary: ops::Tally,
    parts: Option<&Parallel>,
    total_workers: usize,
) -> Exit {
    let process = args.process.unwrap_or(0);
    let threads = args.workers.map_or(1, std::num::NonZeroUsize::get);
    let status = if outcome.runtime {
        Exit::Runtime
    } else {
        Exit::Success
    };
    let ends = &outcome.ends;
    // The rows this process's workers evaluated (routed to them).
    let rows: u64 = ends.iter().map(|(_, s, _)| s.rows).sum();
    // Process 0 read the rows and wrote the alerts: its summary is the run's.
    if (args.summary || args.fail_on_trigger)
        && process == 0
        && let Some(stats) = outcome.merged_stats()
    {
        // Process 0 read the rows; every process evaluated its workers'.
        let read = outcome.read.unwrap_or_default();
        (summary.rows_read, summary.skipped) = (read.rows, read.skipped);
        summary.steps = outcome.steps;
        let mut text = summary.summary(&stats, &outcome.triggers);
        if super::merges(args, spec) {
            // As the single-process run's: a keyed feed keeps the rows of one time apart,
            // so none clash. A file read in parts is one source.
            let sources = read.sources.max(1);
            let plural = |n: u64, one: &str, many: &str| match n {
                1 => format!("1 {one}"),
                n => format!("{n} {many}"),
            };
            text.push_str(&format!(
                "summary: {sources} sources merged; 0 clashes; {}; {}\n",
                plural(read.late, "late row re-stamped", "late rows re-stamped"),
                plural(outcome.ticks, "tick", "ticks"),
            ));
        }
        super::say(format_args!("{text}"));
    }
    let status = super::fail_on_trigger(args, status, outcome.fired);
    if args.stats {
        // This process's workers, each with its own counters (their rows
        // are the rows routed to it).
        for (w, stats, keys) in ends {
            super::say(format_args!(
                "worker {w} of {total_workers}:\n{stats}keys: {keys} live\n"
            ));
        }
        if let Some(parallel) = parts {
            super::say(format_args!(
                "process {process}: {}\n",
                parallel.describe(threads)
            ));
        }
        let keys: usize = ends.iter().map(|(.., k)| k).sum();
        // The writer gets every worker's counters (each process's own,
        // with --unordered, where each process writes its own rows).
        match ends.len() {
            0 => super::say(format_args!(
                "process {process}: its workers' counters are in process 0's --stats\n"
            )),
            n if n == total_workers && n > threads => super::say(format_args!(
                "the run: {rows} rows, {keys} keys live over {n} workers\n"
            )),
            n => super::say(format_args!(
                "process {process}: {rows} rows, {keys} keys live over {n} workers\n"
            )),
        }
    }
    status
}
