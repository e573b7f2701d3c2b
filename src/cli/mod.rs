//! The `vigil` command line: `run`, `check`, `explain`, `tiers`, and their
//! exit statuses.
//!
//! Exit statuses (the contract of docs/cli.md, "Commands"): 0 success; 1 usage error (clap's
//! included) or I/O error (a missing or unreadable spec or trace, a failed
//! write); 2 errors in the specification; 3 runtime error; 4 malformed trace;
//! 5 a trigger fired (with `--fail-on-trigger`, after an otherwise clean run).
//! `--help` and `--version` exit 0.
//!
//! Nothing here prints with `print!`/`eprint!`, which panic when the stream
//! is closed. Standard output is written through `io::Write`: a closed pipe
//! (`vigil … | head -1`) ends the command quietly with status 0, since the
//! reader has all it asked for. Messages to standard error are best-effort:
//! if standard error is closed they are lost, but the exit status is still
//! the one the command earned.

mod bench;
mod checkpoint;
mod live;
use crate::pipeline::{drive, log};
mod ops;
mod paths;
mod repl;
#[cfg(feature = "scale")]
mod scale;
mod stl;
mod timed;

use checkpoint::Runner;
use ops::OnMalformed;

use crate::monitor::{Spec, Tier};
use crate::trace::{
    OutputFormat, ReaderOptions, RowReader, TraceError, TraceErrorKind, TraceFormat,
};
use clap::builder::TypedValueParser;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "vigil",
    version,
    about = "A JIT-backed stream monitor for DSRV specifications",
    after_help = EXIT_STATUSES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a specification over a trace, printing every output at every step.
    // Boxed: the run's flags make this variant much larger than the others.
    Run(Box<RunArgs>),
    /// Replay a log written by `vigil run --record`: the same outputs, on any
    /// tier; with `--check`, re-read the traces (`--input`, in the recorded
    /// order) and stop at the first row that differs from the log.
    Replay(Box<ReplayArgs>),
    /// Time every tier on one trace held in memory, per row and in batches,
    /// after checking that their outputs are identical (see docs/benchmarks.md).
    Bench(Box<bench::BenchArgs>),
    /// Check a specification and report every error in it.
    Check {
        /// The specification file (DSRV).
        spec: String,
    },
    /// Explain how a specification runs: schedule, partition into regions,
    /// each region's scalar IR, and which tier runs each step and why.
    Explain {
        /// The specification file (DSRV).
        spec: String,
        /// Execution tier to explain.
        #[arg(long, default_value = "auto", value_parser = tier_parser())]
        tier: Tier,
        /// Only one line per tier: which tier a run asked for it runs, and
        /// why.
        #[arg(long, conflicts_with = "tier")]
        summary: bool,
    },
    /// Explore a specification interactively: type rows (`x=1 y=2.5`, a JSON
    /// object, or `-`), see each step's outputs; `:help` lists the commands
    /// (`:tier T` moves the run to another tier, keeping its state). Without a
    /// terminal, reads rows and commands from standard input as a script.
    Repl {
        /// The specification file (DSRV); without it, the session starts
        /// with an empty specification for `:def` to build.
        spec: Option<String>,
        /// Execution tier to start on.
        #[arg(long, default_value = "auto", value_parser = tier_parser())]
        tier: Tier,
    },
    /// List the execution tiers this build can run, one per line (for `--tier`).
    Tiers,
    /// Print a completion script for SHELL on standard output
    /// (`vigil completions bash > /etc/bash_completion.d/vigil`).
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The exit statuses, shown at the end of `--help` (docs/cli.md's table).
const EXIT_STATUSES: &str = "Exit status:
  0  success (also with --on-malformed skip|warn after skipped rows; a closed standard output)
  1  usage error or I/O error (a checkpoint that cannot be written or resumed; --strict-tier)
  2  errors in the specification
  3  runtime error
  4  malformed trace
  5  a trigger fired (--fail-on-trigger, in a run that is otherwise a success)";

/// The parser of a flag whose values are names (`--tier`, `--output`), each
/// listed as a possible value so that `--help` and the shell completions
/// show them (clap's own mapping parsers drop the list); `parse` may take
/// more than the names (`--output` takes URLs too).
#[derive(Clone)]
struct Listed<T> {
    flag: &'static str,
    names: fn() -> Vec<&'static str>,
    parse: fn(&str) -> Result<T, String>,
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Listed<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let name = value.to_string_lossy();
        (self.parse)(&name).map_err(|message| {
            let what = arg.map_or_else(|| self.flag.to_string(), |a| a.to_string());
            clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!("invalid value for {what}: {message}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            (self.names)()
                .into_iter()
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

fn tier_parser() -> Listed<Tier> {
    Listed {
        flag: "--tier",
        names: || Tier::ALL.iter().map(|t| t.name()).collect(),
        parse: parse_tier,
    }
}

fn output_parser() -> Listed<OutputArg> {
    Listed {
        flag: "--output",
        names: || vec!["text", "csv", "jsonl"],
        parse: parse_output,
    }
}

#[derive(clap::Args, Clone, Debug)]
#[command(after_help = EXIT_STATUSES)]
pub struct RunArgs {
    /// The specification file: DSRV, or an STL property file (`--language`).
    pub spec: String,
    /// The specification's language: `dsrv`, or `stl`, a property file as the
    /// Trustworthiness Checker's `--language mstlo` reads it (`name: formula` per line;
    /// docs/language.md, "STL properties"). `auto` takes a `.mstlo` or `.stl` file as STL.
    #[arg(long, value_enum, default_value_t = LanguageArg::Auto)]
    pub language: LanguageArg,
    /// STL: the semantics of the verdicts (the checker's `--semantics`).
    #[arg(long, value_name = "SEMANTICS", value_parser = ["delayed-quantitative", "delayed-qualitative", "eager-qualitative", "robustness-interval"])]
    pub semantics: Option<String>,
    /// STL: how a formula over several signals sees a signal between its samples
    /// (default zero-order-hold; the checker's option, also `--sync`).
    #[arg(long = "mstlo-synchronization", alias = "sync", value_name = "STRATEGY", value_parser = ["zero-order-hold", "linear", "none"])]
    pub sync: Option<String>,
    /// STL: the values of the properties' variables (`$threshold`): `NAME=VALUE` pairs,
    /// separated by spaces (as the checker takes them) or commas.
    #[arg(long, value_name = "NAME=VALUE", num_args = 1.., value_delimiter = ',')]
    pub mstlo_vars: Option<Vec<String>>,
    /// The trace: a file, or `-` for standard input. A regular file is
    /// memory-mapped and evaluated in batches; anything else (a pipe, a FIFO,
    /// `/dev/stdin`) is read, evaluated and written row by row. Given more
    /// than once, the traces are sources merged into one sequence of steps
    /// by time (see `--time`), with priority by position.
    /// (`vigil replay` reads the log instead, and the traces only with
    /// `--check`.)
    #[arg(long, short)]
    pub input: Vec<String>,
    /// Write the merged, stamped sequence of steps to LOG (JSON lines, see
    /// docs/operations.md, "Time"), so that `vigil replay` reproduces the
    /// run exactly.
    #[arg(long, value_name = "LOG")]
    pub record: Option<String>,
    /// The time field of every row (a CSV column or JSON key; a number in
    /// `--time-unit`, or an RFC 3339 text). Without it, a row's time is its
    /// index in its trace. An `.input` trace's step numbers are its time.
    #[arg(long, value_name = "FIELD")]
    pub time: Option<String>,
    /// The unit of numeric times (and of `--lateness`).
    #[arg(long, value_name = "UNIT", default_value = "s", value_parser = ["s", "ms", "us", "ns"])]
    pub time_unit: String,
    /// Accept rows up to L late (older than the latest time of their trace),
    /// re-stamping them to that time; an older row is an error.
    #[arg(long, value_name = "L", requires = "time")]
    pub lateness: Option<f64>,
    /// The origin of periodic streams' ticks (a time as `--time` reads
    /// them, negative allowed: `--start -5`); by default the first row's
    /// time.
    #[arg(long, value_name = "TIME", allow_negative_numbers = true)]
    pub start: Option<String>,
    /// A gap between two rows longer than this (in `--time-unit`) is a
    /// jump: `--on-gap` says what the ticks it skips over do.
    #[arg(long, value_name = "G")]
    pub max_gap: Option<f64>,
    /// After a jump (`--max-gap`): `catch-up` fires every tick missed,
    /// `skip` only the last one of each period (by default the spec's choice,
    /// `@ 1s, on_gap skip`, else catch-up).
    #[arg(long, value_name = "POLICY", value_parser = ["catch-up", "skip"])]
    pub on_gap: Option<String>,
    /// At a time reset (a row whose time field is `reset`, in every trace):
    /// `cancel` drops the ticks the jump skips over, `once` fires one tick of
    /// every period at the reset, then the ticks start again at the next
    /// row's time.
    /// (By default the spec's choice, `@ 1s, on_reset once`, else cancel.)
    #[arg(long, value_name = "POLICY", value_parser = ["cancel", "once"])]
    pub on_reset: Option<String>,
    /// With several traces, at least one of them live (a pipe, a FIFO,
    /// standard input): a trace silent for this many seconds stops holding
    /// the merged steps back until its next row (whose time, if already
    /// passed, is re-stamped to the last step's). Without it, the merge
    /// waits for every trace.
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout: Option<f64>,
    /// Where the run's time comes from. `data` (the default): the rows'
    /// time field (`--time`), else their index. `wall`: the wall clock, so
    /// that periodic streams tick while the sources are silent (a heartbeat
    /// says a producer went silent while it is silent). Without `--time`
    /// each row is stamped with its arrival and the ticks start with the
    /// run (or at `--start`); with `--time`, the rows keep their times, and
    /// once every trace has been silent for `--idle-timeout` the time goes
    /// on with the wall clock from the last row's. `--record` logs every
    /// stamp and tick, so `vigil replay` reproduces the run exactly.
    #[arg(long, value_enum, value_name = "CLOCK", default_value_t = ClockArg::Data)]
    pub clock: ClockArg,
    /// The most ticks due before one row; more is an error (a time jump
    /// that would run for ever).
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub max_ticks: u64,
    /// Trace format; `auto` picks by file extension (`.input`, `.csv`,
    /// `.jsonl`), and standard input or another stream without one (a FIFO,
    /// `/dev/stdin`, `<(…)`) defaults to JSON lines.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    pub format: FormatArg,
    /// Output: a format on standard output (`text`, `csv`, `jsonl`), or a
    /// live sink: `mqtt://HOST:PORT[/PREFIX]` (each output stream's value to
    /// the topic named after it, triggers' alerts to `PREFIX/alerts`) or
    /// `redis://HOST:PORT/STREAM` (one entry per step, XADD).
    #[arg(long, default_value = "text", value_parser = output_parser(), value_name = "FORMAT|URL")]
    pub output: OutputArg,
    /// MQTT input: one topic, `PREFIX/TOPIC`, carries whole rows as JSON
    /// objects, instead of a topic per input.
    #[arg(long, value_name = "TOPIC")]
    pub mqtt_rows: Option<String>,
    /// MQTT output: one row object per step (as `--output jsonl` writes
    /// it) published to `PREFIX/TOPIC`, instead of a topic per stream.
    #[arg(long, value_name = "TOPIC")]
    pub mqtt_output_rows: Option<String>,
    /// MQTT: a file of `TOPIC INPUT` lines (`#` comments): each topic (or
    /// topic filter, `+` and `#` allowed) carries that input's values;
    /// inputs not named keep the topic named after them.
    #[arg(long, value_name = "FILE")]
    pub mqtt_topics: Option<String>,
    /// MQTT quality of service for subscriptions and publications.
    #[arg(long, value_name = "0|1|2", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub qos: u8,
    /// Redis: read the stream as consumer `--consumer` of this consumer
    /// group (created if missing) instead of with XREAD. MQTT: subscribe as a
    /// member of this shared subscription group (`$share/G/TOPIC`), so that
    /// the broker gives each message to one member; with `--workers`, one
    /// member per worker.
    #[arg(long, value_name = "G")]
    pub group: Option<String>,
    /// Redis: the consumer's name in `--group`.
    #[arg(long, value_name = "C", requires = "group")]
    pub consumer: Option<String>,
    /// Redis: read the entries the stream holds when they are read and stop
    /// at its end, instead of waiting for more.
    #[arg(long)]
    pub drain: bool,
    /// Execution tier (`vigil tiers` lists those this build can run). An
    /// explicit tier that cannot run the specification (native-whole on a
    /// Str stream) falls back with a warning saying why.
    #[arg(long, default_value = "auto", value_parser = tier_parser())]
    pub tier: Tier,
    /// Make the fallback from an explicit `--tier` an error (exit 1) instead
    /// of a warning.
    #[arg(long)]
    pub strict_tier: bool,
    /// The most empty steps a `.input` trace may skip at once (`0: …` then
    /// `5: …` skips 4); a larger gap is a malformed trace.
    #[arg(long, value_name = "N", default_value_t = ReaderOptions::DEFAULT_MAX_STEP_GAP)]
    pub max_step_gap: u64,
    /// Print per-tier statistics on standard error at the end.
    #[arg(long)]
    pub stats: bool,
    /// The longest string, in bytes, that `++` may produce; a longer result is
    /// a runtime error (exit 3).
    #[arg(long, value_name = "BYTES", default_value_t = crate::monitor::DEFAULT_MAX_STRING_BYTES)]
    pub max_string_bytes: usize,
    /// Write the outputs to FILE (created, or emptied) instead of standard
    /// output. A run resumed with `--resume` continues the file exactly
    /// where its checkpoint left it.
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<String>,
    /// Write a checkpoint to FILE every `--checkpoint-every` rows and at the
    /// end of the input: the monitor's state, the input position and the
    /// output file's length, replaced atomically. `--resume FILE` continues
    /// the run from it. With `--workers`/`--processes` it is a directory
    /// every process shares (docs/operations.md, "Scaling out").
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<String>,
    /// Rows between two checkpoints (with `--workers`/`--processes` and
    /// `--time`: time, in `--time-unit`s).
    #[arg(long, value_name = "N", default_value_t = 100_000, requires = "checkpoint",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub checkpoint_every: u64,
    /// Monitor each value of the input FIELD as a trace of its own (one run
    /// per host, device, …, sharing one compiled plan): each key has its own
    /// steps and history, and every output row names its key
    /// (`z{host=a}[3] = Int(7)`, a `host` CSV column or JSON member). A row
    /// without the key is a malformed trace; a runtime error stops its key
    /// only (reported when it happens; the exit status is then 3).
    #[arg(long, value_name = "FIELD")]
    pub key: Option<String>,
    /// With `--key`: at most N keys live at once; a new key evicts the least
    /// recently used one, whose state is dropped (it starts afresh if it
    /// comes back).
    #[arg(long, value_name = "N", requires = "key", value_parser = parse_max_keys)]
    pub max_keys: Option<std::num::NonZeroUsize>,
    /// Write one JSON line per trigger firing to FILE (`-`: standard
    /// output): `{"step":17,"trigger":"too_hot","message":"…","values":{…}}`,
    /// with the key after the step in a keyed run. Without it, each firing is
    /// a readable line on standard error.
    #[arg(long, value_name = "FILE|-")]
    pub alerts: Option<String>,
    /// Exit with status 5 when any trigger fired (after a run that is
    /// otherwise a success); the summary (`--summary`) is printed too.
    #[arg(long)]
    pub fail_on_trigger: bool,
    /// Print only these outputs (comma-separated), in the specification's
    /// print order; a name that is not an output is a usage error.
    #[arg(
        long,
        value_name = "NAME,...",
        value_delimiter = ',',
        conflicts_with = "quiet"
    )]
    pub only: Option<Vec<String>>,
    /// Print no stream values: only the alerts and the summary.
    #[arg(long)]
    pub quiet: bool,
    /// Copy these declared inputs (comma-separated) into every CSV and JSON
    /// lines output row and every JSON alert line (`--alerts`), after the
    /// step (and key); text lines are not changed.
    #[arg(long, value_name = "FIELD,...", value_delimiter = ',')]
    pub pass: Option<Vec<String>>,
    /// What a malformed row of a JSON-lines or CSV trace does: `stop` the
    /// run (status 4), or `skip` it (it is not a step), or `warn`: skip it
    /// and report it on standard error. Skipped rows leave the status 0.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = OnMalformed::Stop)]
    pub on_malformed: OnMalformed,
    /// Print a summary on standard error at the end: rows read, steps
    /// evaluated, malformed rows skipped, the tier and its declines, each
    /// trigger's firings, rows per second.
    #[arg(long)]
    pub summary: bool,
    /// Continue the run a checkpoint was taken of: the same specification and
    /// trace (a regular file is read from the checkpoint's position; a stream
    /// is read from its start, dropping the rows the checkpoint consumed),
    /// and `--output-file` cut back to the checkpoint's length. Pass
    /// `--checkpoint` too to go on checkpointing.
    #[arg(long, value_name = "FILE")]
    pub resume: Option<String>,
    /// With `--key`: run W timely workers (threads) in this process, each
    /// monitoring the keys that hash to it (docs/operations.md, "Scaling out"). The
    /// output is the single-process run's, in the order (time, row).
    /// At most 256 per process, and 1,024 over all processes.
    #[arg(long, value_name = "W", requires = "key", value_parser = parse_workers)]
    pub workers: Option<std::num::NonZeroUsize>,
    /// With `--key`: join a computation of N processes (each with
    /// `--workers` threads); process 0 reads the trace and writes the
    /// output. Every process is started with the same options and its own
    /// `--process` (they check it when they connect). At most 256.
    #[arg(long, value_name = "N", requires = "key", value_parser = parse_processes)]
    pub processes: Option<std::num::NonZeroUsize>,
    /// This process's index among `--processes` (0 to N-1).
    #[arg(long, value_name = "I", requires = "processes")]
    pub process: Option<usize>,
    /// The processes' addresses, one `host:port` per line in process order
    /// (timely's hostfile); by default 127.0.0.1, ports 2101 and up.
    #[arg(long, value_name = "FILE", requires = "processes")]
    pub hostfile: Option<String>,
    /// With `--processes`: how long a process waits for the others to
    /// connect at the start before it gives up.
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_timeout, requires = "processes")]
    pub connect_timeout: std::time::Duration,
    /// With `--processes`: a peer process that sends no heartbeat for this
    /// long (stopped with `kill -STOP`, a hung machine, a cut network) ends
    /// the run with an error on every other process; a checkpoint lets it
    /// resume. (A process that exits is noticed at once.)
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_timeout, requires = "processes")]
    pub peer_timeout: std::time::Duration,
    /// With `--workers`/`--processes`: each worker writes its rows' outputs
    /// as they complete, to its own process's output, instead of gathering
    /// them in the (time, row) order.
    #[arg(long)]
    pub unordered: bool,
    /// With `--processes`: every process holds the input file at the same path (shared
    /// storage, or a copy), so every process's workers read their share of it in parts,
    /// not process 0's alone (checked in the handshake: its length and a digest).
    #[arg(long, requires = "processes")]
    pub input_on_every_process: bool,
}

