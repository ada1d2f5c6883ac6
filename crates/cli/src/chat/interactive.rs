//! The interactive chat: one user message a line from stdin (a terminal or
//! a pipe), each reply streamed to stdout. Replies and `/stats` go to
//! stdout; the prompt, notices and errors to stderr, so piped output holds
//! only the conversation.

use std::io::{BufRead, IsTerminal, Write};

use wick::completion::ToolCompletion;
use wick::pipeline::stopping::FinishReason;
use wick::tools::ToolCall;

use super::session::{ChatError, ChatSession};
use crate::CliResult;

const HELP: &str = "commands: /tool RESULT (a tool's result for the oldest unanswered call), \
                    /reset (start over), /stats (the last turn's numbers), /exit";

/// What a line of input asks for.
#[derive(Debug, PartialEq)]
enum Input<'a> {
    Message(&'a str),
    ToolResult(&'a str),
    Reset,
    Stats,
    Exit,
    Help,
    Unknown(&'a str),
    Blank,
}

fn parse(line: &str) -> Input<'_> {
    let line = line.trim_end_matches(['\n', '\r']);
    match line.trim() {
        "" => Input::Blank,
        "/reset" => Input::Reset,
        "/stats" => Input::Stats,
        "/exit" | "/quit" => Input::Exit,
        "/help" => Input::Help,
        cmd if cmd.starts_with("/tool ") => Input::ToolResult(cmd["/tool ".len()..].trim()),
        cmd if cmd.starts_with('/') => Input::Unknown(cmd),
        _ => Input::Message(line),
    }
}

pub fn run(mut session: ChatSession, model_name: &str) -> CliResult {
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    let (used, ctx_len) = session.context_used();
    if terminal {
        eprintln!("chat with {model_name} ({used}/{ctx_len} positions used). {HELP}");
    }
    let mut line = String::new();
    loop {
        if terminal {
            eprint!("> ");
        }
        line.clear();
        if stdin.lock().read_line(&mut line)? == 0 {
            return Ok(());
        }
        match parse(&line) {
            Input::Blank => {}
            Input::Exit => return Ok(()),
            Input::Help => eprintln!("{HELP}"),
            Input::Unknown(cmd) => eprintln!("unknown command {cmd}; {HELP}"),
            Input::Reset => {
                session.reset();
                eprintln!("(the conversation and the cache are cleared)");
            }
            Input::Stats => writeln!(std::io::stdout(), "{}", stats_line(&session))?,
            Input::Message(text) => turn(&mut session, |s, out| s.turn(text, out).map(Some))?,
            Input::ToolResult(text) => turn(&mut session, |s, out| s.tool_result(text, out))?,
        }
    }
}

/// Streams one reply (`None`: calls still wait for results); a failed turn
/// is reported and the chat goes on, unless the GPU failed.
fn turn(
    session: &mut ChatSession,
    step: impl FnOnce(
        &mut ChatSession,
        &mut dyn FnMut(&str) -> bool,
    ) -> Result<Option<ToolCompletion>, ChatError>,
) -> CliResult {
    let mut stdout = std::io::stdout();
    let mut on_text = |piece: &str| {
        // A closed stdout ends the reply; the loop then ends at EOF.
        write!(stdout, "{piece}")
            .and_then(|_| stdout.flush())
            .is_ok()
    };
    match step(session, &mut on_text) {
        Ok(None) => {
            eprintln!("(more calls wait for results: /tool RESULT)");
            Ok(())
        }
        Ok(Some(reply)) => {
            let mut stdout = std::io::stdout();
            if reply.reply.content.is_some() {
                writeln!(stdout)?;
            }
            for call in &reply.reply.tool_calls {
                writeln!(stdout, "{}", call_line(call))?;
            }
            if !reply.reply.tool_calls.is_empty() {
                eprintln!("(answer each call with /tool RESULT)");
            }
            if reply.completion.finish_reason == FinishReason::ContextFull {
                let (used, ctx_len) = session.context_used();
                eprintln!(
                    "the context is full ({used}/{ctx_len} positions): /reset starts a new conversation"
                );
            }
            Ok(())
        }
        Err(e) if e.is_fatal() => Err(e.into()),
        Err(e @ ChatError::ContextFull { .. }) => {
            eprintln!("error: {e}; /reset starts a new conversation");
            Ok(())
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(())
        }
    }
}

/// A call as one readable line: `-> name({"a": 1})  [call_...]`.
pub fn call_line(call: &ToolCall) -> String {
    format!("-> {}({})  [{}]", call.name, call.arguments, call.id)
}

/// One line: the last turn's prompt (and how much of it the cache held),
/// its speeds, and how full the context is.
fn stats_line(session: &ChatSession) -> String {
    let (used, ctx_len) = session.context_used();
    let Some(s) = session.last_stats() else {
        return format!("stats: no reply yet; context {used}/{ctx_len}");
    };
    format!(
        "stats: prompt {} tokens ({} cached, {} prefilled), {} generated; \
         prefill {:.1} tok/s, decode {:.1} tok/s; context {used}/{ctx_len}",
        s.prompt_tokens,
        s.cached_tokens,
        s.prefilled_tokens(),
        s.generated_tokens,
        s.prefill_tok_s(),
        s.decode_tok_s(),
    )
}

#[cfg(test)]
mod tests {
    use super::{parse, Input};

    #[test]
    fn lines_are_messages_unless_they_are_commands() {
        assert_eq!(parse("Hello there\n"), Input::Message("Hello there"));
        assert_eq!(parse("  /stats \r\n"), Input::Stats);
        assert_eq!(parse("/reset\n"), Input::Reset);
        assert_eq!(parse("/exit"), Input::Exit);
        assert_eq!(parse("/quit\n"), Input::Exit);
        assert_eq!(parse("/frobnicate\n"), Input::Unknown("/frobnicate"));
        assert_eq!(
            parse("/tool {\"t\": 18}\n"),
            Input::ToolResult("{\"t\": 18}")
        );
        assert_eq!(parse(" \n"), Input::Blank);
    }
}
