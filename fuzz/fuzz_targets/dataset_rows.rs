//! Arbitrary UTF-8 through `Dataset::parse` (and `stats` when it loads): no panic, a loaded
//! dataset satisfies docs/benchmark.md#dataset, every error is located. See `src/harness.rs`.
#![no_main]

#[path = "../src/harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::dataset_rows(data));
