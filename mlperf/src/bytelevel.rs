//! A byte-level BPE tokenizer's count by its own rules, without the tokenizers crate's
//! per-piece bookkeeping.
//!
//! `encode(text)` of a byte-level BPE tokenizer (GPT-2's make: Llama 3, Qwen, DeepSeek,
//! gpt-oss, the golden folder's) is: split out the added tokens; cut the rest with the
//! pre-tokenizer's regex into pieces; map each piece's bytes to the byte-level alphabet; run BPE
//! on each piece. The tokenizers crate does each step on a `NormalizedString` that keeps an
//! alignment per byte and allocates per piece and per token — most of a count's cost once the
//! `Encoding` is gone. A count needs none of it: here the pieces are ranges of the text, a piece's
//! symbols are its bytes' vocabulary ids (a byte maps to one symbol of the alphabet), the merges
//! run on ids, and a piece seen before is one lookup.
//!
//! ## When it is used
//! Only for the shapes it reproduces exactly ([`ByteLevelCount::for_tokenizer`]): no normalizer
//! (or NFC, on ASCII text, where NFC changes nothing); a `ByteLevel` pre-tokenizer with its own
//! regex, or a regex `Split` (isolated) followed by `ByteLevel` without one; a BPE model
//! without dropout, subword prefix, word suffix or byte fallback; added tokens that are matched
//! on the raw text and not stripped. Anything else — and any piece whose bytes are not all in
//! the vocabulary, or longer than [`LONG_PIECE`] — goes through the tokenizers crate's steps.
//!
//! ## The regex
//! The tokenizers crate runs Oniguruma; this runs the `regex` crate, which has no look-ahead.
//! The patterns of this make end in `\s+(?!\S)|\s+`; that pair is run as `\s+` and corrected:
//! Oniguruma tries `\s+(?!\S)` first, which takes a whitespace run followed by a non-space
//! character less its last character (so the next piece is `" word"`), and only a run of one
//! such character falls to `\s+`. A whitespace-only match of two or more characters before a
//! non-space is therefore shortened by one character unless the alternatives before the pair
//! match there (then they were chosen, as by Oniguruma). The character classes (`\s`, `\p{L}`,
//! `\p{N}`) and the case-insensitive contractions are the two engines' alike — a test holds the
//! classes equal over every code point, and the pieces equal to the tokenizers crate's on mixed
//! texts for each pattern.

use aho_corasick::AhoCorasick;
use regex_automata::meta::{Cache, Regex};
use regex_automata::{Anchored, Input};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Pieces longer than this (bytes) are counted by the tokenizers crate: the merge loop here is
/// quadratic in a piece's length.
pub(crate) const LONG_PIECE: usize = 256;
/// Remembered pieces per thread before the memory is cleared.
const WORDS_MAX: usize = 1 << 17;

/// GPT-2's split regex, as the `ByteLevel` pre-tokenizer runs it when `use_regex` is set.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// The look-ahead pair every supported pattern ends with.
const TAIL: &str = r"|\s+(?!\S)|\s+";

type Fast<K, V> = HashMap<K, V, ahash::RandomState>;

/// The count of a byte-level BPE tokenizer (see the module docs).
pub(crate) struct ByteLevelCount {
    id: u64,
    /// Added tokens, leftmost-longest as the tokenizers crate matches them; `None`: none.
    added: Option<AhoCorasick>,
    /// Only ASCII text is counted here (the normalizer is NFC).
    ascii_only: bool,
    split: Split,
    /// Each byte's symbol id in the vocabulary (its byte-level character's).
    byte_id: [Option<u32>; 256],
    /// `(left, right)` → `(rank, merged id)`.
    merges: Fast<(u32, u32), (u32, u32)>,
    /// `ignore_merges`: a piece that is a whole vocabulary entry is one token.
    whole: Option<Fast<String, u32>>,
    byte_char: [char; 256],
}

