//! The libFuzzer harness of [`karu_fuzz_targets::resolve`] (see `xtask/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karu_fuzz_targets::resolve::run(data));
