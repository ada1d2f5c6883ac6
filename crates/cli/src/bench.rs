//! `wick bench`: prefill and decode speed of a model, and proof of the
//! engine's per-step discipline (submits, dispatches, readback, allocations).
//!
//! The model is a file (`--model`) or a synthetic one (`--synthetic NAME
//! --quant Q`: a published architecture's shapes with random weights, built
//! in memory). The roofline fields compare decode speed with what memory
//! allows: a decode step reads every weight once, so at best
//! `decode_tok_s * weight_bytes_per_token` equals the adapter's copy bandwidth
//! (measured in the same run); `roofline_fraction` is how much of it we reach.
//! `bytes_moved_per_token` is everything a decode step's dispatches read and
//! write (weights, activations, the KV cache up to the position, logits), as
//! each op counts it from the tensors it binds (`Recorder::moved`).

use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use serde_json::json;
use wick::kernels::bench::copy_bandwidth;
use wick::model::synthetic;
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stopping::StopCriteria;
use wick::pipeline::{ActDtype, KvDtype, PipelineOptions};
use wick::tokenizer::chat_template::{ChatMessage, ChatTemplate};

use crate::cpu_time;
use crate::load::{load, load_synthetic};
use crate::CliResult;

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["model", "synthetic"]))]
pub struct BenchArgs {
    /// GGUF model file, or a Hugging Face checkpoint folder.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// A published architecture's shapes with random weights, built in memory.
    #[arg(long, value_name = "NAME",
          value_parser = PossibleValuesParser::new(synthetic::ARCHS.map(|a| a.name)))]
    pub synthetic: Option<String>,
    /// The synthetic model's matrix type, q4_0 if not given (norms and
    /// biases stay F32).
    #[arg(long, value_name = "Q", requires = "synthetic", conflicts_with = "model",
          value_parser = PossibleValuesParser::new(synthetic::QUANTS.map(|(n, _)| n)))]
    pub quant: Option<String>,
    /// Also write the synthetic model to this GGUF file before benching it,
    /// so another engine (llama.cpp, an older wick) can be measured on the
    /// same weights.
    #[arg(
        long,
        value_name = "FILE",
        requires = "synthetic",
        conflicts_with = "model"
    )]
    pub write_gguf: Option<PathBuf>,
    /// With --write-gguf: write the model as shards of at most SIZE bytes of
    /// tensor data each (500M, 2G, as llama.cpp's gguf-split), named
    /// FILE-00001-of-0000N.gguf (FILE without its .gguf), instead of one file.
    #[arg(long, value_name = "SIZE", requires = "write_gguf",
          value_parser = crate::split::parse_size)]
    pub split_max_size: Option<u64>,
    #[arg(long, default_value_t = 64)]
    pub prompt_tokens: usize,
    #[arg(long, default_value_t = 32)]
    pub gen_tokens: usize,
    /// Timed generations after the warm-up: the speeds reported are their
    /// medians, each run's listed under `runs` (a shared host's speed
    /// drifts between runs).
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Most prompt tokens per prefill step.
    #[arg(long, default_value_t = PipelineOptions::default().prefill_chunk)]
    pub prefill_chunk: usize,
    /// Decode steps per GPU submit.
    #[arg(long, default_value_t = wick::pipeline::DEFAULT_TOKENS_PER_SUBMIT)]
    pub tokens_per_submit: usize,
    /// Also time each kernel family of a decode step on the GPU
    /// (timestamp queries), in a separate run from a one-token prompt.
    #[arg(long)]
    pub profile: bool,
    /// How the KV cache stores K and V: f16 (the default) or f32.
    #[arg(long, default_value = "f16")]
    pub kv_cache: KvDtype,
    /// What decode steps feed the projections after a norm: f32, or q8
    /// (8-bit blocks: faster decode on lavapipe; see docs/kernels.md).
    #[arg(long, value_name = "TYPE", default_value = "f32")]
    pub activations: ActDtype,
    /// GPU memory the model may take, in GiB (default: what the adapter reports).
    #[arg(long, value_name = "GIB", value_parser = crate::load::parse_gib)]
    pub memory_budget: Option<u64>,
    #[arg(long)]
    pub json: bool,
    /// A user message to time instead of the repeated filler text, rendered
    /// through the model's chat template; the reply then stops where the
    /// model ends its turn (or at --gen-tokens).
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["synthetic", "prompt_tokens"])]
    pub chat: Option<String>,
    #[command(flatten)]
    pub speculative: crate::speculative::SpeculativeArgs,
}

