//! Helpers shared by the integration tests: running a spec over a trace in process.

use std::io::Write;
use std::sync::{Arc, Mutex};
use vigil::trace::{self, OutputFormat, TraceFormat};
use vigil::{Monitor, RuntimeError, Spec, StepError, Tier};

/// A `Write` whose bytes can be read back after the writer is dropped.
#[derive(Clone, Default)]
pub struct SharedBuf(pub Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuf {
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Runs `spec` over a trace given as text in `format` on `tier`, and returns
/// the text output and the runtime error, if any.
pub fn run_text(
    spec: &Spec,
    trace_text: &str,
    format: TraceFormat,
    tier: Tier,
) -> (String, Option<RuntimeError>) {
    let mut reader = trace::reader_from_bytes(
        "trace",
        trace_text.as_bytes().to_vec(),
        format,
        &spec.input_schema(),
    )
    .expect("trace opens");
    let mut monitor = Monitor::builder(spec).tier(tier).build();
    let buf = SharedBuf::default();
    let names = monitor
        .output_names()
        .into_iter()
        .map(String::from)
        .collect();
    let mut writer = trace::make_writer(OutputFormat::Text, names, Box::new(buf.clone()));
    let mut row = vec![None; monitor.input_count()];
    let mut error = None;
    while reader.next_row(&mut row).expect("trace is well formed") {
        match monitor.step(&row) {
            Ok(outputs) => writer
                .write_step(outputs.step(), &outputs.to_vec())
                .unwrap(),
            Err(StepError::Runtime(e)) => {
                error = Some(e);
                break;
            }
            Err(StepError::Row(e)) => panic!("a row of the reader was rejected: {e}"),
        }
    }
    writer.flush().unwrap();
    drop(writer);
    (buf.text(), error)
}

/// A command running the `vigil` binary built for these tests.
pub fn vigil() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
}

/// A fresh, empty directory for one test: `group` names the test module,
/// `test` the test, so that no two tests share one. It is removed when the
/// test is done with it, unless the test failed (then it is left for a look).
pub fn test_dir(group: &str, test: &str) -> TestDir {
    let d = std::env::temp_dir().join(format!("vigil-{group}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TestDir(d)
}

/// A test's directory (`test_dir`), removed on drop unless the thread is
/// panicking: a run of the suite leaves nothing behind in the temporary
/// directory, and a failed test leaves its files.
#[derive(Debug)]
pub struct TestDir(std::path::PathBuf);

impl std::ops::Deref for TestDir {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TestDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TestDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Writes `contents` to `dir/name` and returns the path as a string.
pub fn write(dir: &std::path::Path, name: &str, contents: impl AsRef<[u8]>) -> String {
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p.to_str().unwrap().to_string()
}

/// Runs `script` with `bash -c` (for pipelines and process substitution) and
/// returns what it printed and how it ended.
pub fn bash(script: &str) -> std::process::Output {
    std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .output()
        .unwrap()
}

/// Runs vigil with `args` (and `stdin`, through a pipe, if given); returns
/// the exit status, standard output and standard error.
pub fn run_vigil(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut cmd = vigil();
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What a run printed and how it ended.
#[derive(Debug)]
pub struct Outcome {
    pub code: Option<i32>,
    pub out: String,
    pub err: String,
}

/// Runs `vigil` with `args` (standard input empty), waiting at most `limit` (see [`finish`]).
pub fn run_within(args: &[&str], limit: std::time::Duration) -> Outcome {
    let child = vigil()
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, limit)
}

/// Waits for `child` at most `limit`; a child still running then is killed and the test
/// fails (a hang is a failure, not a stuck test run).
pub fn finish(mut child: std::process::Child, limit: std::time::Duration) -> Outcome {
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut s).unwrap();
        s
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("vigil did not finish within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    Outcome {
        code: status.code(),
        out: String::from_utf8_lossy(&out.join().unwrap()).into_owned(),
        err: String::from_utf8_lossy(&err.join().unwrap()).into_owned(),
    }
}

/// Runs vigil with `args` and `input` on its standard input, within a minute. The input is
/// written from a thread: vigil may stop reading early, and the pipe must not block the test.
pub fn run_piped(args: &[&str], input: &[u8]) -> Outcome {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = vigil()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let outcome = finish(child, std::time::Duration::from_secs(60));
    writer.join().unwrap();
    outcome
}

/// Makes a FIFO at `path` (the tests that need a stream a run cannot see the end of).
pub fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo failed");
}

/// Runs vigil with `args` to its end; returns its exit status and peak
/// resident set (bytes). The peak is `wait4`'s usage of that one child,
/// but a child's peak counts its parent's resident set at the spawn
/// (Linux keeps the larger of the peaks across `execve`), and this test
/// process may hold hundreds of megabytes at that moment (other tests
/// run beside it). So vigil is spawned by a fresh run of this test
/// binary running only `test` (the caller, which must begin with
/// `report_peak_if_child`), which holds a few megabytes, and reports the
/// figure. The child must have run exactly that test and reported, so a
/// filter that matches nothing fails instead of passing vacuously.
#[cfg(target_os = "linux")]
pub fn peak_rss(test: &str, args: &[&str]) -> (i32, u64) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("VIGIL_PEAK_ARGS", args.join("\u{1f}"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "the measuring child did not run exactly this test:\n{stdout}\n{stderr}"
    );
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("vigil peak: "))
        .unwrap_or_else(|| panic!("the child reported no peak:\n{stderr}"));
    let mut words = line.split_whitespace().map(|w| w.parse::<i64>().unwrap());
    let (code, peak) = (words.next().unwrap(), words.next().unwrap());
    (code as i32, peak as u64)
}

/// In the measuring child of [`peak_rss`]: runs vigil with the arguments of
/// `VIGIL_PEAK_ARGS`, reports its exit status and peak resident set, and
/// returns true (the test then returns). Elsewhere returns false.
#[cfg(target_os = "linux")]
// The child is reaped by `wait4` (which gives its usage), not `wait`.
#[allow(clippy::zombie_processes)]
pub fn report_peak_if_child() -> bool {
    let Ok(args) = std::env::var("VIGIL_PEAK_ARGS") else {
        return false;
    };
    let child = vigil()
        .args(args.split('\u{1f}'))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value (plain integers).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for (`child` is only
    // dropped, which neither waits nor kills); the pointers are to live
    // locals.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = match libc::WIFEXITED(status) {
        true => libc::WEXITSTATUS(status),
        false => -1,
    };
    // `ru_maxrss` is in kilobytes on Linux.
    eprintln!("vigil peak: {code} {}", usage.ru_maxrss * 1024);
    true
}
