//! The libFuzzer harness of [`karu_fuzz_targets::content_range`] (see `xtask/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karu_fuzz_targets::content_range::run(data));