// The refusal of an option whose code this build left out names the Cargo
// feature that brings it back.
#[cfg(not(feature = "scale"))]
use crate::live::not_built;

/// `--workers W`: a count of worker threads, 1 to `crate::scale::MAX_WORKERS`.
#[cfg(feature = "scale")]
fn parse_workers(text: &str) -> Result<std::num::NonZeroUsize, String> {
    let max = crate::scale::MAX_WORKERS;
    parse_count(
        text,
        format!(
            "a run needs at least one worker: give 1 to {max} (or leave --workers out for one)"
        ),
        Some((
            max,
            format!(
                "at most {max} workers per process: timely connects every worker to every other, so memory and start-up time grow with the square of the workers (512 take 5 s and 390 MB to start, 1,000 take 1.3 GB), and workers beyond the machine's cores only take turns; add processes (--processes) instead"
            ),
        )),
        format!("not a number of workers (1 to {max})"),
    )
}

/// A count option: `zero` says why 0 is refused, `max` the largest count
/// and why, `nan` what a count is.
fn parse_count(
    text: &str,
    zero: String,
    max: Option<(usize, String)>,
    nan: String,
) -> Result<std::num::NonZeroUsize, String> {
    let n = text.trim().parse::<usize>().map_err(|_| nan)?;
    match max {
        Some((max, why)) if n > max => Err(why),
        _ => std::num::NonZeroUsize::new(n).ok_or(zero),
    }
}

