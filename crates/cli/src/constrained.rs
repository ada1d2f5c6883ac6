//! `wick generate --json-schema FILE | --regex R | --grammar FILE`: a
//! generation whose output always matches the given grammar.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;
use wick::constrain::{Grammar, GrammarCompiler};
use wick::pipeline::sampling::SamplingParams;
use wick::pipeline::stopping::StopCriteria;
use wick::tokenizer::StreamDecoder;

use crate::generate::GenerateArgs;
use crate::CliResult;

/// At most one of these; none means free generation.
#[derive(clap::Args)]
#[group(multiple = false)]
pub struct ConstraintArgs {
    /// Constrain the output to JSON valid under this JSON schema file.
    #[arg(long, value_name = "FILE")]
    pub json_schema: Option<PathBuf>,
    /// Constrain the output to match this regular expression (Rust syntax).
    #[arg(long, value_name = "REGEX")]
    pub regex: Option<String>,
    /// Constrain the output to this grammar file (llguidance's Lark syntax).
    #[arg(long, value_name = "FILE")]
    pub grammar: Option<PathBuf>,
}

impl ConstraintArgs {
    /// The grammar asked for, read from its file; `None` for free generation.
    pub fn grammar(&self) -> Result<Option<Grammar>, Box<dyn std::error::Error>> {
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read '{}': {e}", path.display()))
        };
        Ok(match (&self.json_schema, &self.regex, &self.grammar) {
            (Some(path), _, _) => {
                let schema = serde_json::from_str(&read(path)?)
                    .map_err(|e| format!("'{}' is not JSON: {e}", path.display()))?;
                Some(Grammar::JsonSchema(schema))
            }
            (_, Some(rx), _) => Some(Grammar::Regex(rx.clone())),
            (_, _, Some(path)) => Some(Grammar::Lark(read(path)?)),
            _ => None,
        })
    }
}

pub fn run(args: &GenerateArgs, sampling: &SamplingParams, grammar: Grammar) -> CliResult {
    let loaded = args.input.load(args.json)?;
    let mut engine = loaded.engine;
    let prompt = args.input.ids(&engine)?;
    let stop = StopCriteria {
        stop_ids: engine.tokenizer.stop_ids(),
        max_tokens: args.max_tokens,
    };
    let vocab = engine.pipeline.model().config.vocab_size;
    let compile_start = std::time::Instant::now();
    let compiler = GrammarCompiler::new(&engine.tokenizer, vocab)?;
    let constraint = compiler.compile(&grammar)?;
    let compile_seconds = compile_start.elapsed().as_secs_f64();
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
    let out = pollster::block_on(engine.pipeline.generate_constrained(
        &prompt,
        sampling,
        &stop,
        constraint,
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
            "grammar_compile_seconds": compile_seconds,
            "forced_tokens": out.forced_tokens,
            "mask_ms_per_token": out.mask_ms_per_token(),
        },
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
