//! Tokenizers against llama.cpp's token ids (shared/golden), plus round trips,
//! streaming decode and typed errors.
//!
//! Real models: `$WICK_MODELS_DIR` (default `<workspace>/models`); a missing
//! one fails the test. Tiny models: `<workspace>/tests/fixtures/models`, else
//! `<workspace>/../shared/models`, file by file. Golden JSON:
//! `$WICK_GOLDEN_DIR`, else `<workspace>/tests/fixtures/golden`, else
//! `<workspace>/../shared/golden`.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use wick::format::gguf::{GgufFile, MetaValue};
use wick::tokenizer::chat_template::ChatTemplate;
use wick::tokenizer::{StreamDecoder, Tokenizer, TokenizerError};

const SMOLLM: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";
const QWEN: &str = "qwen2.5-coder-0.5b-instruct-awq.gguf";
const TINY: &str = "tiny-qwen3moe.q8_0.gguf";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn first_dir(candidates: &[PathBuf]) -> PathBuf {
    candidates
        .iter()
        .find(|p| p.is_dir())
        .unwrap_or(&candidates[0])
        .clone()
}

fn model_path(name: &str) -> PathBuf {
    if name.starts_with("tiny-") {
        let ws = workspace();
        let dirs = [
            ws.join("tests/fixtures/models"),
            ws.join("../shared/models"),
        ];
        dirs.iter()
            .map(|d| d.join(name))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("test model {name} not found in {dirs:?}"))
    } else {
        let dir = std::env::var_os("WICK_MODELS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace().join("models"));
        let p = dir.join(name);
        assert!(
            p.is_file(),
            "model file {} not found: run scripts/fetch-models.sh",
            p.display()
        );
        p
    }
}

fn golden(name: &str) -> Value {
    let ws = workspace();
    let mut dirs: Vec<PathBuf> = std::env::var_os("WICK_GOLDEN_DIR")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    dirs.extend([
        ws.join("tests/fixtures/golden"),
        ws.join("../shared/golden"),
    ]);
    let p = first_dir(&dirs).join(name);
    let text = std::fs::read(&p).unwrap_or_else(|e| panic!("golden file {}: {e}", p.display()));
    serde_json::from_slice(&text).unwrap()
}

