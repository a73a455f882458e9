//! Driving a case's batches: submitted together, drained blocking, as streams, on threads or
//! by two takers at once, never waiting past the case's patience.

use super::*;

/// A locator for each object of a case (the changing one last), through `client`.
pub(super) fn locate_all(ctx: &Ctx<'_>, client: &Client) -> Result<Vec<Locator>, String> {
    (0..=CHANGING_INDEX)
        .map(|k| {
            let address = ctx.target.address(name_of(k));
            client
                .locate(&address)
                .map_err(|e| format!("cannot locate {address}: {e}"))
        })
        .collect()
}

/// What a case's batches delivered: each completion with its batch and its index in the case,
/// and the caller's buffers (of a case that lends them).
pub(super) struct Delivered {
    pub(super) done: Vec<(usize, usize, Completion)>,
    pub(super) buffers: Vec<Vec<u8>>,
    /// Duplicates of waiting requests the batches sent (`[hedge]`): requests beyond the ones
    /// their reads need.
    pub(super) hedges: u64,
}

/// Submit every batch of `case` before the first is drained, and drain them as the case says
/// (scoped, on threads of their own, or after dropping the client), with the client and the
/// locators the probes use next (a new client's, when the case dropped its own). A batch's
/// completions that are not exactly its reads' are noted in `wrong`; `Err` is a hang.
pub(super) fn run_batches(
    ctx: &Ctx<'_>,
    case: &Case,
    (client, objects, settings): (Client, Vec<Locator>, &[(&str, &str)]),
    timer: &Timer,
    wrong: &mut String,
) -> Result<(Delivered, Client, Vec<Locator>), String> {
    let options = if case.one_version {
        BatchOptions::new().one_version()
    } else {
        BatchOptions::new()
    };
    // The caller's buffers start as one byte value: a read that left a byte unwritten is
    // caught wherever the object's byte differs from it (see `UNWRITTEN`).
    let mut buffers: Vec<Vec<u8>> = case
        .reads
        .iter()
        .map(|a| vec![UNWRITTEN; if case.borrowed { a.length as usize } else { 0 }])
        .collect();
    // Every batch is submitted before the first is drained; each completion's index is its
    // batch's, so the case's is `start + index`.
    let ranges = case.batch_ranges();
    let mut done: Vec<(usize, usize, Completion)> = Vec::new();
    let mut collect = |b: usize, completions: Vec<Completion>| {
        let start = ranges[b].start;
        let indices: Vec<usize> = completions.iter().map(Completion::index).collect();
        // Every read's, in order; of a batch dropped part-way, as many as were taken.
        let right = match case.abandon {
            Some((a, taken)) if a == b => {
                indices.len() == taken
                    && indices.windows(2).all(|w| w[0] < w[1])
                    && indices.iter().all(|&i| i < ranges[b].len())
            }
            _ => indices == (0..ranges[b].len()).collect::<Vec<_>>(),
        };
        if !right {
            let _ = writeln!(wrong, "batch {b}: completions for the reads {indices:?}");
        }
        done.extend(completions.into_iter().map(|c| (b, start + c.index(), c)));
    };
    let hedges = AtomicU64::new(0);
    let hedges = &hedges;
    let (drained, client, objects) = if case.borrowed {
        let drained = client.scope(|scope| {
            // Each batch's own buffers.
            let mut rest = buffers.as_mut_slice();
            let mut theirs = Vec::new();
            for range in &ranges {
                let (mine, others) = rest.split_at_mut(range.len());
                rest = others;
                theirs.push(mine);
            }
            // (The closure's type comes from `theirs`: its buffers are borrowed for the
            // scope's whole life.)
            submit_and_drain(
                theirs,
                |b, mine| {
                    let reads = case.reads[ranges[b].clone()].iter().zip(mine);
                    scope.submit(
                        reads.map(|(a, buffer)| {
                            a.read(&objects[a.object], Some(buffer), &case.required)
                        }),
                        &options,
                    )
                },
                case,
                timer,
                hedges,
            )
        })?;
        (drained, client, objects)
    } else {
        let submit = |b: usize, ()| {
            client.submit_with(
                case.reads[ranges[b].clone()]
                    .iter()
                    .map(|a| a.read(&objects[a.object], None, &case.required)),
                &options,
            )
        };
        if case.client_dropped {
            let batches = (0..ranges.len()).map(|b| submit(b, ())).collect();
            // The batches keep the engine running; the probes and readers use a new client.
            drop(client);
            let drained = drain(batches, 0, case, timer, hedges);
            let client = ctx.client(settings)?;
            let objects = locate_all(ctx, &client)?;
            (drained?, client, objects)
        } else {
            let inputs = vec![(); ranges.len()];
            let drained = submit_and_drain(inputs, submit, case, timer, hedges)?;
            (drained, client, objects)
        }
    };
    for (b, completions) in drained.into_iter().enumerate() {
        collect(b, completions);
    }
    let hedges = hedges.load(Ordering::Relaxed);
    Ok((
        Delivered {
            done,
            buffers,
            hedges,
        },
        client,
        objects,
    ))
}

