//! The fuzz targets: each takes untrusted bytes through one of wick's
//! CPU-side entry points exactly as loading or chatting would, and returns a
//! short signature of how it ended (which error, or "ok"). The harness keeps
//! an input whose signature it has not seen before, a cheap stand-in for
//! coverage feedback; a panic is what it is looking for.

use wick::embedding::bert_config::BertConfig;
use wick::embedding::gemma_config::GemmaConfig;
use wick::format::gguf::GgufFile;
use wick::format::quant::{dequantize, GgmlType};
use wick::format::safetensors::SafetensorsHeader;
use wick::model::hf::{HfCheckpoint, HfOptions};
use wick::model::loader::{check_needs, NeedKind};
use wick::model::Plan;
use wick::tokenizer::chat_template::{ChatMessage, ChatTemplate};
use wick::tokenizer::Tokenizer;

/// One target: a name for reports and file names, and the function run.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]) -> String,
}

pub const TARGETS: [Target; 5] = [
    Target {
        name: "gguf_load",
        run: gguf_load,
    },
    Target {
        name: "tokenizer_gguf",
        run: tokenizer_gguf,
    },
    Target {
        name: "tokenizer_json",
        run: tokenizer_json,
    },
    Target {
        name: "chat_template",
        run: chat_template,
    },
    Target {
        name: "hf_folder",
        run: hf_folder,
    },
];

pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// An error as a signature: its variant, and for errors past the header the
/// first plain words of its detail (after the first colon), leaving out what
/// the input put there (numbers, names, quoted text), so that random bytes in
/// a key cannot make every error new while a different refusal still is.
fn signature<E: std::fmt::Display + std::fmt::Debug>(stage: &str, e: E) -> String {
    let debug = format!("{e:?}");
    let variant = debug
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .next()
        .unwrap_or("");
    // Header messages hold keys and names unquoted, and a template's raised
    // message is the template's own text: the variant says enough.
    if stage == "header" || variant == "Raised" {
        return format!("{stage}:{variant}");
    }
    let text = e.to_string();
    let detail = text.split_once(':').map_or(text.as_str(), |(_, d)| d);
    let words = detail
        .split(|c: char| c.is_whitespace() || c == ':' || c == ',')
        .filter(|w| w.len() >= 3 && w.chars().all(|c| c.is_ascii_lowercase()))
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    format!("{stage}:{variant}:{words}")
}

/// The load path up to the first GPU call, as `ModelLoader` runs it: the
/// header (possibly a prefix of the file), the architecture's config and
/// bounds, the needed tensors checked against the table, then what the CPU
/// does with tensor bytes before upload (vectors are dequantized on the CPU).
pub fn gguf_load(bytes: &[u8]) -> String {
    let file = match GgufFile::parse_header(bytes) {
        Ok(f) => f,
        Err(e) => {
            // A whole file reports running out of bytes on its own paths.
            let _ = GgufFile::parse(bytes);
            return signature("header", e);
        }
    };
    // The input standing in for the whole file.
    let whole = file.check_file_len(bytes.len() as u64).err();
    let plan = match Plan::for_file(&file) {
        Ok(p) => p,
        Err(e) => return signature("plan", e),
    };
    let found = match check_needs(&file, &plan.needs) {
        Ok(f) => f,
        Err(e) => return signature("needs", e),
    };
    for (info, need) in &found {
        let NeedKind::Vector { len } = need.kind else {
            continue;
        };
        // Only tensors whose bytes the input holds; the rest would come later.
        if let Ok(data) = file.tensor_bytes(bytes, info) {
            if let Err(e) = dequantize(info.dtype, data, len) {
                return signature("vector", e);
            }
        }
    }
    match whole {
        Some(e) => signature("file", e),
        None => "ok".into(),
    }
}

/// Text every tokenizer target encodes: ASCII, multi-byte UTF-8, digits,
/// whitespace runs and special-token look-alikes.
const SAMPLE_TEXT: &str =
    "Hello, world! 1234567 ünïcödé 日本語 🦀\n\n\t  <|im_start|>user <s></s><bos> end";

/// Encodes the sample and decodes it back, token by token too, as
/// generation's streaming detokenizer does.
fn exercise(tok: &Tokenizer, extra: &str) -> String {
    for text in [SAMPLE_TEXT, extra] {
        for (add_special, parse_special) in [(true, true), (false, false)] {
            let ids = match tok.encode(text, add_special, parse_special) {
                Ok(ids) => ids,
                Err(e) => return signature("encode", e),
            };
            if let Err(e) = tok.decode(&ids, false) {
                return signature("decode", e);
            }
            for &id in ids.iter().take(64) {
                let _ = tok.token_bytes(id, true);
                let _ = tok.token_text(id);
            }
        }
    }
    // Ids at and past the vocabulary's end must be refused, not indexed.
    let n = tok.vocab_size() as u32;
    for id in [0, n.saturating_sub(1), n, u32::MAX] {
        let _ = tok.decode(&[id], true);
        let _ = tok.token_bytes(id, false);
    }
    "ok".into()
}

