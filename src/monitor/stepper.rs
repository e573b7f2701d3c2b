//! `Stepper`: a monitor fed scalar rows one at a time at the cost of its kernel, checks done once
//! (and `OwnedStepper`, the same owning its monitor, for the crate's own runs).

use super::{Monitor, Outputs, StreamsView};
use crate::exec::FastRow;
use crate::lang::check::CheckedSpec;
use crate::row::{RowError, ScalarRow, StepError};
use crate::value::Value;
use std::sync::Arc;

/// A monitor borrowed for a run of scalar rows: the fastest way to give a
/// monitor one row at a time. It holds one row of inputs in frame form, as
/// a [`ScalarRow`] does, set by position with the same checked setters;
/// [`Stepper::step`] evaluates it as [`Monitor::step_scalars`] would, with
/// the same outputs and errors on every tier.
///
/// What it saves is the work `step_scalars` repeats on every row because
/// anything may have happened to the monitor in between: checking that the
/// row was made for it, that the run has not failed, that the whole-row
/// kernel is promoted and has nothing to run after it, and laying out the
/// kernel's frame. While the stepper borrows the monitor nothing else can
/// touch it, so it checks these once and again only after a row the kernel
/// did not complete (a declined or failing row, which the general path
/// evaluates). On a monitor with no promoted native-whole (or quickened
/// whole-row) kernel every row takes the general path, and a stepper costs
/// what `step_scalars` does.
///
/// ```
/// use vigil::{Monitor, Spec, Tier};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spec = Spec::parse("sum.dsrv", "in x: Int\nout total: Int\ntotal = default(total[1], 0) + x")?;
/// let mut monitor = Monitor::builder(&spec).build();
/// let mut stepper = monitor.stepper();
/// let x = stepper.input("x")?;
/// for i in 1..=4 {
///     stepper.set_int(x, i)?;
///     assert_eq!(stepper.step()?.int(0), Some(i * (i + 1) / 2));
/// }
/// stepper.unset(x);
/// // An absent input holds its last value under the hold rule (the
/// // kernel declines the row; the canonical tier evaluates it).
/// assert_eq!(stepper.step()?.int(0), Some(10 + 4));
/// drop(stepper);
/// assert_eq!(monitor.steps(), 5);
/// # Ok(())
/// # }
/// ```
pub struct Stepper<'m> {
    monitor: &'m mut Monitor,
    kept: Kept,
}

/// What a stepper keeps beside the monitor it steps: the row and the
/// kernel's frame made for that monitor's run. It is only ever used with the
/// monitor it was made for, which nothing else touches in between: a
/// [`Stepper`] borrows that monitor mutably, an [`OwnedStepper`] owns it.
struct Kept {
    /// The row, handed to the kernel's frame at every step; it never
    /// changes length (`fast` was made for its width).
    row: ScalarRow,
    /// The whole-row kernel's frame while every row so far has completed on
    /// it (`Engine::fast_row`); `None` sends the next row the general way.
    fast: Option<FastRow>,
    /// The rows completed on `fast`.
    fast_rows: u64,
    /// The monitor's checked specification, which every step's outputs
    /// read (their streams' slots): held here so that reading an output
    /// starts from the stepper, not from a chain of pointers through the
    /// monitor's engine and plan, which a row would wait on.
    spec: Arc<CheckedSpec>,
}

/// A monitor owned by its stepper, for the crate's own runs that keep one
/// for good (the STL plan tier, `stl::plan`): a [`Stepper`] without the
/// borrow, so that it can live in a struct beside the monitor's other state.
/// The monitor is boxed so that it stays where the frame was made from
/// whatever moves the stepper (the frame points only into the heap
/// buffers of its run's state, but the box makes that no concern).
pub(crate) struct OwnedStepper {
    monitor: Box<Monitor>,
    kept: Kept,
}

