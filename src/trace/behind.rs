//! A write-behind output writer: formatting and writing a run's outputs on a
//! thread of their own, so that they overlap reading and evaluating the next
//! rows on the machine's other core.
//!
//! `vigil run` over a regular file spends most of its time formatting and
//! writing when every output is printed (the chain scenario prints 258 MB of
//! text for a million rows), and the rest reading and evaluating. With this
//! writer the evaluating thread copies each batch's outputs (lanes and tags,
//! a few hundred kilobytes) and goes on; the writer thread formats them and
//! makes the `write(2)` calls. At most [`IN_FLIGHT`] batches wait for it, so
//! memory stays flat however far evaluation runs ahead.
//!
//! `flush` is synchronous: it returns once every output handed over before
//! it is written and the sink flushed, with the first write error if there
//! was one. Checkpoints rely on this (they record the output file's length
//! after a flush), and so does every error message printed after the
//! outputs of the rows before it. After a failed write nothing more is
//! written (output after a gap would be wrong), and every later call
//! reports the error with its kind (a closed pipe stays `BrokenPipe`).
//! Dropping the writer writes what is left and waits for the thread.

use super::OutputWriter;
use crate::batch::OutputBatch;
use crate::value::{Key, Sample};
use std::io::{self, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// Jobs handed over and not yet answered, at most: the bound on how far
/// evaluation runs ahead of the output, and on the copies' memory.
const IN_FLIGHT: usize = 2;

/// Steps gathered before they are handed over together: a run that goes
/// row by row (triggers, keys) pays for one hand-over per this many rows.
const STEPS_GATHERED: usize = 1024;

/// Work for the writer thread: the calls of [`OutputWriter`].
enum Job {
    Batch(OutputBatch, Vec<usize>),
    Steps(Steps),
    Flush,
}

/// Steps written one at a time (`write_step`, `write_keyed`), gathered:
/// each step's number and key, and its samples, one after another.
#[derive(Default)]
struct Steps {
    steps: Vec<(u64, Option<Key>)>,
    samples: Vec<Sample>,
}

impl Steps {
    fn write(&self, writer: &mut dyn OutputWriter) -> io::Result<()> {
        let width = self.samples.len() / self.steps.len().max(1);
        for (i, (step, key)) in self.steps.iter().enumerate() {
            let samples = &self.samples[i * width..(i + 1) * width];
            match key {
                None => writer.write_step(*step, samples)?,
                Some(key) => writer.write_keyed(*step, key, samples)?,
            }
        }
        Ok(())
    }
}

/// What a job hands back for reuse.
enum Spent {
    Batch(OutputBatch),
    Steps(Steps),
}

/// The writer thread's answer to each job, in order.
enum Done {
    Wrote(Spent, io::Result<()>),
    Flushed(io::Result<()>),
}

/// An error kept to be reported by every later call (`io::Error` is not
/// `Clone`).
#[derive(Clone)]
struct Failure(io::ErrorKind, String);

impl Failure {
    fn of(e: &io::Error) -> Failure {
        Failure(e.kind(), e.to_string())
    }

    fn error(&self) -> io::Error {
        io::Error::new(self.0, self.1.clone())
    }
}

/// An [`OutputWriter`] whose work is done by a thread of its own (see the
/// module documentation).
pub struct WriteBehind {
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    thread: Option<JoinHandle<()>>,
    /// Jobs handed over whose `Done` has not been received.
    in_flight: usize,
    /// Batches written, to copy the next ones into.
    spare: Vec<OutputBatch>,
    /// Steps gathered, and gathered steps written, to gather into again.
    steps: Steps,
    spare_steps: Vec<Steps>,
    failed: Option<Failure>,
}

impl WriteBehind {
    /// Runs `writer` on a thread of its own. If the thread cannot be
    /// started, `writer` is returned as it is, so a run never fails for want
    /// of this optimisation.
    pub fn spawn(writer: Box<dyn OutputWriter>) -> Box<dyn OutputWriter> {
        let (jobs, rx) = sync_channel::<Job>(IN_FLIGHT + 1);
        let (tx, done) = sync_channel::<Done>(IN_FLIGHT + 1);
        // The writer travels through a channel rather than the closure, so
        // that it is still ours if the thread cannot be started.
        let (give, take) = sync_channel::<Box<dyn OutputWriter>>(1);
        let thread = std::thread::Builder::new()
            .name("vigil-writer".into())
            .spawn(move || {
                if let Ok(writer) = take.recv() {
                    serve(writer, &rx, &tx);
                }
            });
        match thread {
            Ok(thread) => {
                // The thread holds the receiving end until it has the writer,
                // so this cannot fail; if it did, the thread would end and
                // every call would report it stopped.
                let _ = give.send(writer);
                Box::new(WriteBehind {
                    jobs: Some(jobs),
                    done,
                    thread: Some(thread),
                    in_flight: 0,
                    spare: Vec::new(),
                    steps: Steps::default(),
                    spare_steps: Vec::new(),
                    failed: None,
                })
            }
            Err(_) => writer,
        }
    }

    fn note(&mut self, result: &io::Result<()>) {
        if let (Err(e), None) = (result, &self.failed) {
            self.failed = Some(Failure::of(e));
        }
    }

    fn stopped(&mut self) -> io::Error {
        self.in_flight = 0;
        let stopped = Err(io::Error::other("the output writer thread stopped"));
        self.note(&stopped);
        self.failed
            .as_ref()
            .map_or_else(|| io::Error::other("stopped"), Failure::error)
    }

    /// Takes in one answer; a flush's result is returned.
    fn receive(&mut self) -> Result<Option<io::Result<()>>, io::Error> {
        match self.done.recv() {
            Ok(Done::Wrote(spent, result)) => {
                self.in_flight -= 1;
                match spent {
                    Spent::Batch(batch) => self.spare.push(batch),
                    Spent::Steps(mut steps) => {
                        steps.steps.clear();
                        steps.samples.clear();
                        self.spare_steps.push(steps);
                    }
                }
                self.note(&result);
                Ok(None)
            }
            Ok(Done::Flushed(result)) => {
                self.in_flight -= 1;
                Ok(Some(result))
            }
            // The thread is gone without answering: it panicked, which
            // `serve` never does itself.
            Err(_) => Err(self.stopped()),
        }
    }

    /// Gathers one step, handing the steps over once there are enough.
    fn gather(&mut self, step: u64, key: Option<&Key>, samples: &[Sample]) -> io::Result<()> {
        if let Some(f) = &self.failed {
            return Err(f.error());
        }
        self.steps.steps.push((step, key.cloned()));
        self.steps.samples.extend_from_slice(samples);
        if self.steps.steps.len() >= STEPS_GATHERED {
            self.hand_over_steps()?;
        }
        Ok(())
    }

    /// Hands the gathered steps over (before any other job, which must
    /// follow them).
    fn hand_over_steps(&mut self) -> io::Result<()> {
        if self.steps.steps.is_empty() {
            return Ok(());
        }
        let next = self.spare_steps.pop().unwrap_or_default();
        let steps = std::mem::replace(&mut self.steps, next);
        self.hand_over(Job::Steps(steps))
    }

    /// Hands a job to the writer thread, first waiting for an answer if
    /// `IN_FLIGHT` jobs are out.
    fn hand_over(&mut self, job: Job) -> io::Result<()> {
        if let Some(f) = &self.failed {
            return Err(f.error());
        }
        while self.in_flight >= IN_FLIGHT {
            self.receive()?;
        }
        if let Some(f) = &self.failed {
            return Err(f.error());
        }
        let sent = self.jobs.as_ref().is_some_and(|j| j.send(job).is_ok());
        if !sent {
            return Err(self.stopped());
        }
        self.in_flight += 1;
        Ok(())
    }
}

/// The writer thread: runs the jobs in order until the sending side is
/// dropped, writing nothing after a failed write.
fn serve(mut writer: Box<dyn OutputWriter>, jobs: &Receiver<Job>, done: &SyncSender<Done>) {
    let mut failed: Option<Failure> = None;
    while let Ok(job) = jobs.recv() {
        let answer = match (job, &failed) {
            (Job::Flush, Some(f)) => Done::Flushed(Err(f.error())),
            (Job::Flush, None) => Done::Flushed(writer.flush()),
            (Job::Batch(batch, _), Some(f)) => Done::Wrote(Spent::Batch(batch), Err(f.error())),
            (Job::Batch(batch, columns), None) => {
                let result = writer.write_batch(&batch, &columns);
                Done::Wrote(Spent::Batch(batch), result)
            }
            (Job::Steps(steps), Some(f)) => Done::Wrote(Spent::Steps(steps), Err(f.error())),
            (Job::Steps(steps), None) => {
                let result = steps.write(writer.as_mut());
                Done::Wrote(Spent::Steps(steps), result)
            }
        };
        let result = match &answer {
            Done::Wrote(_, r) | Done::Flushed(r) => r,
        };
        if let Err(e) = result {
            failed.get_or_insert_with(|| Failure::of(e));
        }
        if done.send(answer).is_err() {
            break;
        }
    }
    // Dropped without a last flush: the writer is dropped here as it would
    // have been on the caller's thread (its buffer is written, and nothing
    // a flush would add, such as an empty run's CSV header).
    drop(writer);
}

impl OutputWriter for WriteBehind {
    fn write_step(&mut self, step: u64, samples: &[Sample]) -> io::Result<()> {
        self.gather(step, None, samples)
    }

    fn write_keyed(&mut self, step: u64, key: &Key, samples: &[Sample]) -> io::Result<()> {
        self.gather(step, Some(key), samples)
    }

    fn write_batch(&mut self, batch: &OutputBatch, columns: &[usize]) -> io::Result<()> {
        self.hand_over_steps()?;
        let mut copy = self.spare.pop().unwrap_or_default();
        copy.copy_from(batch);
        self.hand_over(Job::Batch(copy, columns.to_vec()))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.hand_over_steps()?;
        self.hand_over(Job::Flush)?;
        // Answers come in order, so every earlier job's comes first.
        loop {
            if let Some(flushed) = self.receive()? {
                self.note(&flushed);
                return match &self.failed {
                    Some(f) => Err(f.error()),
                    None => Ok(()),
                };
            }
        }
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        let _ = self.hand_over_steps();
        // Closing the channel ends the thread once it has done every job.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Standard output as a plain file descriptor, for a writer that buffers by
/// itself: Rust's `Stdout` is line-buffered and searches every write for a
/// newline, which a writer handing over 64 KB at a time has no use for.
pub fn raw_stdout() -> Box<dyn Write + Send> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        if let Ok(fd) = io::stdout().as_fd().try_clone_to_owned() {
            return Box::new(std::fs::File::from(fd));
        }
    }
    Box::new(io::stdout())
}

#[cfg(test)]
mod tests {
    use super::super::{OutputFormat, make_writer};
    use super::*;
    use crate::value::Value;
    use std::sync::{Arc, Mutex};

    /// A sink that records what it is given and fails with a closed pipe
    /// once it would hold more than `room` bytes.
    #[derive(Clone)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        room: usize,
    }

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let mut bytes = self.bytes.lock().expect("not poisoned");
            if bytes.len() + b.len() > self.room {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            bytes.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn behind(room: usize) -> (Box<dyn OutputWriter>, Arc<Mutex<Vec<u8>>>) {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let sink = Sink {
            bytes: bytes.clone(),
            room,
        };
        let inner = make_writer(OutputFormat::Text, vec!["z".into()], Box::new(sink));
        (WriteBehind::spawn(inner), bytes)
    }

    fn step(w: &mut dyn OutputWriter, i: u64) -> io::Result<()> {
        w.write_step(i, &[Sample::Value(Value::Int(i as i64))])
    }

    /// A flush returns once everything before it is in the sink.
    #[test]
    fn flush_waits_for_the_output() {
        let (mut w, bytes) = behind(usize::MAX);
        for i in 0..5000 {
            step(w.as_mut(), i).expect("no error");
        }
        w.flush().expect("no error");
        let text = String::from_utf8(bytes.lock().expect("ok").clone()).expect("text");
        assert_eq!(text.lines().count(), 5000);
        assert_eq!(text.lines().last(), Some("z[4999] = Int(4999)"));
    }

    /// A closed pipe is reported with its kind, by the write that finds it
    /// or the flush after it, and by every later call; nothing is written
    /// after the first failed write.
    #[test]
    fn a_write_error_keeps_its_kind_and_ends_the_output() {
        let (mut w, bytes) = behind(20_000);
        let mut first = None;
        for i in 0..100_000 {
            if let Err(e) = step(w.as_mut(), i) {
                first = Some(e);
                break;
            }
        }
        let first = first.or_else(|| w.flush().err()).expect("the pipe closed");
        assert_eq!(first.kind(), io::ErrorKind::BrokenPipe);
        let held = bytes.lock().expect("ok").len();
        assert!(held <= 20_000);
        assert_eq!(
            step(w.as_mut(), 0).map_err(|e| e.kind()),
            Err(io::ErrorKind::BrokenPipe)
        );
        assert_eq!(
            w.flush().map_err(|e| e.kind()),
            Err(io::ErrorKind::BrokenPipe)
        );
        drop(w);
        assert_eq!(bytes.lock().expect("ok").len(), held);
    }

    /// Dropping the writer writes what was handed over.
    #[test]
    fn dropping_writes_the_rest() {
        let (mut w, bytes) = behind(usize::MAX);
        for i in 0..10 {
            step(w.as_mut(), i).expect("no error");
        }
        drop(w);
        assert_eq!(
            String::from_utf8_lossy(&bytes.lock().expect("ok"))
                .lines()
                .count(),
            10
        );
    }
}
