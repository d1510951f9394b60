//! Text shared by the simulated server and the dataset synthesizer.
//!
//! Real reasoning models open most answers with the same few sentences, so the tokens a server
//! just generated often match the start of the *recorded* assistant turn that the next request
//! carries — the cache hits that generated-token cache clearing (docs/benchmark.md#cache-clearing)
//! removes. The simulated server opens its reasoning with [`REASONING_PREAMBLE`] and the
//! synthesizer opens recorded reasoning with it too, so that effect is reproducible: without
//! clearing, the preamble's KV blocks are reused; with clearing (a leading space), they are not.

/// Opening of generated and synthesized reasoning. Longer than several 16-token cache blocks.
pub const REASONING_PREAMBLE: &str =
    "Okay, let me start by looking carefully at what was asked and at the current state of the \
work, so that I understand the problem before changing anything. First I will restate the goal, \
then check what the previous steps have already established.";

/// Words for deterministic filler text.
pub const WORDS: &[&str] = &[
    "the", "request", "handler", "returns", "a", "value", "when", "cache", "is", "warm", "and",
    "test", "fails", "because", "config", "file", "missing", "so", "we", "update", "module",
    "path", "error", "check", "output", "line", "function", "call", "result", "order", "customer",
    "account", "policy", "refund", "status", "pending", "ticket", "agent", "tool", "query",
];

/// Deterministic filler of about `approx_bytes` bytes from a 64-bit `seed` (splitmix64 words).
pub fn filler(seed: u64, approx_bytes: usize) -> String {
    let mut s = String::with_capacity(approx_bytes + 16);
    let mut rng = crate::rng::SplitMix64::new(seed);
    while s.len() < approx_bytes {
        let z = rng.next_u64();
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(WORDS[(z % WORDS.len() as u64) as usize]);
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn filler_is_deterministic_and_sized() {
        let a = super::filler(7, 100);
        assert_eq!(a, super::filler(7, 100));
        assert_ne!(a, super::filler(8, 100));
        assert!(a.len() >= 100 && a.len() < 130);
        assert!(super::REASONING_PREAMBLE.len() > 3 * 64);
    }
}
