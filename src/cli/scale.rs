//! `vigil run --key K --workers W [--processes N --process I]`: the options of a keyed run on
//! timely workers turned into the library's [`ScaledRun`], and what it counted printed.
//!
//! This file refuses what a scaled run cannot do yet, places the workers (threads, or this
//! process's part of a cluster from `--hostfile`), describes the job every process must agree
//! on (`job`; the library compares it in its handshake), and says what happened when a peer
//! stops running (`on_silent_peer`). How the run reads, checkpoints, resumes and writes is the
//! library's.

use super::ops;
use super::{Exit, RunArgs, error, say};
use crate::keyed::KeyedMonitor;
use crate::monitor::Spec;
use crate::scale::peers;
use crate::scale::{
    AlertsTo, Cluster, Failed, Finished, MAX_TOTAL_WORKERS, OutputTo, ScaledRun, WorkerEnd,
};
use crate::time::TimeUnit;
use crate::trace::OutputFormat;
use std::path::PathBuf;
use std::sync::Arc;

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
fn job(args: &RunArgs, spec: &Spec) -> Vec<peers::Term> {
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
    let mut terms = vec![Term::new(
        "spec",
        digest.clone(),
        format!("the specification `{}` (digest {digest})", args.spec),
    )];
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
    option(
        "--input-on-every-process",
        flag(args.input_on_every_process),
    );
    // A process that writes no snapshot at a barrier leaves the checkpoint
    // incomplete. (The library adds the routing hash, the version and the
    // resumed barrier.)
    option("--checkpoint", flag(args.checkpoint.is_some()));
    terms
}

/// What this process does when a peer falls silent (once, after the library flushed the lines
/// written so far): says so, with how to go on, and exits.
fn on_silent_peer(process: usize, checkpoint: Option<String>) -> peers::OnSilent {
    Arc::new(move |peer, silence| {
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

/// A run that could not go on: its message and exit status.
type Refused = (String, Exit);

/// A set-up step's failure as the run's.
fn fail(message: String) -> Refused {
    (message, Exit::Failure)
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
    // Under the wall clock without a time field every key ticks on the run's grid from its
    // own first row (unless `--start`), as a single-process run's keys do: the grid is the
    // shortest period's multiples, so every process's workers and process 0's feed, which
    // ticks from its own start on it, agree.
    let ticking = crate::time::Ticking {
        start,
        max_gap,
        on_gap,
        max_ticks: args.max_ticks,
        align: args.clock == super::ClockArg::Wall && args.time.is_none(),
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

fn prepare_and_run(args: &RunArgs, spec: &Spec, output: OutputFormat) -> Result<Exit, Refused> {
    let Some(key) = args.key.clone() else {
        return Err(fail(
            "--workers and --processes run a keyed monitor: pass --key FIELD (the input whose values the workers share out)".into(),
        ));
    };
    refuse(args).map_err(fail)?;
    let (placement, threads, process) = launch(args).map_err(fail)?;
    let processes = args.processes.map_or(1, std::num::NonZeroUsize::get);
    let view = ops::view(args, spec, output).map_err(fail)?;
    let unit = TimeUnit::from_name(&args.time_unit).expect("clap allows only known units");
    let (template, ticking) = match template(args, spec, &key, unit)? {
        Ok(built) => built,
        Err(exit) => return Ok(exit),
    };
    let periods = template.periods().to_vec();
    let inputs = reads::inputs(
        args,
        spec,
        ops::timed_schema(args, spec),
        unit,
        (&ticking, &periods),
    )?;
    let every = reads::checkpoint_every(args, &inputs);
    let header = reads::record_header(args, spec, &inputs, &ticking);
    let out = if args.quiet {
        OutputTo::Nowhere
    } else if let Some(url) = args.output.live() {
        OutputTo::Live(url.to_string(), Box::new(super::live::options(args, None)))
    } else {
        OutputTo::File(args.output_file.clone().unwrap_or_else(|| "-".into()))
    };
    let mut run = ScaledRun::inputs(spec, template, threads, inputs)
        .map_err(fail)?
        .columns(view)
        .output_to(output, out)
        .notify(super::timed::notices())
        .alert_lines(|text| say(format_args!("{text}")))
        .tally(args.summary || args.fail_on_trigger)
        .merge_options(super::checkpoint::merge_options(args));
    if args.stats {
        run = run.stats();
    }
    if let Some(path) = &args.alerts {
        run = run.alerts_to(AlertsTo::File(path.clone()));
    }
    if let Some(dir) = &args.checkpoint {
        run = run.checkpoint(PathBuf::from(dir), every, &args.spec);
    }
    if let Some(dir) = &args.resume {
        run = run.resume(PathBuf::from(dir));
    }
    if let Some(path) = &args.record {
        run = run.record(path.clone(), header);
    }
    if args.unordered {
        run = run.unordered();
    }
    if let Placement::Cluster { process, addresses } = placement {
        run = run.cluster(Cluster {
            process,
            addresses,
            job: job(args, spec),
            timeouts: peers::Timeouts {
                connect: args.connect_timeout,
                peer: args.peer_timeout,
            },
            on_silent: on_silent_peer(process, args.checkpoint.clone()),
        });
    }
    // The summary's clock starts with the run (its rate is rows a second).
    let summary = ops::Tally::new(ops::Progress::new(true, None));
    crate::scale::install_quiet_panics();
    let outcome = match run.run() {
        Ok(finished) => finished,
        Err(Failed::Stopped(message, ended)) => return Err((message, super::exit_of(ended))),
        Err(Failed::Computation(cause)) => {
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
    Ok(report(args, spec, &outcome, summary, threads * processes))
}

/// What a finished run counted, printed: `--summary` (process 0's) and `--stats` (every
/// worker's, by the process that writes the rows), and the exit status with
/// `--fail-on-trigger`.
fn report(
    args: &RunArgs,
    spec: &Spec,
    outcome: &Finished,
    mut summary: ops::Tally,
    total_workers: usize,
) -> Exit {
    let process = args.process.unwrap_or(0);
    let threads = args.workers.map_or(1, std::num::NonZeroUsize::get);
    let status = if outcome.key_stopped {
        Exit::Runtime
    } else {
        Exit::Success
    };
    let ends = &outcome.workers;
    // The rows this process's workers evaluated (routed to them).
    let rows: u64 = ends.iter().map(|w| w.stats.rows).sum();
    // Process 0 read the rows and wrote the alerts: its summary is the run's.
    if (args.summary || args.fail_on_trigger)
        && process == 0
        && let Some(stats) = outcome.merged_stats()
    {
        // Process 0 read the rows; every process evaluated its workers'.
        let read = outcome.read;
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
        for WorkerEnd {
            worker,
            stats,
            keys,
        } in ends
        {
            super::say(format_args!(
                "worker {worker} of {total_workers}:\n{stats}keys: {keys} live\n"
            ));
        }
        if let Some(reading) = &outcome.reading {
            super::say(format_args!("process {process}: {reading}\n"));
        }
        let keys: usize = ends.iter().map(|w| w.keys).sum();
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
