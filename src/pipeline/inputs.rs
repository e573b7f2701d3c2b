//! A run's inputs opened from their names, as a feed reads them: a trace file (read ahead on a
//! thread of its own when the run has few), standard input (`-`) or a FIFO, a live source's
//! URL (`mqtt://`, `redis://`: its readers, one per topic where the options say so), and at
//! most one `tcp://` listener whose connections join as sources. Resuming, each is checked
//! against the checkpoint's source at its place and put back where it stood (a file from its
//! position, checked by its digests; a stream by dropping the rows it consumed; a live source
//! by its token).
//!
//! ```
//! use vigil::pipeline::Malformed;
//! use vigil::pipeline::inputs::{self, InputOptions};
//! use vigil::trace::{InputSchema, ReaderOptions};
//!
//! let dir = std::env::temp_dir().join(format!("vigil-doc-inputs-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let (a, b) = (dir.join("a.csv"), dir.join("b.jsonl"));
//! std::fs::write(&a, "t,x\n1,10\n")?;
//! std::fs::write(&b, "{\"t\": 2, \"x\": 20}\n")?;
//! let schema = InputSchema { names: vec!["x".into(), "t".into()], types: vec![vigil::Type::Int, vigil::Type::Any] };
//! let live = vigil::live::Options::new(vigil::notice::ignore());
//! let options = InputOptions {
//!     schema: &schema,
//!     reader: ReaderOptions::default(),
//!     format: None,
//!     malformed: Malformed::Stop,
//!     live: &live,
//!     key: None,
//! };
//! let names = [a.display().to_string(), b.display().to_string()];
//! let opened = inputs::open(&names, &options, None)?;
//! // Each by the format its name says, as the checkpoint would record it.
//! assert_eq!(opened.sources.len(), 2);
//! assert!(!opened.streaming && opened.listener.is_none());
//! assert_eq!(opened.kept[1].format, vigil::trace::TraceFormat::Jsonl);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::checkpoint::{self, Checkpoint, Dropping, Reposition};
use super::drive::Ended;
use super::{Feed, Malformed};
use crate::live;
use crate::notice::Notify;
use crate::trace::{
    self, InputSchema, ReaderOptions, RowReader, TraceError, TraceErrorKind, TraceFormat,
};
use std::fmt;
use std::net::TcpListener;

/// Regular files a run reads ahead on threads of their own, at most (a run
/// of more reads them all on its own thread: past a few, the threads only
/// contend for the cores, and each holds a few thousand rows).
pub const READ_AHEAD_FILES: usize = 8;

/// How a run's inputs are read.
pub struct InputOptions<'a> {
    /// The cells every source's rows have (the monitor's inputs, passed
    /// fields, the time field).
    pub schema: &'a InputSchema,
    /// The trace readers' options.
    pub reader: ReaderOptions,
    /// The format of every trace file, else each one's by its name
    /// ([`format_of`]).
    pub format: Option<TraceFormat>,
    /// What a malformed row does (an `.input` trace's cannot be dropped).
    pub malformed: Malformed,
    /// The live transports' options.
    pub live: &'a live::Options,
    /// In a keyed run that skips rows without their key (a scaled one), the key's cell: a
    /// stream put back where a checkpoint left it drops the rows it had consumed, skipped
    /// ones included.
    pub key: Option<usize>,
}

/// A run's inputs, opened (see the module doc).
pub struct Inputs {
    /// Each source: its name, reader and format, in the order given (a live
    /// input may be several, one per topic).
    pub sources: Vec<(String, Box<dyn RowReader>, TraceFormat)>,
    /// The sources as a checkpoint records them.
    pub kept: Vec<checkpoint::Source>,
    /// Whether a source is a stream (standard input, a FIFO, a live source
    /// or a listener): outputs are then flushed as rows are evaluated.
    pub streaming: bool,
    /// The `tcp://` input's listener, bound.
    pub listener: Option<TcpListener>,
}

/// Why the inputs could not be opened: the message, and whose fault it is.
#[derive(Debug)]
pub struct Refused {
    /// What went wrong, naming the input.
    pub message: String,
    /// The input's (a malformed trace met while repositioning) or the
    /// environment's (anything else).
    pub ended: Ended,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refused {}

impl From<String> for Refused {
    fn from(message: String) -> Refused {
        Refused {
            message,
            ended: Ended::Failure,
        }
    }
}

impl From<TraceError> for Refused {
    fn from(e: TraceError) -> Refused {
        Refused {
            message: e.to_string(),
            ended: match e.kind {
                TraceErrorKind::Malformed => Ended::Trace,
                TraceErrorKind::Io => Ended::Failure,
            },
        }
    }
}

/// The format of the trace file `path`: `forced` if given, else by its
/// extension (`.input`, `.csv`, `.jsonl`/`.json`); standard input, a FIFO
/// or another non-file is read as JSON lines, and a live source's rows are
/// JSON lines too (each can be dropped alone).
pub fn format_of(path: &str, forced: Option<TraceFormat>) -> Result<TraceFormat, String> {
    if live::is_url(path) {
        return Ok(TraceFormat::Jsonl);
    }
    if let Some(f) = forced {
        return Ok(f);
    }
    if path == "-" {
        return Ok(TraceFormat::Jsonl);
    }
    if let Some(f) = trace::format_from_path(path) {
        return Ok(f);
    }
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => Ok(TraceFormat::Jsonl),
        Ok(_) => Err(format!(
            "cannot tell the format of `{path}` from its extension; pass --format tc|csv|jsonl"
        )),
        Err(e) => Err(format!("{path}: cannot open the trace: {e}")),
    }
}

