//! The `wick` binary as a user runs it: JSON outputs, and bad input answered
//! with one clear error line and a non-zero exit, never a panic.

use std::path::PathBuf;

use crate::common;
use common::{fails_with, smollm2 as model, wick, wick_json};

#[test]
fn tokenize_json_gives_llama_cpp_ids() {
    let m = model();
    let v = wick_json(&[
        "tokenize",
        "--model",
        m.to_str().unwrap(),
        "--text",
        "The capital of France is",
        "--json",
    ]);
    // llama.cpp's ids for this prompt (tests/fixtures/golden/llamacpp_public.json).
    assert_eq!(v["ids"], serde_json::json!([504, 3575, 282, 4649, 314]));
}

#[test]
fn greedy_generate_json_continues_with_logits_argmax() {
    let m = model();
    let m = m.to_str().unwrap();
    let gen = wick_json(&[
        "generate",
        "--model",
        m,
        "--ids",
        "504,3575,282",
        "--max-tokens",
        "1",
        "--json",
    ]);
    assert_eq!(gen["finish_reason"], "length");
    let logits = wick_json(&[
        "logits",
        "--model",
        m,
        "--ids",
        "504,3575,282",
        "--top",
        "1",
        "--json",
        // generate warmed up (the default), logits compiles on first use:
        // the same argmax either way.
        "--no-warmup",
    ]);
    assert_eq!(gen["ids"][0], logits["positions"][0]["top"][0][0]);
}

fn generate_json(extra: &[&str]) -> serde_json::Value {
    let m = model();
    let mut args = vec!["generate", "--model", m.to_str().unwrap()];
    args.extend_from_slice(&["--prompt", "Once upon a time", "--max-tokens", "12"]);
    args.extend_from_slice(extra);
    // A short run: compile only the kernels it uses.
    args.extend_from_slice(&["--json", "--no-warmup"]);
    wick_json(&args)
}

#[test]
fn generate_ends_at_a_stop_string_without_printing_it() {
    let full = generate_json(&[]);
    let text = full["text"].as_str().unwrap();
    // Three characters from the middle of the text.
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mid = chars.len() / 2;
    let end = chars.get(mid + 3).map_or(text.len(), |&(i, _)| i);
    let stop = &text[chars[mid].0..end];
    let expected = &text[..text.find(stop).unwrap()];
    let cut = generate_json(&["--stop", "never-in-the-text", "--stop", stop]);
    assert_eq!(cut["text"], expected, "stop {stop:?} in {text:?}");
    assert_eq!(cut["finish_reason"], "stop");
    assert_eq!(cut["stop_string"], stop);
}

/// A grammar and a stop string together, as one generation: the output
/// matches the grammar, and the stop string (here a character the grammar
/// forces) ends it unprinted.
#[test]
fn generate_under_a_grammar_ends_at_a_stop_string() {
    let pattern = "[0-9]{3}-[0-9]{4}";
    let whole = generate_json(&["--regex", pattern]);
    let text = whole["text"].as_str().unwrap();
    let shape: Vec<bool> = text.chars().map(|c| c.is_ascii_digit()).collect();
    assert_eq!(
        shape,
        [true, true, true, false, true, true, true, true],
        "{text:?}"
    );
    assert_eq!(&text[3..4], "-", "{text:?}");
    assert_eq!(whole["finish_reason"], "stop");
    assert!(whole["stats"]["mask_ms_per_token"].is_number(), "{whole}");
    let cut = generate_json(&["--regex", pattern, "--stop", "-"]);
    assert_eq!(cut["text"], &text[..3]);
    assert_eq!(cut["finish_reason"], "stop");
    assert_eq!(cut["stop_string"], "-");
}

