//! `vigil run --checkpoint/--resume/--output-file`: runs killed with SIGKILL at random points
//! and resumed give exactly the output file of an uninterrupted run; checkpoints that do not
//! fit the run are clear errors.

use crate::support::{test_dir, vigil, write};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Offsets, holds, Str values and `++`, an `if`, a stateful builtin: every
/// kind of state a checkpoint carries.
const SPEC: &str = "in x: Int\nin s: Str\nout total: Int\nout last: Str\nout tag: Str\nout seen: Bool\n\
total = default(total[1], 0) + x\nlast = default(s[3], \"-\")\n\
tag = if x > 3 then s ++ \"!\" else last\nseen = when(x == 6)\n";

/// A small deterministic generator (xorshift), seeded per test run and
/// printed, so a failure can be replayed.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new() -> Rng {
        let seed = std::env::var("VIGIL_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("checkpoint kill test seed: VIGIL_TEST_SEED={seed}");
        Rng(seed)
    }

    /// A generator of its own for `salt` (a test's part), seeded from this one's seed
    /// alone: the part gives the same values whatever the other parts drew.
    pub(crate) fn fork(&self, salt: u64) -> Rng {
        Rng((self.0 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A trace of `rows` rows in `format` (`csv`, `jsonl` or `input`); absent
/// cells now and then, and in `.input` step gaps too.
fn trace(format: &str, rows: usize) -> String {
    let mut out = String::new();
    if format == "csv" {
        out.push_str("x,s\n");
    }
    let mut step = 0;
    for i in 0..rows {
        let x = (i % 11 != 5).then_some(i % 7);
        let s = (i % 5 != 2).then(|| format!("v{}", i % 13));
        match format {
            "csv" => {
                let x = x.map_or(String::new(), |x| x.to_string());
                let s = s.map_or(String::new(), |s| format!("\"{s}\""));
                out.push_str(&format!("{x},{s}\n"));
            }
            "jsonl" => {
                let mut fields = Vec::new();
                if let Some(x) = x {
                    fields.push(format!("\"x\": {x}"));
                }
                if let Some(s) = s {
                    fields.push(format!("\"s\": \"{s}\""));
                }
                out.push_str(&format!("{{{}}}\n", fields.join(", ")));
            }
            _ => {
                // Every 97th block skips two steps (two empty rows).
                if i % 97 == 96 {
                    step += 2;
                }
                out.push_str(&format!("{step}:"));
                if let Some(x) = x {
                    out.push_str(&format!(" x = {x}"));
                }
                out.push('\n');
                if let Some(s) = s {
                    out.push_str(&format!("   s = \"{s}\"\n"));
                }
                step += 1;
            }
        }
    }
    out
}

/// Waits until `child` has written a checkpoint different from `before` (or
/// has exited); returns the new contents.
fn wait_for_new_checkpoint(child: &mut Child, path: &Path, before: &[u8]) -> Option<Vec<u8>> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        if let Ok(bytes) = std::fs::read(path)
            && !bytes.is_empty()
            && bytes != before
        {
            return Some(bytes);
        }
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("no new checkpoint within two minutes");
}

/// Starts `vigil run` on `input` with checkpoints, resuming from the
/// checkpoint if `resume`; `stdin_trace` is fed through a pipe (a stream)
/// instead of naming a file.
fn start(
    dir: &Path,
    input: &str,
    extra: &[&str],
    resume: bool,
    stdin_trace: Option<&str>,
) -> (Child, Option<std::thread::JoinHandle<()>>) {
    let ck = dir.join("ck");
    let mut cmd = vigil();
    cmd.args([
        "run",
        dir.join("spec.dsrv").to_str().unwrap(),
        "--input",
        input,
    ])
    .args(["--output-file", dir.join("out").to_str().unwrap()])
    .args(["--checkpoint", ck.to_str().unwrap()])
    .args(extra)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if resume {
        cmd.args(["--resume", ck.to_str().unwrap()]);
    }
    if stdin_trace.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().unwrap();
    let feeder = stdin_trace.map(|text| {
        let mut stdin = child.stdin.take().unwrap();
        let text = text.to_string();
        // The rows are paced (20 every 5 ms, about 1.5 s for the stream
        // test's trace) so that the run lasts long enough for kills to land
        // mid-run however fast the machine is: unpaced, a fast run could end
        // before the test saw its first checkpoint. The pipe breaks when the
        // run is killed; that ends the feeder.
        std::thread::spawn(move || {
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            for chunk in lines.chunks(20) {
                if stdin.write_all(chunk.concat().as_bytes()).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    });
    (child, feeder)
}

/// Runs to completion without interruption and returns the output file.
pub(crate) fn uninterrupted(
    dir: &Path,
    input: &str,
    extra: &[&str],
    stdin_trace: Option<&str>,
) -> Vec<u8> {
    let (child, feeder) = start(dir, input, extra, false, stdin_trace);
    let out = child.wait_with_output().unwrap();
    if let Some(f) = feeder {
        f.join().unwrap();
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(dir.join("ck"));
    std::fs::read(dir.join("out")).unwrap()
}

/// Kills the run with SIGKILL at random points after new checkpoints, up to
/// `kills` times, resuming each time, then lets the last resume finish;
/// returns the output file and how many kills landed before the end.
pub(crate) fn killed_and_resumed(
    dir: &Path,
    input: &str,
    extra: &[&str],
    stdin_trace: Option<&str>,
    kills: usize,
    rng: &mut Rng,
) -> (Vec<u8>, usize) {
    let ck = dir.join("ck");
    let _ = std::fs::remove_file(&ck);
    let mut landed = 0;
    for round in 0..=kills {
        let (mut child, feeder) = start(dir, input, extra, round > 0, stdin_trace);
        let mut finished = round == kills;
        if !finished {
            let before = std::fs::read(&ck).unwrap_or_default();
            match wait_for_new_checkpoint(&mut child, &ck, &before) {
                Some(_) => {
                    // Somewhere between this checkpoint and a few after it.
                    std::thread::sleep(Duration::from_millis(rng.below(150)));
                    if child.try_wait().unwrap().is_none() {
                        child.kill().unwrap();
                        landed += 1;
                    } else {
                        finished = true;
                    }
                }
                None => finished = true,
            }
        }
        let out = child.wait_with_output().unwrap();
        if let Some(f) = feeder {
            let _ = f.join();
        }
        if finished {
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return (std::fs::read(dir.join("out")).unwrap(), landed);
        }
    }
    unreachable!("the last round runs to the end")
}

#[test]
fn killed_runs_resume_to_the_uninterrupted_output_file() {
    let mut rng = Rng::new();
    let mut landed = 0;
    for (format, output) in [("csv", "csv"), ("jsonl", "text"), ("input", "jsonl")] {
        let dir = test_dir("checkpoints", &format!("kill-{format}"));
        write(&dir, "spec.dsrv", SPEC);
        let input = write(&dir, &format!("t.{format}"), trace(format, 40_000));
        let extra = ["--output", output, "--checkpoint-every", "1500"];
        let want = uninterrupted(&dir, &input, &extra, None);
        let (got, n) = killed_and_resumed(&dir, &input, &extra, None, 3, &mut rng);
        assert!(
            got == want,
            "{format}: the resumed output differs from an uninterrupted run's"
        );
        landed += n;
    }
    eprintln!("{landed} of 9 kills landed before the end");
    // Most kills must land mid-run, or the test proves little.
    assert!(
        landed >= 5,
        "only {landed} of 9 kills landed before the end"
    );
}

#[test]
fn killed_stream_runs_resume_to_the_uninterrupted_output_file() {
    let mut rng = Rng::new();
    let dir = test_dir("checkpoints", "kill-stream");
    write(&dir, "spec.dsrv", SPEC);
    let text = trace("jsonl", 6_000);
    let extra = ["--output", "csv", "--checkpoint-every", "200"];
    let want = uninterrupted(&dir, "-", &extra, Some(&text));
    let (got, landed) = killed_and_resumed(&dir, "-", &extra, Some(&text), 3, &mut rng);
    assert!(
        got == want,
        "the resumed output differs from an uninterrupted run's"
    );
    eprintln!("{landed} of 3 kills landed before the end");
    assert!(
        landed >= 2,
        "only {landed} of 3 kills landed before the end"
    );
}

#[test]
fn killed_keyed_runs_resume_to_the_uninterrupted_output_file() {
    let mut rng = Rng::new();
    let dir = test_dir("checkpoints", "kill-keyed");
    write(&dir, "spec.dsrv", format!("{SPEC}in k: Int\n"));
    // The JSON-lines trace with a key `k` in 0..7 in every row.
    let text: String = trace("jsonl", 40_000)
        .lines()
        .enumerate()
        .map(|(i, l)| {
            format!("{{\"k\": {}, {}\n", (i * 3 + i / 7) % 7, &l[1..]).replace(", }", "}")
        })
        .collect();
    let input = write(&dir, "t.jsonl", text);
    let extra = [
        "--key",
        "k",
        "--output",
        "csv",
        "--checkpoint-every",
        "1500",
    ];
    let want = uninterrupted(&dir, &input, &extra, None);
    assert!(String::from_utf8_lossy(&want).starts_with("step,k,total,"));
    let (got, landed) = killed_and_resumed(&dir, &input, &extra, None, 3, &mut rng);
    assert!(
        got == want,
        "the resumed keyed output differs from an uninterrupted run's"
    );
    eprintln!("{landed} of 3 kills landed before the end");
    assert!(
        landed >= 2,
        "only {landed} of 3 kills landed before the end"
    );
}

/// Runs vigil with `args`; returns the status, standard output and error.
fn run(args: &[&str]) -> (i32, String, String) {
    crate::support::run_vigil(args, None)
}

/// A run over 50 rows with a checkpoint every 20 (and at the end): returns
/// the directory, the spec, the trace and the checkpoint paths.
fn checkpointed(test: &str) -> (crate::support::TestDir, String, String, String) {
    let dir = test_dir("checkpoints", test);
    let spec = write(&dir, "spec.dsrv", SPEC);
    let input = write(&dir, "t.csv", trace("csv", 50));
    let ck = dir.join("ck").to_str().unwrap().to_string();
    let out = dir.join("out").to_str().unwrap().to_string();
    let (code, _, err) = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--output-file",
        &out,
        "--checkpoint",
        &ck,
        "--checkpoint-every",
        "20",
    ]);
    assert_eq!((code, err.as_str()), (0, ""));
    (dir, spec, input, ck)
}

#[test]
fn a_checkpoint_of_another_spec_is_refused() {
    let (dir, _, input, ck) = checkpointed("other-spec");
    let other = write(&dir, "other.dsrv", SPEC.replace("s[3]", "s[4]"));
    let out = dir.join("out").to_str().unwrap().to_string();
    let (code, stdout, err) = run(&[
        "run",
        &other,
        "--input",
        &input,
        "--output-file",
        &out,
        "--resume",
        &ck,
    ]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    let fingerprint = |path: &str| {
        let spec = vigil::Spec::parse("s", &std::fs::read_to_string(path).unwrap()).unwrap();
        spec.fingerprint().short()
    };
    assert_eq!(
        err,
        format!(
            "error: cannot resume from `{ck}` (taken with `{}`): the snapshot was taken with another specification (snapshot fingerprint {}, this specification's {})\n",
            dir.join("spec.dsrv").display(),
            fingerprint(dir.join("spec.dsrv").to_str().unwrap()),
            fingerprint(&other)
        )
    );
}

#[test]
fn a_corrupt_or_foreign_checkpoint_is_refused() {
    let (dir, spec, input, ck) = checkpointed("corrupt");
    let bytes = std::fs::read(&ck).unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "flipped",
            {
                let mut b = bytes.clone();
                let at = b.len() / 2;
                b[at] ^= 0x40;
                b
            },
            "the checkpoint is corrupt: its contents do not match their checksum",
        ),
        (
            "cut",
            bytes[..bytes.len() - 10].to_vec(),
            "the checkpoint is truncated: its header announces",
        ),
        ("empty", Vec::new(), "not a vigil checkpoint"),
        ("spec", SPEC.as_bytes().to_vec(), "not a vigil checkpoint"),
    ];
    for (name, contents, message) in cases {
        let path = write(&dir, name, contents);
        let (code, stdout, err) = run(&["run", &spec, "--input", &input, "--resume", &path]);
        assert_eq!((code, stdout.as_str()), (1, ""), "{name}");
        assert!(
            err.starts_with(&format!("error: cannot resume from `{path}`: {message}")),
            "{name}: {err}"
        );
    }
    let (code, _, err) = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--resume",
        "/nonexistent/ck",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error: cannot read checkpoint `/nonexistent/ck`: "),
        "{err}"
    );
}

#[test]
fn a_checkpoint_must_fit_the_input_and_output() {
    let (dir, spec, _, ck) = checkpointed("mismatch");
    let out = dir.join("out").to_str().unwrap().to_string();
    let shorter = write(&dir, "short.csv", trace("csv", 10));
    let (code, _, err) = run(&[
        "run",
        &spec,
        "--input",
        &shorter,
        "--output-file",
        &out,
        "--resume",
        &ck,
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("fewer than the")
            && err.contains("it is not the trace the checkpoint was taken on"),
        "{err}"
    );
    // Same length, other bytes.
    let original = std::fs::read_to_string(dir.join("t.csv")).unwrap();
    let changed = write(&dir, "changed.csv", original.replacen("v1", "w1", 1));
    let (code, _, err) = run(&[
        "run",
        &spec,
        "--input",
        &changed,
        "--output-file",
        &out,
        "--resume",
        &ck,
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("differs from the trace the checkpoint was taken on"),
        "{err}"
    );
    let jsonl = write(&dir, "t.jsonl", trace("jsonl", 50));
    let (code, _, err) = run(&[
        "run",
        &spec,
        "--input",
        &jsonl,
        "--output-file",
        &out,
        "--resume",
        &ck,
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("it was taken on a CSV trace, and this run reads JSON-lines"),
        "{err}"
    );
    let input = dir.join("t.csv").to_str().unwrap().to_string();
    let (code, _, err) = run(&["run", &spec, "--input", &input, "--resume", &ck]);
    assert_eq!(code, 1);
    assert!(err.contains("pass it again to continue that file"), "{err}");
    std::fs::write(&out, "").unwrap();
    let (code, _, err) = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--output-file",
        &out,
        "--resume",
        &ck,
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("the output file") && err.contains("has 0 bytes, fewer than the"),
        "{err}"
    );
    // A stream with fewer rows than the checkpoint consumed.
    let script = format!(
        "head -5 {input} | {} run {spec} --input - --format csv --output-file {out}2 --resume {ck}",
        env!("CARGO_BIN_EXE_vigil")
    );
    let _ = std::fs::write(format!("{out}2"), "");
    let o = crate::support::bash(&script);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot resume from"), "{err}");
}

/// On standard output, the rows after the last checkpoint of a killed run are
/// written again by the resumed run (at least once): dropping the repeated
/// steps gives the uninterrupted output.
#[test]
fn stdout_outputs_are_repeated_after_the_last_checkpoint() {
    let dir = test_dir("checkpoints", "stdout");
    let spec = write(&dir, "spec.dsrv", SPEC);
    let text = trace("jsonl", 100);
    let input = write(&dir, "t.jsonl", &text);
    let ck = dir.join("ck").to_str().unwrap().to_string();
    let (code, full, _) = run(&["run", &spec, "--input", &input, "--output", "csv"]);
    assert_eq!(code, 0);
    // A run killed after writing the outputs of 40 rows, whose last
    // checkpoint was taken after 30: the checkpoint of a run over the first
    // 30 rows, and the first 40 rows of output.
    let first: String = text.lines().take(30).map(|l| format!("{l}\n")).collect();
    let part = write(&dir, "part.jsonl", first);
    let (code, _, _) = run(&[
        "run",
        &spec,
        "--input",
        &part,
        "--output",
        "csv",
        "--checkpoint",
        &ck,
    ]);
    assert_eq!(code, 0);
    let head: String = full.lines().take(41).map(|l| format!("{l}\n")).collect();
    // The resumed run reads the stream from its start and drops 30 rows.
    let script = format!(
        "cat {input} | {} run {spec} --input - --output csv --resume {ck}",
        env!("CARGO_BIN_EXE_vigil")
    );
    let o = crate::support::bash(&script);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let tail = String::from_utf8(o.stdout).unwrap();
    // A resumed standard output is a new stream, with its CSV header.
    assert!(tail.starts_with("step,total,last,tag,seen\n30,"), "{tail}");
    let step = |line: &str| line.split(',').next().unwrap().parse::<u64>().unwrap();
    let repeated = tail.lines().skip(1).filter(|l| step(l) < 40).count();
    assert_eq!(repeated, 10, "steps 30 to 39 are written again");
    let rest: String = tail
        .lines()
        .skip(1)
        .filter(|l| step(l) >= 40)
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(format!("{head}{rest}"), full);
}

/// Bytes written after the last checkpoint (a killed run's rows, or
/// anything else) are cut off before the resumed run appends.
#[test]
fn a_resume_cuts_the_output_file_back_to_the_checkpoint() {
    let (dir, spec, input, ck) = checkpointed("cut-back");
    let out = dir.join("out").to_str().unwrap().to_string();
    let want = std::fs::read(&out).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&out).unwrap();
    f.write_all(b"step,total\n999,partial row of a killed ru")
        .unwrap();
    drop(f);
    // The checkpoint was taken at the end of the input: nothing to redo.
    let (code, _, err) = run(&[
        "run",
        &spec,
        "--input",
        &input,
        "--output-file",
        &out,
        "--resume",
        &ck,
    ]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(
        std::fs::read(&out).unwrap() == want,
        "the output file was not cut back"
    );
}

/// Issue 34, item 13: keyed checkpoints of many keys.
mod many_keys {
    use super::run;
    use crate::support::{test_dir, write};
    use std::path::Path;

    /// A counter, a difference over an offset and a flag per key.
    const KEYED: &str = "in host: Str\nin x: Int\nout total: Int\nout delta: Int\nout hi: Bool\n\
total = default(total[1], 0) + x\ndelta = x - default(x[1], x)\nhi = x > 90\n";

    /// `rows` JSON lines over `keys` keys (`h0`, `h1`, …), each key's rows
    /// spread over the trace.
    fn trace(keys: usize, rows: usize) -> String {
        (0..rows)
            .map(|i| {
                let x = (i * 7919) % 100;
                format!("{{\"host\": \"h{}\", \"x\": {x}}}\n", i % keys)
            })
            .collect()
    }

    /// The memory test's name, which its measuring child runs.
    const MEMORY_TEST: &str =
        "checkpoints::many_keys::keyed_checkpoints_and_resumes_stay_within_the_monitors_memory";

    fn peak_rss(args: &[&str]) -> (i32, u64) {
        crate::support::peak_rss(MEMORY_TEST, args)
    }

    /// A keyed checkpoint of 100,000 keys used to be built whole in memory
    /// (every key's snapshot, its encoding, then the file's) beside the
    /// monitor, and a resume held the decoded checkpoint, every key's
    /// restored state and the monitor at once: the run with a checkpoint
    /// peaked at several times the run without one. Both are now streams,
    /// key by key, so each peaks at about the monitor's own memory. Not a
    /// timed test: it compares peak resident sets of the three runs.
    #[cfg(target_os = "linux")]
    #[test]
    fn keyed_checkpoints_and_resumes_stay_within_the_monitors_memory() {
        if crate::support::report_peak_if_child() {
            return;
        }
        const KEYS: usize = 100_000;
        let dir = test_dir("checkpoints", "many-keys-memory");
        let spec = write(&dir, "spec.dsrv", KEYED);
        let input = write(&dir, "t.jsonl", trace(KEYS, KEYS));
        let ck = dir.join("ck").to_str().unwrap().to_string();
        let base = ["run", &spec, "--input", &input, "--key", "host", "--quiet"];
        let (code, plain) = peak_rss(&base);
        assert_eq!(code, 0);
        // Checkpoints at 60,000 rows and at the end (100,000 keys).
        let with_ck = [
            &base[..],
            &["--checkpoint", &ck, "--checkpoint-every", "60000"],
        ]
        .concat();
        let (code, checkpointed) = peak_rss(&with_ck);
        assert_eq!(code, 0);
        let size = std::fs::metadata(&ck).unwrap().len();
        let (code, resumed) = peak_rss(&[&base[..], &["--resume", &ck]].concat());
        assert_eq!(code, 0);
        let mb = |b: u64| b as f64 / (1 << 20) as f64;
        eprintln!(
            "{KEYS} keys: peak RSS {:.1} MB plain, {:.1} MB checkpointed, {:.1} MB resumed; checkpoint {:.1} MB",
            mb(plain),
            mb(checkpointed),
            mb(resumed),
            mb(size)
        );
        // The monitor's own memory, and the buffers of a stream (a megabyte
        // of file buffer, a few hundred kilobytes of decoding) with room for
        // the allocator's slack; the old code needed the whole checkpoint
        // several times over on top.
        let bound = plain + plain / 4 + (16 << 20);
        assert!(
            checkpointed <= bound,
            "checkpointing peaked at {:.1} MB against {:.1} MB without",
            mb(checkpointed),
            mb(plain)
        );
        assert!(
            resumed <= bound,
            "resuming peaked at {:.1} MB against {:.1} MB for the run itself",
            mb(resumed),
            mb(plain)
        );
    }

    /// A keyed run with thousands of keys checkpointed partway (the trace
    /// then grew, as an append-only log does) and resumed writes exactly
    /// the output file of an uninterrupted run, and its final checkpoint is
    /// byte for byte the uninterrupted run's.
    #[test]
    fn a_resumed_keyed_run_of_many_keys_equals_an_uninterrupted_one() {
        let dir = test_dir("checkpoints", "many-keys-resume");
        let spec = write(&dir, "spec.dsrv", KEYED);
        let text = trace(5_000, 12_000);
        let whole = write(&dir, "whole.jsonl", &text);
        let (out, ck) = (dir.join("out"), dir.join("ck"));
        let (out, ck) = (out.to_str().unwrap(), ck.to_str().unwrap());
        let keyed = ["--key", "host", "--output", "csv", "--output-file", out];
        let (code, _, err) = run(&[&["run", &spec, "--input", &whole], &keyed[..]].concat());
        assert_eq!((code, err.as_str()), (0, ""));
        let want = std::fs::read(out).unwrap();
        let (ck_want, ck_got) = (dir.join("ck-want"), dir.join("ck-got"));
        let (code, _, err) = run(&[
            &["run", &spec, "--input", &whole, "--quiet"],
            &["--key", "host", "--checkpoint", ck_want.to_str().unwrap()][..],
        ]
        .concat());
        assert_eq!((code, err.as_str()), (0, ""));
        // The first 7,000 rows, with checkpoints every 3,000 and at their
        // end; the trace is then the whole one (same path, grown).
        let growing = dir.join("growing.jsonl");
        let head: String = text.lines().take(7_000).map(|l| format!("{l}\n")).collect();
        std::fs::write(&growing, head).unwrap();
        let growing = growing.to_str().unwrap();
        let every = ["--checkpoint", ck, "--checkpoint-every", "3000"];
        let (code, _, err) =
            run(&[&["run", &spec, "--input", growing], &keyed[..], &every[..]].concat());
        assert_eq!((code, err.as_str()), (0, ""));
        std::fs::write(growing, &text).unwrap();
        let (code, _, err) = run(&[
            &["run", &spec, "--input", growing, "--resume", ck],
            &keyed[..],
            &every[..],
        ]
        .concat());
        assert_eq!((code, err.as_str()), (0, ""));
        assert!(
            std::fs::read(out).unwrap() == want,
            "the resumed output differs from the uninterrupted run's"
        );
        std::fs::copy(ck, &ck_got).unwrap();
        let snapshot_of = |path: &Path| {
            let bytes = std::fs::read(path).unwrap();
            // The snapshot follows the description; the descriptions differ
            // (input paths), the monitors' snapshots must not.
            let at = bytes
                .windows(8)
                .position(|w| w == vigil::KEYED_MAGIC)
                .expect("a keyed snapshot");
            bytes[at..].to_vec()
        };
        assert!(
            snapshot_of(&ck_got) == snapshot_of(&ck_want),
            "the resumed run's last checkpoint differs from the uninterrupted run's"
        );
    }

    /// Every way a keyed checkpoint can be damaged is refused with a clear
    /// message (exit 1, nothing written), never a panic: a flipped byte
    /// anywhere, a cut anywhere, bytes after its end, a lying key count, and
    /// a checkpoint of the format before streaming.
    #[test]
    fn damaged_keyed_checkpoints_are_refused() {
        let dir = test_dir("checkpoints", "many-keys-damaged");
        let spec = write(&dir, "spec.dsrv", KEYED);
        let input = write(&dir, "t.jsonl", trace(300, 600));
        let ck = dir.join("ck").to_str().unwrap().to_string();
        let base = ["run", &spec, "--input", &input, "--key", "host", "--quiet"];
        let (code, _, err) = run(&[&base[..], &["--checkpoint", &ck]].concat());
        assert_eq!((code, err.as_str()), (0, ""));
        let bytes = std::fs::read(&ck).unwrap();
        let snap_at = bytes
            .windows(8)
            .position(|w| w == vigil::KEYED_MAGIC)
            .unwrap();
        let mut cases: Vec<(String, Vec<u8>, &str)> = Vec::new();
        // Flips and cuts spread over the description, the snapshot's header
        // and its entries.
        for k in 0..24 {
            let at = k * (bytes.len() - 1) / 23;
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            cases.push((format!("flip-{at}"), flipped, ""));
            cases.push((format!("cut-{at}"), bytes[..at].to_vec(), ""));
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"tail");
        cases.push((
            "longer".into(),
            longer,
            "the checkpoint is corrupt: 4 bytes after the end of the data",
        ));
        let cut_body = bytes[..bytes.len() - 5].to_vec();
        cases.push((
            "cut-body".into(),
            cut_body,
            "the checkpoint is truncated: its header announces",
        ));
        let mut old = bytes.clone();
        old[8..12].copy_from_slice(&3u32.to_le_bytes());
        cases.push((
            "format-3".into(),
            old,
            "checkpoint format version 3 is not supported (this vigil reads versions 5 to 6): it was written by an earlier vigil",
        ));
        let mut flipped = bytes.clone();
        flipped[bytes.len() - 1] ^= 1;
        cases.push((
            "flip-last".into(),
            flipped,
            "the checkpoint is corrupt: its contents do not match their checksum",
        ));
        // A key count that claims more keys than the bytes could hold, with
        // a valid checksum: the count is the varint after the head's fields.
        let lying = reseal_keyed(&bytes, snap_at, |body| {
            // Version (1), fingerprint (32), key name (1 + 4: "host"),
            // rows (2 bytes: 600), then the count (2 bytes: 300).
            assert_eq!(&body[34..38], b"host");
            assert_eq!(body[40..42], [0xac, 0x02], "300 keys");
            body.splice(40..42, [0xff, 0xff, 0xff, 0x7f]);
        });
        cases.push((
            "lying-count".into(),
            lying,
            "the checkpoint is corrupt: 268435455 keys announced in",
        ));
        // One key fewer than announced, resealed: the last entry is missing.
        let short = reseal_keyed(&bytes, snap_at, |body| {
            body.truncate(body.len() - 60);
        });
        cases.push(("short".into(), short, "the checkpoint is corrupt: "));
        for (name, contents, message) in cases {
            let path = write(&dir, &name, contents);
            let (code, stdout, err) = run(&[&base[..], &["--resume", &path]].concat());
            assert_eq!((code, stdout.as_str()), (1, ""), "{name}: {err}");
            assert!(
                err.starts_with(&format!("error: cannot resume from `{path}`: {message}")),
                "{name}: {err}"
            );
            assert!(!err.contains("panicked"), "{name}: {err}");
        }
    }

    /// The checkpoint `bytes` with its keyed snapshot (at `at`) changed by
    /// `change` and resealed with a valid length and SHA-256.
    fn reseal_keyed(bytes: &[u8], at: usize, change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        use sha2::Digest;
        let mut body = bytes[at + 52..].to_vec();
        change(&mut body);
        let mut out = bytes[..at + 52].to_vec();
        out[at + 12..at + 20].copy_from_slice(&(body.len() as u64).to_le_bytes());
        out[at + 20..at + 52].copy_from_slice(&sha2::Sha256::digest(&body));
        out.extend_from_slice(&body);
        out
    }
}