/// `--processes N`: a count of processes, 1 to `crate::scale::MAX_PROCESSES`.
#[cfg(feature = "scale")]
fn parse_processes(text: &str) -> Result<std::num::NonZeroUsize, String> {
    let max = crate::scale::MAX_PROCESSES;
    parse_count(
        text,
        format!(
            "a run needs at least one process: give 1 to {max} (or leave --processes out for one)"
        ),
        Some((
            max,
            format!(
                "at most {max} processes: each process holds two connections and three threads for every other one, and process 0 alone reads the trace for all of them"
            ),
        )),
        format!("not a number of processes (1 to {max})"),
    )
}

/// `--workers` without the `scale` feature: refused as it is parsed, so
/// that no other check of the run speaks first.
#[cfg(not(feature = "scale"))]
fn parse_workers(_: &str) -> Result<std::num::NonZeroUsize, String> {
    Err(not_built("scale"))
}

/// `--processes` without the `scale` feature (see `parse_workers`).
#[cfg(not(feature = "scale"))]
fn parse_processes(_: &str) -> Result<std::num::NonZeroUsize, String> {
    Err(not_built("scale"))
}

/// `--max-keys N`: at least one key.
fn parse_max_keys(text: &str) -> Result<std::num::NonZeroUsize, String> {
    parse_count(
        text,
        "a keyed run keeps at least one key live: give 1 or more, or leave --max-keys out to keep every key".into(),
        None,
        "not a number of keys (1 or more)".into(),
    )
}

