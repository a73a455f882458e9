//! Which process this is: fork detection, and values that belong to the process that made them.
//!
//! After `fork(2)` only the forking thread exists in the child. Every other thread of the
//! parent — Karu's file workers, event loops, credential workers, a provider's runtime — is
//! gone, and whatever it held at that instant stays held: a mutex locked by one of them is
//! locked forever in the child, a connection it owned is shared with the parent, a transfer it
//! ran never ends. The child must therefore not use, lock, join or even drop anything the
//! parent's threads may touch. It builds its own instead, and leaks the parent's (the memory
//! is a copy that nothing in the child refers to; it goes when the child exits).
//!
//! [`ProcessStamp`] says which process made something; [`PerProcess`] holds a value for the
//! process that made it and builds a fresh one, on first use, in a process that did not.
//! Neither locks anything: a child may use them whatever the parent's threads were doing.
//!
//! A fork is detected by two means, so that no use after a fork goes unnoticed: a
//! `pthread_atfork` child handler (registered on first use, since Karu runs no code at load
//! time) counts forks, and the process id is compared too (which also catches a child made by
//! a raw `clone` that runs no fork handlers).

use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Forks this process has seen in a child since the handler was registered (each child
/// increments its own copy).
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Whether the fork handler is registered (a plain flag rather than a `Once`: a `Once` that a
/// parent thread was running at the instant of a fork stays "running" forever in the child).
static HANDLER: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn forked_child() {
    // Async-signal-safe: one atomic add, in the child, right after the fork.
    FORKS.fetch_add(1, Ordering::Relaxed);
}

fn register_fork_handler() {
    if HANDLER.swap(true, Ordering::AcqRel) {
        return;
    }
    #[cfg(unix)]
    {
        // SAFETY: `pthread_atfork` only records the three pointers; `forked_child` is an
        // `extern "C"` function that lives as long as the program and does one atomic add,
        // which is async-signal-safe as a child handler must be. A failure (ENOMEM) leaves
        // the process id comparison as the only means of detection, which still catches
        // every fork.
        unsafe {
            libc::pthread_atfork(None, None, Some(forked_child));
        }
    }
}

/// The identity of a process: its id, and the number of forks counted in it.
///
/// Two stamps are equal only in the process that took the first one: a forked child has
/// another process id and has counted one more fork.
///
/// ```
/// use karu_engine::ProcessStamp;
/// let stamp = ProcessStamp::current();
/// assert!(stamp.is_current());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessStamp {
    pid: u32,
    forks: u64,
}

impl ProcessStamp {
    /// The running process. Costs one atomic load and a `getpid` call.
    pub fn current() -> Self {
        register_fork_handler();
        ProcessStamp {
            forks: FORKS.load(Ordering::Relaxed),
            pid: std::process::id(),
        }
    }

    /// Whether this stamp was taken in the running process.
    pub fn is_current(&self) -> bool {
        *self == Self::current()
    }

    /// The id of the process the stamp was taken in.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A stamp for tests that simulate forks.
    #[cfg(test)]
    pub(crate) fn simulated(pid: u32, forks: u64) -> Self {
        ProcessStamp { pid, forks }
    }
}

impl fmt::Debug for ProcessStamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessStamp")
            .field("pid", &self.pid)
            .field("forks", &self.forks)
            .finish()
    }
}

/// A value that belongs to one process, rebuilt in a forked child on first use there.
///
/// [`get_or_build`](PerProcess::get_or_build) returns the value of the running process,
/// building it first if the process has none yet: the first use in a forked child builds a
/// fresh one, and the parent's is never touched again in the child — not read, not locked, not
/// dropped. It is leaked there instead, as is every value replaced this way: a stale value may
/// hold locks that threads which no longer exist hold, or threads to join that are not there.
///
/// Lock-free: a value is published with one compare-and-swap, so threads of a child that race
/// to build one each build their own, one of them wins, and the others drop theirs (values
/// made in this process, so dropping them is sound). A value is never freed while it may be
/// borrowed: replaced values are leaked, and the current one is dropped only with the
/// `PerProcess`.
///
/// ```
/// use karu_engine::PerProcess;
/// let pool = PerProcess::new(vec![1, 2, 3]);
/// let value = pool.get_or_build(|| Ok::<_, ()>(Vec::new()));
/// assert_eq!(value, Ok(&vec![1, 2, 3])); // made in this process: kept
/// ```
pub struct PerProcess<T> {
    current: AtomicPtr<Stamped<T>>,
    /// Owns a `Stamped<T>` (drop check, variance and auto traits as for `Box<T>`).
    _owns: PhantomData<Box<Stamped<T>>>,
}