impl Monitor {
    /// A [`Stepper`] of this monitor, every input absent.
    pub fn stepper(&mut self) -> Stepper<'_> {
        let kept = Kept::new(self);
        Stepper {
            monitor: self,
            kept,
        }
    }
}

impl Kept {
    /// The row (every input absent) and the frame for `m` as it is now.
    fn new(m: &mut Monitor) -> Kept {
        let mut kept = Kept {
            row: m.scalar_row(),
            fast: None,
            fast_rows: 0,
            spec: m.engine.plan().spec.clone(),
        };
        kept.refresh(m);
        kept
    }

    /// Makes the kernel's frame again from the monitor as it now is (after
    /// building, or after a row the general path evaluated).
    fn refresh(&mut self, m: &mut Monitor) {
        let (lanes, tags) = self.row.frame();
        self.fast = m.engine.fast_row(&mut m.run, lanes, tags);
        // A row the general path evaluated may have rebuilt the engine on
        // a re-signed plan (speculation), whose spec is another (of the
        // same streams).
        let spec = &m.engine.plan().spec;
        if !Arc::ptr_eq(&self.spec, spec) {
            self.spec = spec.clone();
        }
    }

    /// One step of the row as it is set, on `m`.
    ///
    /// # Safety
    /// `m` is the monitor this was made for (`Kept::new`), and since then
    /// nothing but this function (and `refresh`) has touched it.
    ///
    /// Always inlined into its caller, which reads the outputs: returned from a call, they
    /// are stored by the callee and read back in wider loads, a stall that was a third of
    /// the STL plan's own time per step.
    #[inline(always)]
    unsafe fn step_timed<'a>(
        &'a mut self,
        m: &'a mut Monitor,
        time: Option<crate::time::Time>,
    ) -> Result<Outputs<'a>, StepError> {
        let step = m.steps();
        let row = self.row.frame();
        let done = match self.fast.as_mut() {
            // SAFETY: `fast` was made by `refresh` for this monitor's run, for
            // this row (which never changes length); since then only
            // `run_fast_row` has touched the run (the caller's promise, and the
            // general path below calls `refresh` after every row it evaluates).
            Some(fast) => unsafe { m.engine.run_fast_row(&mut m.run, fast, row, time) },
            None => false,
        };
        // The outputs are made here for both paths, so that they are not
        // made in memory by one and copied (a wide read of narrow stores,
        // stalled, was half of a row's time).
        if done {
            self.fast_rows += 1;
        } else {
            self.step_general(m, time)?;
        }
        Ok(Outputs::new(
            StreamsView::State(&m.run.state),
            &self.spec,
            step,
            None,
        ))
    }

    /// A row the kernel did not complete, or any row without a fast frame:
    /// `step_scalars`' way, then the frame made again.
    #[inline(never)]
    fn step_general(
        &mut self,
        m: &mut Monitor,
        time: Option<crate::time::Time>,
    ) -> Result<(), StepError> {
        self.fast = None;
        let ran = m.step_scalars_timed(time, &self.row).map(|_| ());
        self.refresh(m);
        ran
    }
}

