//! The vocabulary constrained decoding sees (no GPU): every token's exact
//! bytes, on a byte-level BPE (SmolLM2, Qwen2.5) and a SentencePiece
//! (Gemma 3) vocab; masks that hold only tokens the grammar allows; and
//! grammars llguidance cannot compile refused with a typed error.

use wick::constrain::{grammar_token_bytes, ConstrainError, Grammar, GrammarCompiler};
use wick::format::gguf::GgufFile;
use wick::tokenizer::Tokenizer;
use wick_tests::model_path;

const MODELS: [&str; 3] = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m.gguf",
    "qwen2.5-coder-0.5b-instruct-awq.gguf",
];

fn tokenizer(file: &str) -> Tokenizer {
    let path = model_path(file);
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: read-only mapping of a test fixture nothing else writes.
    let bytes = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let gguf = GgufFile::parse_header(&bytes).unwrap();
    Tokenizer::from_gguf(&gguf).unwrap()
}

const TEXTS: [&str; 6] = [
    "Hello, world!",
    "  two leading spaces\nthen a newline\tand a tab",
    "naïve café — 東京 🦀 Ünïcödé",
    r#"{"key": [1, 2.5e-3, null], "s": "a\"b"}"#,
    "<|im_end|> <end_of_turn> </s> written as text",
    "fn main() {\n    println!(\"{}\", 1 + 1);\n}",
];

#[test]
fn token_bytes_concatenate_to_the_text() {
    for model in MODELS {
        let tok = tokenizer(model);
        for text in TEXTS {
            let ids = tok.encode(text, false, false).unwrap();
            let mut bytes = Vec::new();
            let mut grammar_bytes = Vec::new();
            for &id in &ids {
                bytes.extend(tok.token_bytes(id, false).unwrap());
                grammar_bytes.extend(grammar_token_bytes(&tok, id));
            }
            assert_eq!(String::from_utf8_lossy(&bytes), text, "{model}: {ids:?}");
            // Special-token text is plain text here, so no token is marked.
            assert_eq!(grammar_bytes, bytes, "{model}: {text}");
        }
        // End-of-generation tokens are llguidance's special form: 0xFF first.
        for id in tok.stop_ids() {
            let b = grammar_token_bytes(&tok, id);
            assert_eq!(b.first(), Some(&0xFF), "{model}: stop id {id}");
        }
    }
}

/// The allowed tokens of a fresh constraint's first mask.
fn first_allowed(compiler: &GrammarCompiler, grammar: Grammar, vocab: usize) -> Vec<u32> {
    let mut c = compiler.compile(&grammar).unwrap();
    let mut words = Vec::new();
    c.next_mask(&mut words).unwrap();
    assert_eq!(words.len(), vocab.div_ceil(32));
    (0..vocab as u32)
        .filter(|&i| words[i as usize / 32] >> (i % 32) & 1 == 1)
        .collect()
}

#[test]
fn masks_allow_exactly_the_grammar_s_tokens() {
    for model in MODELS {
        let tok = tokenizer(model);
        // A logits row longer than the vocabulary (as Qwen2.5's is): the
        // extra ids have no bytes and are never allowed.
        let vocab = tok.vocab_size() + 37;
        let compiler = GrammarCompiler::new(&tok, vocab).unwrap();
        let digits = first_allowed(&compiler, Grammar::Regex("[0-9]{3}".into()), vocab);
        assert!(!digits.is_empty(), "{model}");
        for &id in &digits {
            let b = grammar_token_bytes(&tok, id);
            assert!(
                !b.is_empty() && b.len() <= 3 && b.iter().all(u8::is_ascii_digit),
                "{model}: token {id} {b:?} allowed by [0-9]{{3}}"
            );
        }
        // Every single digit is there, and nothing else is.
        for d in b'0'..=b'9' {
            let id = tok.encode(&(d as char).to_string(), false, false).unwrap();
            assert!(digits.contains(&id[0]), "{model}: digit {}", d as char);
        }
        // A JSON object's first token can only start with `{`.
        let json = first_allowed(&compiler, Grammar::JsonObject, vocab);
        assert!(json
            .iter()
            .all(|&id| grammar_token_bytes(&tok, id)[0] == b'{'));
    }
}

