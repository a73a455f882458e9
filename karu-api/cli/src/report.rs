//! What `karu read` says on stderr: one line per distinct failure (repeats are counted, not
//! printed again), a progress bar while a batch runs when stderr is a terminal, and a summary.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use karu::Status;
use karu::config::ByteSize;

use crate::outcome::say;

/// Distinct failures printed in full; later distinct ones are only counted.
const MAX_SHOWN: usize = 100;

/// One kind of failure: the same status and message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Kind {
    status: Status,
    message: String,
}

/// Failures seen so far, grouped.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    /// Each kind with how many reads failed with it beyond the one printed, in first-seen order.
    kinds: Vec<(Kind, u64)>,
    index: HashMap<Kind, usize>,
    /// Reads whose failure was not printed because too many distinct kinds were.
    unshown: u64,
    /// Reads that failed.
    pub(crate) count: u64,
    /// Failed reads not printed whose name holds a file from before this run.
    pub(crate) notes_unsaid: u64,
}

impl Failures {
    /// Records a failure; returns whether it is the first of its kind (and so is printed).
    pub(crate) fn record(&mut self, status: Status, message: &str) -> bool {
        self.count += 1;
        let kind = Kind {
            status,
            message: message.to_owned(),
        };
        if let Some(&at) = self.index.get(&kind) {
            self.kinds[at].1 += 1;
            return false;
        }
        if self.kinds.len() >= MAX_SHOWN {
            self.unshown += 1;
            return false;
        }
        self.index.insert(kind.clone(), self.kinds.len());
        self.kinds.push((kind, 0));
        true
    }

    /// The closing lines: one per kind that repeated, and one for failures not shown.
    pub(crate) fn tail(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .kinds
            .iter()
            .filter(|(_, more)| *more > 0)
            .map(|(kind, more)| {
                let reads = if *more == 1 { "read" } else { "reads" };
                format!(
                    "karu: {more} more {reads} failed the same way ({}: {})",
                    kind.status, kind.message
                )
            })
            .collect();
        if self.unshown > 0 {
            lines.push(format!(
                "karu: {} more reads failed in other ways (not shown; --json lists every read)",
                self.unshown
            ));
        }
        if self.notes_unsaid > 0 {
            let (reads, them) = match self.notes_unsaid {
                1 => ("read", "its name"),
                _ => ("reads", "their names"),
            };
            lines.push(format!(
                "karu: {} more failed {reads} left the files from before this run under {them} \
                 as they were (--json names each as earlier_file)",
                self.notes_unsaid
            ));
        }
        lines
    }
}

/// Writes to stderr around an optional progress bar.
pub(crate) struct Reporter {
    bar: Option<ProgressBar>,
    reads: u64,
    started: Instant,
    /// Whether stderr is a terminal (a person is watching).
    terminal: bool,
    last_message: Instant,
}

impl Reporter {
    /// A reporter for a command of `reads` reads of `bytes` bytes in all; the bar shows only
    /// when stderr is a terminal and there is something to follow (several reads, or a read
    /// long enough to go in pieces). It counts bytes as they arrive, and the reads done.
    pub(crate) fn new(reads: u64, bytes: u64, long: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (terminal && (reads > 1 || long)).then(|| {
            let bar = ProgressBar::with_draw_target(Some(bytes), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec}  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_message(format!("0/{reads} reads"));
            bar
        });
        Reporter {
            bar,
            reads,
            started: Instant::now(),
            terminal,
            last_message: Instant::now(),
        }
    }

    /// One line on stderr, above the bar.
    pub(crate) fn line(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| say(line)),
            None => say(line),
        }
    }

    /// Progress: reads done, bytes arrived, failures.
    pub(crate) fn progress(&mut self, done: u64, bytes: u64, failures: u64) {
        let Some(bar) = &self.bar else {
            return;
        };
        bar.set_position(bytes);
        if done == self.reads || self.last_message.elapsed() >= Duration::from_millis(100) {
            self.last_message = Instant::now();
            bar.set_message(progress_message(done, self.reads, failures));
        }
    }

    /// Clears the bar and prints the summary line when a person is watching or reads failed.
    pub(crate) fn finish(&self, reads: u64, bytes: u64, failures: u64) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.terminal || (failures > 0 && reads > 1) {
            say(&summary(reads, bytes, failures, self.started.elapsed()));
        }
    }
}

/// `3/10 reads, 1 failed`.
fn progress_message(done: u64, reads: u64, failures: u64) -> String {
    match failures {
        0 => format!("{done}/{reads} reads"),
        _ => format!("{done}/{reads} reads, {failures} failed"),
    }
}

/// `karu: 2 of 5 reads failed; 1.5MiB delivered in 0.3 s`.
pub(crate) fn summary(reads: u64, bytes: u64, failures: u64, elapsed: Duration) -> String {
    let outcome = if failures == 0 {
        format!(
            "{reads} {} succeeded",
            if reads == 1 { "read" } else { "reads" }
        )
    } else {
        format!(
            "{failures} of {reads} {} failed",
            if reads == 1 { "read" } else { "reads" }
        )
    };
    format!(
        "karu: {outcome}; {} delivered in {:.1} s",
        approximate(bytes),
        elapsed.as_secs_f64()
    )
}

/// A size for people: exact below 1 KiB, else one decimal in the largest binary unit.
fn approximate(bytes: u64) -> String {
    if bytes < 1024 {
        return ByteSize(bytes).to_string();
    }
    let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{}", units[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_failures_are_grouped() {
        let mut failures = Failures::default();
        assert!(failures.record(Status::NotFound, "no such file: /x"));
        for _ in 0..4999 {
            assert!(!failures.record(Status::NotFound, "no such file: /x"));
        }
        assert!(failures.record(Status::NotFound, "no such file: /y"));
        assert!(failures.record(Status::InvalidRange, "no such file: /x"));
        assert_eq!(failures.count, 5002);
        assert_eq!(
            failures.tail(),
            ["karu: 4999 more reads failed the same way (not_found: no such file: /x)"]
        );
    }

    #[test]
    fn distinct_failures_beyond_the_limit_are_counted() {
        let mut failures = Failures::default();
        for i in 0..MAX_SHOWN + 5 {
            failures.record(Status::NotFound, &format!("/file/{i}"));
        }
        assert_eq!(
            failures.tail(),
            ["karu: 5 more reads failed in other ways (not shown; --json lists every read)"]
        );
    }

    #[test]
    fn summaries_and_sizes_read_well() {
        assert_eq!(approximate(14), "14B");
        assert_eq!(approximate(1536), "1.5KiB");
        assert_eq!(approximate(3 << 30), "3.0GiB");
        assert_eq!(
            summary(5, 1536, 2, Duration::from_millis(300)),
            "karu: 2 of 5 reads failed; 1.5KiB delivered in 0.3 s"
        );
        assert_eq!(
            summary(1, 14, 0, Duration::from_millis(20)),
            "karu: 1 read succeeded; 14B delivered in 0.0 s"
        );
        assert_eq!(progress_message(3, 10, 1), "3/10 reads, 1 failed");
        assert_eq!(progress_message(10, 10, 0), "10/10 reads");
    }
}
