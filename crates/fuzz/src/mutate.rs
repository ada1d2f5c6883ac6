//! Byte-level mutations, as libFuzzer's default mutators do them: bit flips,
//! byte sets, inserts and deletes, block copies, splices with another corpus
//! entry, and interesting integers written at random places.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Inputs grow by inserts and splices; past this they are cut back, so an
/// execution stays cheap.
pub const MAX_INPUT: usize = 1 << 20;

/// Values that sit on boundaries parsers get wrong: zero, one, powers of two
/// and their neighbours, the signed and unsigned extremes of each width.
pub const INTERESTING: [u64; 24] = [
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    16,
    31,
    32,
    64,
    255,
    256,
    1024,
    4096,
    65_535,
    65_536,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

/// One interesting value, sometimes nudged by one.
pub fn interesting(rng: &mut ChaCha8Rng) -> u64 {
    let v = INTERESTING[rng.gen_range(0..INTERESTING.len())];
    match rng.gen_range(0..4) {
        0 => v.wrapping_add(1),
        1 => v.wrapping_sub(1),
        _ => v,
    }
}

/// Applies one to four byte-level mutations to `data`; `other` is another
/// corpus entry to splice from.
pub fn mutate_bytes(rng: &mut ChaCha8Rng, data: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..rng.gen_range(1..=4) {
        mutate_once(rng, data, other);
    }
    data.truncate(MAX_INPUT);
}

fn mutate_once(rng: &mut ChaCha8Rng, data: &mut Vec<u8>, other: &[u8]) {
    if data.is_empty() {
        data.push(rng.gen());
        return;
    }
    let len = data.len();
    let at = rng.gen_range(0..len);
    match rng.gen_range(0..9) {
        0 => data[at] ^= 1 << rng.gen_range(0..8),
        1 => data[at] = rng.gen(),
        2 => {
            let n = rng.gen_range(1..=len.min(16));
            data.insert(at, rng.gen());
            for _ in 1..n {
                data.insert(at, data[at]);
            }
        }
        3 => {
            let n = rng.gen_range(1..=(len - at).min(64));
            data.drain(at..at + n);
        }
        4 => {
            // Copy a block within the input (repeats a record).
            let from = rng.gen_range(0..len);
            let n = rng.gen_range(1..=(len - from).min(256));
            let block = data[from..from + n].to_vec();
            data.splice(at..at, block);
        }
        5 if !other.is_empty() => {
            // Splice: our head, the other input's tail.
            let from = rng.gen_range(0..other.len());
            data.truncate(at);
            data.extend_from_slice(&other[from..]);
        }
        6 => {
            // An interesting integer, little-endian, of width 1, 2, 4 or 8.
            let width = 1 << rng.gen_range(0..4);
            let bytes = interesting(rng).to_le_bytes();
            let end = (at + width).min(len);
            data[at..end].copy_from_slice(&bytes[..end - at]);
        }
        7 => data.truncate(at),
        _ => {
            // Add or subtract a small amount from a byte (off-by-one lengths).
            let delta = rng.gen_range(1..=35u8);
            data[at] = if rng.gen() {
                data[at].wrapping_add(delta)
            } else {
                data[at].wrapping_sub(delta)
            };
        }
    }
}

/// Inserts or overwrites with a token of the input's language (Jinja
/// syntax, JSON punctuation), which random bytes almost never spell.
pub fn insert_word(rng: &mut ChaCha8Rng, data: &mut Vec<u8>, words: &[&str]) {
    let word = words[rng.gen_range(0..words.len())].as_bytes();
    let at = rng.gen_range(0..=data.len());
    if rng.gen() {
        data.splice(at..at, word.iter().copied());
    } else {
        let end = (at + word.len()).min(data.len());
        data.splice(at..end, word.iter().copied());
    }
    data.truncate(MAX_INPUT);
}

/// Jinja pieces chat templates are made of, and some that make them costly.
pub const JINJA_WORDS: [&str; 40] = [
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    "#}",
    "{%-",
    "-%}",
    "{% for m in messages %}",
    "{% endfor %}",
    "{% if ",
    "{% elif ",
    "{% else %}",
    "{% endif %}",
    "{% set ns = namespace(x=0) %}",
    "{% set ns.x = ns.x + 1 %}",
    "{% macro f(a) %}",
    "{% endmacro %}",
    "{% break %}",
    "{% continue %}",
    "{% raw %}",
    "{% endraw %}",
    "range(",
    "range(99999999)",
    "loop.index0",
    "loop.cycle(",
    "messages[0]",
    "messages[-1]",
    "['content']",
    ".content",
    "|tojson",
    "|join(",
    "|length",
    "|replace(",
    "[::-1]",
    ".items()",
    ".split(",
    "raise_exception(",
    "strftime_now(",
    " * 99999",
];

/// JSON punctuation and values that stress a tokenizer.json reader.
pub const JSON_WORDS: [&str; 16] = [
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "true",
    "-1",
    "4294967295",
    "1e999",
    "\"type\": \"BPE\"",
    "\"type\": \"Unigram\"",
    "\"id\": 4294967295",
    "\"special\": true",
];
