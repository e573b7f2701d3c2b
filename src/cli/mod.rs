//! The `vigil` command line: `run`, `check` (and their exit statuses).
//!
//! Exit statuses: 0 success, 1 usage or I/O error, 2 specification errors,
//! 3 runtime error, 4 malformed or unreadable trace.

use crate::batch::{OutputBatch, RowBatch};
use crate::monitor::{Monitor, Spec, Tier};
use crate::trace::{self, OutputFormat, OutputWriter, RowReader, TraceError, TraceFormat};
use crate::value::Value;
use clap::{Parser, Subcommand, ValueEnum};
use std::io;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "vigil",
    version,
    about = "A JIT-backed stream monitor for DSRV specifications"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a specification over a trace, printing every output at every step.
    Run(RunArgs),
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
        #[arg(long, default_value = "auto", value_parser = parse_tier)]
        tier: Tier,
    },
    /// List the execution tiers this build can run, one per line (for `--tier`).
    Tiers,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The specification file (DSRV).
    pub spec: String,
    /// The trace: a file, or `-` for standard input (read row by row).
    #[arg(long, short)]
    pub input: String,
    /// Trace format; `auto` picks by file extension (`.input`, `.csv`,
    /// `.jsonl`), and standard input defaults to JSON lines.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    pub format: FormatArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputArg::Text)]
    pub output: OutputArg,
    /// Execution tier.
    #[arg(long, default_value = "auto", value_parser = parse_tier)]
    pub tier: Tier,
    /// Print per-tier statistics on standard error at the end.
    #[arg(long)]
    pub stats: bool,
    /// The longest string, in bytes, that `++` may produce; a longer result is
    /// a runtime error (exit 3).
    #[arg(long, value_name = "BYTES", default_value_t = crate::monitor::DEFAULT_MAX_STRING_BYTES)]
    pub max_string_bytes: usize,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormatArg {
    Auto,
    Tc,
    Csv,
    Jsonl,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OutputArg {
    Text,
    Csv,
    Jsonl,
}

fn parse_tier(s: &str) -> Result<Tier, String> {
    Tier::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Tier::ALL.iter().map(|t| t.name()).collect();
        format!("unknown tier `{s}` (expected one of: {})", names.join(", "))
    })
}

/// Runs the command line and returns the process exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(&args),
        Command::Check { spec } => match load_spec(&spec) {
            Ok(_) => ExitCode::SUCCESS,
            Err(code) => code,
        },
        Command::Explain { spec, tier } => match load_spec(&spec) {
            Ok(spec) => {
                print!("{}", crate::explain::explain(&spec, tier));
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Command::Tiers => {
            for t in Tier::ALL.iter().filter(|t| **t != Tier::Auto) {
                println!("{t}");
            }
            ExitCode::SUCCESS
        }
    }
}

/// Reads and checks a specification, printing diagnostics on failure.
pub fn load_spec(path: &str) -> Result<Spec, ExitCode> {
    let source = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot read specification `{path}`: {e}");
            return Err(ExitCode::from(2));
        }
    };
    Spec::parse(path, &source).map_err(|d| {
        eprint!("{}", d.render());
        let n = d.errors.len();
        eprintln!(
            "error: could not check `{path}` due to {n} previous error{}",
            if n == 1 { "" } else { "s" }
        );
        ExitCode::from(2)
    })
}

fn trace_error(e: &TraceError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(4)
}

/// A write error on standard output: a closed pipe (`vigil … | head`) ends
/// the run quietly; anything else is reported.
fn output_error(e: io::Error) -> ExitCode {
    if e.kind() == io::ErrorKind::BrokenPipe {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: cannot write output: {e}");
        ExitCode::from(1)
    }
}