/// Opens the inputs `names` (see the module doc), each put back where the
/// checkpoint `resume` left it, which must have as many sources.
pub fn open(
    names: &[String],
    options: &InputOptions<'_>,
    resume: Option<&Checkpoint>,
) -> Result<Inputs, Refused> {
    let files = names
        .iter()
        .filter(|p| !live::is_url(p) && !p.starts_with("tcp://"));
    let read_ahead = files.count() <= READ_AHEAD_FILES;
    let mut inputs = Inputs {
        sources: Vec::new(),
        kept: Vec::new(),
        streaming: false,
        listener: None,
    };
    for path in names {
        if live::is_url(path) {
            inputs.open_live(path, options, resume)?;
        } else if let Some(addr) = path.strip_prefix("tcp://") {
            if inputs.listener.is_some() {
                return Err("one tcp:// input at most (its connections are the sources)"
                    .to_string()
                    .into());
            }
            let listener = TcpListener::bind(addr)
                .map_err(|e| format!("--input {path}: cannot listen: {e}"))?;
            inputs.listener = Some(listener);
            inputs.streaming = true;
        } else {
            inputs.open_trace(path, options, resume, read_ahead)?;
        }
    }
    if let Some(r) = resume
        && r.sources() != inputs.sources.len()
    {
        return Err(format!(
            "cannot resume from `{}`: it was taken on {} sources, and this run has {}",
            r.path(),
            r.sources(),
            inputs.sources.len()
        )
        .into());
    }
    Ok(inputs)
}

impl Inputs {
    /// Gives every source to `feed`, and the listener's connections as they come (said with
    /// a [`Notice::Listening`](crate::notice::Notice::Listening) naming its address, since a
    /// port 0 asks for any free one); returns the sources as a checkpoint records them and
    /// whether one is a stream. Live sources merged are each read on a thread of their own,
    /// so that a silent one does not hold the others back.
    pub fn join(
        self,
        feed: &mut Feed,
        schema: &InputSchema,
        malformed: Malformed,
        notify: &Notify,
    ) -> (Vec<checkpoint::Source>, bool) {
        let merged_live = self.streaming && (self.sources.len() > 1 || self.listener.is_some());
        for (name, reader, format) in self.sources {
            feed.add_reader(name, reader, format);
        }
        if merged_live {
            // Each read by the reader opened here. (Opening it again on the thread closed
            // the first one: a FIFO's writer could then find no reader and fail with a broken
            // pipe.)
            feed.read_on_threads();
        }
        if let Some(l) = self.listener {
            if let Ok(addr) = l.local_addr() {
                notify(crate::notice::Notice::Listening {
                    at: format!("tcp://{addr}"),
                });
            }
            feed.listen(super::spawn_listener(
                l,
                schema.clone(),
                malformed,
                notify.clone(),
            ));
        }
        (self.kept, self.streaming)
    }

    /// Opens the live source `url` (its readers, each a source).
    fn open_live(
        &mut self,
        url: &str,
        options: &InputOptions<'_>,
        resume: Option<&Checkpoint>,
    ) -> Result<(), Refused> {
        let at = live::Resume {
            token: resume.and_then(|r| r.token(self.sources.len())),
            written: None,
        };
        for live::Source { name, reader } in
            live::open_input(url, options.schema, options.live, &at)?
        {
            if let Some(r) = resume {
                r.check_source(self.sources.len(), &name, TraceFormat::Jsonl)?;
            }
            self.kept.push(checkpoint::Source {
                path: live::redact(&name),
                format: TraceFormat::Jsonl,
                trace: None,
            });
            self.sources.push((name, reader, TraceFormat::Jsonl));
        }
        self.streaming = true;
        Ok(())
    }

    /// Opens the trace `path` (a file, `-` or a FIFO), read ahead on a
    /// thread of its own when it is a regular file and `read_ahead`.
    fn open_trace(
        &mut self,
        path: &str,
        options: &InputOptions<'_>,
        resume: Option<&Checkpoint>,
        read_ahead: bool,
    ) -> Result<(), Refused> {
        let format = format_of(path, options.format)?;
        if format == TraceFormat::Tc && options.malformed != Malformed::Stop {
            return Err("--on-malformed skip|warn needs JSON-lines or CSV traces: a malformed `.input` block cannot be skipped alone".to_string().into());
        }
        let i = self.sources.len();
        let resume_at = match resume {
            Some(r) => r.check_source(i, path, format)?,
            None => None,
        };
        let (schema, reader) = (options.schema, options.reader);
        let mut opened = trace::open_trace_at(path, format, schema, reader, resume_at)
            .map_err(|e| e.to_string())?;
        self.streaming |= opened.streaming;
        if let Some(r) = resume {
            let dropping = Dropping {
                malformed: options.malformed != Malformed::Stop,
                key: options.key,
            };
            let width = schema.names.len();
            match r.reposition(i, path, &mut opened, width, dropping) {
                Ok(()) => {}
                Err(Reposition::Refused(m)) => return Err(m.into()),
                Err(Reposition::Trace(e)) => return Err(e.into()),
            }
        }
        let name = trace::display_name(path);
        self.kept.push(checkpoint::Source {
            path: path.to_string(),
            format,
            trace: opened.file,
        });
        // A stream is read as its rows arrive; a regular file ahead.
        let reader = match opened.streaming || !read_ahead {
            true => opened.reader,
            false => trace::ReadAhead::spawn(opened.reader, schema.names.len(), path),
        };
        self.sources.push((name.to_string(), reader, format));
        Ok(())
    }
}
