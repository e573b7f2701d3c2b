//! Memory-mapped trace files that survive being truncated while they are read.
//!
//! A read from a file mapping beyond the file's current end raises SIGBUS, which
//! kills the process. Trace files are mapped (no system call per line, no copy
//! through the kernel), but log files get truncated under a running reader
//! (`truncate`, logrotate's `copytruncate`), so every read of the mapping goes
//! through a [`GuardedMap`]:
//!
//! - A process-wide SIGBUS handler is installed once. When the faulting address
//!   lies inside a registered mapping, the handler maps anonymous zero pages
//!   over the rest of that mapping (so the interrupted copy completes, reading
//!   zeros), records the fault in the mapping's slot and returns. A fault
//!   anywhere else restores the previous disposition and returns, so that the
//!   access faults again and the process dies (or Rust's own handler runs)
//!   exactly as without the guard.
//! - The bytes are copied out of the mapping one chunk at a time, and a chunk
//!   is handed to the parsers only after the copy is validated: no fault was
//!   recorded, and the file (asked through its handle with `fstat`) is still at
//!   least as long as the chunk's end. A truncation that ends inside the last
//!   mapped page does not fault (the kernel shows zeros past the end), which is
//!   why the length check is needed as well as the handler.
//!
//! A truncation is reported as an `io::Error` carrying [`Truncated`], which the
//! readers turn into a located trace error. A file that is rewritten in place
//! without shrinking can still change under the reader; vigil reads what it
//! finds, as any reader of a file being rewritten does.

use std::fs::File;
use std::io::{self, BufRead, Read};

/// The bytes copied out of the mapping per validation: large enough that one
/// `fstat` per chunk costs nothing next to parsing it, small enough to stay in
/// the cache.
const CHUNK: usize = 64 * 1024;

/// Why a mapped read stopped: the file became shorter than what was mapped.
#[derive(Debug)]
pub(crate) struct Truncated {
    /// The length of the file when it was opened (the mapping's length).
    pub(crate) mapped: u64,
    /// Its length when the truncation was noticed.
    pub(crate) now: u64,
}

impl std::fmt::Display for Truncated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the trace file was truncated while it was read (it had {} bytes when opened, {} now)",
            self.mapped, self.now
        )
    }
}

impl std::error::Error for Truncated {}

/// A regular file read through a truncation-safe mapping, as a `BufRead`.
pub(crate) struct GuardedMap {
    /// Declared before `map`: fields drop in order, and the slot must stop
    /// covering the range before the mapping is unmapped.
    slot: imp::Slot,
    map: memmap2::Mmap,
    file: File,
    /// The offset in the mapping of the next chunk to copy.
    pos: usize,
    /// The current chunk (validated) and how much of it has been consumed.
    buf: Vec<u8>,
    consumed: usize,
    /// Set after a truncation was reported: every later read repeats it.
    failed: Option<u64>,
    /// The mapping before this offset (page-aligned) has been given back:
    /// its pages are no longer in this process's resident set.
    released: usize,
}

/// The copied part of a mapping is given back in steps of this many bytes
/// (at least), so that a trace read from start to end keeps the resident set
/// flat instead of growing to the file's size.
const RELEASE: usize = 4 << 20;

impl GuardedMap {
    /// Maps `file` (a regular file of `len > 0` bytes) and reads it from
    /// `start`. Returns `Ok(None)` when this platform cannot guard a mapping,
    /// or when every guard slot is taken by other open traces; the caller then
    /// reads the file through an ordinary buffer.
    pub(crate) fn open(file: File, start: u64) -> io::Result<Result<GuardedMap, File>> {
        let Some(slot) = imp::Slot::acquire() else {
            return Ok(Err(file));
        };
        // SAFETY: the mapping is only read, and only by `fill_buf` below,
        // which copies a chunk out and validates it (no SIGBUS recorded, the
        // file still long enough) before any parser sees it. A truncation
        // turns the pages past the end into zeros (the guard's handler maps
        // them) instead of killing the process. Other writers can still
        // change the bytes; that is documented, and no invariant of vigil
        // depends on the bytes staying the same.
        let map = unsafe { memmap2::Mmap::map(&file) }?;
        slot.register(map.as_ptr() as usize, map.len());
        let pos = usize::try_from(start).unwrap_or(usize::MAX).min(map.len());
        Ok(Ok(GuardedMap {
            slot,
            map,
            file,
            pos,
            buf: Vec::with_capacity(CHUNK),
            consumed: 0,
            failed: None,
            released: pos - pos % imp::page(),
        }))
    }

    fn truncated(&mut self, now: u64) -> io::Error {
        self.failed = Some(now);
        io::Error::other(Truncated {
            mapped: self.map.len() as u64,
            now,
        })
    }

