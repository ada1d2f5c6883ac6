//! `wick bench`: prefill and decode speed of a model, and proof of the
//! engine's per-step discipline (submits, dispatches, readback, allocations).

use std::path::PathBuf;

use serde_json::json;
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stopping::StopCriteria;
use wick::pipeline::PipelineOptions;

use crate::load::load;
use crate::CliResult;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[arg(long)]
    pub model: PathBuf,
    #[arg(long, default_value_t = 64)]
    pub prompt_tokens: usize,
    #[arg(long, default_value_t = 32)]
    pub gen_tokens: usize,
    #[arg(long)]
    pub json: bool,
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

pub fn run(args: BenchArgs) -> CliResult {
    if args.prompt_tokens == 0 || args.gen_tokens < 2 {
        return Err("--prompt-tokens must be >= 1 and --gen-tokens >= 2".into());
    }
    let opts = PipelineOptions {
        ctx_len: Some(args.prompt_tokens + args.gen_tokens + 1),
        ..Default::default()
    };
    let loaded = load(&args.model, &opts, args.json)?;
    let mut engine = loaded.engine;
    let prompt = bench_prompt(&engine, args.prompt_tokens)?;
    // No stop tokens: always run the full count so runs compare.
    let stop = StopCriteria {
        stop_ids: Vec::new(),
        max_tokens: args.gen_tokens,
    };
    let greedy = SamplingParams::default();
    let run = |engine: &mut wick::Engine| {
        pollster::block_on(
            engine
                .pipeline
                .generate(&prompt, &greedy, &stop, &mut |_| true),
        )
    };
    run(&mut engine)?; // warm-up: compiles pipelines, creates bind groups
    let out = run(&mut engine)?;
    let s = &out.stats;
    let c = &s.decode_counters;
    let report = json!({
        "model": args.model.file_name().map(|n| n.to_string_lossy().into_owned()),
        "adapter": engine.pipeline.ctx().adapter.name,
        "load_seconds": loaded.load_seconds,
        "prompt_tokens": s.prompt_tokens,
        "gen_tokens": s.generated_tokens,
        "prefill_tok_s": s.prefill_tok_s(),
        "decode_tok_s": s.decode_tok_s(),
        "time_to_first_token": s.time_to_first_token,
        "submits_per_decode_step": s.per_decode_step(c.submits),
        "dispatches_per_decode_step": s.per_decode_step(c.dispatches),
        "bytes_read_back_per_token": s.per_decode_step(c.bytes_read_back),
        "buffers_created_per_decode_step": s.per_decode_step(c.buffers_created),
        "bind_groups_created_per_decode_step": s.per_decode_step(c.bind_groups_created),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for (k, v) in report.as_object().into_iter().flatten() {
            println!("{k:<36} {v}");
        }
    }
    Ok(())
}
