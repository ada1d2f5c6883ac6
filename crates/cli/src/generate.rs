//! `wick generate`: stream a completion to stdout.

use std::io::Write;

use serde_json::json;
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stopping::StopCriteria;
use wick::tokenizer::StreamDecoder;

use crate::load::ModelInput;
use crate::CliResult;

#[derive(clap::Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub input: ModelInput,
    #[arg(long, default_value_t = 64)]
    pub max_tokens: usize,
    /// 0 samples greedily.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// 0 keeps every token.
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object at the end instead of streaming text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub constraint: crate::constrained::ConstraintArgs,
}

pub fn run(args: GenerateArgs) -> CliResult {
    let sampling = SamplingParams {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
        ..Default::default()
    };
    sampling.validate()?;
    if args.max_tokens == 0 {
        return Err("--max-tokens must be at least 1".into());
    }
    if let Some(grammar) = args.constraint.grammar()? {
        return crate::constrained::run(&args, &sampling, grammar);
    }
    let loaded = args.input.load(args.json)?;
    let mut engine = loaded.engine;
    let prompt = args.input.ids(&engine)?;
    let stop = StopCriteria {
        stop_ids: engine.tokenizer.stop_ids(),
        max_tokens: args.max_tokens,
    };
    let tokenizer = &engine.tokenizer;
    let mut stream = StreamDecoder::new(tokenizer, true);
    let mut stdout = std::io::stdout();
    let mut stream_error = None;
    let mut on_token = |id: u32| {
        if args.json {
            return true;
        }
        match stream.push(id) {
            Ok(text) => {
                let _ = write!(stdout, "{text}");
                let _ = stdout.flush();
                true
            }
            Err(e) => {
                stream_error = Some(e);
                false
            }
        }
    };
    let out = pollster::block_on(engine.pipeline.generate(
        &prompt,
        &sampling,
        &stop,
        &mut on_token,
    ))?;
    if let Some(e) = stream_error {
        return Err(e.into());
    }
    if !args.json {
        println!("{}", stream.finish()?);
        return Ok(());
    }
    let s = &out.stats;
    let report = json!({
        "prompt_ids": prompt,
        "ids": out.ids,
        "text": tokenizer.decode(&out.ids, true)?,
        "finish_reason": out.finish_reason.as_str(),
        "stats": {
            "load_seconds": loaded.load_seconds,
            "prompt_tokens": s.prompt_tokens,
            "generated_tokens": s.generated_tokens,
            "prefill_tok_s": s.prefill_tok_s(),
            "decode_tok_s": s.decode_tok_s(),
            "time_to_first_token": s.time_to_first_token,
            "submits_per_decode_step": s.per_decode_step(s.decode_counters.submits),
        },
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
