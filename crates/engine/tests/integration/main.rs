//! The engine's integration tests, in one binary (one link, not one per
//! file): the file formats (GGUF, safetensors, quantization) and the
//! tokenizers against llama.cpp's ids.

mod format_gguf;
mod format_gguf_malformed;
mod format_gguf_split;
mod format_models;
mod format_quant;
mod format_quant_roundtrip;
mod format_safetensors;
mod tokenizer_golden;