/// `--connect-timeout`, `--peer-timeout`: seconds, more than 0 and at most a day.
fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86_400.0 => Ok(std::time::Duration::from_secs_f64(s)),
        Ok(_) => Err("give a number of seconds more than 0 and at most 86400 (a day)".into()),
        Err(_) => Err("not a number of seconds (e.g. 30 or 2.5)".into()),
    }
}

/// Where a run's time comes from (`--clock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ClockArg {
    /// The rows' time field (`--time`), else their index.
    Data,
    /// The wall clock (`pipeline::FeedOptions::wall_clock`).
    Wall,
}

/// `--language`: the specification's language.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LanguageArg {
    /// By the file's extension: `.mstlo` and `.stl` are STL, anything else DSRV.
    Auto,
    /// A DSRV specification.
    Dsrv,
    /// An STL property file (`mstlo`, the checker's name for it, is the same).
    #[value(alias = "mstlo")]
    Stl,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormatArg {
    Auto,
    Tc,
    Csv,
    Jsonl,
}

impl FormatArg {
    /// The format asked for, if not `auto`.
    pub fn forced(self) -> Option<TraceFormat> {
        match self {
            FormatArg::Auto => None,
            FormatArg::Tc => Some(TraceFormat::Tc),
            FormatArg::Csv => Some(TraceFormat::Csv),
            FormatArg::Jsonl => Some(TraceFormat::Jsonl),
        }
    }
}

