//! Arbitrary bytes, cut at arbitrary points, through `tokentap_core::sse::Framer` and
//! `ChunkInfo::parse`: no panic, and the cuts never change the events. See `src/harness.rs`.
#![no_main]

#[path = "../src/harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::sse(data));