    /// Copies and validates the next chunk.
    fn next_chunk(&mut self) -> io::Result<()> {
        let end = (self.pos + CHUNK).min(self.map.len());
        self.buf.clear();
        self.consumed = 0;
        // A plain copy: if the file has been truncated below this range, the
        // guard's handler zero-fills the pages and records the fault.
        self.buf.extend_from_slice(&self.map[self.pos..end]);
        let now = self.file.metadata()?.len();
        if self.slot.faulted() || now < end as u64 {
            self.buf.clear();
            return Err(self.truncated(now));
        }
        self.pos = end;
        self.release();
        Ok(())
    }

    /// Gives back the pages of the mapping already copied out, once there
    /// are `RELEASE` bytes of them.
    fn release(&mut self) {
        let upto = self.pos - self.pos % imp::page();
        if upto < self.released + RELEASE {
            return;
        }
        // SAFETY: the mapping is a shared, read-only mapping of the file
        // (or, after a truncation, the guard's anonymous zero pages): telling
        // the kernel it is not needed only drops the pages from this
        // process's page tables, and a later access (there is none: `pos`
        // only grows) would read the file again. No reference into the
        // range is live: chunks are copied out into `buf`. The range lies
        // inside the mapping and starts on a page boundary (the mapping
        // does).
        let _ = unsafe {
            self.map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                self.released,
                upto - self.released,
            )
        };
        self.released = upto;
    }
}