/// `vigil replay`: the run's options, then the log.
#[derive(clap::Args, Debug)]
#[command(after_help = EXIT_STATUSES)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// The log (`vigil run --record LOG`).
    #[arg(value_name = "LOG")]
    pub log: String,
    /// Re-read the traces given with `--input` and compare every row with
    /// the log; stop at the first divergence (exit status 4).
    #[arg(long)]
    pub check: bool,
}

/// Where `vigil run` writes its outputs: a format on standard output (or
/// `--output-file`), or a live sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputArg {
    Text,
    Csv,
    Jsonl,
    /// `mqtt://HOST:PORT[/PREFIX]`.
    Mqtt(String),
    /// `redis://HOST:PORT/STREAM`.
    Redis(String),
}

impl OutputArg {
    /// The writers' format (a live sink's values are JSON).
    fn format(&self) -> OutputFormat {
        match self {
            OutputArg::Text => OutputFormat::Text,
            OutputArg::Csv => OutputFormat::Csv,
            OutputArg::Jsonl | OutputArg::Mqtt(_) | OutputArg::Redis(_) => OutputFormat::Jsonl,
        }
    }

    /// The live sink's URL, if the outputs go to one.
    fn live(&self) -> Option<&str> {
        match self {
            OutputArg::Mqtt(url) | OutputArg::Redis(url) => Some(url),
            _ => None,
        }
    }
}

fn parse_output(s: &str) -> Result<OutputArg, String> {
    Ok(match s {
        "text" => OutputArg::Text,
        "csv" => OutputArg::Csv,
        "jsonl" => OutputArg::Jsonl,
        url if url.starts_with("mqtt://") => OutputArg::Mqtt(url.to_string()),
        url if url.starts_with("redis://") => OutputArg::Redis(url.to_string()),
        _ => {
            return Err(format!(
                "`{s}` is neither an output format (text, csv, jsonl) nor a live sink (mqtt://HOST:PORT[/PREFIX], redis://HOST:PORT/STREAM)"
            ));
        }
    })
}

fn parse_tier(s: &str) -> Result<Tier, String> {
    Tier::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Tier::ALL.iter().map(|t| t.name()).collect();
        format!("unknown tier `{s}` (expected one of: {})", names.join(", "))
    })
}

/// The exit statuses of `vigil`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    /// A usage error or an I/O error.
    Failure = 1,
    /// Errors in the specification.
    Spec = 2,
    /// A runtime error of the monitor.
    Runtime = 3,
    /// A malformed trace.
    Trace = 4,
    /// A trigger fired (with `--fail-on-trigger`).
    Triggered = 5,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// Writes a message to standard error. A closed or failing standard error
/// loses the message and nothing else: there is nowhere left to report it.
fn say(message: fmt::Arguments<'_>) {
    let mut pending = said_later();
    let mut err = io::stderr().lock();
    write_out(&mut pending, &mut err);
    let _ = err.write_fmt(message);
}

/// Writes what `say_later` queued to `err`, and empties the queue.
fn write_out(pending: &mut Vec<u8>, err: &mut impl Write) {
    if !pending.is_empty() {
        let _ = err.write_all(pending);
        pending.clear();
    }
}

/// Lines for standard error that are written together, not one `write` each
/// (alert lines: a million firings had cost seven calls each). Whatever is
/// said next (`say`) writes them first, so standard error keeps its order.
static SAID_LATER: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

