//! A loop's task pool: the tasks that run its jobs, each task one job after another.
//!
//! The loop takes a job's permits, then hands the job to the pool: to a task that waits for
//! work if there is one, else to a new task. A task runs the job, drops its permits, and
//! takes the next job, or waits. So a request costs no task of its own: a task per job would
//! cost an allocation of the whole job's future, its copy into the box, and the scheduler's
//! work to create and free it, on every request.
//!
//! The tasks that run at once are the jobs running at once: at most the loop's share of the
//! limit, plus followers that handed their permits back while they wait for a location
//! ([`ReleasablePermits`](super::ReleasablePermits)). Tasks that find no work wait, up to the
//! loop's share of them; one more that finds none ends, so a burst of waiting followers leaves no
//! tasks behind.
//!
//! Every job handed over is run: each hand-over either promises the job to a waiting task
//! (and wakes it) or asks for a new task, and every task checks the queue before it waits.
//! A task that finds its promised job taken by another that finished first waits again,
//! counted as free once more.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The pool of one loop, for jobs `W` (shared by the loop and its tasks; all on the loop's
/// thread).
pub(super) struct TaskPool<W> {
    state: Mutex<State<W>>,
    wake: Notify,
    /// The most tasks that wait for work at once.
    keep: usize,
}

struct State<W> {
    queue: VecDeque<W>,
    /// Tasks waiting for work that no queued job is promised to.
    free: usize,
    /// No more work comes: tasks finish the queue, then end.
    closed: bool,
}

/// What the loop does after handing over a job.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(super) enum Handed {
    /// A waiting task was woken for it.
    ToWaiting,
    /// No task waits: the loop must start one ([`TaskPool::serve`]).
    NeedsTask,
}

