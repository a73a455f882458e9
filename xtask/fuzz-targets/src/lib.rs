//! Karu's fuzz targets, as plain functions: each takes any bytes and panics when one of the
//! invariants it checks breaks (never on input that is merely invalid).
//!
//! Two drivers run them:
//!
//! - libFuzzer, through the thin harness crate in `xtask/fuzz` (nightly, coverage-guided):
//!   `cargo xtask fuzz [TARGET] [--seconds N]`.
//! - This crate's tests, in every `cargo xtask test`: each target replays its committed corpus
//!   (`xtask/fuzz/corpus/TARGET`) and a fixed number of seeded mutations of it ([`replay`]).
//!   They build with the rest of the workspace (no second, instrumented build of the
//!   dependencies in the test run), so no target can rot, and a crash once found stays found
//!   when its input is committed to the corpus.

use std::path::{Path, PathBuf};

pub mod config;
pub mod content_range;
pub mod plan;
pub mod resolve;
pub mod response_check;

/// One fuzz target.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Its name: the harness binary, the corpus directory.
    pub name: &'static str,
    /// What it checks, in a line.
    pub checks: &'static str,
    /// Check one input.
    pub run: fn(&[u8]),
    /// Seeded mutations [`replay`] runs in the test suite (a few seconds at most each).
    pub mutations: usize,
}

/// Every target.
pub const TARGETS: [Target; 5] = [
    Target {
        name: "content_range",
        checks: "Content-Range parsing (against an independent reading of RFC 9110) and Range headers",
        run: content_range::run,
        mutations: 200_000,
    },
    Target {
        name: "response_check",
        checks: "check_head + receive + Receipt::finish: bytes at their stated position, ends of object only where stated",
        run: response_check::run,
        mutations: 300_000,
    },
    Target {
        name: "resolve",
        checks: "every provider's address resolution: no panic, stable canonical paths, no secret in messages",
        run: resolve::run,
        mutations: 40_000,
    },
    Target {
        name: "config",
        checks: "TOML + KARU_* environment + explicit options: errors not panics, every path resolves, no secret shown",
        run: config::run,
        mutations: 1_500,
    },
    Target {
        name: "plan",
        checks: "the planner on random batches: coverage, positions, hulls, the four guards, determinism",
        run: plan::run,
        mutations: 10_000,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The committed corpus of every target: `xtask/fuzz/corpus`.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

/// What [`replay`] ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// Committed inputs run as they are.
    pub seeds: usize,
    /// Mutated inputs run.
    pub mutations: usize,
}

/// Run `target` on every file of `corpus` (its own directory), then on `mutations` inputs
/// made from them by seeded mutations (byte flips, insertions, deletions, copies, splices,
/// digits). Deterministic for one seed and corpus; panics (with the input) where the target
/// does.
pub fn replay(target: &Target, corpus: &Path, seed: u64, mutations: usize) -> Replayed {
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(corpus)
        .map(|dir| {
            dir.filter_map(|entry| std::fs::read(entry.ok()?.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    // Directory order is the filesystem's: sort, so a seed replays the same inputs everywhere.
    seeds.sort();
    if seeds.is_empty() {
        seeds.push(Vec::new());
    }
    for input in &seeds {
        run_one(target, input);
    }
    let mut rng = Mutator::new(seed);
    for _ in 0..mutations {
        let input = rng.mutate(&seeds);
        run_one(target, &input);
    }
    Replayed {
        seeds: seeds.len(),
        mutations,
    }
}

fn run_one(target: &Target, input: &[u8]) {
    let outcome = std::panic::catch_unwind(|| (target.run)(input));
    if let Err(panic) = outcome {
        eprintln!(
            "fuzz target {} failed on input {:?} ({} bytes): add it to the corpus and fix the code",
            target.name,
            String::from_utf8_lossy(input),
            input.len()
        );
        std::panic::resume_unwind(panic);
    }
}

/// The longest input a mutation makes (libFuzzer runs with `-max_len=4096` too).
const MAX_LEN: usize = 4096;

/// A small, seeded xorshift generator and the mutations libFuzzer's simplest ones resemble.
struct Mutator(u64);

impl Mutator {
    fn new(seed: u64) -> Self {
        Mutator(seed | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn mutate(&mut self, seeds: &[Vec<u8>]) -> Vec<u8> {
        let mut input = seeds[self.below(seeds.len())].clone();
        for _ in 0..=self.below(4) {
            let at = self.below(input.len() + 1);
            match self.below(7) {
                0 if !input.is_empty() => {
                    let i = self.below(input.len());
                    input[i] ^= 1 << self.below(8);
                }
                1 => {
                    let byte = self.next() as u8;
                    input.insert(at, byte);
                }
                2 if !input.is_empty() => {
                    let end = (at + 1 + self.below(8)).min(input.len());
                    input.drain(at.min(end)..end);
                }
                3 if !input.is_empty() => {
                    let from = self.below(input.len());
                    let len = 1 + self.below((input.len() - from).min(16));
                    let copy = input[from..from + len].to_vec();
                    input.splice(at..at, copy);
                }
                4 => {
                    let other = &seeds[self.below(seeds.len())];
                    let from = self.below(other.len() + 1);
                    input.truncate(at);
                    input.extend_from_slice(&other[from..]);
                }
                5 => {
                    let digits = (self.next() >> self.below(64)).to_string();
                    input.splice(at..at, digits.into_bytes());
                }
                _ => {
                    let byte = [b'-', b'/', b'*', b' ', b'.', b'%', b':', 0xff][self.below(8)];
                    input.insert(at, byte);
                }
            }
        }
        input.truncate(MAX_LEN);
        input
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_and_bounded() {
        let seeds = vec![b"bytes 0-9/100".to_vec(), vec![0u8; 4000]];
        let (mut a, mut b) = (Mutator::new(7), Mutator::new(7));
        for _ in 0..1000 {
            let (x, y) = (a.mutate(&seeds), b.mutate(&seeds));
            assert_eq!(x, y);
            assert!(x.len() <= MAX_LEN);
        }
    }

    #[test]
    fn every_target_has_a_committed_corpus() {
        for target in &TARGETS {
            let dir = corpus_dir().join(target.name);
            let files = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .count();
            assert!(files > 0, "{} has no seeds", target.name);
        }
    }

    #[test]
    fn a_failing_input_is_reported_and_fails_the_replay() {
        fn fails_on_x(data: &[u8]) {
            assert!(!data.contains(&b'x'), "found an x");
        }
        let target = Target {
            name: "x",
            checks: "",
            run: fails_on_x,
            mutations: 0,
        };
        let dir = std::env::temp_dir().join(format!("karu-fuzz-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("seed"), b"abc").unwrap();
        let clean = replay(&target, &dir, 1, 0);
        assert_eq!(
            clean,
            Replayed {
                seeds: 1,
                mutations: 0
            }
        );
        std::fs::write(dir.join("crash"), b"xyz").unwrap();
        let failed = std::panic::catch_unwind(|| replay(&target, &dir, 1, 0));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(failed.is_err(), "a committed crashing input fails the run");
    }
}
