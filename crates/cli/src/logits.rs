//! `wick logits`: teacher-forced logits of the last positions of an input.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;
use wick::pipeline::logprobs::top_k;

use crate::load::ModelInput;
use crate::CliResult;

#[derive(clap::Args)]
pub struct LogitsArgs {
    #[command(flatten)]
    pub input: ModelInput,
    /// How many final positions to report.
    #[arg(long, default_value_t = 1)]
    pub last: usize,
    /// How many of the highest logits to print per position.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    #[arg(long)]
    pub json: bool,
    /// Write the raw little-endian f32 logits here: `last` rows of vocab size.
    #[arg(long)]
    pub dump: Option<PathBuf>,
}

pub fn run(args: LogitsArgs) -> CliResult {
    if args.last == 0 {
        return Err("--last must be at least 1".into());
    }
    let mut engine = args.input.load(args.json)?.engine;
    let ids = args.input.ids(&engine)?;
    let rows = pollster::block_on(engine.pipeline.prefill(&ids, args.last))?;
    if let Some(path) = &args.dump {
        let mut file = std::fs::File::create(path)
            .map_err(|e| format!("cannot write '{}': {e}", path.display()))?;
        for row in &rows {
            file.write_all(bytemuck::cast_slice(row))?;
        }
    }
    let first = ids.len() - rows.len();
    if args.json {
        let positions: Vec<_> = rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let top: Vec<_> = top_k(row, args.top)
                    .into_iter()
                    .map(|(id, l)| json!([id, l]))
                    .collect();
                json!({ "position": first + i, "top": top })
            })
            .collect();
        let report = json!({ "prompt_ids": ids, "positions": positions });
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for (i, row) in rows.iter().enumerate() {
            println!("position {}:", first + i);
            for (id, logit) in top_k(row, args.top) {
                let text = engine.tokenizer.token_text(id).unwrap_or_default();
                println!("  {id:>7} {logit:>10.4}  {text:?}");
            }
        }
    }
    Ok(())
}