fn run(args: &RunArgs) -> ExitCode {
    let spec = match load_spec(&args.spec) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let format = match args.format {
        FormatArg::Tc => TraceFormat::Tc,
        FormatArg::Csv => TraceFormat::Csv,
        FormatArg::Jsonl => TraceFormat::Jsonl,
        FormatArg::Auto if args.input == "-" => TraceFormat::Jsonl,
        FormatArg::Auto => match trace::format_from_path(&args.input) {
            Some(f) => f,
            None => {
                eprintln!(
                    "error: cannot tell the format of `{}` from its extension; pass --format tc|csv|jsonl",
                    args.input
                );
                return ExitCode::from(4);
            }
        },
    };
    let output = match args.output {
        OutputArg::Text => OutputFormat::Text,
        OutputArg::Csv => OutputFormat::Csv,
        OutputArg::Jsonl => OutputFormat::Jsonl,
    };
    let mut reader = match trace::open_reader(&args.input, format, &spec.input_schema()) {
        Ok(r) => r,
        Err(e) => return trace_error(&e),
    };
    let mut monitor = Monitor::builder(&spec)
        .tier(args.tier)
        .max_string_bytes(args.max_string_bytes)
        .build();
    let names = monitor
        .output_names()
        .into_iter()
        .map(String::from)
        .collect();
    let mut writer = trace::make_writer(output, names, Box::new(io::stdout().lock()));
    let status = if args.input == "-" {
        run_streaming(&mut monitor, reader.as_mut(), writer.as_mut())
    } else {
        run_batched(&mut monitor, reader.as_mut(), writer.as_mut())
    };
    let status = match status {
        Ok(code) => code,
        Err(e) => return output_error(e),
    };
    if let Err(e) = writer.flush() {
        return output_error(e);
    }
    if args.stats {
        eprint!("{}", monitor.stats());
    }
    status
}

/// Where a run stopped early: a runtime error (exit 3) or a malformed trace
/// (exit 4), reported after the outputs of every earlier row are written.
fn stop(writer: &mut dyn OutputWriter, message: &str, code: u8) -> io::Result<ExitCode> {
    writer.flush()?;
    eprintln!("error: {message}");
    Ok(ExitCode::from(code))
}

/// Standard input: one row at a time, outputs flushed per row, so that vigil
/// can sit in an endless pipe.
fn run_streaming(
    monitor: &mut Monitor,
    reader: &mut dyn RowReader,
    writer: &mut dyn OutputWriter,
) -> io::Result<ExitCode> {
    let mut row: Vec<Option<Value>> = vec![None; monitor.input_count()];
    let mut samples = Vec::with_capacity(monitor.output_names().len());
    loop {
        for w in reader.take_warnings() {
            eprintln!("warning: {w}");
        }
        match reader.next_row(&mut row) {
            Ok(true) => {}
            Ok(false) => return Ok(ExitCode::SUCCESS),
            Err(e) => return stop(writer, &e.to_string(), 4),
        }
        let step = monitor.steps();
        match monitor.step(&row) {
            Ok(outputs) => {
                samples.clear();
                samples.extend(outputs.iter());
                writer.write_step(step, &samples)?;
                writer.flush()?;
            }
            Err(e) => return stop(writer, &e.to_string(), 3),
        }
    }
}

/// Rows evaluated per batch when reading a file.
const BATCH_ROWS: usize = 4096;

/// A file: rows are read into batches of columns and evaluated by
/// `Monitor::run_batch` (one native call per run of rows on the
/// native-whole tier); outputs are written as each batch completes.
fn run_batched(
    monitor: &mut Monitor,
    reader: &mut dyn RowReader,
    writer: &mut dyn OutputWriter,
) -> io::Result<ExitCode> {
    let mut row: Vec<Option<Value>> = vec![None; monitor.input_count()];
    let width = monitor.output_names().len();
    let mut samples = Vec::with_capacity(width);
    let mut rows = RowBatch::new(monitor.input_count());
    let mut out = OutputBatch::new();
    loop {
        rows.clear();
        let mut end = None;
        while rows.len() < BATCH_ROWS {
            match reader.next_row(&mut row) {
                Ok(true) => rows.push_row(&row),
                Ok(false) => {
                    end = Some(Ok(()));
                    break;
                }
                Err(e) => {
                    end = Some(Err(e));
                    break;
                }
            }
        }
        for w in reader.take_warnings() {
            eprintln!("warning: {w}");
        }
        let first = monitor.steps();
        let result = monitor.run_batch(&rows, &mut out);
        for r in 0..out.len() {
            samples.clear();
            samples.extend((0..width).map(|c| out.get(r, c)));
            writer.write_step(first + r as u64, &samples)?;
        }
        if let Err(e) = result {
            return stop(writer, &e.to_string(), 3);
        }
        match end {
            Some(Ok(())) => return Ok(ExitCode::SUCCESS),
            Some(Err(e)) => return stop(writer, &e.to_string(), 4),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