/// A batch a case drains: an owned one or a scoped one.
pub(super) trait Drainable: Stream<Item = Completion> + Unpin {
    fn batch(&self) -> &Batch;
}

impl Drainable for Batch {
    fn batch(&self) -> &Batch {
        self
    }
}

impl Drainable for ScopedBatch<'_> {
    fn batch(&self) -> &Batch {
        self
    }
}

/// Submit a batch per input (`submit` of its index and input) and drain them: every batch
/// from this thread, submitted before any is drained ([`drain`]), or in a threaded case each
/// on a thread of its own, all submitting at once. The completions of every batch, or the first
/// hang (by batch). The duplicates the batches sent are added to `hedges`.
pub(super) fn submit_and_drain<I: Send, B: Drainable + Send>(
    inputs: Vec<I>,
    submit: impl Fn(usize, I) -> B + Sync,
    case: &Case,
    timer: &Timer,
    hedges: &AtomicU64,
) -> Result<Vec<Vec<Completion>>, String> {
    if !case.threaded {
        let batches = inputs
            .into_iter()
            .enumerate()
            .map(|(b, input)| submit(b, input));
        return drain(batches.collect(), 0, case, timer, hedges);
    }
    let start = Barrier::new(inputs.len());
    let (start, submit) = (&start, &submit);
    let ended: Vec<_> = std::thread::scope(|s| {
        let threads: Vec<_> = inputs
            .into_iter()
            .enumerate()
            .map(|(b, input)| {
                s.spawn(move || {
                    start.wait();
                    drain(vec![submit(b, input)], b, case, timer, hedges)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join()).collect()
    });
    let mut all = Vec::new();
    for (b, one) in ended.into_iter().enumerate() {
        match one {
            Ok(Ok(mut completions)) => all.append(&mut completions),
            Ok(Err(hang)) => return Err(format!("batch {b}: {hang}")),
            Err(_) => return Err(format!("batch {b}: its thread panicked")),
        }
    }
    Ok(all)
}

/// The completions of every batch, each batch's in submission order (`first`: the index of
/// the first among the case's batches); the batch [`Case::abandon`] names is dropped once that
/// many of its completions are taken. In an asynchronous case the batches are polled together
/// as `Stream`s on this thread (which never blocks in them), else drained one after another.
/// `Err` if no completion comes within [`PATIENCE`]. The duplicates each batch sent are added
/// to `hedges` as it is drained or dropped.
pub(super) fn drain<B: Drainable>(
    batches: Vec<B>,
    first: usize,
    case: &Case,
    timer: &Timer,
    hedges: &AtomicU64,
) -> Result<Vec<Vec<Completion>>, String> {
    let retire = |slot: &mut Option<B>| {
        if let Some(batch) = slot.take() {
            hedges.fetch_add(batch.batch().stats().hedges, Ordering::Relaxed);
        }
    };
    let mut all: Vec<Vec<Completion>> = batches.iter().map(|_| Vec::new()).collect();
    let mut batches: Vec<Option<B>> = batches.into_iter().map(Some).collect();
    let hang = |batches: &[Option<B>]| {
        let left: Vec<&Batch> = batches.iter().flatten().map(Drainable::batch).collect();
        format!("no completion within {PATIENCE:?}: {left:?}")
    };
    if case.asynchronous {
        let mut deadline = patience(timer);
        let ended = futures::executor::block_on(futures::future::poll_fn(|cx| {
            loop {
                let mut progressed = false;
                for (b, slot) in batches.iter_mut().enumerate() {
                    if case.abandon == Some((first + b, all[b].len())) {
                        retire(slot);
                    }
                    let Some(batch) = slot else { continue };
                    match Pin::new(batch).poll_next(cx) {
                        Poll::Ready(Some(c)) => {
                            all[b].push(c);
                            progressed = true;
                        }
                        Poll::Ready(None) => retire(slot),
                        Poll::Pending => {}
                    }
                }
                if batches.iter().all(Option::is_none) {
                    return Poll::Ready(true);
                }
                if !progressed {
                    return Pin::new(&mut deadline).poll(cx).map(|()| false);
                }
            }
        }));
        if !ended {
            return Err(hang(&batches));
        }
    } else {
        for (b, slot) in batches.iter_mut().enumerate() {
            let keep = match case.abandon {
                Some((a, taken)) if a == first + b => taken,
                _ => usize::MAX,
            };
            let Some(batch) = slot.as_ref().map(Drainable::batch) else {
                continue;
            };
            let two = case.two_takers && keep == usize::MAX;
            let taken = if two {
                // Two threads take from the batch at once: each completion goes to one.
                std::thread::scope(|s| {
                    let other = s.spawn(|| take(batch, usize::MAX));
                    match (take(batch, usize::MAX), other.join()) {
                        (Some(mine), Ok(Some(theirs))) => {
                            Some(mine.into_iter().chain(theirs).collect())
                        }
                        _ => None,
                    }
                })
            } else {
                take(batch, keep)
            };
            match taken {
                Some(taken) => all[b] = taken,
                None if two => {
                    return Err(format!("two takers: {}", hang(std::slice::from_ref(slot))));
                }
                None => return Err(hang(std::slice::from_ref(slot))),
            }
            retire(slot);
        }
    }
    for completions in &mut all {
        completions.sort_by_key(Completion::index);
    }
    Ok(all)
}

/// Take `batch`'s completions (`next_timeout`) until `most` are taken or it is drained (other
/// threads may take some too); `None` if a wait for the next one, or to learn that there is
/// none, lasts [`PATIENCE`].
pub(super) fn take(batch: &Batch, most: usize) -> Option<Vec<Completion>> {
    let mut taken = Vec::new();
    while taken.len() < most {
        let asked = Instant::now();
        match batch.next_timeout(PATIENCE) {
            Next::Completion(c) => taken.push(c),
            Next::Drained if asked.elapsed() < PATIENCE => break,
            Next::Drained | Next::TimedOut => return None,
        }
    }
    Some(taken)
}

/// A wait of [`PATIENCE`] from now, on the run's timer.
pub(super) fn patience(timer: &Timer) -> Delay {
    timer.sleep_until(Instant::now() + PATIENCE)
}

/// Poll `future` once (starting its work) and drop it, cancelling the work.
pub(super) fn start_and_drop<F: Future>(future: F) {
    let mut future = std::pin::pin!(future);
    let _ = future
        .as_mut()
        .poll(&mut Context::from_waker(futures::task::noop_waker_ref()));
}

/// `future`'s output, driven by `futures::executor::block_on`; `Err` naming `what` if it takes
/// longer than [`PATIENCE`].
pub(super) fn within<F: Future>(timer: &Timer, what: &str, future: F) -> Result<F::Output, String> {
    let future = std::pin::pin!(future);
    match futures::executor::block_on(futures::future::select(future, patience(timer))) {
        futures::future::Either::Left((output, _)) => Ok(output),
        futures::future::Either::Right(_) => Err(format!("{what}: no answer within {PATIENCE:?}")),
    }
}
