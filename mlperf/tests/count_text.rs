//! The reference tokenizer's count without building an encoding (`RefTokenizer::count_text`)
//! is `encode(text, add_special_tokens=False)`'s length (`encode_len`), text for text: words,
//! whitespace runs, newlines and `\r\n`, digits, punctuation, accents composed and decomposed
//! (the golden tokenizer normalizes to NFC), emoji, CJK, the added tokens' texts glued to words,
//! and long mixes of all of them — on the golden tokenizer (byte-level BPE with a split regex)
//! and on a tokenizer of another make (a lowercasing, whitespace-splitting word-level one with
//! its own added token).

use std::path::PathBuf;
use tokentap_mlperf::RefTokenizer;

fn golden() -> RefTokenizer {
    RefTokenizer::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../testdata/golden/mlperf-ea33275/tokenizer"),
    )
    .expect("the golden tokenizer")
}

const BITS: [&str; 24] = [
    "the",
    " cache",
    "  fails",
    "\n",
    "\r\n",
    "\n\n\n",
    "\t",
    "config.py",
    "42",
    "3.14159",
    "é",
    "e\u{301}",
    "😀",
    "日本語",
    "<|im_end|>",
    "<think>",
    "</tool_call>",
    "<tool_call>",
    "{\"command\": \"ls -la\"}",
    "   ",
    "don't",
    "ÅÄÖ",
    "\u{200b}",
    "!!",
];

/// A deterministic mix of `n` bits.
fn text(n: usize, seed: usize) -> String {
    let mut x = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            BITS[(x % BITS.len() as u64) as usize]
        })
        .collect()
}

fn agree(tok: &RefTokenizer, texts: impl IntoIterator<Item = String>) -> usize {
    let mut n = 0;
    for t in texts {
        assert_eq!(tok.count_text(&t), tok.encode_len(&t), "{t:?}");
        n += 1;
    }
    n
}

#[test]
fn the_golden_tokenizers_count_is_encode() {
    let tok = golden();
    let mut texts: Vec<String> = BITS.iter().map(|b| b.to_string()).collect();
    texts.push(String::new());
    texts.extend((0..400).map(|s| text(1 + s % 60, s)));
    texts.push(text(5000, 7));
    assert_eq!(agree(&tok, texts), 24 + 1 + 400 + 1);
    assert!(
        tok.count_text(&text(5000, 7)) > 1000,
        "a long text has many tokens"
    );
}

#[test]
fn another_makes_count_is_encode() {
    let dir = tempfile::tempdir().unwrap();
    let vocab: serde_json::Map<String, serde_json::Value> =
        ["[UNK]", "the", "cache", "fails", "42", "é", "<sep>"]
            .iter()
            .enumerate()
            .map(|(i, w)| (w.to_string(), serde_json::json!(i)))
            .collect();
    let tj = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [{"id": 6, "content": "<sep>", "single_word": false, "lstrip": true,
            "rstrip": false, "normalized": false, "special": true}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    std::fs::write(dir.path().join("tokenizer.json"), tj.to_string()).unwrap();
    let tok = RefTokenizer::load(dir.path()).expect("a word-level tokenizer");
    let texts = (0..200).map(|s| text(1 + s % 40, s).replace("<|im_end|>", " <sep>"));
    assert_eq!(agree(&tok, texts), 200);
    assert_eq!(tok.count_text("The CACHE fails <sep> 42"), 5);
}