/// A synthetic model's prompt: `n` ids spread over the vocabulary (its
/// tokenizer knows only bytes and fillers, so text would say nothing).
fn synthetic_prompt(vocab: usize, n: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 13) % vocab) as u32).collect()
}

/// A prompt of exactly `n` ids: ordinary text, tokenized, repeated.
fn bench_prompt(engine: &wick::Engine, n: usize) -> Result<Vec<u32>, Box<dyn std::error::Error>> {
    let text = "The quick brown fox jumps over the lazy dog while the engine measures itself. ";
    let unit = engine.tokenizer.encode(text, false, false)?;
    let mut ids = engine.tokenize_prompt("Once upon a time")?;
    while ids.len() < n {
        ids.extend_from_slice(&unit);
    }
    ids.truncate(n);
    Ok(ids)
}

/// `text` as a user's message in the model's chat template, ready to reply to.
fn chat_prompt(engine: &wick::Engine, text: &str) -> Result<Vec<u32>, Box<dyn std::error::Error>> {
    let template = ChatTemplate::from_gguf(&engine.gguf, &engine.tokenizer)?;
    let rendered = template.render(&[ChatMessage::new("user", text)], true)?;
    Ok(template.encode(&engine.tokenizer, &rendered)?)
}

/// Streams the synthetic model `name` in `quant` to a GGUF file at `path`,
/// or to shards of at most `split` bytes of tensor data each.
fn write_synthetic(
    name: &str,
    quant: &str,
    path: &std::path::Path,
    split: Option<u64>,
) -> CliResult {
    use std::io::Write;
    let model = synthetic::SyntheticModel::new(synthetic::arch(name)?, synthetic::quant(quant)?)?;
    if let Some(max) = split {
        let header = wick::format::GgufFile::parse_header(model.header())?;
        let prefix = crate::split::prefix_of(path);
        crate::split::write_shards(&header, max, &prefix, |sink| model.stream(sink))?;
        return Ok(());
    }
    let named = |e: std::io::Error| format!("writing {}: {e}", path.display());
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(named)?);
    model.stream(|chunk| out.write_all(chunk)).map_err(named)?;
    out.flush().map_err(named)?;
    Ok(())
}

