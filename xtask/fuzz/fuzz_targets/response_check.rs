//! The libFuzzer harness of [`karu_fuzz_targets::response_check`] (see `xtask/fuzz-targets`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karu_fuzz_targets::response_check::run(data));
