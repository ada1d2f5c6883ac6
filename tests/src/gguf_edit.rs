//! A model file with its chat template replaced: a tiny random-weight
//! fixture under a real model's template, so that the plumbing around a
//! template (tool calls, think blocks) runs on a model that costs seconds.

use std::path::Path;

use wick::format::{GgufFile, GgufWriter, MetaValue};

const TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// The chat template of the GGUF file at `path`, read from its header alone.
pub fn chat_template_of(path: &Path) -> String {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let gguf = GgufFile::read_header(std::io::BufReader::new(file))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    gguf.meta_str(TEMPLATE_KEY)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_string()
}

/// The GGUF file at `path` with `tokenizer.chat_template` set to
/// `template` (every other entry and every tensor as they were).
pub fn with_chat_template(path: &Path, template: &str) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let gguf = GgufFile::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = GgufWriter::new().version(gguf.version);
    let mut replaced = false;
    for (key, value) in &gguf.metadata {
        if key == TEMPLATE_KEY {
            out = out.meta(key, MetaValue::String(template.to_string()));
            replaced = true;
        } else {
            out = out.meta(key, value.clone());
        }
    }
    if !replaced {
        out = out.meta(TEMPLATE_KEY, MetaValue::String(template.to_string()));
    }
    for t in &gguf.tensors {
        let data = gguf.tensor_bytes(&bytes, t).unwrap();
        out = out.tensor(&t.name, &t.dims, t.dtype, data);
    }
    out.to_bytes()
}
