//! A scaled-out run's checkpoints: one barrier, one checkpoint file per worker and a commit
//! record, all in the checkpoint format every other run writes.
//!
//! `vigil run --workers W [--processes N]` takes a checkpoint when a row's time crosses a
//! multiple `T` of `--checkpoint-every`: a barrier at `T` reaches every worker, each writes its
//! keys ([`write_worker`]: `DIR/ck-T/worker-W.ck`, a checkpoint file whose monitor is that
//! worker's keyed snapshot), and the writer, once every worker's barrier has come and every
//! output before `T` is synced, writes the barrier's commit record ([`write_commit`]:
//! `DIR/ck-T/commit.ck`, a checkpoint file without a monitor that records the outputs'
//! lengths, where each source stood (its position, as every checkpoint records it, and the
//! feed's state) and what the run was), then removes older barriers. A resume puts process
//! 0's sources back at those positions, as a single-process run's resume does. (A commit
//! record written before vigil recorded positions has only the rows' digest: its resume
//! reads the sources again from their start, skips the rows before the barrier and checks
//! their digest.) As in Flink,
//! where the job manager's metadata file completes a checkpoint whose state the tasks wrote, a
//! barrier without its commit record is incomplete and never resumed from.
//!
//! [`latest`] finds the newest committed barrier of a directory, and [`Checkpoint::read`] reads
//! each of its files like any checkpoint: [`Checkpoint::shard`] tells a barrier's file (and
//! which part it is) from a single-process run's checkpoint, which a scaled run's files never
//! resume, nor the other way round.

use super::{
    At, Checkpoint, Checkpointable, Clock, Info, InputInfo, Output, OutputInfo, Source, VERSION,
    input_infos, write_atomically_with,
};
use crate::keyed::KeyedMonitor;
use crate::snapshot;
use crate::trace::OutputFormat;
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What every file of one barrier records: when it was taken and by which run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Barrier {
    /// Its time: the state after every row before it.
    pub time: u64,
    /// Workers over all processes (each wrote `worker-W.ck`).
    pub workers: u32,
    /// The key input.
    pub key: String,
    /// The name of the hash that routed the keys to the workers (`vigil::scale::ROUTE_HASH`
    /// when it was taken): a resume routing by another would look for a key on a worker that
    /// does not hold it.
    pub route_hash: String,
}

/// Which file of a barrier a checkpoint is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Part {
    /// Worker `W`'s keys (its monitor is the worker's keyed snapshot).
    Worker(u32),
    /// The commit record, written last: the barrier is complete.
    Commit(Commit),
}

/// A barrier's commit record: where the run's outputs and its input stood.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// The output file's synced length (0 for standard output).
    pub output_len: u64,
    /// The alerts file's synced length (0 without one).
    pub alerts_len: u64,
    /// A digest of the rows before the barrier (their cells and times), which a resume checks
    /// the trace it reads again against.
    pub input_digest: u64,
    /// The replay log's length (`--record`), kept exactly once like the output file.
    pub record_len: Option<u64>,
    /// For a live sink that keeps a history (a Redis Stream): the entries written to it, which
    /// a resumed run does not send again.
    pub sink_entries: Option<u64>,
}

/// A barrier file's description: the barrier, and which part of it the file is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// The barrier the file belongs to.
    pub barrier: Barrier,
    /// Which of its files this is.
    pub part: Part,
}

/// The directory of barrier `time` in the checkpoint directory `root`.
pub fn barrier_dir(root: &Path, time: u64) -> PathBuf {
    root.join(format!("ck-{time:020}"))
}

/// The file of worker `worker`'s keys in a barrier's directory.
pub fn worker_file(dir: &Path, worker: u32) -> PathBuf {
    dir.join(format!("worker-{worker}.ck"))
}

/// The commit record's file in a barrier's directory.
pub fn commit_file(dir: &Path) -> PathBuf {
    dir.join("commit.ck")
}

