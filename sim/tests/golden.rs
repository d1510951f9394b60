//! The sim's seeded output, fixed: with a seed, the same requests get the same lengths and the
//! same text on every platform and in every release (its random draws are SplitMix64 and the
//! `libm` crate, not the platform's libm). A change here changes every seeded sim run.

use serde_json::json;
use tokentap_sim::{SimConfig, SimServer};
use tokentap_testkit::sim::*;

/// FNV-1a 64 of the text (a fixed digest, no dependency).
fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in s.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[tokio::test]
async fn seeded_output_is_fixed() {
    let mut c = SimConfig::zero_delay();
    c.seed = 11;
    c.output.mean_tokens = 120.0;
    c.output.sigma = 0.7;
    let s = SimServer::start(c).await.unwrap();
    let mut got = Vec::new();
    for i in 0..4 {
        let r = chat(
            s.addr(),
            json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
                   "messages": [{"role": "user", "content": format!("question {i}")}]}),
        )
        .await;
        assert!(r.done(), "{:?}", r.error);
        let text = r.text_of("content") + &r.text_of("reasoning_content");
        got.push((r.usage()["completion_tokens"].as_u64().unwrap(), fnv(&text)));
    }
    assert_eq!(got, GOLDEN);
}

/// (completion tokens, FNV-1a of the text) of the four responses.
const GOLDEN: [(u64, u64); 4] = [
    (66, 0xfa8b_b19f_fdd8_0ec1),
    (81, 0xda7c_f7b1_f3e1_4911),
    (142, 0x44b5_1338_50a6_a429),
    (148, 0xf4da_c5d0_6ef3_212f),
];