/// Parses the GGUF header, reading only as much of the file as it needs.
fn read_header(path: &Path) -> GgufFile {
    let f = File::open(path).unwrap();
    GgufFile::read_header(f).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One tokenizer per model file, built once for all tests.
fn tokenizer(name: &str) -> Arc<Tokenizer> {
    type Slot = Arc<OnceLock<Arc<Tokenizer>>>;
    static CACHE: OnceLock<Mutex<HashMap<String, Slot>>> = OnceLock::new();
    let slot = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(name.to_string())
        .or_default()
        .clone();
    slot.get_or_init(|| {
        let header = read_header(&model_path(name));
        let start = std::time::Instant::now();
        let tok = Tokenizer::from_gguf(&header).unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!("{name}: tokenizer built in {:?}", start.elapsed());
        Arc::new(tok)
    })
    .clone()
}

fn ids_of(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Every case of a llamacpp_*_public.json file: the prompt as llama.cpp
/// tokenized it (add_special as the model says, special tokens not parsed).
fn check_golden_prompts(file: &str) {
    let mut failures = Vec::new();
    let mut checked = 0;
    for entry in golden(file).as_array().unwrap() {
        let model = entry["model"].as_str().unwrap();
        let tok = tokenizer(model);
        for case in entry["cases"].as_array().unwrap() {
            let prompt = case["prompt"].as_str().unwrap();
            let want = ids_of(&case["prompt_ids"]);
            let got = tok.encode(prompt, true, false).unwrap();
            checked += 1;
            if got != want {
                failures.push(format!(
                    "{model}: {prompt:?}\n  want {want:?}\n  got  {got:?}"
                ));
            }
        }
    }
    assert!(checked > 0);
    assert!(
        failures.is_empty(),
        "{} of {checked} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn golden_prompt_ids_match_llama_cpp() {
    check_golden_prompts("llamacpp_public.json");
}

#[test]
fn golden_long_prompt_ids_match_llama_cpp() {
    check_golden_prompts("llamacpp_long_public.json");
}

#[test]
fn rendered_chat_templates_match_llama_cpp() {
    for entry in golden("chat_templates_public.json").as_array().unwrap() {
        let model = entry["model"].as_str().unwrap();
        let tok = tokenizer(model);
        for case in entry["cases"].as_array().unwrap() {
            let text = case["rendered"].as_str().unwrap();
            let want = ids_of(&case["ids"]);
            // The rendered text carries its own BOS where the template writes one;
            // add_special adds BOS only where the model's metadata says so.
            assert_eq!(
                tok.encode(text, true, true).unwrap(),
                want,
                "{model}: {text:?}"
            );
            // Decoding with special tokens shown gives the rendered text back.
            assert_eq!(tok.decode(&want, false).unwrap(), text, "{model}");
            let eos = entry["eos_token"].as_str().unwrap();
            let eos_id = tok.token_id(eos).unwrap();
            assert!(
                tok.stop_ids().contains(&eos_id),
                "{model}: {eos} is not a stop id"
            );
        }
    }
}

const TEXTS: &[&str] = &[
    "Hello, world! The capital of France is Paris.",
    "我爱北京天安门，今天天气很好。机器学习",
    "مرحبا بالعالم، كيف حالك اليوم؟",
    "नमस्ते दुनिया, आप कैसे हैं? हिन्दी",
    "Family 👨‍👩‍👧‍👦, flags 🇯🇵 🏳️‍🌈, thumbs 👍🏽 ❤️‍🔥",
    "e\u{301}le\u{300}ve n\u{303} Z\u{36b}\u{343}a\u{30f}l\u{344}g\u{34c}o, Ångström façade",
    "a  b   c\t\td \n\n\n e      f\u{a0}g\u{3000}h   ",
    "line1\nline2\r\nline3\n\n\nline6\n",
    "fn main() {\n    let x: Vec<u8> = vec![0x1f, 255];\n    println!(\"{x:?} -> {}\", 3.14e-2);\n}\n",
    "  leading and trailing spaces  ",
    "Rare: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𓀀𓂀 𐍈 ꙮ 䨻 \u{10FFFD}",
    "Special-looking: <|im_start|>user\n<|im_end|> <start_of_turn> <bos> <0x41> [multimodal]",
    "1234567890 3.14159 1,000,000 -42 x²+y³ ½ ⅞",
    "\u{feff}BOM and zero\u{200b}width\u{200d}joiners",
];

const MODELS: &[&str] = &[SMOLLM, QWEN, GEMMA, TINY];

#[test]
fn decode_inverts_encode() {
    for &model in MODELS {
        let tok = tokenizer(model);
        for &text in TEXTS {
            let ids = tok.encode(text, false, false).unwrap();
            assert_eq!(
                tok.decode(&ids, false).unwrap(),
                text,
                "{model}: ids {ids:?}"
            );
            // With BOS/EOS added and special tokens hidden: the same text.
            let ids = tok.encode(text, true, false).unwrap();
            if tok.add_bos() {
                assert_eq!(ids[0], tok.bos_id().unwrap());
            }
            // Hidden special tokens drop their text: only when the text made none.
            let inner = &ids[usize::from(tok.add_bos())..];
            if !inner.iter().any(|&id| tok.is_control(id)) {
                assert_eq!(
                    tok.decode(&ids, true).unwrap(),
                    text,
                    "{model}: ids {ids:?}"
                );
            }
        }
    }
}

/// llama.cpp's ids for `TEXTS` (Chinese, Arabic, Hindi, emoji, combining
/// marks, whitespace runs, code, special-token look-alikes), with and without
/// special-token parsing: tests/data/tokenizer_llamacpp_texts.json, made with
/// the llama-cpp-python version behind shared/golden (see its "about").
#[test]
fn multilingual_ids_match_llama_cpp() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tokenizer_llamacpp_texts.json");
    let reference: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let texts: Vec<&str> = reference["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        TEXTS,
        "regenerate {} for the new TEXTS",
        path.display()
    );
    for (model, cases) in reference["models"].as_object().unwrap() {
        let tok = tokenizer(model);
        for (mode, parse_special) in [("plain", false), ("special", true)] {
            for (text, want) in TEXTS.iter().zip(cases[mode].as_array().unwrap()) {
                let got = tok.encode(text, true, parse_special).unwrap();
                assert_eq!(got, ids_of(want), "{model} ({mode}): {text:?}");
            }
        }
    }
}

/// SmolLM2's vocab has no token for some bytes (0x04, 0xF1, 0xF2 ...).
/// llama.cpp drops them, and does not merge the bytes on either side across them.
#[test]
fn bytes_without_a_token_are_dropped_as_llama_cpp_does() {
    let tok = tokenizer(SMOLLM);
    let got = tok.encode("gn\u{99f66}\u{425ff} x", true, false).unwrap();
    assert_eq!(got, [3662, 243, 138, 116, 220, 241, 140, 1792]);
    assert_eq!(
        tok.encode("a\u{4}b\u{6}c", true, false).unwrap(),
        [81, 82, 83]
    );
}

/// Whether some token in `ids` ends inside a UTF-8 character.
fn splits_a_character(tok: &Tokenizer, ids: &[u32]) -> bool {
    let mut bytes = Vec::new();
    ids.iter().any(|&id| {
        bytes.extend(tok.token_bytes(id, false).unwrap());
        std::str::from_utf8(&bytes).is_err()
    })
}

#[test]
fn streaming_decode_equals_whole_decode() {
    for &model in MODELS {
        let tok = tokenizer(model);
        let mut held_back = 0;
        for &text in TEXTS {
            for skip_special in [false, true] {
                let ids = tok.encode(text, true, false).unwrap();
                let mut stream = StreamDecoder::new(&tok, skip_special);
                let mut streamed = String::new();
                for &id in &ids {
                    streamed.push_str(&stream.push(id).unwrap());
                    held_back += usize::from(stream.pending_len() > 0);
                }
                streamed.push_str(&stream.finish().unwrap());
                assert_eq!(
                    streamed,
                    tok.decode(&ids, skip_special).unwrap(),
                    "{model}: {text:?}"
                );
                assert!(
                    !streamed.contains('\u{FFFD}'),
                    "{model}: {text:?} decodes with U+FFFD"
                );
            }
        }
        let split = TEXTS
            .iter()
            .any(|t| splits_a_character(&tok, &tok.encode(t, false, false).unwrap()));
        assert!(
            split,
            "{model}: no test text puts a character across two tokens"
        );
        assert!(
            held_back > 0,
            "{model}: the stream never held back part of a character"
        );
    }
}

#[test]
fn streaming_replaces_invalid_bytes_like_decode() {
    let tok = tokenizer(QWEN);
    // Byte-level tokens for 0xE2 0x82 (a truncated "€"), then "x", then a lone 0xFF.
    let byte_id = |b: u8| {
        (0..tok.vocab_size() as u32)
            .find(|&i| tok.token_bytes(i, false).unwrap() == [b])
            .unwrap()
    };
    let ids = [
        byte_id(0xE2),
        byte_id(0x82),
        tok.encode("x", false, false).unwrap()[0],
        byte_id(0xFF),
        byte_id(0xE2),
    ];
    let mut stream = StreamDecoder::new(&tok, true);
    let mut streamed: String = ids.iter().map(|&id| stream.push(id).unwrap()).collect();
    streamed.push_str(&stream.finish().unwrap());
    assert_eq!(streamed, tok.decode(&ids, true).unwrap());
    assert_eq!(streamed, "\u{FFFD}x\u{FFFD}\u{FFFD}");
}

#[test]
fn special_ids_and_stop_tokens() {
    let smol = tokenizer(SMOLLM);
    assert_eq!(
        (smol.bos_id(), smol.eos_id(), smol.add_bos()),
        (Some(1), Some(2), false)
    );
    assert_eq!(smol.vocab_size(), 49152);
    assert!(smol.stop_ids().contains(&2) && smol.stop_ids().contains(&0));

    let qwen = tokenizer(QWEN);
    assert_eq!(
        (qwen.eos_id(), qwen.add_bos(), qwen.vocab_size()),
        (Some(151645), false, 151936)
    );
    let im_end = qwen.token_id("<|im_end|>").unwrap();
    let endoftext = qwen.token_id("<|endoftext|>").unwrap();
    assert!(qwen.is_stop(im_end) && qwen.is_stop(endoftext));
    assert!(!qwen.is_stop(qwen.token_id("<|im_start|>").unwrap()));
    assert_eq!(qwen.token_text(im_end).as_deref(), Some("<|im_end|>"));
    assert_eq!(qwen.decode(&[im_end], true).unwrap(), "");
    assert_eq!(qwen.decode(&[im_end], false).unwrap(), "<|im_end|>");
    // <tool_call> is user-defined: matched even when special tokens are not parsed, always shown.
    let tool_call = qwen.token_id("<tool_call>").unwrap();
    assert_eq!(
        qwen.encode("<tool_call>", false, false).unwrap(),
        vec![tool_call]
    );
    assert_eq!(qwen.decode(&[tool_call], true).unwrap(), "<tool_call>");
    assert_ne!(qwen.encode("<|im_start|>", false, false).unwrap().len(), 1);
    assert_eq!(
        qwen.encode("<|im_start|>", false, true).unwrap(),
        vec![151644]
    );

    let gemma = tokenizer(GEMMA);
    assert_eq!(
        (gemma.bos_id(), gemma.eos_id(), gemma.add_bos()),
        (Some(2), Some(1), true)
    );
    assert_eq!(gemma.vocab_size(), 262144);
    let eot = gemma.token_id("<end_of_turn>").unwrap();
    assert!(gemma.is_stop(eot) && gemma.is_stop(1));
    assert_eq!(gemma.encode("", true, false).unwrap(), vec![2]);
    assert_eq!(gemma.encode("", false, false).unwrap(), Vec::<u32>::new());
    // Gemma's newline runs and space runs are user-defined tokens.
    assert_eq!(
        gemma.encode("\n\n", false, false).unwrap(),
        vec![gemma.token_id("\n\n").unwrap()]
    );
    assert_eq!(
        gemma.encode("<start_of_turn>user\n", false, true).unwrap()[..1],
        [gemma.token_id("<start_of_turn>").unwrap()]
    );
    assert!(matches!(
        gemma.decode(&[262144], false),
        Err(TokenizerError::TokenOutOfRange {
            id: 262144,
            vocab: 262144
        })
    ));
}

// ---- end of turn: Gemma 2, Phi-3, SmolLM3, Qwen3-Coder ----------------------------

/// The vocabulary a `chat_templates_new_archs.json` entry names: a tiny
/// file's, with `rename` giving some ids other texts. SmolLM3's vocabulary is
/// Llama 3's with its ChatML markers in reserved special slots; tiny-smollm3
/// carries plain Llama 3's, so the test puts them there (control tokens
/// either way) and the stop ids come from the texts, as in the real file.
fn family_tokenizer(spec: &Value) -> (GgufFile, Tokenizer) {
    let mut header = read_header(&model_path(spec["gguf"].as_str().unwrap()));
    if let Some(rename) = spec.get("rename").and_then(Value::as_object) {
        let (_, tokens) = header
            .metadata
            .iter_mut()
            .find(|(k, _)| k == "tokenizer.ggml.tokens")
            .unwrap();
        let MetaValue::Array(tokens) = tokens else {
            panic!("tokenizer.ggml.tokens is not an array")
        };
        for (id, text) in rename {
            let slot = &mut tokens[id.parse::<usize>().unwrap()];
            assert!(
                matches!(slot, MetaValue::String(s) if s.starts_with("<|reserved_special_token_")),
                "{id} is not a reserved slot: {slot:?}"
            );
            *slot = MetaValue::String(text.as_str().unwrap().to_string());
        }
    }
    let tok = Tokenizer::from_gguf(&header).unwrap();
    (header, tok)
}

/// Generation stops at the end-of-turn tokens of the architectures wick
/// gained (Gemma 2: `<end_of_turn>`; Phi-3: `<|end|>` and EOS
/// `<|endoftext|>`; SmolLM3: `<|im_end|>`, Llama 3's `<|eot_id|>`) and of
/// Qwen3-Coder, in the tiny files' real vocabularies (Gemma 3's, Phi-3's,
/// Llama 3's, Qwen2's): each family stop text is one token and a stop id.
/// Where a rendered conversation of chat_templates_new_archs.json ends an
/// assistant turn, the token closing it is one of them; where the GGUF
/// carries the entry's template (tiny-phi3), `ChatTemplate::from_gguf`
/// renders the cases the same with the vocabulary's BOS/EOS texts.
#[test]
fn new_arch_end_of_turn_tokens_are_stop_ids() {
    for entry in golden("chat_templates_new_archs.json").as_array().unwrap() {
        let model = entry["model"].as_str().unwrap();
        let (header, tok) = family_tokenizer(&entry["tokenizer"]);
        let stops: Vec<&str> = entry["stop_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        for &text in &stops {
            let id = tok
                .token_id(text)
                .unwrap_or_else(|| panic!("{model}: {text} is not in the vocabulary"));
            assert!(
                tok.stop_ids().contains(&id),
                "{model}: {text} ({id}) is not a stop id"
            );
            assert_eq!(
                tok.encode(text, false, true).unwrap(),
                [id],
                "{model}: {text}"
            );
        }
        let eot = entry["end_of_turn"].as_str().unwrap();
        let eos = entry["eos_token"].as_str().unwrap();
        assert!(stops.contains(&eot) && stops.contains(&eos), "{model}");
        let eot_id = tok.token_id(eot).unwrap();

        let mut closed = 0;
        for case in entry["cases"].as_array().unwrap() {
            let Some(text) = case["rendered"].as_str() else {
                continue;
            };
            let last = case["messages"].as_array().unwrap().last().unwrap();
            if case["add_generation_prompt"].as_bool().unwrap() || last["role"] != "assistant" {
                continue;
            }
            // The assistant's turn ends the render, before trailing
            // whitespace and an EOS the template appends (Phi-3.5's).
            let mut body = text.trim_end();
            if eos != eot {
                body = body.strip_suffix(eos).unwrap_or(body).trim_end();
            }
            let reply = last["content"].as_str().unwrap().trim();
            let turn = &body[body
                .rfind(reply)
                .unwrap_or_else(|| panic!("{model}: {reply:?} not in {body:?}"))..];
            assert_eq!(turn, format!("{reply}{eot}"), "{model}: {text:?}");
            let ids = tok.encode(turn, false, true).unwrap();
            let (&closing, content) = ids.split_last().unwrap();
            assert_eq!(closing, eot_id, "{model}: {text:?}");
            assert!(
                !content.iter().any(|&id| tok.is_stop(id)),
                "{model}: the reply itself holds a stop id: {ids:?}"
            );
            closed += 1;
        }
        assert!(closed > 0, "{model}: no case ends an assistant turn");

        let Some(source) = header.meta_str_opt("tokenizer.chat_template").unwrap() else {
            continue;
        };
        if source != entry["chat_template"].as_str().unwrap() {
            continue;
        }
        let t = ChatTemplate::from_gguf(&header, &tok).unwrap();
        assert_eq!(
            (t.bos_token.as_str(), t.eos_token.as_str()),
            (entry["bos_token"].as_str().unwrap(), eos),
            "{model}"
        );
        for case in entry["cases"].as_array().unwrap() {
            let agp = case["add_generation_prompt"].as_bool().unwrap();
            let got = t
                .render_json(&case["messages"].to_string(), None, agp)
                .unwrap();
            assert_eq!(got, case["rendered"].as_str().unwrap(), "{model}");
        }
    }
}

// ---- tokenizer.json --------------------------------------------------------------

/// A Qwen2 `tokenizer.json` made from the GGUF's own vocab and merges: the
/// tokenizer.json path must then give the GGUF path's ids.
fn qwen_tokenizer_json() -> Vec<u8> {
    let header = read_header(&model_path(QWEN));
    let tokens: Vec<&str> = header
        .meta("tokenizer.ggml.tokens")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let types: Vec<i64> = header
        .meta("tokenizer.ggml.token_type")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    let merges: Vec<&str> = header
        .meta("tokenizer.ggml.merges")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut vocab = serde_json::Map::new();
    let mut added = Vec::new();
    for (i, (t, ty)) in tokens.iter().zip(&types).enumerate() {
        match ty {
            1 => drop(vocab.insert(t.to_string(), i.into())),
            3 | 4 => added.push(serde_json::json!({"id": i, "content": t, "special": *ty == 3})),
            _ => {}
        }
    }
    let regex = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    let doc = serde_json::json!({
        "version": "1.0",
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
        ]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": merges}
    });
    serde_json::to_vec(&doc).unwrap()
}

#[test]
fn tokenizer_json_matches_gguf() {
    let gguf = tokenizer(QWEN);
    let json = Tokenizer::from_tokenizer_json(&qwen_tokenizer_json()).unwrap();
    assert_eq!(json.eos_id(), Some(151643)); // <|endoftext|> by name: tokenizer.json does not say
    let json = json
        .with_special_ids(None, Some(151645), false, false)
        .unwrap();
    let mut texts: Vec<String> = TEXTS.iter().map(|s| s.to_string()).collect();
    for entry in golden("chat_templates_public.json").as_array().unwrap() {
        for case in entry["cases"].as_array().unwrap() {
            texts.push(case["rendered"].as_str().unwrap().to_string());
        }
    }
    for text in &texts {
        for parse_special in [false, true] {
            let want = gguf.encode(text, true, parse_special).unwrap();
            assert_eq!(
                json.encode(text, true, parse_special).unwrap(),
                want,
                "{text:?}"
            );
        }
        let ids = json.encode(text, false, false).unwrap();
        assert_eq!(json.decode(&ids, false).unwrap(), *text);
    }
    assert_eq!(json.stop_ids(), gguf.stop_ids());
}