fn said_later() -> std::sync::MutexGuard<'static, Vec<u8>> {
    SAID_LATER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Queues `bytes` for standard error; they are written once 64 KiB are
/// waiting, by the next `say`, or by `flush_said`.
fn say_later(bytes: &[u8]) {
    let mut pending = said_later();
    pending.extend_from_slice(bytes);
    if pending.len() >= 64 * 1024 {
        write_out(&mut pending, &mut io::stderr().lock());
    }
}

/// Writes the lines `say_later` queued.
fn flush_said() {
    write_out(&mut said_later(), &mut io::stderr().lock());
}

/// Reports an error message (`error: …`) on standard error.
fn error(message: impl fmt::Display) {
    say(format_args!("error: {message}\n"));
}

/// A failed write to standard output: a closed pipe (`vigil … | head`) ends
/// the command quietly with status 0; anything else is an I/O error, named
/// by where it went when that is not the outputs (see [`at`]).
fn output_error(e: &io::Error) -> Exit {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Exit::Success
    } else {
        match e.get_ref().and_then(|r| r.downcast_ref::<Destination>()) {
            Some(d) => error(format_args!("cannot write {}: {}", d.what, d.source)),
            None => error(format_args!("cannot write output: {e}")),
        }
        Exit::Failure
    }
}

use crate::pipeline::sink::Destination;

/// Writes `text` to standard output and flushes it.
fn print(text: &str) -> Exit {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Exit::Success,
        Err(e) => output_error(&e),
    }
}

/// Runs the command line and returns the process exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version requests are printed on standard output and
            // succeed; everything else is a usage error (status 1: clap's
            // own status 2 means a faulty specification here).
            let _ = e.print();
            return if e.use_stderr() {
                Exit::Failure
            } else {
                Exit::Success
            }
            .into();
        }
    };
    let exit = match cli.command {
        Command::Run(args) => run(&args),
        Command::Replay(args) => timed::replay(&args),
        Command::Bench(args) => bench::bench(&args),
        Command::Check { spec } if stl::is_stl(&spec, LanguageArg::Auto) => {
            match stl::load(&spec) {
                Ok(_) => Exit::Success,
                Err(exit) => exit,
            }
        }
        Command::Check { spec } => match load_spec(&spec) {
            Ok(_) => Exit::Success,
            Err(exit) => exit,
        },
        Command::Explain { spec, .. } if stl::is_stl(&spec, LanguageArg::Auto) => {
            match stl::load(&spec) {
                Ok(spec) => print(&spec.explain()),
                Err(exit) => exit,
            }
        }
        Command::Explain {
            spec,
            tier,
            summary,
        } => match load_spec(&spec) {
            Ok(spec) if summary => print(&crate::explain::summary(&spec)),
            Ok(spec) => print(&crate::explain::explain(&spec, tier)),
            Err(exit) => exit,
        },
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "vigil", &mut script);
            print(&String::from_utf8_lossy(&script))
        }
        Command::Repl { spec, tier } => repl::repl(spec.as_deref(), tier),
        Command::Tiers => {
            let mut text = String::new();
            for t in Tier::ALL.iter().filter(|t| **t != Tier::Auto) {
                text.push_str(t.name());
                text.push('\n');
            }
            print(&text)
        }
    };
    exit.into()
}

/// Reads and checks a specification, printing diagnostics on failure: a
/// file that cannot be read is an I/O error (status 1), a faulty
/// specification status 2.
pub fn load_spec(path: &str) -> Result<Spec, Exit> {
    let bytes = std::fs::read(path).map_err(|e| {
        error(format_args!("cannot read specification `{path}`: {e}"));
        Exit::Failure
    })?;
    Spec::parse_bytes(path, &bytes).map_err(|d| {
        say(format_args!("{d}\n"));
        Exit::Spec
    })
}

use crate::pipeline::direct::Direct;
use crate::pipeline::run_loop::RunLoop;
use crate::pipeline::sink::Alerts;

/// Alert lines on standard error: under a progress bar each line is written
/// at once, with the bar off the terminal; else lines wait to go out
/// together (`flush`, or the next message).
struct Said(ops::Bar);

impl crate::pipeline::sink::AlertLines for Said {
    fn line(&mut self, text: &str) {
        if self.0.is_shown() {
            self.0.suspend(|| say(format_args!("{text}")));
        } else {
            say_later(text.as_bytes());
        }
    }

    fn flush(&mut self) {
        flush_said();
    }
}

/// The alerts of a run: JSON lines to `--alerts` (written through `file`
/// when given: opened by a checkpointed run, which keeps its length), to an
/// MQTT broker the outputs go to, or readable lines on standard error
/// (behind `bar`).
fn alerts(
    args: &RunArgs,
    spec: &Spec,
    file: Option<std::fs::File>,
    bar: ops::Bar,
) -> Result<Alerts, Exit> {
    let key = args.key.as_deref();
    let json = |out: Box<dyn Write>, dest: String| Ok(Alerts::json(spec, key, out, dest));
    match args.alerts.as_deref() {
        // A run publishing to MQTT or Redis sends its alerts there too
        // (`PREFIX/alerts`, `STREAM:alerts`).
        None => match &args.output {
            OutputArg::Mqtt(url) | OutputArg::Redis(url) if !spec.trigger_names().is_empty() => {
                match live::alerts_sink(url, &live::options(args, None)) {
                    Ok(sink) => json(sink, format!("the alerts to `{}`", live::redact(url))),
                    Err(e) => {
                        error(e);
                        Err(Exit::Failure)
                    }
                }
            }
            _ => Ok(Alerts::readable(spec, key, Box::new(Said(bar)))),
        },
        Some("-") => json(
            Box::new(io::stdout()),
            "the alerts to standard output".to_string(),
        ),
        Some(path) => {
            let dest = format!("the alerts file `{path}`");
            match file {
                Some(f) => json(Box::new(f), dest),
                None => match std::fs::File::create(path) {
                    Ok(f) => json(Box::new(f), dest),
                    Err(e) => {
                        error(format_args!("cannot create the alerts file `{path}`: {e}"));
                        Err(Exit::Failure)
                    }
                },
            }
        }
    }
}

