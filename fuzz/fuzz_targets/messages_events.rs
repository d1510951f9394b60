//! The Anthropic Messages API's event stream, cut at arbitrary points, through the framer, the
//! event reader, the timeline and the chat-form conversion: no panic, and the cuts never change
//! what is measured. See `src/harness.rs` (`api_events`).
#![no_main]

#[path = "../src/harness.rs"]
mod harness;

use tokentap_core::events::Api;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::api_events(Api::Messages, data));
