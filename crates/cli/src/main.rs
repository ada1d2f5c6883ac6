//! `wick`: the native runner. Every subcommand reports errors as one clear
//! line and a non-zero exit, never a panic.

mod bench;
mod bench_kernels;
mod chat;
mod constraint;
mod cpu_time;
mod embed;
mod generate;
mod hf;
mod info;
mod load;
mod logits;
mod map_file;
mod sampling;
mod speculative;
mod split;
mod template;
mod tokenize;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "wick",
    version,
    about = "Run LLMs on the GPU through WebGPU (wgpu)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the GPU adapter, granted features and limits (and, with
    /// --model, a GGUF model's architecture, tensors and shards).
    Info {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// A GGUF model file (of a split model, its first shard) to describe
        /// from its headers.
        #[arg(long)]
        model: Option<std::path::PathBuf>,
    },
    /// Generate text from a prompt, streamed to stdout.
    Generate(generate::GenerateArgs),
    /// Chat with a model through its chat template: interactive from stdin
    /// (/reset, /stats, /exit), or one reply to --messages F.json.
    Chat(chat::ChatArgs),
    /// Teacher-forced logits of the last positions of an input.
    Logits(logits::LogitsArgs),
    /// Text embeddings from a sentence-transformers (BERT) folder.
    Embed(embed::EmbedArgs),
    /// Tokenize text as generation would.
    Tokenize(tokenize::TokenizeArgs),
    /// Render a chat template over a conversation, as transformers does.
    Template(template::TemplateArgs),
    /// Measure prefill and decode speed of a model.
    Bench(bench::BenchArgs),
    /// Measure GEMV bandwidth per quant type against buffer copy bandwidth.
    BenchKernels(bench_kernels::BenchKernelsArgs),
    /// Split a GGUF file into shards, as llama.cpp's gguf-split --split-max-size.
    Split(split::SplitArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { json, model } => info::run(json, model.as_deref()),
        Command::Generate(args) => generate::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Logits(args) => logits::run(args),
        Command::Embed(args) => embed::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Template(args) => template::run(args),
        Command::Bench(args) => bench::run(args),
        Command::BenchKernels(args) => bench_kernels::run(args),
        Command::Split(args) => split::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Errors from any subcommand, printed by `main`.
pub type CliResult = Result<(), Box<dyn std::error::Error>>;
