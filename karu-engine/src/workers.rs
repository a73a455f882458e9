//! Worker threads that start with the first job that needs them: the file workers and the
//! credential workers.
//!
//! A client that never reads a local file runs no file worker, and one whose reads need no
//! credential lookup runs no credential worker. Idle threads are not free: each takes memory
//! and, on its first allocation, one of the allocator's per-thread arenas (glibc makes at most
//! eight per core; the threads beyond them share one, and the event loops, which allocate on
//! every request, then contend for its lock).

use std::sync::OnceLock;
use std::thread::JoinHandle;

use crossbeam_channel::Receiver;

use crate::sdk::{Error, Status};

/// Up to `count` threads named `{name}-{i}`, each running `work` on one shared queue, started
/// by the first [`start`](Workers::start).
pub(crate) struct Workers<J> {
    name: &'static str,
    count: usize,
    receiver: Receiver<J>,
    work: fn(&Receiver<J>),
    /// The threads that started (at least one), or why none could.
    started: OnceLock<Result<Vec<JoinHandle<()>>, String>>,
}

impl<J: Send + 'static> Workers<J> {
    /// Workers for the queue `receiver` (at least one), none started yet.
    pub(crate) fn new(
        name: &'static str,
        count: usize,
        receiver: Receiver<J>,
        work: fn(&Receiver<J>),
    ) -> Self {
        Workers {
            name,
            count: count.max(1),
            receiver,
            work,
            started: OnceLock::new(),
        }
    }

    /// How many workers there are once started.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Start the workers, the first time: as many as the system lets start. An error
    /// ([`Status::Io`]) only when not even one could, since a job queued then would wait for
    /// nobody.
    pub(crate) fn start(&self) -> Result<(), Error> {
        let started = self.started.get_or_init(|| {
            let mut threads = Vec::with_capacity(self.count);
            for i in 0..self.count {
                let (receiver, work) = (self.receiver.clone(), self.work);
                match std::thread::Builder::new()
                    .name(format!("{}-{i}", self.name))
                    .spawn(move || work(&receiver))
                {
                    Ok(thread) => threads.push(thread),
                    Err(e) if threads.is_empty() => {
                        return Err(format!("cannot start worker thread {}-{i}: {e}", self.name));
                    }
                    Err(e) => {
                        let running = threads.len();
                        tracing::warn!(
                            error = %e,
                            running,
                            "cannot start worker thread {}-{i}",
                            self.name
                        );
                        break;
                    }
                }
            }
            Ok(threads)
        });
        match started {
            Ok(_) => Ok(()),
            Err(message) => Err(Error::new(Status::Io, message.clone())),
        }
    }

    /// How many threads started (none before [`start`](Workers::start)).
    #[cfg(test)]
    pub(crate) fn running(&self) -> usize {
        self.started
            .get()
            .map_or(0, |s| s.as_ref().map_or(0, Vec::len))
    }

    /// The threads that started, if any, for their owner to join (or leave) as it drops.
    pub(crate) fn take(&mut self) -> Vec<JoinHandle<()>> {
        match self.started.take() {
            Some(Ok(threads)) => threads,
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(receiver: &Receiver<crossbeam_channel::Sender<String>>) {
        while let Ok(reply) = receiver.recv() {
            let name = std::thread::current().name().map(str::to_string);
            let _ = reply.send(name.unwrap_or_default());
        }
    }

    #[test]
    fn the_workers_start_with_the_first_job_and_only_once() {
        let (sender, receiver) = crossbeam_channel::unbounded();
        let mut workers = Workers::new("karu-test", 3, receiver, echo);
        assert_eq!(workers.count(), 3);
        assert_eq!(workers.running(), 0, "no thread before a job");
        workers.start().unwrap();
        workers.start().unwrap();
        assert_eq!(workers.running(), 3);
        let threads = workers.take();
        assert_eq!(threads.len(), 3, "started once, all of them");
        let mut names: Vec<String> = threads
            .iter()
            .map(|t| t.thread().name().unwrap().to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["karu-test-0", "karu-test-1", "karu-test-2"]);
        // They serve the queue.
        let (reply, answer) = crossbeam_channel::bounded(1);
        sender.send(reply).unwrap();
        assert!(answer.recv().unwrap().starts_with("karu-test-"));
        drop((sender, workers));
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn at_least_one_worker_runs() {
        let (_sender, receiver) = crossbeam_channel::unbounded();
        let mut workers = Workers::new("karu-test", 0, receiver, echo);
        workers.start().unwrap();
        assert_eq!(workers.take().len(), 1);
    }
}