/// The pre-tokenizer's regex without its look-ahead (see the module docs).
struct Split {
    /// The pattern with its tail pair run as `\s+`.
    all: Regex,
    /// The alternatives before the tail pair.
    head: Regex,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What a thread keeps between counts of one counter (`id`).
#[derive(Default)]
struct Scratch {
    id: u64,
    /// Piece bytes → tokens.
    words: Fast<Box<[u8]>, u32>,
    syms: Vec<u32>,
    ranks: Vec<u32>,
    /// The split regexes' search caches.
    caches: Option<(Cache, Cache)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl ByteLevelCount {
    /// `None` unless the tokenizer is of a shape counted exactly here.
    pub(crate) fn for_tokenizer(tok: &tokenizers::Tokenizer) -> Option<ByteLevelCount> {
        let ascii_only = match tok.get_normalizer() {
            None => false,
            Some(n) => match serde_json::to_value(n).ok()?.get("type") {
                Some(Value::String(t)) if t == "NFC" => true,
                _ => return None,
            },
        };
        let pattern = split_pattern(&serde_json::to_value(tok.get_pre_tokenizer()?).ok()?)?;
        let split = Split::new(&pattern)?;
        let model = serde_json::to_value(tok.get_model()).ok()?;
        let (byte_id, merges, whole) = bpe(&model)?;
        let mut texts = Vec::new();
        for t in tok.get_added_tokens_decoder().values() {
            if t.lstrip || t.rstrip || t.single_word || t.normalized {
                return None;
            }
            if !t.content.is_empty() {
                texts.push(t.content.clone());
            }
        }
        let added = if texts.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                    .build(&texts)
                    .ok()?,
            )
        };
        Some(ByteLevelCount {
            id: NEXT_ID.fetch_add(1, Relaxed),
            added,
            ascii_only,
            split,
            byte_id,
            merges,
            whole,
            byte_char: byte_chars(),
        })
    }

    /// `encode(text, add_special_tokens=False)`'s length; `None` where this text must be
    /// counted by the tokenizers crate (NFC on non-ASCII text). `slow` counts one piece the
    /// tokenizers crate's way (its model on the piece's byte-level text).
    pub(crate) fn count(&self, text: &str, slow: &dyn Fn(&str) -> Option<u64>) -> Option<u64> {
        if self.ascii_only && !text.is_ascii() {
            return None;
        }
        SCRATCH.with(|w| {
            let mut w = w.borrow_mut();
            let w = &mut *w;
            if w.id != self.id || w.words.len() >= WORDS_MAX {
                if w.id != self.id {
                    w.caches = None;
                }
                w.id = self.id;
                w.words.clear();
            }
            let caches = w.caches.get_or_insert_with(|| {
                (
                    self.split.all.create_cache(),
                    self.split.head.create_cache(),
                )
            });
            let mut pieces = Pieces {
                c: self,
                words: &mut w.words,
                syms: &mut w.syms,
                ranks: &mut w.ranks,
                caches,
                slow,
            };
            let mut n = 0u64;
            let mut at = 0;
            if let Some(ac) = &self.added {
                for m in ac.find_iter(text) {
                    n += pieces.text(&text[at..m.start()])? + 1;
                    at = m.end();
                }
            }
            Some(n + pieces.text(&text[at..])?)
        })
    }
}

/// One count's borrow of the thread's memory.
struct Pieces<'a> {
    c: &'a ByteLevelCount,
    words: &'a mut Fast<Box<[u8]>, u32>,
    syms: &'a mut Vec<u32>,
    ranks: &'a mut Vec<u32>,
    caches: &'a mut (Cache, Cache),
    slow: &'a dyn Fn(&str) -> Option<u64>,
}

