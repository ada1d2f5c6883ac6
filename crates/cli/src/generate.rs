//! `wick generate`: stream a completion to stdout.

use std::io::Write;

use serde_json::json;
use wick::constrain::GrammarCompiler;
use wick::pipeline::stopping::StopCriteria;

use crate::load::ModelInput;
use crate::sampling::SamplingArgs;
use crate::CliResult;

#[derive(clap::Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub input: ModelInput,
    #[arg(long, default_value_t = 64)]
    pub max_tokens: usize,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// With --json: the log-probability of each generated token and the K
    /// most likely tokens at its position (0..=20, as OpenAI's top_logprobs).
    #[arg(long, value_name = "K", requires = "json")]
    pub logprobs: Option<usize>,
    /// Print one JSON object at the end instead of streaming text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub constraint: crate::constraint::ConstraintArgs,
    #[command(flatten)]
    pub speculative: crate::speculative::SpeculativeArgs,
}

/// OpenAI's limit on `top_logprobs`.
const MAX_TOP_LOGPROBS: usize = 20;

pub fn run(args: GenerateArgs) -> CliResult {
    let sampling = args.sampling.params()?;
    if args.max_tokens == 0 {
        return Err("--max-tokens must be at least 1".into());
    }
    if args.logprobs.is_some_and(|k| k > MAX_TOP_LOGPROBS) {
        return Err(format!("--logprobs must be 0..={MAX_TOP_LOGPROBS}").into());
    }
    let grammar = args.constraint.grammar()?;
    let loaded = args.input.load(args.json)?;
    let mut engine = loaded.engine;
    args.speculative
        .apply(&mut engine, !args.input.model.no_warmup, args.json)?;
    let prompt = args.input.ids(&engine)?;
    let stop = StopCriteria {
        stop_ids: engine.tokenizer.stop_ids(),
        max_tokens: args.max_tokens,
    };
    let mut grammar_compile_seconds = None;
    let constraint = match grammar {
        Some(grammar) => {
            let start = std::time::Instant::now();
            let vocab = engine.pipeline.model().config.vocab_size;
            let constraint = GrammarCompiler::new(&engine.tokenizer, vocab)?.compile(&grammar)?;
            grammar_compile_seconds = Some(start.elapsed().as_secs_f64());
            Some(constraint)
        }
        None => None,
    };
    let mut stdout = std::io::stdout();
    let mut on_text = |text: &str| {
        if !args.json {
            let _ = write!(stdout, "{text}");
            let _ = stdout.flush();
        }
        true
    };
    let out = pollster::block_on(engine.complete(
        &prompt,
        &sampling,
        stop,
        &args.sampling.stop,
        constraint,
        &mut on_text,
    ))?;
    if !args.json {
        println!();
        return Ok(());
    }
    let s = &out.stats;
    let mut report = json!({
        "prompt_ids": prompt,
        "ids": out.ids,
        "text": out.text,
        "finish_reason": out.finish_reason.as_str(),
        "stop_string": out.stop_string,
        "stats": {
            "load_seconds": loaded.load_seconds,
            "prompt_tokens": s.prompt_tokens,
            "cached_tokens": s.cached_tokens,
            "generated_tokens": s.generated_tokens,
            "prefill_tok_s": s.prefill_tok_s(),
            "decode_tok_s": s.decode_tok_s(),
            "time_to_first_token": s.time_to_first_token,
            "submits_per_decode_step": s.per_decode_step(s.decode_counters.submits),
        },
    });
    if let (Some(compile_seconds), Some(grammar)) = (grammar_compile_seconds, &s.grammar) {
        let stats = &mut report["stats"];
        stats["grammar_compile_seconds"] = json!(compile_seconds);
        stats["forced_tokens"] = json!(grammar.forced_tokens);
        stats["mask_ms_per_token"] = json!(grammar.mask_ms_per_token());
    }
    if let Some(spec) = &s.speculative {
        report["stats"]["speculative"] = crate::speculative::stats_json(spec);
    }
    if let Some(k) = args.logprobs {
        let logprobs = pollster::block_on(engine.pipeline.logprobs_of(&prompt, &out.ids, k))?;
        // As OpenAI writes each entry: the token's text (lossy where it holds
        // part of a character) and its exact bytes.
        let entry = |id: u32, logprob: f32| -> Result<serde_json::Value, wick::WickError> {
            let bytes = engine.tokenizer.token_bytes(id, false)?;
            let token = String::from_utf8_lossy(&bytes);
            Ok(json!({ "id": id, "token": token, "bytes": bytes, "logprob": logprob }))
        };
        let mut entries = Vec::with_capacity(logprobs.len());
        for t in &logprobs {
            let mut e = entry(t.id, t.logprob)?;
            let top: Result<Vec<_>, _> = t.top.iter().map(|&(id, lp)| entry(id, lp)).collect();
            e["top_logprobs"] = json!(top?);
            entries.push(e);
        }
        report["logprobs"] = json!(entries);
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
