//! `wick chat`: a conversation with a model through its chat template.
//! Interactive from stdin, or one reply to the messages of a JSON file
//! (`--messages F.json`, with `--json` as an OpenAI `chat.completion`).

mod interactive;
mod session;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;
use wick::completion::openai::{messages, ChatCompletion, ReplyHeader};
use wick::tools::{ToolChoice, ToolSet};

use crate::load::ModelArgs;
use crate::sampling::SamplingArgs;
use crate::CliResult;
use session::{ChatSession, ReplySettings};

#[derive(clap::Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A system message that opens the conversation (kept by /reset).
    #[arg(long, value_name = "TEXT", conflicts_with = "messages")]
    pub system: Option<String>,
    /// A JSON file holding an array of OpenAI-style messages ({role,
    /// content}): answer it once and exit instead of chatting.
    #[arg(long, value_name = "FILE")]
    pub messages: Option<PathBuf>,
    /// At most this many tokens a reply (default: until the end of the turn
    /// or of the context).
    #[arg(long)]
    pub max_tokens: Option<usize>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// A JSON object of more template variables (`{"enable_thinking": false}`,
    /// `tools`, ...).
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub kwargs: String,
    /// With --messages: print one OpenAI chat.completion object instead of
    /// streaming the reply.
    #[arg(long, requires = "messages")]
    pub json: bool,
    /// A JSON file holding OpenAI's `tools` array ([{"type": "function",
    /// "function": {name, description, parameters}}]): described to the
    /// model by its chat template, its calls parsed from the reply.
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// auto (the model decides), none (tools not shown), required (at least
    /// one call, decoding constrained to well-formed calls) or a tool's name
    /// (that tool is called).
    #[arg(
        long,
        value_name = "CHOICE",
        requires = "tools",
        default_value = "auto"
    )]
    pub tool_choice: String,
    #[command(flatten)]
    pub speculative: crate::speculative::SpeculativeArgs,
}

pub fn run(args: ChatArgs) -> CliResult {
    // Everything that can be wrong with the input is found before the load.
    let sampling = args.sampling.params()?;
    if args.max_tokens == Some(0) {
        return Err("--max-tokens must be at least 1".into());
    }
    check_kwargs(&args.kwargs)?;
    let (tools, tool_choice) = read_tools(args.tools.as_deref(), &args.tool_choice)?;
    let conversation = args.messages.as_deref().map(read_messages).transpose()?;
    let settings = ReplySettings {
        sampling,
        stop_strings: args.sampling.stop.clone(),
        max_tokens: args.max_tokens,
        kwargs: args.kwargs.clone(),
        tools,
        tool_choice,
    };
    let preamble: Vec<_> = args
        .system
        .iter()
        .map(|s| messages::message("system", s))
        .collect();
    let model_name = args
        .model
        .model
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut engine = args.model.load(args.json)?.engine;
    args.speculative
        .apply(&mut engine, !args.model.no_warmup, args.json)?;
    let mut session = ChatSession::new(engine, settings, preamble)?;
    let Some(conversation) = conversation else {
        return interactive::run(session, &model_name);
    };
    session.extend(conversation);
    let mut stdout = std::io::stdout();
    let mut on_text = |piece: &str| {
        args.json
            || write!(stdout, "{piece}")
                .and_then(|_| stdout.flush())
                .is_ok()
    };
    let reply = session.reply(&mut on_text)?;
    let mut stdout = std::io::stdout();
    if args.json {
        let object = ChatCompletion::of_reply(ReplyHeader::new(&model_name), &reply);
        writeln!(stdout, "{}", serde_json::to_string_pretty(&object)?)?;
    } else {
        if reply.reply.content.is_some() {
            writeln!(stdout)?;
        }
        for call in &reply.reply.tool_calls {
            writeln!(stdout, "{}", interactive::call_line(call))?;
        }
    }
    Ok(())
}

/// The tools file and the choice, checked before any model loads.
fn read_tools(path: Option<&Path>, choice: &str) -> Result<(Value, ToolChoice), String> {
    let Some(path) = path else {
        return Ok((Value::Null, ToolChoice::Auto));
    };
    let json = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the tools file '{}': {e}", path.display()))?;
    let tools: Value = serde_json::from_str(&json)
        .map_err(|e| format!("the tools file '{}' is not JSON: {e}", path.display()))?;
    let choice = match choice {
        "auto" => ToolChoice::Auto,
        "none" => ToolChoice::None,
        "required" => ToolChoice::Required,
        name => ToolChoice::Function(name.to_string()),
    };
    // The tools and the choice checked against each other now; the format
    // (the model's template) only once it is loaded. Any Hermes-style
    // source stands in for it here.
    ToolSet::new(&tools, choice.clone(), "<tool_call>")
        .map_err(|e| format!("the tools file '{}': {e}", path.display()))?;
    Ok((tools, choice))
}

fn read_messages(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    let json = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the messages file '{}': {e}", path.display()))?;
    messages::parse(&json).map_err(|e| format!("the messages file '{}': {e}", path.display()))
}

/// `--kwargs` must be a JSON object (the template checks it again).
fn check_kwargs(kwargs: &str) -> Result<(), String> {
    match serde_json::from_str::<serde_json::Value>(kwargs) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(format!("--kwargs must be a JSON object, not {kwargs}")),
        Err(e) => Err(format!("--kwargs is not JSON: {e}")),
    }
}