/// The exit status of a trace error: malformed (4) or unreadable (1).
fn trace_exit(e: &TraceError) -> Exit {
    match e.kind {
        TraceErrorKind::Malformed => Exit::Trace,
        TraceErrorKind::Io => Exit::Failure,
    }
}

/// Says on standard error when the tier asked for is not the one running
/// (`Err` with `--strict-tier`, which refuses to run then).
/// Whether a single-process run of `args` merges its sources through a feed (`timed.rs`):
/// time, several sources, a replay log, periodic streams, an MQTT input split per topic, the
/// wall clock. Its summary then says what the merge did, and a scaled run's says so too.
fn merges(args: &RunArgs, spec: &Spec) -> bool {
    // An MQTT input with `--time` is a source per topic, merged by time.
    let split = (args.input.iter()).any(|i| live::splits(i, args));
    args.input.len() > 1
        || args.time.is_some()
        || args.record.is_some()
        || spec.checked().has_periodic_streams()
        || split
        || args.clock == ClockArg::Wall
}

fn check_tier(args: &RunArgs, stats: &crate::monitor::Stats) -> Result<(), Exit> {
    if let Some((why, running)) = ops::tier_fallback(args.tier, stats) {
        if args.strict_tier {
            error(format_args!(
                "{why}; --strict-tier refuses to run it on {running} instead"
            ));
            return Err(Exit::Failure);
        }
        say(format_args!("warning: {why}; running {running} instead\n"));
    }
    Ok(())
}

/// The format of trace `path`: `--format`, else by extension; a stream
/// without one (standard input, a FIFO, `/dev/stdin`, `<(…)`) is JSON lines
/// (`pipeline::inputs::format_of`).
fn trace_format(path: &str, format: FormatArg) -> Result<TraceFormat, Exit> {
    crate::pipeline::inputs::format_of(path, format.forced()).map_err(|m| {
        error(m);
        Exit::Failure
    })
}