struct Stamped<T> {
    stamp: ProcessStamp,
    value: T,
}

// SAFETY: as for `std::sync::OnceLock`: sharing a `PerProcess` lets any thread build the value
// (so it must be `Send` to be dropped by the owner's thread) and borrow it (so it must be
// `Sync`). The pointer itself is only handed between threads through the atomic.
unsafe impl<T: Send + Sync> Sync for PerProcess<T> {}
// SAFETY: moving a `PerProcess` moves ownership of its current value, which is `Send`.
unsafe impl<T: Send> Send for PerProcess<T> {}

impl<T> PerProcess<T> {
    /// A value made by (and for) the running process.
    pub fn new(value: T) -> Self {
        Self::stamped(value, ProcessStamp::current())
    }

    /// No value yet; the first use builds one. (`const`, for a `static`.)
    pub const fn empty() -> Self {
        PerProcess {
            current: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    fn stamped(value: T, stamp: ProcessStamp) -> Self {
        let boxed = Box::new(Stamped { stamp, value });
        PerProcess {
            current: AtomicPtr::new(Box::into_raw(boxed)),
            _owns: PhantomData,
        }
    }

    /// The running process's value, if it has one (`None` in a forked child before its first
    /// [`get_or_build`](PerProcess::get_or_build)).
    pub fn get(&self) -> Option<&T> {
        self.get_in(ProcessStamp::current())
    }

    /// The running process's value, built with `build` if it has none: in a forked child, the
    /// first call builds the child's own.
    pub fn get_or_build<E>(&self, build: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        self.get_or_build_in(ProcessStamp::current(), |_| build())
    }

    /// [`get_or_build`](PerProcess::get_or_build) for a value whose building cannot fail.
    pub fn get_or_init(&self, build: impl FnOnce() -> T) -> &T {
        match self.get_or_build(|| Ok::<_, std::convert::Infallible>(build())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// [`get_or_build`](PerProcess::get_or_build), where `build` is shown the value of the
    /// process this one was forked from (if any) to copy what it can from it. It may read
    /// plain data and use `try_lock`, nothing that blocks: a lock of that value may be held
    /// forever by a thread that is not in this process, and its threads are not here.
    pub fn get_or_build_from<E>(
        &self,
        build: impl FnOnce(Option<&T>) -> Result<T, E>,
    ) -> Result<&T, E> {
        self.get_or_build_in(ProcessStamp::current(), build)
    }

    fn get_in(&self, now: ProcessStamp) -> Option<&T> {
        self.value_in(self.current.load(Ordering::Acquire), now)
    }

    fn get_or_build_in<E>(
        &self,
        now: ProcessStamp,
        build: impl FnOnce(Option<&T>) -> Result<T, E>,
    ) -> Result<&T, E> {
        let mut seen = self.current.load(Ordering::Acquire);
        if let Some(value) = self.value_in(seen, now) {
            return Ok(value);
        }
        // SAFETY: as in `value_in` (a published value is never freed while `&self` lives).
        let previous = unsafe { seen.as_ref() }.map(|stamped| &stamped.value);
        let fresh = Box::into_raw(Box::new(Stamped {
            stamp: now,
            value: build(previous)?,
        }));
        loop {
            match self
                .current
                .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                // The value replaced (another process's, or none) is leaked on purpose: see
                // the type's documentation.
                // SAFETY: `fresh` is now published; it is freed only by `Drop`.
                Ok(_) => return Ok(unsafe { &(*fresh).value }),
                Err(actual) => match self.value_in(actual, now) {
                    Some(value) => {
                        // Another thread of this process published its value first; ours
                        // was never shared, so it is dropped here, by the process that made
                        // it.
                        // SAFETY: `fresh` came from `Box::into_raw` above, never published.
                        drop(unsafe { Box::from_raw(fresh) });
                        return Ok(value);
                    }
                    // Still another process's value: try again over it.
                    None => seen = actual,
                },
            }
        }
    }

    /// The value `current` points to, if it was made in the process `now`.
    fn value_in(&self, current: *mut Stamped<T>, now: ProcessStamp) -> Option<&T> {
        // SAFETY: a non-null pointer read from `current` came from `Box::into_raw` and is freed
        // only by `Drop` (which needs `&mut self`, so not while this `&self` is borrowed) or
        // never (a replaced value is leaked).
        // It is only ever read through shared references.
        let stamped = unsafe { current.as_ref()? };
        (stamped.stamp == now).then_some(&stamped.value)
    }
}

impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let current = *self.current.get_mut();
        if current.is_null() {
            return;
        }
        // SAFETY: see `value_in`; `&mut self` means no borrow of the value is alive.
        let stamp = unsafe { (*current).stamp };
        if stamp == ProcessStamp::current() {
            // SAFETY: made by this process from `Box::into_raw`, published once, freed once.
            drop(unsafe { Box::from_raw(current) });
        }
        // Otherwise the value is another process's: leaked, as the type documents.
    }
}

impl<T: fmt::Debug> fmt::Debug for PerProcess<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerProcess")
            .field("current", &self.get())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    /// Counts drops, so tests can tell a leaked value from a dropped one.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_value_is_kept_in_the_process_that_made_it() {
        let parent = ProcessStamp::simulated(10, 0);
        let cell = PerProcess::stamped(1, parent);
        assert_eq!(cell.get_in(parent), Some(&1));
        let built = cell.get_or_build_in(parent, |_| -> Result<i32, ()> { panic!("no build") });
        assert_eq!(built, Ok(&1));
    }

    #[test]
    fn a_forked_child_builds_its_own_and_leaks_the_parents() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let parent = ProcessStamp::simulated(10, 0);
        let child = ProcessStamp::simulated(11, 1);
        let cell = PerProcess::stamped(Counted(Arc::clone(&dropped)), parent);
        assert!(
            cell.get_in(child).is_none(),
            "the parent's value is not the child's"
        );
        let fresh = Arc::new(AtomicUsize::new(0));
        let got = cell
            .get_or_build_in(child, |previous| {
                assert!(
                    previous.is_some(),
                    "the parent's value is shown to the builder"
                );
                Ok::<_, ()>(Counted(Arc::clone(&fresh)))
            })
            .unwrap();
        assert!(Arc::ptr_eq(&got.0, &fresh), "the child's own value");
        assert_eq!(dropped.load(Ordering::SeqCst), 0, "the parent's is leaked");
        // A grandchild (same pid number, another fork count) builds again.
        let grandchild = ProcessStamp::simulated(10, 2);
        assert!(cell.get_in(grandchild).is_none());
    }

    #[test]
    fn a_failed_build_leaves_the_cell_as_it_was() {
        let parent = ProcessStamp::simulated(10, 0);
        let child = ProcessStamp::simulated(11, 1);
        let cell = PerProcess::stamped(1, parent);
        assert_eq!(
            cell.get_or_build_in(child, |_| Err("no threads")),
            Err("no threads")
        );
        assert_eq!(cell.get_in(parent), Some(&1));
        assert_eq!(
            cell.get_or_build_in(child, |p| Ok::<_, ()>(p.unwrap() + 1)),
            Ok(&2)
        );
    }

    #[test]
    fn racing_builders_agree_and_the_losers_drop_their_own() {
        let built = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicUsize::new(0));
        let cell: Arc<PerProcess<Counted>> = Arc::new(PerProcess::empty());
        let barrier = Arc::new(std::sync::Barrier::new(8));
        let now = ProcessStamp::current();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (cell, built, dropped, barrier) = (
                    Arc::clone(&cell),
                    Arc::clone(&built),
                    Arc::clone(&dropped),
                    Arc::clone(&barrier),
                );
                std::thread::spawn(move || {
                    let value = cell
                        .get_or_build_in(now, |_| {
                            built.fetch_add(1, Ordering::SeqCst);
                            barrier.wait(); // every thread builds before any publishes
                            Ok::<_, ()>(Counted(Arc::clone(&dropped)))
                        })
                        .unwrap();
                    std::ptr::from_ref(value) as usize
                })
            })
            .collect();
        let winners: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(
            winners.windows(2).all(|w| w[0] == w[1]),
            "one value for all"
        );
        assert_eq!(built.load(Ordering::SeqCst), 8);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            7,
            "the seven losers dropped theirs"
        );
        drop(Arc::try_unwrap(cell).ok().expect("last reference"));
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            8,
            "the winner is dropped with the cell"
        );
    }

    #[test]
    fn dropping_the_cell_leaks_another_process_value() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let elsewhere = ProcessStamp::simulated(u32::MAX, u64::MAX);
        drop(PerProcess::stamped(
            Counted(Arc::clone(&dropped)),
            elsewhere,
        ));
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        drop(PerProcess::new(Counted(Arc::clone(&dropped))));
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_stamp_is_this_process() {
        let stamp = ProcessStamp::current();
        assert_eq!(stamp.pid(), std::process::id());
        assert!(stamp.is_current());
        assert!(!ProcessStamp::simulated(stamp.pid(), stamp.forks + 1).is_current());
    }
}
