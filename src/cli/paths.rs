//! The files a run writes are neither the files it reads nor one another: compared by device
//! and inode (not by name), before anything is opened for writing.
//!
//! A run writes its `--output-file`, `--alerts` file, `--checkpoint` and `--record` log; it
//! reads its specification, its `--input` traces and its `--resume` checkpoint. Writing one of
//! those it reads would clobber it (an output file over the trace truncates it before the
//! first row is read); two outputs in one file would overwrite each other. The exception is
//! the checkpoint a run resumes from and goes on writing: `--resume F --checkpoint F` is how a
//! run continues, and it reads F whole before it writes F again (atomically, by rename).
//!
//! Only regular files, directories (a scaled-out run's checkpoint) and paths that do not
//! exist yet can be clobbered: two outputs to `/dev/null`, or a FIFO, are fine.

use super::RunArgs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a path names, for comparing with another.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Identity {
    /// An existing regular file or directory.
    Inode { dev: u64, ino: u64 },
    /// A file to be made: its directory (by inode) and its name there.
    New { dir: (u64, u64), name: PathBuf },
    /// Something writing cannot clobber (a device, a FIFO), or a path whose
    /// directory does not exist (opening it will fail with its own message).
    Other,
}

fn identity(path: &str) -> Identity {
    let p = Path::new(path);
    match std::fs::metadata(p) {
        Ok(m) if m.is_file() || m.is_dir() => Identity::Inode {
            dev: m.dev(),
            ino: m.ino(),
        },
        Ok(_) => Identity::Other,
        Err(_) => {
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            match (std::fs::metadata(dir), p.file_name()) {
                (Ok(m), Some(name)) => Identity::New {
                    dir: (m.dev(), m.ino()),
                    name: PathBuf::from(name),
                },
                _ => Identity::Other,
            }
        }
    }
}

/// A file given on the command line: its option and path.
struct Named<'a> {
    option: &'static str,
    path: &'a str,
}

impl Named<'_> {
    fn show(&self) -> String {
        match self.option {
            "" => format!("the specification `{}`", self.path),
            option => format!("`{option} {}`", self.path),
        }
    }
}

/// Refuses a run whose outputs clobber its inputs or one another, naming both.
pub(super) fn check_distinct(args: &RunArgs) -> Result<(), String> {
    let is_file = |p: &&String| p.as_str() != "-" && !p.contains("://");
    let mut reads: Vec<Named> = vec![Named {
        option: "",
        path: &args.spec,
    }];
    reads.extend(args.input.iter().filter(is_file).map(|p| Named {
        option: "--input",
        path: p,
    }));
    let writes: Vec<Named> = [
        ("--output-file", args.output_file.as_ref()),
        ("--alerts", args.alerts.as_ref().filter(is_file)),
        ("--checkpoint", args.checkpoint.as_ref()),
        ("--record", args.record.as_ref()),
    ]
    .into_iter()
    .filter_map(|(option, p)| p.map(|path| Named { option, path }))
    .collect();
    let ids: Vec<Identity> = writes.iter().map(|w| identity(w.path)).collect();
    let read_ids: Vec<Identity> = reads.iter().map(|r| identity(r.path)).collect();
    let resume_id = args.resume.as_deref().map(identity);
    for (k, (w, id)) in writes.iter().zip(&ids).enumerate() {
        if *id == Identity::Other {
            continue;
        }
        for (r, read_id) in reads.iter().zip(&read_ids) {
            if read_id == id {
                return Err(format!(
                    "{} is the same file as {}: writing it would destroy what the run reads; write to another file",
                    w.show(),
                    r.show()
                ));
            }
        }
        if let (Some(resume), Some(resume_id)) = (&args.resume, &resume_id)
            && w.option != "--checkpoint"
            && resume_id == id
        {
            return Err(format!(
                "{} is the same file as `--resume {resume}`: writing it would destroy the checkpoint the run continues from; write to another file",
                w.show()
            ));
        }
        if let Some((other, _)) = writes[..k].iter().zip(&ids).find(|(_, o)| *o == id) {
            return Err(format!(
                "{} and {} are the same file: each would overwrite the other; give them different paths",
                other.show(),
                w.show()
            ));
        }
    }
    Ok(())
}
