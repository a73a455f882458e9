//! Scopes: reads into borrowed destinations, waited for before the borrow ends
//! ([`Engine::scope`], [`Scope`], [`ScopedBatch`]), and the C ABI's unchecked submission.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::{FusedStream, Stream};

use parking_lot::Mutex;

use crate::batch::read::{Completion, Read};
use crate::batch::{Batch, BatchShared};
use crate::sdk::PerProcess;

use super::{BatchOptions, Engine};

impl Engine {
    /// Submit reads that may borrow their destinations for `'d`, without a scope: the
    /// returned batch is what waits, when dropped, until no transfer references a borrowed
    /// destination (its pending reads cancelled first), as a scope's end would. For callers
    /// whose destinations outlive any Rust borrow, such as the C ABI (`karu_client_submit` with
    /// caller buffers, released by `karu_batch_free`).
    ///
    /// # Safety
    ///
    /// The returned batch must be dropped before `'d` ends (never leaked with
    /// [`std::mem::forget`] or a reference cycle): until it has been dropped, transfers may
    /// write to the borrowed destinations from Karu's threads. For foreign destinations
    /// ([`Read::from_raw_parts`]), the caller keeps that constructor's contract instead: each
    /// stays valid for writes, and is neither read nor written by anyone else, until the
    /// batch has been dropped or its read's completion has been taken, whichever comes first
    /// for reading it, and until the batch has been dropped for freeing it.
    pub unsafe fn submit_unchecked<'d>(
        &self,
        reads: impl IntoIterator<Item = Read<'d>>,
        options: &BatchOptions,
    ) -> ScopedBatch<'d> {
        ScopedBatch {
            batch: self.submit_any(reads.into_iter().collect(), options, None),
            _scope: PhantomData,
        }
    }

    /// Run `f` with a [`Scope`] in which reads may borrow their destinations. When `f`
    /// returns, every batch of the scope is released (pending reads cancelled) and the scope
    /// waits until no transfer references a borrowed buffer, even for batches leaked with
    /// [`std::mem::forget`].
    pub fn scope<'env, F, T>(&self, f: F) -> T
    where
        F: for<'scope> FnOnce(&'scope Scope<'env>) -> T,
    {
        let scope = Scope {
            engine: self.clone(),
            batches: PerProcess::new(Mutex::new(Vec::new())),
            _env: PhantomData,
        };
        let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        // Only this process's batches: in a child forked inside `f`, the parent's batches
        // are another process's (no transfer of theirs runs here), and the list the parent
        // kept them in may be locked forever by a thread that is not here.
        if let Some(batches) = scope.batches.get() {
            for batch in batches.lock().drain(..) {
                batch.release();
            }
        }
        match result {
            Ok(value) => value,
            Err(panic) => resume_unwind(panic),
        }
    }
}

/// A region in which reads may borrow their destinations; see [`Engine::scope`].
///
/// Leaking is harmless: a batch leaked with [`std::mem::forget`] is still waited for (the
/// scope registered it before any of its transfers started), and the scope itself is only
/// ever lent to the closure, so it cannot be moved out, leaked, or kept:
///
/// ```compile_fail,E0507
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// engine.scope(|scope| std::mem::forget(*scope)); // cannot move out of `*scope`
/// ```
///
/// ```compile_fail
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// let kept = engine.scope(|scope| scope); // the scope cannot outlive the closure
/// ```
///
/// A slice lent to a scope's read stays borrowed until the scope has returned, so it cannot be
/// touched while a transfer may write to it:
///
/// ```compile_fail,E0506
/// # use karu_engine::{BatchOptions, Read};
/// # let registry = karu_engine::sdk::testing::registry();
/// # let object = registry.resolve("/etc/hostname").unwrap();
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// let mut buf = [0u8; 4];
/// engine.scope(|scope| {
///     let batch = scope.submit([Read::borrowed(&object, 0, &mut buf)], &BatchOptions::new());
///     std::mem::forget(batch);
///     buf[0] = 1; // `buf` is still lent to the scope
/// });
/// ```
///
/// The same code reads `buf` once the scope has returned:
///
/// ```
/// # use karu_engine::{BatchOptions, Read};
/// # let registry = karu_engine::sdk::testing::registry();
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("f");
/// # std::fs::write(&path, b"abcd").unwrap();
/// # let object = registry.resolve(path.to_str().unwrap()).unwrap();
/// # let engine = karu_engine::Engine::new(karu_config::Snapshot::defaults()).unwrap();
/// let mut buf = [0u8; 4];
/// engine.scope(|scope| {
///     let batch = scope.submit([Read::borrowed(&object, 0, &mut buf)], &BatchOptions::new());
///     assert!(batch.wait()[0].is_ok());
///     std::mem::forget(batch); // leaked: harmless
/// });
/// buf[0] = buf[0].to_ascii_uppercase();
/// assert_eq!(&buf, b"Abcd");
/// ```
pub struct Scope<'env> {
    engine: Engine,
    /// The batches submitted in this scope by the running process.
    batches: PerProcess<Mutex<Vec<Arc<BatchShared>>>>,
    /// Invariant in `'env`, so borrows cannot be shortened to the closure's own lifetime.
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'env> Scope<'env> {
    /// Submit reads whose destinations may be borrowed for `'env`.
    pub fn submit<'scope>(
        &'scope self,
        reads: impl IntoIterator<Item = Read<'env>>,
        options: &BatchOptions,
    ) -> ScopedBatch<'scope> {
        let batches = self.batches.get_or_init(|| Mutex::new(Vec::new()));
        let batch = self
            .engine
            .submit_any(reads.into_iter().collect(), options, Some(batches));
        ScopedBatch {
            batch,
            _scope: PhantomData,
        }
    }
}

impl fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("batches", &self.batches.get().map(|b| b.lock().len()))
            .finish_non_exhaustive()
    }
}

/// A [`Batch`] whose reads may borrow destinations; it cannot outlive its [`Scope`] (or, from
/// [`Engine::submit_unchecked`], the borrow of its destinations).
///
/// Unlike an owned [`Batch`], dropping it waits until no transfer references its borrowed
/// destinations (its pending reads are cancelled first), as the end of its scope would. In a
/// forked child, a scoped batch submitted before the fork has no transfer running there, and
/// dropping it does not wait (see [`Batch`]).
#[derive(Debug)]
#[must_use = "dropping a scoped batch cancels its reads and waits for its transfers"]
pub struct ScopedBatch<'scope> {
    batch: Batch,
    _scope: PhantomData<&'scope ()>,
}

impl Deref for ScopedBatch<'_> {
    type Target = Batch;
    fn deref(&self) -> &Batch {
        &self.batch
    }
}

impl Drop for ScopedBatch<'_> {
    fn drop(&mut self) {
        self.batch.shared.release();
    }
}

impl Stream for ScopedBatch<'_> {
    type Item = Completion;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        Pin::new(&mut self.batch).poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.batch.size_hint()
    }
}

impl FusedStream for ScopedBatch<'_> {
    fn is_terminated(&self) -> bool {
        self.batch.is_terminated()
    }
}