/// The tokenizer built from a GGUF's `tokenizer.ggml.*` metadata, then the
/// file's chat template rendered and encoded with it.
pub fn tokenizer_gguf(bytes: &[u8]) -> String {
    let file = match GgufFile::parse_header(bytes) {
        Ok(f) => f,
        Err(e) => return signature("header", e),
    };
    let tok = match Tokenizer::from_gguf(&file) {
        Ok(t) => t,
        Err(e) => return signature("build", e),
    };
    let used = exercise(&tok, "");
    if used != "ok" {
        return used;
    }
    match ChatTemplate::from_gguf(&file, &tok) {
        Ok(t) => render(&t, Some(&tok)),
        Err(e) => signature("template", e),
    }
}

/// A tokenizer from `tokenizer.json` bytes.
pub fn tokenizer_json(bytes: &[u8]) -> String {
    match Tokenizer::from_tokenizer_json(bytes) {
        Ok(t) => exercise(&t, ""),
        Err(e) => signature("build", e),
    }
}

/// A conversation with every role templates branch on.
fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", "Hi <|im_end|> {{ x }}"),
        ChatMessage::new("assistant", "Hello."),
        ChatMessage::new("user", ""),
    ]
}

fn render(t: &ChatTemplate, tok: Option<&Tokenizer>) -> String {
    for add_generation_prompt in [true, false] {
        match t.render(&conversation(), add_generation_prompt) {
            Ok(text) => {
                if let Some(tok) = tok {
                    if let Err(e) = t.encode(tok, &text) {
                        return signature("encode", e);
                    }
                }
            }
            Err(e) => return signature("render", e),
        }
    }
    "ok".into()
}

/// A chat template source; after a NUL byte, optionally a JSON messages
/// array rendered through `render_json` (the browser's chat API's path).
pub fn chat_template(bytes: &[u8]) -> String {
    let (source, messages) = match bytes.iter().position(|&b| b == 0) {
        Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
        None => (bytes, None),
    };
    let source = String::from_utf8_lossy(source);
    let t = match ChatTemplate::new(source, "<s>", "</s>") {
        Ok(t) => t,
        Err(e) => return signature("parse", e),
    };
    if let Some(json) = messages {
        let json = String::from_utf8_lossy(json);
        if let Err(e) = t.render_json(&json, Some("[]"), true) {
            return signature("render_json", e);
        }
    }
    render(&t, None)
}

/// A Hugging Face folder: `config.json`, a NUL byte, then one safetensors
/// file (whole or a prefix). The config goes through every parser a folder
/// meets (decoder, BERT and Gemma embedding configs); with the file's header
/// it plans the decoder checkpoint (as stored and quantized to Q8_0 at
/// load), then streams the file through the conversion to GGUF as the
/// browser's loader does, in two chunks. The GGUF header the stream makes
/// must read back and plan: the engine wrote it.
pub fn hf_folder(bytes: &[u8]) -> String {
    let (config, file) = match bytes.iter().position(|&b| b == 0) {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (bytes, &[][..]),
    };
    let embedders = [
        BertConfig::parse(config)
            .err()
            .map(|e| signature("bert", e)),
        GemmaConfig::parse(config)
            .err()
            .map(|e| signature("gemma", e)),
    ];
    let embedders = embedders
        .map(|e| e.unwrap_or_else(|| "ok".into()))
        .join(",");
    let header = match SafetensorsHeader::parse(file) {
        Ok(h) => h,
        Err(e) => return format!("{embedders};{}", signature("safetensors", e)),
    };
    let mut ends = Vec::new();
    for quantize in [None, Some(GgmlType::Q8_0)] {
        let opts = HfOptions { quantize };
        let ckpt = match HfCheckpoint::new(
            config,
            std::slice::from_ref(&header),
            Some(FOLDER_TEMPLATE),
            &opts,
        ) {
            Ok(c) => c,
            Err(e) => {
                ends.push(signature("checkpoint", e));
                continue;
            }
        };
        ends.push(stream_checkpoint(ckpt, file));
    }
    format!("{embedders};{}", ends.join(","))
}

const FOLDER_TEMPLATE: &str = "{% for m in messages %}{{ m.content }}{% endfor %}";

/// Streams `file` (shard 0) through the checkpoint's conversion and reads
/// the GGUF it makes back.
fn stream_checkpoint(ckpt: HfCheckpoint, file: &[u8]) -> String {
    let mut stream = ckpt.into_stream();
    let mut gguf = Vec::new();
    let mut sink = |b: &[u8]| -> Result<(), wick::WickError> {
        gguf.extend_from_slice(b);
        Ok(())
    };
    let (a, b) = file.split_at(file.len() / 2);
    for chunk in [a, b] {
        if let Err(e) = stream.push(0, chunk, &mut sink) {
            return signature("stream", e);
        }
    }
    let finished = stream.finish();
    let made = GgufFile::parse_header(&gguf)
        .unwrap_or_else(|e| panic!("the GGUF header made from a checkpoint does not read: {e}"));
    if let Err(e) = Plan::for_file(&made) {
        return signature("gguf_plan", e);
    }
    match finished {
        Ok(()) => "ok".into(),
        Err(e) => signature("finish", e),
    }
}