impl Stepper<'_> {
    /// How many rows the stepper completed on the whole-row kernel's kept
    /// frame, without the general path (for tests of its coverage).
    #[doc(hidden)]
    pub fn fast_rows(&self) -> u64 {
        self.kept.fast_rows
    }

    /// The position of input `name`, for the setters.
    pub fn input(&self, name: &str) -> Result<usize, RowError> {
        self.kept.row.input(name)
    }

    /// Sets input `input` (a position) to an Int, as [`ScalarRow::set_int`]
    /// does.
    #[inline(always)]
    pub fn set_int(&mut self, input: usize, value: i64) -> Result<(), RowError> {
        self.kept.row.set_int(input, value)
    }

    /// Sets input `input` to a Float, as [`ScalarRow::set_float`] does.
    #[inline(always)]
    pub fn set_float(&mut self, input: usize, value: f64) -> Result<(), RowError> {
        self.kept.row.set_float(input, value)
    }

    /// Sets input `input` to a Bool, as [`ScalarRow::set_bool`] does.
    #[inline(always)]
    pub fn set_bool(&mut self, input: usize, value: bool) -> Result<(), RowError> {
        self.kept.row.set_bool(input, value)
    }

    /// Sets input `input` from a cell of a row of `Value`s, as
    /// [`ScalarRow::set`] does (a Str or Unit value is refused).
    pub fn set(&mut self, input: usize, cell: Option<&Value>) -> Result<(), RowError> {
        self.kept.row.set(input, cell)
    }

    /// Makes input `input` absent (NoVal at the next step).
    pub fn unset(&mut self, input: usize) {
        self.kept.row.unset(input);
    }

    /// Makes every input absent.
    pub fn clear(&mut self) {
        self.kept.row.clear();
    }

    /// Evaluates one step of the row as it is set (inputs keep their values
    /// from one step to the next until set again): the outputs of
    /// [`Monitor::step_scalars`] on the same row, and its errors. A runtime
    /// error stops the monitor, as there.
    #[inline]
    pub fn step(&mut self) -> Result<Outputs<'_>, StepError> {
        // SAFETY: the stepper borrows its monitor mutably from `Kept::new`
        // on, so only the stepper's steps have touched it.
        unsafe { self.kept.step_timed(self.monitor, None) }
    }

    /// [`Stepper::step`] at `time`: the row's time, as [`Monitor::step_at`]
    /// gives one (what `time()`, time windows and STL intervals read), for a
    /// run whose rows carry their times. Its outputs and errors are those of
    /// `step_at` on the same row, on every tier.
    ///
    /// ```
    /// use vigil::time::Time;
    /// use vigil::{Monitor, Spec, Tier};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Whether x stayed above 0 over the last second.
    /// let spec = Spec::parse("up.dsrv", "in x: Float\nout up: Bool\nup = stl(G[0, 1s](x > 0))")?;
    /// let mut monitor = Monitor::builder(&spec).tier(Tier::NativeWhole).build();
    /// let mut stepper = monitor.stepper();
    /// let x = stepper.input("x")?;
    /// let mut ups = Vec::new();
    /// for (ms, value) in [(0, 1.0), (500, -1.0), (1000, 2.0), (1600, 3.0)] {
    ///     stepper.set_float(x, value)?;
    ///     ups.push(stepper.step_at(Time(ms * 1_000_000))?.bool(0));
    /// }
    /// // The dip at 0.5 s is in the last second until 1.5 s has passed.
    /// assert_eq!(ups, [Some(true), Some(false), Some(false), Some(true)]);
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn step_at(&mut self, time: crate::time::Time) -> Result<Outputs<'_>, StepError> {
        // SAFETY: as in `step`.
        unsafe { self.kept.step_timed(self.monitor, Some(time)) }
    }
}

impl OwnedStepper {
    /// A stepper that owns `monitor`, every input absent.
    pub(crate) fn new(monitor: Monitor) -> OwnedStepper {
        let mut monitor = Box::new(monitor);
        let kept = Kept::new(&mut monitor);
        OwnedStepper { monitor, kept }
    }

    /// The monitor, to read (a step is the stepper's).
    pub(crate) fn monitor(&self) -> &Monitor {
        &self.monitor
    }

    /// Sets input `input` to a Float, as [`Stepper::set_float`] does.
    #[inline(always)]
    pub(crate) fn set_float(&mut self, input: usize, value: f64) -> Result<(), RowError> {
        self.kept.row.set_float(input, value)
    }

    /// [`Stepper::step`] of the owned monitor.
    #[inline(always)]
    pub(crate) fn step(&mut self) -> Result<Outputs<'_>, StepError> {
        // SAFETY: the monitor is owned here and private, and `monitor()`
        // lends it only to read: only the stepper's steps have touched it
        // since `Kept::new`.
        unsafe { self.kept.step_timed(&mut self.monitor, None) }
    }
}
