//! The `vigil` command line: `run`, `check` (and their exit statuses).
//!
//! Exit statuses: 0 success, 1 usage or I/O error, 2 specification errors,
//! 3 runtime error, 4 malformed or unreadable trace.

use crate::monitor::{Monitor, Spec, Tier};
use crate::trace::{self, OutputFormat, TraceError, TraceFormat};
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
                print!("{}", crate::exec::explain::explain(&spec, tier));
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
    let mut monitor = Monitor::builder(&spec).tier(args.tier).build();
    let names = monitor
        .output_names()
        .into_iter()
        .map(String::from)
        .collect();
    let mut writer = trace::make_writer(output, names, Box::new(io::stdout().lock()));
    // On a pipe every row's outputs are flushed at once, so that vigil can sit
    // in an endless stream; on a file they are flushed at the end.
    let flush_each_row = args.input == "-";
    let mut row: Vec<Option<Value>> = vec![None; monitor.input_count()];
    let mut samples = Vec::with_capacity(monitor.output_names().len());
    let status = loop {
        for w in reader.take_warnings() {
            eprintln!("warning: {w}");
        }
        match reader.next_row(&mut row) {
            Ok(true) => {}
            Ok(false) => break ExitCode::SUCCESS,
            Err(e) => {
                if let Err(e) = writer.flush() {
                    return output_error(e);
                }
                break trace_error(&e);
            }
        }
        let step = monitor.steps();
        match monitor.step(&row) {
            Ok(outputs) => {
                samples.clear();
                samples.extend(outputs.iter());
                if let Err(e) = writer.write_step(step, &samples) {
                    return output_error(e);
                }
                if flush_each_row && let Err(e) = writer.flush() {
                    return output_error(e);
                }
            }
            Err(e) => {
                if let Err(e) = writer.flush() {
                    return output_error(e);
                }
                eprintln!("error: {e}");
                break ExitCode::from(3);
            }
        }
    };
    if let Err(e) = writer.flush() {
        return output_error(e);
    }
    if args.stats {
        eprint!("{}", monitor.stats());
    }
    status
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