impl Read for GuardedMap {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let avail = self.fill_buf()?;
            let n = avail.len().min(out.len());
            out[..n].copy_from_slice(&avail[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for GuardedMap {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if let Some(now) = self.failed {
            return Err(self.truncated(now));
        }
        if self.consumed == self.buf.len() && self.pos < self.map.len() {
            self.next_chunk()?;
        }
        Ok(&self.buf[self.consumed..])
    }

    fn consume(&mut self, amt: usize) {
        self.consumed = (self.consumed + amt).min(self.buf.len());
    }
}

#[cfg(target_os = "linux")]
mod imp {
    //! The SIGBUS handler and the table of guarded mappings it consults.

    use std::sync::Once;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// How many mappings can be guarded at once; further traces are read
    /// through a buffer instead.
    const SLOTS: usize = 64;

    struct Entry {
        /// Claimed by an open trace.
        busy: AtomicBool,
        /// The mapped range `[start, end)`; `start == 0` while not registered.
        start: AtomicUsize,
        end: AtomicUsize,
        /// Set by the handler when it replaced pages of this range.
        faulted: AtomicBool,
    }

    static TABLE: [Entry; SLOTS] = [const {
        Entry {
            busy: AtomicBool::new(false),
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            faulted: AtomicBool::new(false),
        }
    }; SLOTS];
    static INSTALL: Once = Once::new();
    /// The disposition SIGBUS had before the guard, restored for faults the
    /// guard does not own.
    static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
    static PAGE: AtomicUsize = AtomicUsize::new(4096);

    /// One claimed entry of the table, given back when dropped.
    pub(super) struct Slot(usize);

    impl Drop for Slot {
        fn drop(&mut self) {
            let e = &TABLE[self.0];
            e.start.store(0, Ordering::Release);
            e.end.store(0, Ordering::Release);
            e.busy.store(false, Ordering::Release);
        }
    }

    impl Slot {
        /// Claims a free entry (installing the handler on first use).
        pub(super) fn acquire() -> Option<Slot> {
            if !install() {
                return None;
            }
            TABLE
                .iter()
                .position(|e| {
                    e.busy
                        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                })
                .map(Slot)
        }

        pub(super) fn register(&self, start: usize, len: usize) {
            let e = &TABLE[self.0];
            e.faulted.store(false, Ordering::Release);
            e.end.store(start + len, Ordering::Release);
            e.start.store(start, Ordering::Release);
        }

        pub(super) fn faulted(&self) -> bool {
            TABLE[self.0].faulted.load(Ordering::Acquire)
        }
    }

    /// The page size (known once a mapping is guarded).
    pub(super) fn page() -> usize {
        PAGE.load(Ordering::Relaxed)
    }

    /// Installs the handler once; `false` if that failed (mappings are then
    /// not guarded, and traces are read through a buffer).
    fn install() -> bool {
        static OK: AtomicBool = AtomicBool::new(false);
        INSTALL.call_once(|| {
            // SAFETY: `sysconf` has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if let Ok(page) = usize::try_from(page)
                && page.is_power_of_two()
            {
                PAGE.store(page, Ordering::Relaxed);
            }
            // SAFETY: an all-zero `sigaction` is a valid value of the C
            // struct (no handler, empty mask, no flags); the calls only read
            // and write the structs passed to them.
            unsafe {
                let mut previous: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                    return;
                }
                // The previous disposition is stored before the handler can
                // run, so the handler always finds it.
                let _ = PREVIOUS.set(previous);
                let mut action: libc::sigaction = std::mem::zeroed();
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    on_sigbus;
                action.sa_sigaction = handler as libc::sighandler_t;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0 {
                    OK.store(true, Ordering::Release);
                }
            }
        });
        OK.load(Ordering::Acquire)
    }

    /// The SIGBUS handler. It only loads atomics and makes two system calls
    /// (`mmap`, `sigaction`), both async-signal-safe on Linux.
    extern "C" fn on_sigbus(
        _sig: libc::c_int,
        info: *mut libc::siginfo_t,
        _ctx: *mut libc::c_void,
    ) {
        // SAFETY: the kernel passes a valid `siginfo_t` to an SA_SIGINFO
        // handler, and SIGBUS carries a fault address.
        let addr = unsafe { (*info).si_addr() } as usize;
        let page = PAGE.load(Ordering::Relaxed);
        for e in &TABLE {
            let start = e.start.load(Ordering::Acquire);
            let end = e.end.load(Ordering::Acquire);
            if start == 0 || addr < start || addr >= end {
                continue;
            }
            let from = addr & !(page - 1);
            let to = (end + page - 1) & !(page - 1);
            // SAFETY: `[from, to)` lies inside a live mapping registered by a
            // `GuardedMap` (registration precedes every read of it, and the
            // entry is cleared before the mapping is unmapped). Replacing
            // those pages with private zero pages changes only bytes the
            // reader will reject, since it sees the recorded fault.
            let mapped = unsafe {
                libc::mmap(
                    from as *mut libc::c_void,
                    to - from,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if mapped != libc::MAP_FAILED {
                e.faulted.store(true, Ordering::Release);
                return;
            }
            break;
        }
        // Not a guarded mapping (or the pages could not be replaced): put
        // back the previous disposition; the access faults again and is
        // handled as if the guard did not exist.
        if let Some(previous) = PREVIOUS.get() {
            // SAFETY: restores a disposition read from the kernel earlier.
            unsafe { libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut()) };
        } else {
            // SAFETY: `signal` with SIG_DFL has no preconditions.
            unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    //! Without a guard, mappings are not used: traces are read through a
    //! buffer, which a truncation cannot crash.

    pub(super) struct Slot;

    impl Slot {
        pub(super) fn acquire() -> Option<Slot> {
            None
        }
        pub(super) fn register(&self, _start: usize, _len: usize) {}
        pub(super) fn faulted(&self) -> bool {
            false
        }
    }

    pub(super) fn page() -> usize {
        4096
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(name: &str, len: usize) -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!("vigil-guard-{}-{name}", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&vec![b'a'; len])
            .unwrap();
        let file = File::open(&path).unwrap();
        (path, file)
    }

    /// The resident pages of `map`'s mapping, from `/proc/self/smaps`.
    fn resident_kb(map: &GuardedMap) -> u64 {
        let start = format!("{:x}-", map.map.as_ptr() as usize);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&start));
        lines
            .find_map(|l| l.strip_prefix("Rss:"))
            .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("the mapping is listed")
    }

    /// Reading a large trace from start to end gives the copied pages back:
    /// the resident set stays flat instead of growing to the file's size.
    #[test]
    fn read_pages_are_given_back() {
        let len = 48 << 20;
        let (path, file) = file_of("release", len);
        let mut map = match GuardedMap::open(file, 0).unwrap() {
            Ok(map) => map,
            Err(_) => panic!("no guard slot"),
        };
        let mut read = 0;
        let mut most = 0;
        loop {
            let n = map.fill_buf().unwrap().len();
            if n == 0 {
                break;
            }
            read += n;
            map.consume(n);
            most = most.max(resident_kb(&map));
        }
        let _ = std::fs::remove_file(&path);
        assert_eq!(read, len);
        assert!(
            most <= 2 * (RELEASE as u64 >> 10) + 1024,
            "{most} kB of a {len}-byte mapping resident"
        );
    }

    /// The guard owns only its registered mappings: a SIGBUS anywhere else still kills the
    /// process, as it would without the guard. Run in a child process (this test binary,
    /// filtered to this test), which must die of SIGBUS.
    #[test]
    fn a_fault_outside_guarded_mappings_still_kills() {
        const CHILD: &str = "VIGIL_GUARD_TEST_CHILD";
        if std::env::var_os(CHILD).is_some() {
            // Install the guard, with a mapping registered.
            let (guarded_path, guarded) = file_of("guarded", 10_000);
            let mut map = match GuardedMap::open(guarded, 0).unwrap() {
                Ok(map) => map,
                Err(_) => panic!("no guard slot"),
            };
            assert_eq!(map.fill_buf().unwrap().len(), 10_000);
            // An unguarded mapping of another file, truncated, then read.
            let (path, file) = file_of("unguarded", 1 << 20);
            // SAFETY: this test deliberately reads past the end of a truncated file to
            // raise SIGBUS; the process is expected to die.
            let raw = unsafe { memmap2::Mmap::map(&file) }.unwrap();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(0)
                .unwrap();
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(&guarded_path);
            let sum: u64 = raw.iter().map(|b| u64::from(*b)).sum();
            // Only reached if the read did not fault.
            println!("read {sum} without a fault");
            std::process::exit(0);
        }
        let me = std::env::current_exe().unwrap();
        let out = std::process::Command::new(me)
            .args([
                "--exact",
                "trace::guard::tests::a_fault_outside_guarded_mappings_still_kills",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGBUS),
            "{:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
