//! A run's outputs opened for writing: the writer of its output columns (to standard output,
//! a file, or a live sink's URL: an MQTT topic, a Redis Stream), and the alerts file. A run
//! that checkpoints keeps its files exactly once: each is opened with a second handle a
//! checkpoint syncs it through, and a resumed run's is cut back to the length its checkpoint
//! recorded and written on from there (a CSV header is not written again).
//!
//! ```
//! use vigil::pipeline::outputs::{self, OutputOptions};
//! use vigil::trace::OutputFormat;
//!
//! let dir = std::env::temp_dir().join(format!("vigil-doc-outputs-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let file = dir.join("out.csv").display().to_string();
//! let live = vigil::live::Options::new(vigil::notice::ignore());
//! let mut opened = outputs::open(
//!     &OutputOptions {
//!         format: OutputFormat::Csv,
//!         file: Some(&file),
//!         checkpointed: true,
//!         ..OutputOptions::new(&live)
//!     },
//!     vec!["total".into()],
//!     None,
//! )?;
//! opened.writer.flush()?;
//! // The file, and a handle a checkpoint syncs it through.
//! assert_eq!(opened.output_sync.as_ref().map(|(p, _)| p.as_str()), Some(file.as_str()));
//! assert_eq!(std::fs::read_to_string(&file)?, "step,total\n");
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::checkpoint::{Checkpoint, created};
use crate::live;
use crate::trace::{self, OutputFormat, OutputWriter};
use std::fs::File;
use std::io::{self, Write};

/// Where a run's outputs go and how they are written.
pub struct OutputOptions<'a> {
    /// The output columns' format.
    pub format: OutputFormat,
    /// The output file, else standard output (or the live sink).
    pub file: Option<&'a str>,
    /// A live sink's URL (`mqtt://…`, `redis://…`), instead of a file or
    /// standard output.
    pub live: Option<&'a str>,
    /// The live transports' options.
    pub live_options: &'a live::Options,
    /// The key input of a keyed run (its outputs name their key).
    pub key: Option<&'a str>,
    /// The alerts file (JSON lines), if any.
    pub alerts: Option<&'a str>,
    /// Whether the run checkpoints: the files are then kept exactly once.
    pub checkpointed: bool,
    /// Whether a source is a stream: each row's outputs are then written as
    /// it is evaluated, on the run's thread; else a thread of their own
    /// formats and writes them, overlapping the next rows.
    pub streaming: bool,
}

impl<'a> OutputOptions<'a> {
    /// CSV to standard output, by a thread of its own, no alerts file, no
    /// checkpoints (set the fields that differ).
    pub fn new(live_options: &'a live::Options) -> OutputOptions<'a> {
        OutputOptions {
            format: OutputFormat::Csv,
            file: None,
            live: None,
            live_options,
            key: None,
            alerts: None,
            checkpointed: false,
            streaming: false,
        }
    }
}

/// A run's outputs, opened (see the module doc).
pub struct Outputs {
    /// The output columns' writer.
    pub writer: Box<dyn OutputWriter>,
    /// The output file kept exactly once: its path, and a handle a
    /// checkpoint syncs it through.
    pub output_sync: Option<(String, File)>,
    /// The alerts file kept exactly once, to write the alerts to.
    pub alerts_file: Option<File>,
    /// Its path, and a handle a checkpoint syncs it through.
    pub alerts_sync: Option<(String, File)>,
}

/// Opens the outputs `options` say, the columns named `names`, each file
/// kept exactly once where the run checkpoints (cut back to the checkpoint
/// `resume`'s lengths when resuming, as a live sink goes on after the
/// entries it had written).
pub fn open(
    options: &OutputOptions<'_>,
    names: Vec<String>,
    resume: Option<&Checkpoint>,
) -> Result<Outputs, String> {
    let kept = options.checkpointed || resume.is_some();
    let keep = |path: &str, alerts: bool| match resume {
        Some(r) => r.kept(path, alerts),
        None => created(path, if alerts { "alerts file" } else { "output file" }),
    };
    let (writer, output_sync) = match (options.live, options.file) {
        (Some(url), _) => {
            let at = live::Resume {
                token: None,
                written: resume.and_then(Checkpoint::written),
            };
            (
                live::open_output(url, names, options.live_options, &at)?,
                None,
            )
        }
        (None, None) => {
            // A stream's outputs are flushed row by row; else standard
            // output is written in large blocks.
            let out: Box<dyn Write + Send> = match options.streaming {
                true => Box::new(io::stdout()),
                false => trace::raw_stdout(),
            };
            (writer(options, names, out, false), None)
        }
        (None, Some(path)) if kept => {
            let (file, sync) = keep(path, false)?;
            let continued = file.metadata().is_ok_and(|m| m.len() > 0);
            let writer = writer(options, names, Box::new(file), continued);
            (writer, Some((path.to_string(), sync)))
        }
        (None, Some(path)) => {
            let file = File::create(path)
                .map_err(|e| format!("cannot create the output file `{path}`: {e}"))?;
            (writer(options, names, Box::new(file), false), None)
        }
    };
    // A stream's outputs are written as each row is evaluated, and a live
    // sink is a writer of its own; else a thread formats and writes them.
    let writer = match options.streaming || options.live.is_some() {
        true => writer,
        false => trace::WriteBehind::spawn(writer),
    };
    let (alerts_file, alerts_sync) = match options.alerts {
        Some(path) if path != "-" && kept => {
            let (file, sync) = keep(path, true)?;
            (Some(file), Some((path.to_string(), sync)))
        }
        _ => (None, None),
    };
    Ok(Outputs {
        writer,
        output_sync,
        alerts_file,
        alerts_sync,
    })
}

/// The writer of the columns `names` to `out` (`continued`: a resumed
/// file, whose header is there already).
fn writer(
    options: &OutputOptions<'_>,
    names: Vec<String>,
    out: Box<dyn Write + Send>,
    continued: bool,
) -> Box<dyn OutputWriter> {
    match options.key {
        Some(k) => trace::keyed_writer(options.format, names, k, out, continued),
        None if continued => trace::continue_writer(options.format, names, out),
        None => trace::make_writer(options.format, names, out),
    }
}