impl<W> TaskPool<W> {
    /// A pool that keeps at most `keep` tasks waiting for work.
    pub(super) fn new(keep: usize) -> Self {
        TaskPool {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                free: 0,
                closed: false,
            }),
            wake: Notify::new(),
            keep: keep.max(1),
        }
    }

    /// Queue `work` for the pool.
    pub(super) fn hand(&self, work: W) -> Handed {
        let mut state = self.state.lock();
        state.queue.push_back(work);
        if state.free == 0 {
            return Handed::NeedsTask;
        }
        state.free -= 1;
        drop(state);
        self.wake.notify_one();
        Handed::ToWaiting
    }

    /// The next job for a task, waiting for one; `None`: the task ends (the pool is
    /// closed and its queue empty, or enough tasks wait already).
    async fn next(&self) -> Option<W> {
        loop {
            {
                let mut state = self.state.lock();
                if let Some(work) = state.queue.pop_front() {
                    return Some(work);
                }
                if state.closed || state.free >= self.keep {
                    return None;
                }
                state.free += 1;
            }
            // A wake that comes before this wait is kept by `Notify` (one permit), and the
            // loop's thread runs nothing else between the count above and this wait.
            self.wake.notified().await;
        }
    }

    /// No more work comes: waiting tasks end, busy ones once the queue is empty.
    pub(super) fn close(&self) {
        self.state.lock().closed = true;
        self.wake.notify_waiters();
    }

    /// A task's life: run jobs with `run` until [`next`](TaskPool::next) says to end, each job
    /// with the task's `state`, which `run` hands back for the next one (what a task
    /// keeps from job to job instead of allocating it again). `alive` is dropped when the
    /// task ends, also by unwinding (the loop waits for every one).
    pub(super) async fn serve<F, Fut, T, S>(self: Arc<Self>, alive: T, mut state: S, mut run: F)
    where
        F: FnMut(W, S) -> Fut,
        Fut: Future<Output = S>,
    {
        let _alive = alive;
        while let Some(work) = self.next().await {
            state = run(work, state).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;

    /// A job of the tests: its number, and a gate it waits on before it finishes (`None`: it
    /// finishes at once).
    type TestJob = (usize, Option<oneshot::Receiver<()>>);

    /// A loop's side of a pool: hands jobs over, starts tasks when asked, and records the
    /// jobs run in order.
    struct Harness {
        pool: Arc<TaskPool<TestJob>>,
        ran: Arc<Mutex<Vec<usize>>>,
        started: usize,
        /// Tasks alive: each holds a clone; the strong count, less this one, counts them.
        alive: Arc<()>,
    }

    impl Harness {
        fn new(keep: usize) -> Self {
            Harness {
                pool: Arc::new(TaskPool::new(keep)),
                ran: Arc::new(Mutex::new(Vec::new())),
                started: 0,
                alive: Arc::new(()),
            }
        }

        fn hand(&mut self, job: TestJob) -> Handed {
            let handed = self.pool.hand(job);
            if handed == Handed::NeedsTask {
                self.started += 1;
                let ran = Arc::clone(&self.ran);
                tokio::spawn(Arc::clone(&self.pool).serve(
                    Arc::clone(&self.alive),
                    (),
                    move |(n, gate): TestJob, ()| {
                        let ran = Arc::clone(&ran);
                        async move {
                            if let Some(gate) = gate {
                                let _ = gate.await;
                            }
                            assert_ne!(n, usize::MAX, "the job that panics");
                            ran.lock().push(n);
                        }
                    },
                ));
            }
            handed
        }

        /// Two tasks: job 1's, busy at the gate this returns, and job 2's, done and waiting.
        async fn one_busy_one_waiting(&mut self) -> oneshot::Sender<()> {
            let (open, gate) = oneshot::channel();
            assert_eq!(self.hand((1, Some(gate))), Handed::NeedsTask);
            assert_eq!(self.hand((2, None)), Handed::NeedsTask);
            settle().await;
            assert_eq!(self.ran(), [2]);
            assert_eq!(self.tasks(), 2);
            open
        }

        fn tasks(&self) -> usize {
            Arc::strong_count(&self.alive) - 1
        }

        fn ran(&self) -> Vec<usize> {
            self.ran.lock().clone()
        }
    }

    /// Let every task that can run do so (the runtime has one thread: nothing runs meanwhile).
    async fn settle() {
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
    }

    fn on_one_thread(test: impl Future<Output = ()>) {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(test);
    }

    #[test]
    fn a_task_runs_one_job_after_another_and_waits_for_the_next() {
        on_one_thread(async {
            let mut h = Harness::new(4);
            assert_eq!(h.hand((1, None)), Handed::NeedsTask);
            settle().await;
            assert_eq!(h.ran(), [1]);
            assert_eq!(h.tasks(), 1, "the task waits for work");
            for n in 2..=100 {
                assert_eq!(h.hand((n, None)), Handed::ToWaiting, "job {n}");
                settle().await;
            }
            assert_eq!(h.ran(), (1..=100).collect::<Vec<_>>());
            assert_eq!(h.started, 1, "a hundred jobs, one after another, one task");
        });
    }

    #[test]
    fn jobs_handed_together_each_get_a_task_and_run_in_order() {
        on_one_thread(async {
            let mut h = Harness::new(4);
            let mut gates = Vec::new();
            for n in 0..6 {
                let (open, gate) = oneshot::channel();
                gates.push(open);
                assert_eq!(h.hand((n, Some(gate))), Handed::NeedsTask, "job {n}");
            }
            settle().await;
            assert_eq!(h.tasks(), 6);
            assert!(h.ran().is_empty(), "every job waits at its gate");
            for open in gates {
                open.send(()).expect("the job waits");
            }
            settle().await;
            assert_eq!(h.ran(), [0, 1, 2, 3, 4, 5]);
            // Six finished at once; four may wait for work, the other two end.
            assert_eq!(h.tasks(), 4);
            for n in 6..10 {
                assert_eq!(h.hand((n, None)), Handed::ToWaiting, "job {n}");
            }
            assert_eq!(h.hand((10, None)), Handed::NeedsTask, "four wait, not five");
            settle().await;
            assert_eq!(h.ran(), (0..=10).collect::<Vec<_>>());
            assert_eq!(h.started, 7);
        });
    }

    #[test]
    fn a_job_promised_to_a_waiting_task_is_run_once_by_whichever_task_is_first() {
        on_one_thread(async {
            let mut h = Harness::new(4);
            let open = h.one_busy_one_waiting().await;
            // The busy task finishes before the woken one runs, and may take the job that
            // was promised to the other; it runs once either way, and the other waits again.
            open.send(()).expect("job 1 waits");
            assert_eq!(h.hand((3, None)), Handed::ToWaiting);
            settle().await;
            let mut ran = h.ran();
            ran[1..].sort_unstable();
            assert_eq!(ran, [2, 1, 3]);
            assert_eq!(h.tasks(), 2);
            assert_eq!(h.hand((4, None)), Handed::ToWaiting);
            assert_eq!(h.hand((5, None)), Handed::ToWaiting);
            assert_eq!(h.hand((6, None)), Handed::NeedsTask, "two were waiting");
            settle().await;
            assert_eq!(h.ran()[3..], [4, 5, 6]);
            assert_eq!(h.started, 3);
        });
    }

    #[test]
    fn closing_ends_waiting_tasks_and_busy_ones_once_the_queue_is_done() {
        on_one_thread(async {
            let mut h = Harness::new(4);
            let open = h.one_busy_one_waiting().await;
            // One job more, promised to the waiting task, then the close.
            assert_eq!(h.hand((3, None)), Handed::ToWaiting);
            h.pool.close();
            settle().await;
            assert_eq!(h.ran(), [2, 3]);
            assert_eq!(h.tasks(), 1, "the busy task is still at its gate");
            open.send(()).expect("job 1 waits");
            settle().await;
            assert_eq!(h.ran(), [2, 3, 1]);
            assert_eq!(h.tasks(), 0);
        });
    }

    #[test]
    fn a_job_that_panics_ends_its_task_only() {
        on_one_thread(async {
            let mut h = Harness::new(4);
            assert_eq!(h.hand((1, None)), Handed::NeedsTask);
            settle().await;
            assert_eq!(h.hand((usize::MAX, None)), Handed::ToWaiting);
            settle().await;
            assert_eq!(h.tasks(), 0, "the task unwound (its token dropped)");
            for n in 2..5 {
                let _ = h.hand((n, None));
                settle().await;
            }
            assert_eq!(h.ran(), [1, 2, 3, 4]);
            assert_eq!(h.started, 2, "one new task after the panic");
        });
    }
}