#[test]
fn grammars_that_do_not_compile_are_typed_errors() {
    let tok = tokenizer(MODELS[0]);
    let compiler = GrammarCompiler::new(&tok, tok.vocab_size()).unwrap();
    let bad = [
        Grammar::JsonSchema(serde_json::json!({"type": "frobnicate"})),
        Grammar::JsonSchema(serde_json::json!({"$ref": "#/$defs/missing"})),
        Grammar::Regex("(unclosed".into()),
        Grammar::Lark("start: ( \"a\"".into()),
    ];
    for g in bad {
        match compiler.compile(&g) {
            Err(ConstrainError::Compile { kind, message }) => {
                assert_eq!(kind, g.kind());
                assert!(!message.is_empty());
                eprintln!("{kind}: {message}");
            }
            Err(e) => panic!("{g:?}: wrong error {e}"),
            Ok(_) => panic!("{g:?} compiled"),
        }
    }
}

/// The masks of a verifying pass under a grammar: one a row, each the mask
/// plain decoding computes after the drafts before it; drafts cut before
/// the first the grammar forbids and before one after which the grammar
/// forces tokens; the grammar left where it was.
#[test]
fn draft_masks_are_plain_decodings_masks_and_stop_where_it_would_not_sample() {
    let tok = tokenizer(MODELS[0]);
    let vocab = tok.vocab_size();
    let compiler = GrammarCompiler::new(&tok, vocab).unwrap();
    let id = |s: &str| {
        let ids = tok.encode(s, false, false).unwrap();
        assert_eq!(ids.len(), 1, "{s:?} is one token");
        ids[0]
    };
    let (a, b, c) = (id("a"), id("b"), id("c"));
    let mask_after = |grammar: &Grammar, ids: &[u32]| {
        let mut g = compiler.compile(grammar).unwrap();
        for &t in ids {
            g.consume(t).unwrap();
        }
        let mut words = Vec::new();
        g.next_mask(&mut words).unwrap();
        words
    };
    let ab = Grammar::Regex("[ab]{3}".into());
    let mut g = compiler.compile(&ab).unwrap();
    let before = mask_after(&ab, &[]);
    let mut words = Vec::new();
    // "c" is not allowed: the pass verifies the two drafts before it.
    let kept = g.draft_masks(&[a, b, c, a], &mut words).unwrap();
    assert_eq!(kept, 2);
    let per = before.len();
    assert_eq!(words.len(), 3 * per, "a mask a row");
    assert_eq!(words[..per], before[..]);
    assert_eq!(words[per..2 * per], mask_after(&ab, &[a])[..]);
    assert_eq!(words[2 * per..], mask_after(&ab, &[a, b])[..]);
    assert!(words[..per] != words[2 * per..], "the masks differ by row");
    let mut again = Vec::new();
    g.next_mask(&mut again).unwrap();
    assert_eq!(again, before, "the grammar is where it was");
    // All allowed; and none drafted.
    assert_eq!(g.draft_masks(&[b, b], &mut words).unwrap(), 2);
    assert_eq!(words.len(), 3 * per);
    assert_eq!(g.draft_masks(&[], &mut words).unwrap(), 0);
    assert_eq!(words, before);
    // The third letter completes the grammar: drafts stop before it.
    let kept = g.draft_masks(&[a, a, a, a], &mut words).unwrap();
    assert_eq!(kept, 2, "stops before the draft that finishes the grammar");

    // After "x" the grammar forces " equals ": plain decoding would run
    // those without sampling, so a pass does not draft past "x".
    let forced = Grammar::Regex("(x|y) equals [0-9]{2}".into());
    let mut g = compiler.compile(&forced).unwrap();
    let kept = g
        .draft_masks(&[id("x"), id(" equals")], &mut words)
        .unwrap();
    assert_eq!(kept, 0);
    assert_eq!(words, mask_after(&forced, &[]));
    let x = id("x") as usize;
    assert!(words[x / 32] >> (x % 32) & 1 == 1, "x itself is allowed");
}