/// Process 0's sources at a barrier: each one (name, format, a regular file's trace), where
/// it stood, and the feed's state with the options that shaped it.
pub struct Inputs<'a> {
    /// The sources, as a single-process run's checkpointer knows them.
    pub sources: &'a [Source],
    /// Where each stood: after the last row before the barrier.
    pub at: Vec<At>,
    /// The feed's state then, and the merge's options.
    pub clock: Clock,
}

/// The description of a barrier's file: a worker's has no inputs of its own, the commit
/// record those of the run.
fn info(
    spec: &str,
    output: OutputFormat,
    shard: Shard,
    inputs: Vec<InputInfo>,
    clock: Option<Clock>,
) -> Vec<u8> {
    let info = Info {
        spec: spec.to_string(),
        inputs,
        output: OutputInfo {
            format: Output::from(output),
            file: None,
            stream: None,
            alerts: None,
        },
        clock,
        shard: Some(shard),
    };
    let info = postcard::to_stdvec(&info).expect("a checkpoint's description serialises");
    snapshot::seal(&super::MAGIC, VERSION, &info)
}

/// Writes worker `worker`'s part of `barrier` atomically into `dir` (created if missing): its
/// monitor's keys, streamed key by key into the file. An error of kind `InvalidData` says why
/// the state cannot be checkpointed.
pub fn write_worker(
    dir: &Path,
    spec: &str,
    output: OutputFormat,
    barrier: &Barrier,
    worker: u32,
    monitor: &dyn Checkpointable,
) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let shard = Shard {
        barrier: barrier.clone(),
        part: Part::Worker(worker),
    };
    let head = info(spec, output, shard, Vec::new(), None);
    write_atomically_with(&worker_file(dir, worker), |out| {
        out.write_all(&head)?;
        monitor.write_state(out)
    })
}

/// Writes `barrier`'s commit record atomically into `dir`, with where process 0's `inputs`
/// stood (`None`: a run whose readers have no positions to record, whose resume checks the
/// digest): from then on the barrier is complete. Call it only once every worker's file is
/// written.
pub fn write_commit(
    dir: &Path,
    spec: &str,
    output: OutputFormat,
    barrier: &Barrier,
    commit: Commit,
    inputs: Option<Inputs<'_>>,
) -> io::Result<()> {
    let shard = Shard {
        barrier: barrier.clone(),
        part: Part::Commit(commit),
    };
    let (inputs, clock) = match inputs {
        None => (Vec::new(), None),
        Some(i) => (
            input_infos(i.sources, &i.at).map_err(io::Error::other)?,
            Some(i.clock),
        ),
    };
    let bytes = info(spec, output, shard, inputs, clock);
    write_atomically_with(&commit_file(dir), |out| out.write_all(&bytes))
}

/// The newest complete barrier in the checkpoint directory `root`: its directory, and its
/// commit record read back (a missing `root` has none). A barrier whose keys were routed by
/// another hash than `route_hash` (the one this run routes by), or a directory an earlier
/// vigil wrote, is an error that says what to do.
pub fn latest(root: &Path, route_hash: &str) -> Result<Option<(PathBuf, Checkpoint)>, String> {
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "cannot read the checkpoint directory `{}`: {e}",
                root.display()
            ));
        }
    };
    let mut best: Option<(u64, PathBuf, Checkpoint)> = None;
    for entry in entries.flatten() {
        let dir = entry.path();
        let Some(time) = barrier_time(&dir) else {
            continue;
        };
        let commit = commit_file(&dir);
        if !commit.exists() {
            if dir.join("COMPLETE").exists() {
                return Err(format!(
                    "`{}` was written by an earlier vigil, in a format this one does not read; start the run afresh, or resume it with the vigil that wrote it",
                    dir.display()
                ));
            }
            // Not committed: a barrier cut short by the end of the run.
            continue;
        }
        let checkpoint = Checkpoint::read(&commit.to_string_lossy())?;
        let Some(Shard {
            barrier,
            part: Part::Commit(_),
        }) = checkpoint.shard()
        else {
            return Err(format!(
                "cannot resume from `{}`: it is not a scaled run's commit record",
                commit.display()
            ));
        };
        if barrier.time != time {
            return Err(format!(
                "cannot resume from `{}`: the checkpoint is corrupt: it records time {} in the directory of time {time}",
                commit.display(),
                barrier.time
            ));
        }
        if barrier.route_hash != route_hash {
            return Err(format!(
                "cannot resume from `{}`: its keys were routed to the workers by `{}`, and this vigil routes by `{}`: resuming would look for keys on workers that do not hold them; run again from the start",
                dir.display(),
                barrier.route_hash,
                route_hash
            ));
        }
        if best.as_ref().is_none_or(|(t, _, _)| *t < time) {
            best = Some((time, dir, checkpoint));
        }
    }
    Ok(best.map(|(_, dir, checkpoint)| (dir, checkpoint)))
}

