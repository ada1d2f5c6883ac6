//! `wick logits`: teacher-forced logits of the last positions of an input.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

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

/// The `k` highest logits as (id, logit), highest first, lowest id on ties.
pub fn top_k(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..row.len() as u32).collect();
    let k = k.min(row.len());
    let order = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
    if k > 0 && k < idx.len() {
        idx.select_nth_unstable_by(k - 1, order);
        idx.truncate(k);
    }
    idx.sort_unstable_by(order);
    idx.into_iter().map(|i| (i, row[i as usize])).collect()
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
