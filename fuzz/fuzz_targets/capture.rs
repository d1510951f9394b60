//! Streamed chat-completion chunks through the accuracy capture (`tokentap_mlperf::output`) and the scorer's extraction of intents and bash actions: no panic, deterministic. See `src/outside.rs`.
#![no_main]

#[path = "../src/outside.rs"]
mod outside;

libfuzzer_sys::fuzz_target!(|data: &[u8]| outside::capture(data));