pub fn run(args: BenchArgs) -> CliResult {
    if args.prompt_tokens == 0 || args.gen_tokens < 2 {
        return Err("--prompt-tokens must be >= 1 and --gen-tokens >= 2".into());
    }
    if args.runs == 0 {
        return Err("--runs must be >= 1: the timed generations to take medians of".into());
    }
    // A chat prompt's length is known once the model's tokenizer is.
    let ctx_len = match &args.chat {
        Some(_) => None,
        None => Some(args.prompt_tokens + args.gen_tokens + 1),
    };
    let opts = PipelineOptions {
        ctx_len,
        tokens_per_submit: args.tokens_per_submit,
        prefill_chunk: args.prefill_chunk,
        kv_dtype: args.kv_cache,
        act_dtype: args.activations,
        memory_budget: args.memory_budget,
        // Timed runs must not wait for compiles.
        warm_up: true,
    };
    let quant = args.quant.as_deref().unwrap_or("q4_0");
    if let (Some(path), Some(name)) = (&args.write_gguf, &args.synthetic) {
        write_synthetic(name, quant, path, args.split_max_size)?;
    }
    let loaded = match (&args.model, &args.synthetic) {
        (Some(path), _) => load(path, &opts, &Default::default(), args.json)?,
        (None, Some(name)) => load_synthetic(name, quant, &opts, args.json)?,
        (None, None) => return Err("give --model FILE or --synthetic NAME".into()),
    };
    let mut engine = loaded.engine;
    args.speculative.apply(&mut engine, true, args.json)?;
    let prompt = match (&args.synthetic, &args.chat) {
        (Some(_), _) => synthetic_prompt(
            engine.pipeline.model().config.vocab_size,
            args.prompt_tokens,
        ),
        (None, Some(text)) => chat_prompt(&engine, text)?,
        (None, None) => bench_prompt(&engine, args.prompt_tokens)?,
    };
    if prompt.len() + args.gen_tokens > engine.pipeline.ctx_len() {
        return Err(format!(
            "a {}-token prompt and {} generated tokens do not fit the {}-token context",
            prompt.len(),
            args.gen_tokens,
            engine.pipeline.ctx_len()
        )
        .into());
    }
    // No stop tokens (but a chat's end of turn): always run the full
    // count so runs compare.
    let stop = StopCriteria {
        stop_ids: match args.chat {
            Some(_) => engine.tokenizer.stop_ids(),
            None => Vec::new(),
        },
        max_tokens: args.gen_tokens,
    };
    let greedy = SamplingParams::default();
    let run = |engine: &mut wick::Engine| {
        // Every run prefills the whole prompt: nothing reused from the last.
        engine.pipeline.reset();
        // The process's CPU seconds at the start and at the first token.
        let start_cpu = cpu_time::process_seconds();
        let mut first_cpu = None;
        let out = pollster::block_on(engine.pipeline.generate(
            &prompt,
            &greedy,
            &stop,
            None,
            &mut |_| {
                first_cpu = first_cpu.or_else(cpu_time::process_seconds);
                true
            },
        ))?;
        let end_cpu = cpu_time::process_seconds();
        let cpu = match (start_cpu, first_cpu, end_cpu) {
            (Some(a), Some(b), Some(c)) => Some((b - a, c - b)),
            _ => None,
        };
        Ok::<_, wick::WickError>((out, cpu))
    };
    run(&mut engine)?; // warm-up: compiles pipelines, creates bind groups
    let mut runs = Vec::with_capacity(args.runs);
    for _ in 0..args.runs {
        runs.push(run(&mut engine)?);
    }
    let per_run: Vec<_> = runs
        .iter()
        .map(|(out, cpu)| {
            let s = &out.stats;
            json!({
                "prefill_tok_s": s.prefill_tok_s(),
                "decode_tok_s": s.decode_tok_s(),
                "prefill_over_decode": s.prefill_tok_s() / s.decode_tok_s(),
                "prefill_cpu_seconds": cpu.map(|c| c.0),
                "decode_cpu_seconds": cpu.map(|c| c.1),
            })
        })
        .collect();
    let median_of = |key: &str| {
        let mut v: Vec<f64> = per_run.iter().filter_map(|r| r[key].as_f64()).collect();
        v.sort_by(f64::total_cmp);
        // The lower middle of an even count: a value some run measured.
        (!v.is_empty()).then(|| v[(v.len() - 1) / 2])
    };
    // The run whose prefill speed is the median's: its counters and times.
    let middle = {
        let mut order: Vec<usize> = (0..runs.len()).collect();
        order.sort_by(|&a, &b| {
            let speed = |i: usize| runs[i].0.stats.prefill_tok_s();
            speed(a).total_cmp(&speed(b))
        });
        order[(order.len() - 1) / 2]
    };
    let out = &runs[middle].0;
    let s = &out.stats;
    let c = &s.decode_counters;
    let ctx = engine.pipeline.ctx();
    // 256 MiB (capped at one binding): larger than any cache, as the weights are.
    let copy_gbps = pollster::block_on(copy_bandwidth(ctx, 256 << 20, 8))?;
    let weight_bytes = engine.pipeline.model().weight_bytes_per_token();
    let decode_tok_s = median_of("decode_tok_s").unwrap_or(0.0);
    let roofline = decode_tok_s * weight_bytes as f64 / (copy_gbps * 1e9);
    let mut report = json!({
        "model": args.model.as_ref().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()),
        "adapter": ctx.adapter.name,
        "load_seconds": loaded.load_seconds,
        "prompt_tokens": s.prompt_tokens,
        "gen_tokens": s.generated_tokens,
        "prefill_tok_s": median_of("prefill_tok_s"),
        "decode_tok_s": decode_tok_s,
        "prefill_over_decode": median_of("prefill_over_decode"),
        "prefill_cpu_seconds": median_of("prefill_cpu_seconds"),
        "decode_cpu_ms_per_token": median_of("decode_cpu_seconds")
            .map(|d| d * 1e3 / s.generated_tokens.saturating_sub(1).max(1) as f64),
        "time_to_first_token": s.time_to_first_token,
        "submits_per_decode_step": s.per_decode_step(c.submits),
        "dispatches_per_decode_step": s.per_decode_step(c.dispatches),
        "bytes_read_back_per_token": s.per_decode_step(c.bytes_read_back),
        "buffers_created_per_decode_step": s.per_decode_step(c.buffers_created),
        "bind_groups_created_per_decode_step": s.per_decode_step(c.bind_groups_created),
        "tokens_per_submit": s.tokens_per_submit(),
        "kv_cache": engine.pipeline.kv_dtype().name(),
        "activations": engine.pipeline.act_dtype().name(),
        "weight_store": ctx.weight_store.name(),
        "cpu_record_ms_per_step": s.cpu_record_ms_per_step(),
        "weight_bytes_per_token": weight_bytes,
        "bytes_moved_per_token": s.per_decode_step(c.bytes_moved),
        "copy_gbps": copy_gbps,
        "roofline_fraction": roofline,
    });
    if args.runs > 1 {
        report["runs"] = json!(per_run);
    }
    if let Some(spec) = &s.speculative {
        report["speculative"] = crate::speculative::stats_json(spec);
    }
    if let Some(name) = &args.synthetic {
        report["synthetic"] = json!(name);
        report["quant"] = json!(quant);
    }
    let profile = if args.profile {
        let decode = profile_run(&mut engine, &prompt[..1], &stop)?;
        let first_token = StopCriteria {
            stop_ids: Vec::new(),
            max_tokens: 1,
        };
        let prefill = profile_run(&mut engine, &prompt, &first_token)?;
        Some((decode, prefill))
    } else {
        None
    };
    if let Some((decode, prefill)) = &profile {
        report["profile"] = json!({ "decode": decode, "prefill": prefill });
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for (k, v) in report.as_object().into_iter().flatten() {
            if k != "profile" {
                println!("{k:<36} {v}");
            }
        }
        if let Some((decode, prefill)) = &profile {
            print_profile("a decode step", decode);
            print_profile("the prompt's prefill", prefill);
        }
    }
    Ok(())
}

