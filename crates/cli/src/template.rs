//! `wick template`: renders a Hugging Face chat template over a conversation
//! the way transformers' `apply_chat_template` renders it. No model, no GPU.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;
use wick::tokenizer::chat_template::ChatTemplate;

use crate::CliResult;

#[derive(clap::Args)]
pub struct TemplateArgs {
    /// The template (Jinja) file.
    #[arg(long)]
    pub template: PathBuf,
    /// A JSON file: an array of messages (`role`, `content`, ...).
    #[arg(long)]
    pub messages: PathBuf,
    /// Open the assistant's turn after the messages.
    #[arg(long)]
    pub add_generation_prompt: bool,
    /// The `bos_token` text.
    #[arg(long, default_value = "")]
    pub bos: String,
    /// The `eos_token` text.
    #[arg(long, default_value = "")]
    pub eos: String,
    /// A JSON object of more template variables (`tools`,
    /// `enable_thinking`, ...).
    #[arg(long, default_value = "{}")]
    pub kwargs: String,
    /// Print `{"text": ...}` instead of the bare text.
    #[arg(long)]
    pub json: bool,
}

fn read(path: &Path, what: &str) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the {what} file '{}': {e}", path.display()))
}

pub fn run(args: TemplateArgs) -> CliResult {
    let source = read(&args.template, "template")?;
    let messages = read(&args.messages, "messages")?;
    let template = ChatTemplate::new(source, args.bos, args.eos)?;
    let text =
        template.render_json_with_kwargs(&messages, args.add_generation_prompt, &args.kwargs)?;
    if args.json {
        println!("{}", json!({ "text": text }));
    } else {
        // The text exactly, with no newline added.
        let mut out = std::io::stdout();
        out.write_all(text.as_bytes())?;
        out.flush()?;
    }
    Ok(())
}