/// Each generated token's logprobs against the log-softmax of `wick logits`
/// over the same positions (its raw dump), in f64.
#[test]
fn generate_logprobs_are_the_log_softmax_of_wick_logits() {
    const K: usize = 5;
    let gen = generate_json(&["--logprobs", &K.to_string()]);
    let ids: Vec<u64> = gen["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let mut seq: Vec<u64> = gen["prompt_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    seq.extend_from_slice(&ids[..ids.len() - 1]);
    let seq: Vec<String> = seq.iter().map(u64::to_string).collect();
    let dump =
        std::env::temp_dir().join(format!("wick-cli-test-logits-{}.f32", std::process::id()));
    let m = model();
    let out = wick(&[
        "logits",
        "--model",
        m.to_str().unwrap(),
        "--ids",
        &seq.join(","),
        "--last",
        &ids.len().to_string(),
        "--dump",
        dump.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = std::fs::read(&dump).unwrap();
    std::fs::remove_file(&dump).unwrap();
    let logits: Vec<f32> = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let vocab = logits.len() / ids.len();
    let entries = gen["logprobs"].as_array().unwrap();
    assert_eq!(entries.len(), ids.len());
    for (i, (entry, row)) in entries.iter().zip(logits.chunks_exact(vocab)).enumerate() {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let log_sum = max
            + row
                .iter()
                .map(|&x| (x as f64 - max).exp())
                .sum::<f64>()
                .ln();
        let expected = |id: u64| row[id as usize] as f64 - log_sum;
        let close = |e: &serde_json::Value| {
            let (id, lp) = (e["id"].as_u64().unwrap(), e["logprob"].as_f64().unwrap());
            assert!(
                (lp - expected(id)).abs() < 1e-4,
                "token {i} id {id}: {lp} vs {}",
                expected(id)
            );
        };
        assert_eq!(entry["id"].as_u64(), Some(ids[i]));
        close(entry);
        let top = entry["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), K);
        top.iter().for_each(close);
        // The top K are the K highest of the row, highest first.
        let mut best: Vec<f64> = row.iter().map(|&x| x as f64 - log_sum).collect();
        best.sort_by(|a, b| b.total_cmp(a));
        for (e, want) in top.iter().zip(&best) {
            assert!(
                (e["logprob"].as_f64().unwrap() - want).abs() < 1e-4,
                "token {i}"
            );
        }
        assert!(entry["bytes"].is_array() && entry["token"].is_string());
        // Greedy: the sampled token is the most likely one (or tied with it).
        let gap = top[0]["logprob"].as_f64().unwrap() - entry["logprob"].as_f64().unwrap();
        assert!(
            top[0]["id"] == entry["id"] || gap < 1e-4,
            "token {i}: {entry}"
        );
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let m = model();
    let m = m.to_str().unwrap();
    fails_with(
        &["generate", "--model", "/no/such.gguf", "--prompt", "hi"],
        "cannot open model file",
    );
    fails_with(&["generate", "--model", m, "--ids", "1,x"], "invalid value");
    fails_with(
        &["generate", "--model", m, "--prompt", "hi", "--top-p", "0"],
        "top_p",
    );
    fails_with(
        &[
            "generate",
            "--model",
            m,
            "--prompt",
            "hi",
            "--temperature=-1",
        ],
        "temperature",
    );
    let five_stops = [
        "--stop", "a", "--stop", "b", "--stop", "c", "--stop", "d", "--stop", "e",
    ];
    let mut args = vec!["generate", "--model", m, "--prompt", "hi"];
    args.extend_from_slice(&five_stops);
    fails_with(&args, "at most 4");
    fails_with(
        &[
            "generate",
            "--model",
            m,
            "--prompt",
            "hi",
            "--json",
            "--logprobs",
            "21",
        ],
        "--logprobs must be 0..=20",
    );
    fails_with(
        &["generate", "--model", m, "--ids", "99999999"],
        "outside the vocabulary",
    );
    fails_with(
        &["logits", "--model", m, "--ids", "1,2,3", "--ctx-len", "2"],
        "do not fit the context",
    );
    let not_gguf = std::env::temp_dir().join("wick-cli-test-not-a-model.gguf");
    std::fs::write(&not_gguf, b"this is not a gguf file at all").unwrap();
    fails_with(
        &[
            "tokenize",
            "--model",
            not_gguf.to_str().unwrap(),
            "--text",
            "x",
        ],
        "magic",
    );
}

/// `wick bench --json` on a mixture of experts: a decode step is one submit
/// and reads back only the sampled row's logits (routing stays on the GPU).
/// Three timed runs: each is listed, and the speeds reported are the
/// medians of theirs.
#[test]
fn bench_json_on_a_mixture_of_experts_reports_one_submit_per_decode_step() {
    let m = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/models/tiny-qwen3moe.q8_0.gguf");
    let out = wick(&[
        "bench",
        "--model",
        m.to_str().unwrap(),
        "--prompt-tokens",
        "12",
        "--gen-tokens",
        "3",
        "--tokens-per-submit",
        "1",
        "--runs",
        "3",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&stdout[stdout.find('{').unwrap()..]).unwrap();
    let runs = v["runs"].as_array().expect("runs listed");
    assert_eq!(runs.len(), 3, "{v}");
    for key in ["prefill_tok_s", "decode_tok_s", "prefill_over_decode"] {
        let mut each: Vec<f64> = runs.iter().map(|r| r[key].as_f64().unwrap()).collect();
        each.sort_by(f64::total_cmp);
        assert!(each[0] > 0.0, "{key}: {v}");
        assert_eq!(v[key].as_f64(), Some(each[1]), "{key} is the median: {v}");
    }
    if cfg!(unix) {
        let cpu = v["prefill_cpu_seconds"].as_f64().unwrap();
        assert!(cpu > 0.0, "{v}");
        assert!(v["decode_cpu_ms_per_token"].as_f64().unwrap() > 0.0, "{v}");
    }
    assert_eq!(v["submits_per_decode_step"], 1.0, "{v}");
    assert_eq!(v["buffers_created_per_decode_step"], 0.0, "{v}");
    // Sampled on the GPU: the token id, nothing else.
    assert_eq!(v["bytes_read_back_per_token"], 4.0, "{v}");
    // Only the chosen experts are read: fewer bytes than the file holds.
    let weights = v["weight_bytes_per_token"].as_u64().unwrap();
    let file_len = std::fs::metadata(&m).unwrap().len();
    assert!(
        weights > 0 && weights < file_len,
        "{weights} of {file_len}: {v}"
    );
    assert!(
        v["dispatches_per_decode_step"].as_f64().unwrap() > 0.0,
        "{v}"
    );
}

/// Stored bytes of a `rows x cols` matrix in `quant`, from ggml's block sizes.
fn matrix_bytes(quant: &str, rows: u64, cols: u64) -> u64 {
    let (block_elements, block_bytes) = match quant {
        "q4_0" => (32, 18),
        "q8_0" => (32, 34),
        "f16" => (1, 2),
        other => panic!("no block size for {other} here"),
    };
    rows * cols / block_elements * block_bytes
}

/// `wick bench --synthetic`: a published architecture with random weights
/// runs like a file, and its roofline fields are finite and positive, with
/// the weight bytes of SmolLM2-135M's shapes. The model it writes with
/// `--write-gguf` is a whole GGUF file another run can read.
#[test]
fn bench_synthetic_reports_the_roofline() {
    let written = std::env::temp_dir().join(format!(
        "wick-cli-test-synthetic-{}.gguf",
        std::process::id()
    ));
    let v = wick_json(&[
        "bench",
        "--synthetic",
        "smollm2-135m",
        "--quant",
        "q8_0",
        "--write-gguf",
        written.to_str().unwrap(),
        "--json",
        "--prompt-tokens",
        "8",
        "--gen-tokens",
        "3",
    ]);
    assert_eq!(
        (v["synthetic"].as_str(), v["quant"].as_str()),
        (Some("smollm2-135m"), Some("q8_0"))
    );
    // SmolLM2-135M: 30 layers, d 576, 9 query and 3 key/value heads of 64,
    // MLP 1536, vocabulary 49152, output head tied to the embedding.
    let (layers, d, q, kv, ffn, vocab) = (30, 576, 9 * 64, 3 * 64, 1536, 49152);
    let m = |rows, cols| matrix_bytes("q8_0", rows, cols);
    let block = m(q, d) + 2 * m(kv, d) + m(d, q) + 2 * m(ffn, d) + m(d, ffn);
    let want = layers * block + m(vocab, d);
    assert_eq!(v["weight_bytes_per_token"].as_u64(), Some(want), "{v}");
    for key in ["roofline_fraction", "copy_gbps", "decode_tok_s"] {
        let x = v[key].as_f64().unwrap_or(f64::NAN);
        assert!(x.is_finite() && x > 0.0, "{key}: {v}");
    }
    assert!(v["roofline_fraction"].as_f64().unwrap() < 1.5, "{v}");
    assert_eq!(v["tokens_per_submit"].as_u64(), Some(4), "{v}");
    assert!(v["cpu_record_ms_per_step"].as_f64().unwrap() > 0.0, "{v}");
    // The fused layer: at most 7 dispatches a layer and 5 besides, one more
    // a layer with 8-bit activations (the q/k/v norm goes ahead).
    let dispatches = v["dispatches_per_decode_step"].as_f64().unwrap();
    let per_layer = if v["activations"] == "q8" { 8 } else { 7 };
    assert!(
        dispatches > 0.0 && dispatches <= (per_layer * layers + 5) as f64,
        "{v}"
    );
    assert_eq!(v["bytes_read_back_per_token"], 4.0, "{v}");
    // The file's header and tensor table parse, every tensor within its
    // bytes, and its tokenizer maps text to the byte tokens.
    let file_len = std::fs::metadata(&written).map(|m| m.len()).unwrap_or(0);
    assert!(file_len > want, "{file_len} bytes");
    let tok = wick(&[
        "tokenize",
        "--model",
        written.to_str().unwrap(),
        "--text",
        "hi",
        "--json",
    ]);
    std::fs::remove_file(&written).ok();
    assert!(
        tok.status.success(),
        "{}",
        String::from_utf8_lossy(&tok.stderr)
    );
    let ids: serde_json::Value = serde_json::from_slice(&tok.stdout).unwrap();
    assert!(
        ids["ids"].as_array().is_some_and(|a| !a.is_empty()),
        "{ids}"
    );
}

#[test]
fn bench_synthetic_refuses_unknown_names_listing_the_valid_ones() {
    fn bench<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        [&["bench", "--json"], extra].concat()
    }
    fails_with(
        &bench(&["--synthetic", "gpt-9", "--quant", "q4_0"]),
        "smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, llama-3.1-8b",
    );
    fails_with(
        &bench(&["--synthetic", "smollm2-135m", "--quant", "q3_k"]),
        "q4_0, q4_k, q8_0, f16",
    );
    fails_with(&bench(&[]), "--synthetic");
    fails_with(
        &bench(&["--synthetic", "smollm2-135m", "--runs", "0"]),
        "--runs must be >= 1",
    );
    fails_with(
        &bench(&["--model", "x.gguf", "--write-gguf", "y.gguf"]),
        "cannot be used with",
    );
    fails_with(
        &bench(&["--model", "x.gguf", "--synthetic", "smollm2-135m"]),
        "cannot be used with",
    );
    fails_with(
        &bench(&["--model", "x.gguf", "--quant", "q8_0"]),
        "cannot be used with",
    );
}

/// `--verify exact` runs each pass's rows as decode steps would: the reply
/// is plain greedy's, and the stats say which form ran; `--verify` without
/// drafting, or a form it does not know, is refused by name.
#[test]
fn speculative_generate_verifies_as_asked() {
    let quote = "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog, and the quick brown fox jumps over the lazy dog again.";
    let run = |extra: &[&str]| {
        let m = model();
        let mut args = vec!["generate", "--model", m.to_str().unwrap()];
        args.extend_from_slice(&["--prompt", quote, "--max-tokens", "24", "--json"]);
        args.extend_from_slice(extra);
        wick_json(&args)
    };
    let plain = run(&[]);
    for form in ["exact", "batched"] {
        let drafted = run(&["--speculative", "lookup", "--verify", form]);
        let s = &drafted["stats"]["speculative"];
        assert_eq!(s["verify"], form, "{s}");
        if form == "exact" {
            assert_eq!(drafted["ids"], plain["ids"]);
        }
    }
    let m = model();
    let m = m.to_str().unwrap();
    let base = [
        "generate",
        "--model",
        m,
        "--prompt",
        "Hi",
        "--max-tokens",
        "2",
    ];
    fails_with(&[&base[..], &["--verify", "exact"]].concat(), "--verify");
    fails_with(
        &[&base[..], &["--speculative", "lookup", "--verify", "loose"]].concat(),
        "--verify",
    );
}
