//! The reference tokenizer's count without building an encoding (`RefTokenizer::count_text`) is
//! `encode(text, add_special_tokens=False)`'s length (`encode_len`), text for text: words,
//! whitespace runs, newlines and `\r\n`, digits, punctuation, accents composed and decomposed (NFC
//! in the variant that normalizes), emoji, CJK, the added tokens' texts glued to words, and long
//! mixes of all of them, character by character over an alphabet of the split regexes' edge cases
//! and over code points drawn from the whole Unicode range — on the golden tokenizer (byte-level
//! BPE with GPT-2's split regex), on the same vocabulary behind the split regexes of Llama 3, Qwen
//! 2 and gpt-oss (with `ignore_merges`, with NFC), all counted by the byte-level rules of
//! tokentap's own, and on a tokenizer of another make (a lowercasing, whitespace-splitting
//! word-level one with its own added token).

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

/// A deterministic string of `n` picks from `from`.
fn mix(from: &[&str], n: usize, seed: u64) -> String {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            from[(x % from.len() as u64) as usize]
        })
        .collect()
}

/// A deterministic mix of `n` bits.
fn text(n: usize, seed: usize) -> String {
    mix(&BITS, n, (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Single characters where the split regexes differ: whitespace of several kinds before words,
/// contractions in both cases (and the long s, which folds to `s`), letters of several
/// categories (upper, lower, modifier, other, a combining mark), digits of several kinds.
const CHARS: [&str; 36] = [
    " ", " ", " ", "\t", "\n", "\r", "\u{a0}", "\u{3000}", "\u{85}", "a", "Z", "é", "ſ", "'", "'",
    "s", "S", "t", "l", "L", "d", "1", "2", "\u{663}", "\u{216b}", "\u{bd}", ".", "!", "/", "😀",
    "日", "\u{301}", "\u{2b0}", "\u{1c5}", "_", "\u{200b}",
];

/// A deterministic string of `n` characters of [`CHARS`].
fn chars(n: usize, seed: usize) -> String {
    mix(&CHARS, n, (seed as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// The texts every tokenizer here is held to.
fn texts() -> Vec<String> {
    let mut texts: Vec<String> = BITS.iter().map(|b| b.to_string()).collect();
    texts.push(String::new());
    texts.extend((0..400).map(|s| text(1 + s % 60, s)));
    texts.extend((0..1500).map(|s| chars(1 + s % 40, s)));
    texts.push(text(5000, 7));
    texts.push(chars(20000, 3));
    // Runs of one symbol, where which equal pair merges first decides the count (the golden
    // merges have `00 0` but not `0 00`, and so for `.` and a backtick).
    texts.extend(["...", "000", "```", "1000000", "x....y"].map(String::from));
    texts
}

/// A tokenizer folder: the golden vocabulary and merges behind another pre-tokenizer (and
/// normalizer, and `ignore_merges`).
fn variant(
    pre: serde_json::Value,
    nfc: bool,
    ignore_merges: bool,
) -> (tempfile::TempDir, RefTokenizer) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/golden/mlperf-ea33275/tokenizer");
    let mut tj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("tokenizer.json")).unwrap())
            .unwrap();
    tj["pre_tokenizer"] = pre;
    if nfc {
        tj["normalizer"] = serde_json::json!({"type": "NFC"});
    }
    tj["model"]["ignore_merges"] = ignore_merges.into();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokenizer.json"), tj.to_string()).unwrap();
    let tok = RefTokenizer::load(dir.path()).expect("a variant of the golden tokenizer");
    (dir, tok)
}

fn split_then_bytes(pattern: &str) -> serde_json::Value {
    serde_json::json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
    ]})
}

const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const GPT_OSS: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

#[test]
fn the_split_regexes_of_other_models_count_as_encode() {
    let cases = [
        ("llama 3", split_then_bytes(LLAMA3), false, true),
        ("qwen 2", split_then_bytes(QWEN2), true, false),
        ("gpt-oss", split_then_bytes(GPT_OSS), false, true),
    ];
    for (name, pre, nfc, ignore) in cases {
        let (_dir, tok) = variant(pre, nfc, ignore);
        assert!(
            tok.counts_byte_level(),
            "{name}: counted by the byte-level rules"
        );
        for t in texts() {
            assert_eq!(tok.count_text(&t), tok.encode_len(&t), "{name}: {t:?}");
        }
    }
}

/// `n` texts of code points drawn from the whole Unicode range, among spaces, apostrophes and
/// ASCII letters and digits (so every class meets every other at a piece's edge).
fn any_unicode(n: usize) -> Vec<String> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| {
            (0..1 + i % 48)
                .map(|_| {
                    let r = next();
                    match r % 4 {
                        0 => char::from_u32((r >> 8) as u32 % 0x11_0000).unwrap_or('\u{fffd}'),
                        1 => char::from_u32((r >> 8) as u32 % 0x3400).unwrap_or(' '),
                        2 => [' ', ' ', '\n', '\'', '\u{a0}'][(r >> 8) as usize % 5],
                        _ => ['a', 'S', '7', 'x', '.'][(r >> 8) as usize % 5],
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn any_code_point_counts_as_encode() {
    let (_dir, llama) = variant(split_then_bytes(LLAMA3), false, true);
    for tok in [golden(), llama] {
        assert!(tok.counts_byte_level());
        for t in any_unicode(2000) {
            assert_eq!(tok.count_text(&t), tok.encode_len(&t), "{t:?}");
        }
    }
}

#[test]
fn other_shapes_are_counted_through_the_tokenizers_steps() {
    let removed = serde_json::json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Removed", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
    ]});
    let prefix = serde_json::json!({"type": "ByteLevel", "add_prefix_space": true,
        "trim_offsets": false, "use_regex": true});
    for pre in [removed, prefix, split_then_bytes(r"\s+|\w+")] {
        let (_dir, tok) = variant(pre.clone(), false, false);
        assert!(!tok.counts_byte_level(), "{pre}");
        assert_eq!(agree(&tok, (0..100).map(|s| chars(1 + s % 40, s))), 100);
    }
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
    assert!(tok.counts_byte_level(), "counted by the byte-level rules");
    for t in texts() {
        assert_eq!(tok.count_steps(&t), tok.encode_len(&t), "{t:?}");
    }
    assert_eq!(agree(&tok, texts()), 24 + 1 + 400 + 1500 + 2 + 5);
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