fn run(args: &RunArgs) -> Exit {
    if stl::is_stl(&args.spec, args.language) {
        return stl::run(args);
    }
    if let Some(option) = stl::stl_only_options(args) {
        error(format_args!(
            "{option} applies to STL property files (--language stl); `{}` is a DSRV specification",
            args.spec
        ));
        return Exit::Failure;
    }
    let spec = match load_spec(&args.spec) {
        Ok(s) => s,
        Err(exit) => return exit,
    };
    let output = args.output.format();
    if let Err(m) = live::check_options(args) {
        error(m);
        return Exit::Failure;
    }
    if args.checkpoint.is_some()
        && let Err(m) = checkpoint::check_checkpointable(&spec)
    {
        error(m);
        return Exit::Failure;
    }
    // JSON alert lines between CSV rows (or in a JSON-lines stream of
    // outputs, as lines of another shape) would break every reader of it.
    if args.alerts.as_deref() == Some("-")
        && args.output_file.is_none()
        && !args.quiet
        && matches!(args.output, OutputArg::Csv | OutputArg::Jsonl)
    {
        error(format_args!(
            "--alerts - and --output {} would mix two formats on standard output; write the alerts to a file (--alerts FILE), the outputs to one (--output-file FILE), or leave --alerts out (alerts then go to standard error)",
            if matches!(args.output, OutputArg::Csv) {
                "csv"
            } else {
                "jsonl"
            }
        ));
        return Exit::Failure;
    }
    // Before anything is opened for writing.
    if let Err(m) = paths::check_distinct(args) {
        error(m);
        return Exit::Failure;
    }
    // A tcp:// input is a listener whose connections are sources merged by
    // time, whatever else is given: never a file to open.
    if let Some(tcp) = args.input.iter().find(|i| i.starts_with("tcp://"))
        && args.time.is_none()
    {
        error(format_args!(
            "--input {tcp}: a tcp:// input's connections are merged by time: pass --time FIELD, the field of each row that holds its time"
        ));
        return Exit::Failure;
    }
    // Workers or processes: the keyed run on timely (`scale.rs`).
    if args.workers.is_some() || args.processes.is_some() {
        #[cfg(feature = "scale")]
        return scale::run(args, &spec, output);
        // The parser refuses both options in such a build; a `RunArgs` made
        // in code is refused here.
        #[cfg(not(feature = "scale"))]
        {
            error(not_built("scale"));
            return Exit::Failure;
        }
    }
    // Time, several sources or a log: the merged run (`timed.rs`).
    if merges(args, &spec) {
        return timed::run(args, &spec, output, None);
    }
    let Some(input) = args.input.first().map(String::as_str) else {
        error("the trace is missing: pass --input FILE (or - for standard input)");
        return Exit::Failure;
    };
    let format = match trace_format(input, args.format) {
        Ok(f) => f,
        Err(exit) => return exit,
    };
    if format == TraceFormat::Tc && args.on_malformed != OnMalformed::Stop {
        // A block's step number places every later block, so one cannot be
        // dropped alone without renumbering the trace behind the user's back.
        error(
            "--on-malformed skip|warn needs a JSON-lines or CSV trace: a malformed `.input` block cannot be skipped alone (its step numbers tie it to the blocks around it)",
        );
        return Exit::Failure;
    }
    let view = match ops::view(args, &spec, output) {
        Ok(v) => v,
        Err(message) => {
            error(message);
            return Exit::Failure;
        }
    };
    let options = ReaderOptions {
        max_step_gap: args.max_step_gap,
    };
    let checkpoint::Prepared {
        mut monitor,
        mut reader,
        streaming,
        mut writer,
        mut checkpoints,
        alerts: alerts_file,
    } = match checkpoint::prepare(args, &spec, format, output, options, &view) {
        Ok(p) => p,
        Err(exit) => return exit,
    };
    if let Err(exit) = check_tier(args, &monitor.stats()) {
        return exit;
    }
    let len = match input {
        "-" => None,
        path => std::fs::metadata(path).ok().map(|m| m.len()),
    };
    let progress = ops::Progress::new(streaming, len);
    let mut alerts = match alerts(args, &spec, alerts_file, progress.bar()) {
        Ok(a) => a,
        Err(exit) => return exit,
    };
    let mut tally = ops::Tally::new(progress);
    // Triggers need each row's state (their messages read any stream), and
    // passed fields each row's inputs, so such a run goes row by row even
    // from a regular file.
    let by_row = streaming || !spec.trigger_names().is_empty() || view.needs_rows();
    // A resumed keyed run counts its rows from the trace's start, so that a
    // missing key's row number does.
    let resumed = match &monitor {
        Runner::Keyed(m) => m.rows(),
        Runner::Single(_) => 0,
    };
    let notify = timed::notices_under(tally.progress.bar());
    let mut counts = drive::Counts {
        rows_read: resumed,
        ..drive::Counts::default()
    };
    let ended = {
        let bar = &mut tally.progress;
        let mut show = |rows: u64, reader: &dyn RowReader| bar.update(rows, reader);
        let mut driven = drive::Drive {
            malformed: args.on_malformed.into(),
            name: crate::trace::display_name(input),
            lines: format != TraceFormat::Tc,
            notify: &notify,
            progress: &mut show,
        };
        match &mut monitor {
            Runner::Single(m) if !by_row => {
                let columns = (&view, output);
                let ck = checkpoints.as_mut();
                drive::batches(
                    &mut driven,
                    m,
                    reader.as_mut(),
                    writer.as_mut(),
                    columns,
                    ck,
                    &mut counts,
                )
                .map(|end| (end, false))
            }
            runner => {
                let mut run = RunLoop {
                    key_input: args.key.as_deref(),
                    streaming,
                    malformed: args.on_malformed.into(),
                    counts,
                    checkpoints: checkpoints.take(),
                    ..RunLoop::new(&view, output, spec.input_names().len(), notify.clone())
                };
                let width = run.inputs + view.extra();
                let (name, lines) = (driven.name, driven.lines);
                let mut steps = Direct::new(reader.as_mut(), name, lines, width, driven.progress);
                let ended = run.go(&mut steps, runner, writer.as_mut(), &mut alerts);
                counts = run.counts;
                ended
            }
        }
    };
    // The summary counts this process's rows.
    counts.rows_read -= resumed;
    tally.add(counts);
    tally.progress.finish();
    let status = ended.map(self::ended);
    let status = match status
        .and_then(|s| writer.flush().map(|()| s))
        .and_then(|s| alerts.flush().map(|()| s))
    {
        Ok(exit) => exit,
        Err(e) => return output_error(&e),
    };
    if args.summary || args.fail_on_trigger {
        say(format_args!(
            "{}",
            tally.summary(&monitor.stats(), alerts.triggers())
        ));
    }
    let status = fail_on_trigger(args, status, alerts.fired());
    if args.stats {
        say(format_args!("{}", monitor.stats()));
        if let Runner::Keyed(m) = &monitor {
            say(format_args!("keys: {} live\n", m.key_count()));
        }
    }
    status
}

/// The exit status of a run's end (a stop said on standard error first),
/// given whether a key was stopped by a runtime error.
fn ended((end, keys_stopped): (drive::End, bool)) -> Exit {
    match end {
        drive::End::Done if keys_stopped => Exit::Runtime,
        drive::End::Done => Exit::Success,
        drive::End::Stopped(message, ended) => {
            error(message);
            exit_of(ended)
        }
    }
}

/// The exit status of a run ended by whose fault `ended` says.
pub(super) fn exit_of(ended: drive::Ended) -> Exit {
    match ended {
        drive::Ended::Trace => Exit::Trace,
        drive::Ended::Runtime => Exit::Runtime,
        drive::Ended::Failure => Exit::Failure,
    }
}

/// With `--fail-on-trigger`, a run that is otherwise a success and had
/// `fired` trigger firings says so and ends with status 5.
fn fail_on_trigger(args: &RunArgs, status: Exit, fired: u64) -> Exit {
    if status == Exit::Success && args.fail_on_trigger && fired > 0 {
        say(format_args!(
            "error: {fired} trigger firing{} (--fail-on-trigger)\n",
            if fired == 1 { "" } else { "s" }
        ));
        Exit::Triggered
    } else {
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