/// A committed barrier a scaled run resumes from ([`resume`]).
pub struct Resume {
    /// The barrier's directory.
    pub dir: PathBuf,
    /// The barrier, as its commit record says.
    pub barrier: Barrier,
    /// Where the outputs and the input stood.
    pub commit: Commit,
    /// The commit record read back: where each source stood (`Checkpoint::at`,
    /// `check_source`, `reposition`, `token`) and the feed's state (`clock`), for the
    /// commit records that have them.
    pub record: Checkpoint,
}

impl std::fmt::Debug for Resume {
    // (The record read back is what `barrier` and `commit` say, and its sources.)
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resume")
            .field("dir", &self.dir)
            .field("barrier", &self.barrier)
            .field("commit", &self.commit)
            .field("sources", &self.record.sources())
            .finish_non_exhaustive()
    }
}

/// The newest complete barrier in `root`, checked against the run resuming from it: keys
/// routed by `route_hash` over `workers` workers, keyed by `key`.
pub fn resume(root: &Path, route_hash: &str, workers: u32, key: &str) -> Result<Resume, String> {
    let Some((dir, checkpoint)) = latest(root, route_hash)? else {
        return Err(format!(
            "cannot resume from `{}`: it holds no complete checkpoint",
            root.display()
        ));
    };
    let Some(Shard {
        barrier,
        part: Part::Commit(commit),
    }) = checkpoint.shard().cloned()
    else {
        unreachable!("`latest` gives commit records only");
    };
    if barrier.workers != workers {
        return Err(format!(
            "cannot resume from `{}`: it was taken by {} workers, and this run has {workers} (the same --workers and --processes are needed)",
            dir.display(),
            barrier.workers
        ));
    }
    if barrier.key != key {
        return Err(format!(
            "cannot resume from `{}`: it was keyed by `{}`, not `{key}`",
            dir.display(),
            barrier.key
        ));
    }
    Ok(Resume {
        dir,
        barrier,
        commit,
        record: checkpoint,
    })
}

impl Resume {
    /// Worker `worker`'s monitor: a share of `template` restored from its file of this
    /// barrier, which must be that worker's part of the same barrier.
    pub fn restore_worker(
        &self,
        worker: u32,
        template: &KeyedMonitor,
    ) -> Result<KeyedMonitor, String> {
        let file = worker_file(&self.dir, worker);
        let mut checkpoint = Checkpoint::read(&file.to_string_lossy())?;
        let expected = Shard {
            barrier: self.barrier.clone(),
            part: Part::Worker(worker),
        };
        if checkpoint.shard() != Some(&expected) {
            return Err(format!(
                "cannot resume from `{}`: the checkpoint is corrupt: it is not worker {worker}'s part of the barrier at time {}",
                file.display(),
                self.barrier.time
            ));
        }
        checkpoint.restore_shared(template)
    }
}

/// The time of a barrier's directory (`ck-T`), or `None` for anything else.
fn barrier_time(dir: &Path) -> Option<u64> {
    dir.file_name()?
        .to_str()?
        .strip_prefix("ck-")?
        .parse::<u64>()
        .ok()
}

