//! The deterministic stand-in tokenizer shared by the simulated server and the dataset tools.
//!
//! One token is 4 bytes of UTF-8 text, counted over the exact bytes (the last partial group is
//! one token). It is prefix-stable — the tokens of a prefix are a prefix of the tokens — which is
//! what a prefix KV cache needs, and close to the ~4 characters per token of English BPE
//! vocabularies. It is not a real tokenizer and never claims to be: records produced with it say
//! so through their token source.

/// Bytes per stand-in token.
pub const BYTES_PER_TOKEN: usize = 4;

/// Number of stand-in tokens in `text`.
pub fn count(text: &str) -> u64 {
    text.len().div_ceil(BYTES_PER_TOKEN) as u64
}

/// Stand-in tokens of `bytes`, as 4-byte groups.
pub fn tokens(bytes: &[u8]) -> std::slice::Chunks<'_, u8> {
    bytes.chunks(BYTES_PER_TOKEN)
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("abcd"), 1);
        assert_eq!(super::count("abcde"), 2);
    }
}
