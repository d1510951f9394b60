//! One chat chunk read by the proxy's scan and by serde_json: the scan never accepts what
//! serde_json refuses and never reads a field differently. See `src/harness.rs`.
#![no_main]

#[path = "../src/harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::chat_chunk(data));