/// Removes the barriers (`ck-T` directories) in `root` whose time `T` `which` picks; nothing
/// else in it is touched.
pub fn remove(root: &Path, which: impl Fn(u64) -> bool) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        if barrier_time(&dir).is_some_and(&which) {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::checkpoint::{CheckpointOptions, Checkpointer, Source};
    use crate::pipeline::{At, Where};
    use crate::trace::{self, TraceFormat};
    use crate::value::{Key, Sample, Value};
    use crate::{Monitor, Spec};

    const HASH: &str = "xxh3-64/vigil-value-1";
    const SPEC: &str = "in k: Int\nin x: Int\nout s: Int\ns = default(s[1], 0) + x\n";

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vigil-barrier-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The message of a call that must be refused.
    fn refusal<T>(result: Result<T, String>) -> String {
        match result {
            Ok(_) => panic!("accepted"),
            Err(e) => e,
        }
    }

    fn barrier(time: u64) -> Barrier {
        Barrier {
            time,
            workers: 2,
            key: "k".into(),
            route_hash: HASH.into(),
        }
    }

    fn commit() -> Commit {
        Commit {
            output_len: 10,
            alerts_len: 0,
            input_digest: 7,
            record_len: None,
            sink_entries: Some(3),
        }
    }

    /// Two workers' monitors: worker 0 holds keys 1 and 2, worker 1 key 3.
    fn workers(spec: &Spec) -> (KeyedMonitor, [KeyedMonitor; 2]) {
        let template = KeyedMonitor::builder(spec, "k").build().unwrap();
        let mut w = [template.share(), template.share()];
        for (worker, key, x) in [(0, 1, 5), (0, 2, 6), (1, 3, 7), (0, 1, 1)] {
            w[worker]
                .step([Some(Value::Int(key)), Some(Value::Int(x))])
                .unwrap();
        }
        (template, w)
    }

    fn write_barrier(root: &Path, time: u64, w: &[KeyedMonitor; 2], committed: bool) -> PathBuf {
        let dir = barrier_dir(root, time);
        for (i, m) in w.iter().enumerate() {
            let i = u32::try_from(i).unwrap();
            write_worker(&dir, "s.dsrv", OutputFormat::Csv, &barrier(time), i, m).unwrap();
        }
        if committed {
            write_commit(
                &dir,
                "s.dsrv",
                OutputFormat::Csv,
                &barrier(time),
                commit(),
                None,
            )
            .unwrap();
        }
        dir
    }

    #[test]
    fn a_committed_barrier_resumes_every_worker() {
        let root = dir("resume");
        let spec = Spec::parse("s.dsrv", SPEC).unwrap();
        let (template, w) = workers(&spec);
        write_barrier(&root, 100, &w, true);
        // A later barrier without its commit record is not complete.
        let cut = write_barrier(&root, 200, &w, false);
        let resume = resume(&root, HASH, 2, "k").unwrap();
        assert_eq!((resume.barrier.time, &resume.commit), (100, &commit()));
        let restored = [0, 1].map(|i| resume.restore_worker(i, &template).unwrap());
        assert_eq!(restored[0].key_count(), 2);
        assert_eq!(restored[1].key_count(), 1);
        let s = restored[0].output(&Key::new(Value::Int(1)), "s");
        assert_eq!(s, Some(Sample::Value(Value::Int(6))));
        remove(&root, |t| t > 100);
        assert!(!cut.exists() && barrier_dir(&root, 100).exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_barrier_of_another_run_is_refused_with_the_reason() {
        let root = dir("refused");
        let spec = Spec::parse("s.dsrv", SPEC).unwrap();
        let (template, w) = workers(&spec);
        assert!(matches!(latest(&root, HASH), Ok(None)));
        let err = resume(&root, HASH, 2, "k").unwrap_err();
        assert!(err.contains("it holds no complete checkpoint"), "{err}");
        let dir = write_barrier(&root, 100, &w, true);
        let err = resume(&root, "siphash-1-3/std", 2, "k").unwrap_err();
        assert!(err.contains("routed to the workers by `xxh3-64/vigil-value-1`, and this vigil routes by `siphash-1-3/std`"), "{err}");
        let err = resume(&root, HASH, 3, "k").unwrap_err();
        assert!(
            err.contains("taken by 2 workers, and this run has 3"),
            "{err}"
        );
        let err = resume(&root, HASH, 2, "host").unwrap_err();
        assert!(err.contains("keyed by `k`, not `host`"), "{err}");
        // A worker's file in another worker's place.
        std::fs::copy(worker_file(&dir, 0), worker_file(&dir, 1)).unwrap();
        let r = resume(&root, HASH, 2, "k").unwrap();
        let err = refusal(r.restore_worker(1, &template));
        assert!(
            err.contains("it is not worker 1's part of the barrier at time 100"),
            "{err}"
        );
        // The commit record holds no monitor, and nothing may follow it.
        let mut record = Checkpoint::read(&commit_file(&dir).to_string_lossy()).unwrap();
        let err = refusal(record.restore_shared(&template));
        assert!(err.contains("holds no monitor"), "{err}");
        let mut bytes = std::fs::read(commit_file(&dir)).unwrap();
        bytes.push(0);
        std::fs::write(commit_file(&dir), bytes).unwrap();
        let err = refusal(latest(&root, HASH));
        assert!(err.contains("bytes after its commit record"), "{err}");
        // The format before this one: a JSON record beside `.snap` files.
        std::fs::remove_file(commit_file(&dir)).unwrap();
        std::fs::write(dir.join("COMPLETE"), "{}").unwrap();
        let err = refusal(latest(&root, HASH));
        assert!(err.contains("written by an earlier vigil"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A checkpoint of format version 5 (before barriers) is still read:
    /// its description is version 6's without the last field, which postcard
    /// writes as one zero byte when it is `None`.
    #[test]
    fn a_version_5_checkpoint_still_resumes() {
        let root = dir("v5");
        let spec = Spec::parse("s.dsrv", SPEC).unwrap();
        let mut monitor = Monitor::builder(&spec).build();
        monitor
            .step([Some(Value::Int(1)), Some(Value::Int(4))])
            .unwrap();
        let path = root.join("run.ck").to_string_lossy().into_owned();
        let options = CheckpointOptions {
            path: path.clone(),
            every: 10,
            spec: "s.dsrv".into(),
            sink: None,
        };
        let source = Source {
            path: "rows".into(),
            format: TraceFormat::Csv,
            trace: None,
        };
        let mut ck = Checkpointer::new(options, vec![source], OutputFormat::Csv, None, None);
        let mut out = trace::make_writer(OutputFormat::Csv, vec!["s".into()], Box::new(io::sink()));
        let at = At {
            rows: 1,
            at: Where::default(),
        };
        ck.write_at(&monitor, &[at], None, out.as_mut(), None)
            .unwrap()
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let described = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
        let end = snapshot::HEADER_LEN + usize::try_from(described).unwrap();
        let description = &bytes[snapshot::HEADER_LEN..end];
        assert_eq!(
            description.last(),
            Some(&0),
            "`shard: None` is the last byte"
        );
        let mut v5 = snapshot::seal(
            &super::super::MAGIC,
            5,
            &description[..description.len() - 1],
        );
        v5.extend_from_slice(&bytes[end..]);
        std::fs::write(&path, v5).unwrap();
        let mut read = Checkpoint::read(&path).unwrap();
        assert!(read.shard().is_none());
        read.check_plain("rows", TraceFormat::Csv).unwrap();
        let mut resumed = read.restore(Monitor::builder(&spec)).unwrap();
        let s = resumed
            .step([Some(Value::Int(1)), Some(Value::Int(2))])
            .unwrap()
            .get(0);
        assert_eq!(s, Sample::Value(Value::Int(6)));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