impl Pieces<'_> {
    /// Tokens of a text without added tokens.
    fn text(&mut self, text: &str) -> Option<u64> {
        let mut n = 0u64;
        let mut at = 0;
        let mut last = 0;
        while at < text.len() {
            let Some((s, e)) = self.c.split.find(text, at, self.caches) else {
                break;
            };
            if s > last {
                n += self.piece(&text[last..s])?;
            }
            n += self.piece(&text[s..e])?;
            last = e;
            at = e;
        }
        if last < text.len() {
            n += self.piece(&text[last..])?;
        }
        Some(n)
    }

    fn piece(&mut self, p: &str) -> Option<u64> {
        if let Some(&n) = self.words.get(p.as_bytes()) {
            return Some(u64::from(n));
        }
        let n = match self.merge(p.as_bytes()) {
            Some(n) => n,
            None => {
                let mapped: String = p.bytes().map(|b| self.c.byte_char[b as usize]).collect();
                (self.slow)(&mapped)?
            }
        };
        self.words
            .insert(p.as_bytes().into(), n.min(u64::from(u32::MAX)) as u32);
        Some(n)
    }

    /// BPE on the piece's byte ids: the lowest-ranked adjacent pair merged first, the leftmost
    /// of equals (the tokenizers crate's order). `None`: a byte outside the vocabulary, or a
    /// long piece.
    fn merge(&mut self, p: &[u8]) -> Option<u64> {
        if p.len() > LONG_PIECE {
            return None;
        }
        if let Some(whole) = &self.c.whole {
            let mapped: String = p.iter().map(|&b| self.c.byte_char[b as usize]).collect();
            if whole.contains_key(&mapped) {
                return Some(1);
            }
        }
        let (syms, ranks) = (&mut *self.syms, &mut *self.ranks);
        syms.clear();
        for &b in p {
            syms.push(self.c.byte_id[b as usize]?);
        }
        let merges = &self.c.merges;
        let rank = |a: u32, b: u32| merges.get(&(a, b)).map_or(u32::MAX, |m| m.0);
        ranks.clear();
        ranks.extend(syms.windows(2).map(|w| rank(w[0], w[1])));
        while let Some((i, _)) = ranks
            .iter()
            .enumerate()
            .filter(|&(_, &r)| r != u32::MAX)
            .min_by_key(|&(i, &r)| (r, i))
        {
            syms[i] = merges[&(syms[i], syms[i + 1])].1;
            syms.remove(i + 1);
            ranks.remove(i);
            if i + 1 < syms.len() {
                ranks[i] = rank(syms[i], syms[i + 1]);
            }
            if i > 0 {
                ranks[i - 1] = rank(syms[i - 1], syms[i]);
            }
        }
        Some(syms.len() as u64)
    }
}

impl Split {
    fn new(pattern: &str) -> Option<Split> {
        let head = pattern.strip_suffix(TAIL)?;
        if head.contains("(?=")
            || head.contains("(?!")
            || head.contains("(?<")
            || head.contains("\\G")
        {
            return None;
        }
        Some(Split {
            all: Regex::new(&format!(r"{head}|\s+")).ok()?,
            head: Regex::new(head).ok()?,
        })
    }

    /// The next piece at or after `at`, as Oniguruma finds it.
    fn find(&self, text: &str, at: usize, caches: &mut (Cache, Cache)) -> Option<(usize, usize)> {
        let m = self
            .all
            .search_with(&mut caches.0, &Input::new(text).range(at..))?;
        let (s, mut e) = (m.start(), m.end());
        let run = &text[s..e];
        let next_is_text = text[e..].chars().next().is_some_and(|c| !c.is_whitespace());
        if next_is_text && run.chars().nth(1).is_some() && run.chars().all(char::is_whitespace) {
            let here = Input::new(text).range(s..).anchored(Anchored::Yes);
            if self.head.search_with(&mut caches.1, &here).is_none() {
                e -= run.chars().next_back().map_or(0, char::len_utf8);
            }
        }
        Some((s, e))
    }
}

/// The split regex of a supported pre-tokenizer (its serialized form), with the `ByteLevel`
/// after it adding no prefix space.
fn split_pattern(pre: &Value) -> Option<String> {
    let is = |v: &Value, k: &str, want: Value| v.get(k) == Some(&want);
    let byte_level = |v: &Value, regex: bool| {
        is(v, "type", "ByteLevel".into())
            && is(v, "add_prefix_space", false.into())
            && is(v, "use_regex", regex.into())
    };
    if byte_level(pre, true) {
        return Some(GPT2.to_string());
    }
    let seq = pre.get("pretokenizers")?.as_array()?;
    if !is(pre, "type", "Sequence".into()) || seq.len() != 2 || !byte_level(&seq[1], false) {
        return None;
    }
    let sp = &seq[0];
    if !is(sp, "type", "Split".into())
        || !is(sp, "behavior", "Isolated".into())
        || !is(sp, "invert", false.into())
    {
        return None;
    }
    Some(sp.get("pattern")?.get("Regex")?.as_str()?.to_string())
}

