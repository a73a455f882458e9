//! Every fuzz target on its committed corpus and seeded mutations of it: the part of fuzzing
//! that runs in every `cargo xtask test` (the coverage-guided runs are `cargo xtask fuzz`).

use karu_fuzz_targets::{Replayed, corpus_dir, replay, target};

/// The seed of the mutations: fixed, so a failure here reproduces exactly.
const SEED: u64 = 0x6b61_7275;

fn replay_target(name: &str) -> Replayed {
    let target = target(name).expect("a target of that name");
    let done = replay(target, &corpus_dir().join(name), SEED, target.mutations);
    assert!(done.seeds > 0, "{name} replayed no committed seed");
    assert_eq!(done.mutations, target.mutations);
    done
}

#[test]
fn content_range() {
    replay_target("content_range");
}

#[test]
fn response_check() {
    replay_target("response_check");
}

#[test]
fn resolve() {
    replay_target("resolve");
}

#[test]
fn config() {
    replay_target("config");
}

#[test]
fn plan() {
    replay_target("plan");
}
