//! `wick tokenize`: text to ids, as generation would tokenize it.

use std::path::PathBuf;

use serde_json::json;
use wick::format::gguf::GgufFile;
use wick::tokenizer::Tokenizer;

use crate::map_file::map_file;
use crate::CliResult;

#[derive(clap::Args)]
pub struct TokenizeArgs {
    /// GGUF model file, or a Hugging Face checkpoint folder.
    #[arg(long)]
    pub model: PathBuf,
    #[arg(long)]
    pub text: String,
    #[arg(long)]
    pub json: bool,
}

/// Needs only the file's header (a folder's tokenizer files): no GPU, no weights.
pub fn run(args: TokenizeArgs) -> CliResult {
    let tokenizer = if args.model.is_dir() {
        crate::hf::tokenizer(&args.model)?
    } else {
        // A split model's metadata is all in its first shard.
        let files = crate::split::model_files(&args.model)?;
        let bytes = map_file(&files[0])?;
        Tokenizer::from_gguf(&GgufFile::parse(&bytes)?)?
    };
    let ids = tokenizer.encode(&args.text, true, false)?;
    if args.json {
        println!("{}", json!({ "ids": ids }));
    } else {
        for id in ids {
            println!("{id:>7} {:?}", tokenizer.token_text(id).unwrap_or_default());
        }
    }
    Ok(())
}
