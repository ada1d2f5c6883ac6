//! A fuzzer for wick's CPU-side entry points that runs on the stable
//! toolchain: seeded mutation of real model headers, tokenizer files and chat
//! templates, each execution under `catch_unwind`, with a global allocator
//! that refuses (and reports) any allocation over a bound. See
//! `scripts/fuzz.sh` and `src/main.rs`.

pub mod alloc;
pub mod exec;
pub mod gguf_fields;
pub mod gguf_mutate;
pub mod json_mutate;
pub mod mutate;
pub mod seeds;
pub mod targets;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// One mutation of `data` suited to `target`'s input language.
pub fn mutate_for(target: &str, rng: &mut ChaCha8Rng, data: &mut Vec<u8>, other: &[u8]) {
    match target {
        "gguf_load" | "tokenizer_gguf" => gguf_mutate::mutate_gguf(rng, data, other),
        "tokenizer_json" => {
            let structured = rng.gen_range(0..10) < 6 && json_mutate::mutate_json(rng, data);
            if !structured {
                match rng.gen_range(0..3) {
                    0 => mutate::insert_word(rng, data, &mutate::JSON_WORDS),
                    _ => mutate::mutate_bytes(rng, data, other),
                }
            }
        }
        "hf_folder" => hf_folder_mutate(rng, data, other),
        _ => match rng.gen_range(0..2) {
            0 => mutate::insert_word(rng, data, &mutate::JINJA_WORDS),
            _ => mutate::mutate_bytes(rng, data, other),
        },
    }
}

/// `hf_folder` inputs: half the time a structured change to the config (the
/// part before the first NUL), else a change to the NUL and the 4 KiB after
/// it: the safetensors header and the first tensors.
fn hf_folder_mutate(rng: &mut ChaCha8Rng, data: &mut Vec<u8>, other: &[u8]) {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    if rng.gen_range(0..10) < 5 {
        let mut config = data[..split].to_vec();
        if json_mutate::mutate_json(rng, &mut config) {
            data.splice(..split, config);
            return;
        }
    }
    // The NUL and the file's first 4 KiB: its header and first tensors.
    let end = data.len().min(split + 4096);
    let mut front = data[split..end].to_vec();
    match rng.gen_range(0..3) {
        0 => mutate::insert_word(rng, &mut front, &mutate::JSON_WORDS),
        _ => mutate::mutate_bytes(rng, &mut front, other),
    }
    let mut out = data[..split].to_vec();
    out.extend_from_slice(&front);
    out.extend_from_slice(&data[end..]);
    *data = out;
}