/// GPU time per kernel family of one generation, per step (forward pass):
/// from a one-token prompt every step is a decode step; with one token to
/// generate, the one step is the prompt's prefill.
fn profile_run(
    engine: &mut wick::Engine,
    prompt: &[u32],
    stop: &StopCriteria,
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let greedy = SamplingParams::default();
    engine.pipeline.reset();
    engine.pipeline.ctx().start_profile()?;
    let out =
        pollster::block_on(
            engine
                .pipeline
                .generate(prompt, &greedy, stop, None, &mut |_| true),
        );
    let profile = engine
        .pipeline
        .ctx()
        .finish_profile()
        .ok_or("the profile was lost")?;
    let steps = out?.stats.generated_tokens.max(1) as f64;
    let total = profile.total_seconds();
    let families: Vec<_> = profile
        .by_family
        .iter()
        .map(|(name, f)| {
            json!({
                "kernel": name,
                "ms_per_step": f.seconds * 1e3 / steps,
                "dispatches_per_step": f.dispatches as f64 / steps,
                "share": if total > 0.0 { f.seconds / total } else { 0.0 },
            })
        })
        .collect();
    Ok(json!({
        "steps": steps,
        "gpu_ms_per_step": total * 1e3 / steps,
        "kernels": families,
        "untimed_dispatches": profile.untimed_dispatches,
        "unread_submits": profile.unread_submits,
    }))
}

fn print_profile(what: &str, p: &serde_json::Value) {
    println!(
        "\nprofile: {:.2} ms of GPU time for {what}, over {} steps (one pass a dispatch, so slower than unprofiled)",
        p["gpu_ms_per_step"].as_f64().unwrap_or(0.0),
        p["steps"]
    );
    println!(
        "{:<28} {:>10} {:>12} {:>7}",
        "kernel", "ms/step", "dispatches", "share"
    );
    let mut rows: Vec<&serde_json::Value> = p["kernels"].as_array().into_iter().flatten().collect();
    rows.sort_by(|a, b| {
        b["ms_per_step"]
            .as_f64()
            .partial_cmp(&a["ms_per_step"].as_f64())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    for r in rows {
        println!(
            "{:<28} {:>10.3} {:>12.1} {:>6.1}%",
            r["kernel"].as_str().unwrap_or(""),
            r["ms_per_step"].as_f64().unwrap_or(0.0),
            r["dispatches_per_step"].as_f64().unwrap_or(0.0),
            100.0 * r["share"].as_f64().unwrap_or(0.0)
        );
    }
    for key in ["untimed_dispatches", "unread_submits"] {
        if p[key].as_u64().unwrap_or(0) > 0 {
            println!("{key}: {}", p[key]);
        }
    }
}