type Bpe = (
    [Option<u32>; 256],
    Fast<(u32, u32), (u32, u32)>,
    Option<Fast<String, u32>>,
);

/// The byte ids, merges and (under `ignore_merges`) vocabulary of a serialized BPE model of
/// the supported options.
fn bpe(model: &Value) -> Option<Bpe> {
    let empty = |k: &str| match model.get(k) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    };
    if model.get("type") != Some(&Value::from("BPE"))
        || !empty("dropout")
        || !empty("continuing_subword_prefix")
        || !empty("end_of_word_suffix")
        || model
            .get("byte_fallback")
            .is_some_and(|b| b != &Value::Bool(false))
    {
        return None;
    }
    let vocab: Fast<String, u32> = model
        .get("vocab")?
        .as_object()?
        .iter()
        .map(|(k, v)| Some((k.clone(), u32::try_from(v.as_u64()?).ok()?)))
        .collect::<Option<_>>()?;
    let chars = byte_chars();
    let mut byte_id = [None; 256];
    for (b, c) in chars.iter().enumerate() {
        byte_id[b] = vocab.get(c.to_string().as_str()).copied();
    }
    let mut merges = Fast::default();
    for (rank, m) in model.get("merges")?.as_array()?.iter().enumerate() {
        let (a, b) = match m {
            Value::String(s) => s.split_once(' ')?,
            Value::Array(p) if p.len() == 2 => (p[0].as_str()?, p[1].as_str()?),
            _ => return None,
        };
        let (ia, ib) = (*vocab.get(a)?, *vocab.get(b)?);
        let merged = *vocab.get(format!("{a}{b}").as_str())?;
        merges.insert((ia, ib), (u32::try_from(rank).ok()?, merged));
    }
    let whole = (model.get("ignore_merges") == Some(&Value::Bool(true))).then_some(vocab);
    Some((byte_id, merges, whole))
}

/// GPT-2's byte-to-character map of the byte-level alphabet.
fn byte_chars() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut out = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        out[b as usize] = if printable(b) {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap_or('\0')
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code point's membership of each class the supported regexes use is the same in Oniguruma (as
    /// the tokenizers crate builds its regexes) and in the `regex` crate.
    #[test]
    fn the_classes_are_oniguruma_s_over_every_code_point() {
        let all: String = (0..=0x10FFFFu32).filter_map(char::from_u32).collect();
        let classes = [
            r"\s",
            r"\p{L}",
            r"\p{N}",
            r"[^\s\p{L}\p{N}]",
            r"[^\r\n\p{L}\p{N}]",
        ];
        let letters = [
            r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}",
        ];
        for class in classes.into_iter().chain(letters) {
            let onig = tokenizers::utils::SysRegex::new(&format!("{class}+")).unwrap();
            let ours = regex::Regex::new(&format!("{class}+")).unwrap();
            let a: Vec<(usize, usize)> = onig.find_iter(&all).collect();
            let b: Vec<(usize, usize)> =
                ours.find_iter(&all).map(|m| (m.start(), m.end())).collect();
            assert_eq!(a.len(), b.len(), "{class}: runs");
            if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
                panic!(
                    "{class}: differs at {:?}",
                    all[a[i].0.min(b[i].0)..].chars().next()
                );
            }
        }
    }

    #[test]
    fn the_byte_map_is_gpt2_s() {
        let c = byte_chars();
        assert_eq!(
            (c[b' ' as usize], c[b'\n' as usize], c[b'a' as usize]),
            ('Ġ', 'Ċ', 'a')
        );
        let mut seen = c.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 256);
    }
}
