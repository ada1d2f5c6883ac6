//! Generated text to content and tool calls, as it streams. Text that may
//! begin a call is held back (as `StopStrings` holds back a possible stop
//! string) until it is known to be content or a call. A call is announced
//! once its head (`{"name": "f", "arguments": `) is complete and names a
//! known tool; its arguments then stream as generated, in OpenAI's delta
//! shape: the first delta carries index, id and name, later ones append to
//! `arguments`.
//!
//! What is not a call, decided:
//! - a call naming no given tool, or whose head is not JSON of that shape,
//!   is content, markers and all (Hermes: unless the whole block parses as a
//!   call object with its keys in another order: then it is a call);
//! - arguments are handed on as generated, without checking them against
//!   the schema (as OpenAI does: "the model does not always generate valid
//!   JSON"); a call cut short by `max_tokens` keeps the arguments it has;
//! - text between a Hermes call's arguments and its `</tool_call>` is
//!   dropped (it is the object's closing brace and whitespace).

use serde_json::Value;

use super::format::ToolFormat;
use super::new_call_id;
use super::scan::{head, Parse, Scanned, ValueScan};

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";
const PYTHON_TAG: &str = "<|python_tag|>";
const MISTRAL_TAG: &str = "[TOOL_CALLS]";

/// One step of a streamed reply.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolEvent {
    /// Text that belongs to `message.content`.
    Content(String),
    /// A piece of `tool_calls[index]`: `id` and `name` on its first delta
    /// only, `arguments` text to append.
    Call(ToolCallDelta),
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

#[derive(Clone, Debug, PartialEq)]
enum State {
    /// Content; Hermes watches it for `<tool_call>`.
    Text,
    /// Formats whose calls open the reply: nothing decided yet.
    Lead,
    /// A call object's head is expected (`buf` from the region's start,
    /// `skip` bytes of markers before the object).
    Head { skip: usize },
    /// Streaming the arguments value.
    Args(ValueScan),
    /// After the arguments value, up to the next call or the region's end.
    After,
    /// A Hermes block whose head did not read: held to its close tag.
    Raw,
    /// The rest is content, unwatched.
    Plain,
}

/// Splits streamed text into content and calls for one reply.
pub struct ToolCallStream {
    format: ToolFormat,
    names: Vec<String>,
    state: State,
    buf: String,
    calls: usize,
    /// Hermes: the call in progress opened the reply without `<tool_call>`.
    bare: bool,
    /// Content held while all of it so far is whitespace: a reply of calls
    /// has no content (`ToolReply::finish`), so the newlines around its
    /// calls are not streamed as content either.
    blank: String,
    /// Some content was not whitespace: content streams as it comes.
    spoke: bool,
}

impl ToolCallStream {
    /// `names`: the tools a call may name.
    pub fn new(format: ToolFormat, names: Vec<String>) -> ToolCallStream {
        ToolCallStream {
            format,
            names,
            state: State::Lead,
            buf: String::new(),
            calls: 0,
            bare: false,
            blank: String::new(),
            spoke: false,
        }
    }

    /// The events `text` completes, in order. Content that is only
    /// whitespace so far is held until real content comes (then it leads
    /// it, after any call made meanwhile) or the reply ends.
    pub fn push(&mut self, text: &str) -> Vec<ToolEvent> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        while self.step(&mut out) {}
        self.hold_blank(out)
    }

    /// Ends the reply: what was held back, decided with no more text coming.
    /// Held whitespace is dropped after calls, and is the content of a
    /// reply without any.
    pub fn finish(&mut self) -> Vec<ToolEvent> {
        let mut out = Vec::new();
        while self.step(&mut out) {}
        let rest = std::mem::take(&mut self.buf);
        match std::mem::replace(&mut self.state, State::Plain) {
            State::Raw => self.raw_block(&rest, false, &mut out),
            // Cut inside the arguments: all of them were handed out already.
            // After a call: its closing brace and whitespace.
            State::Args(_) | State::After => {}
            _ => content(&rest, &mut out),
        }
        let mut out = self.hold_blank(out);
        if self.calls == 0 && !self.blank.is_empty() {
            out.push(ToolEvent::Content(std::mem::take(&mut self.blank)));
        }
        out
    }

    /// `events` with whitespace-only content held back (see `push`).
    fn hold_blank(&mut self, events: Vec<ToolEvent>) -> Vec<ToolEvent> {
        if self.spoke {
            return events;
        }
        let mut out = Vec::with_capacity(events.len());
        for e in events {
            match e {
                ToolEvent::Content(t) if !self.spoke => {
                    self.blank.push_str(&t);
                    if !self.blank.trim().is_empty() {
                        self.spoke = true;
                        out.push(ToolEvent::Content(std::mem::take(&mut self.blank)));
                    }
                }
                e => out.push(e),
            }
        }
        out
    }

    /// Advances on `buf` as far as it decides; false when it needs more text.
    fn step(&mut self, out: &mut Vec<ToolEvent>) -> bool {
        match self.state.clone() {
            State::Plain => {
                content(&std::mem::take(&mut self.buf), out);
                false
            }
            State::Text => match self.buf.find(HERMES_OPEN) {
                Some(at) => {
                    content(&self.buf[..at], out);
                    self.buf.drain(..at);
                    self.state = State::Head {
                        skip: HERMES_OPEN.len(),
                    };
                    true
                }
                None => {
                    let keep = partial_suffix(&self.buf, HERMES_OPEN);
                    let emit = self.buf.len() - keep;
                    content(&self.buf[..emit], out);
                    self.buf.drain(..emit);
                    false
                }
            },
            State::Lead => self.lead(),
            State::Head { skip } => self.head(skip, out),
            State::Args(mut scan) => {
                let mut used = 0;
                let mut piece = String::new();
                let mut done = false;
                for ch in self.buf.chars() {
                    let scanned = scan.push(ch);
                    if scanned == Scanned::After {
                        done = true;
                        break;
                    }
                    used += ch.len_utf8();
                    // Whitespace before the value is not part of it.
                    if scanned != Scanned::Skipped {
                        piece.push(ch);
                    }
                    if scanned == Scanned::Last {
                        done = true;
                        break;
                    }
                }
                self.buf.drain(..used);
                if !piece.is_empty() {
                    out.push(ToolEvent::Call(ToolCallDelta {
                        index: self.calls - 1,
                        id: None,
                        name: None,
                        arguments: piece,
                    }));
                }
                self.state = if done {
                    State::After
                } else {
                    State::Args(scan)
                };
                done
            }
            State::After => self.after(),
            State::Raw => match self.buf.find(HERMES_CLOSE) {
                Some(at) => {
                    let block: String = self.buf.drain(..at + HERMES_CLOSE.len()).collect();
                    self.raw_block(&block, true, out);
                    self.state = State::Text;
                    true
                }
                None => false,
            },
        }
    }

    /// The start of a reply whose calls must open it: a call region, or
    /// content from here on.
    fn lead(&mut self) -> bool {
        if self.format == ToolFormat::Hermes {
            // A bare call object may open the reply (Qwen2.5-Coder writes
            // them so); anything else is content watched for <tool_call>.
            let s = self.buf.trim_start();
            if s.is_empty() {
                return false;
            }
            self.bare = s.starts_with('{');
            self.state = if self.bare {
                State::Head {
                    skip: self.buf.len() - s.len(),
                }
            } else {
                State::Text
            };
            return true;
        }
        let (tag, open) = match self.format {
            ToolFormat::Mistral => (MISTRAL_TAG, "["),
            _ => (PYTHON_TAG, "{"),
        };
        let s = self.buf.trim_start();
        // Whitespace or a start of the tag (when the decoder shows it): wait.
        if tag.starts_with(s) {
            return false;
        }
        let rest = s.strip_prefix(tag).map(str::trim_start).unwrap_or(s);
        if rest.is_empty() {
            return false;
        }
        self.state = if rest.starts_with(open) {
            // Mistral's `[` opens the list; the object follows it.
            State::Head {
                skip: self.buf.len() - rest.len() + usize::from(open == "["),
            }
        } else {
            State::Plain
        };
        true
    }

    /// A call object's head: announce the call, or give up on the region.
    fn head(&mut self, skip: usize, out: &mut Vec<ToolEvent>) -> bool {
        match head(&self.buf[skip..]) {
            Parse::Incomplete => false,
            Parse::Done((name, used)) if self.names.contains(&name) => {
                self.buf.drain(..skip + used);
                self.calls += 1;
                out.push(ToolEvent::Call(ToolCallDelta {
                    index: self.calls - 1,
                    id: Some(new_call_id()),
                    name: Some(name),
                    arguments: String::new(),
                }));
                self.state = State::Args(ValueScan::default());
                true
            }
            _ => {
                self.state = match self.format {
                    ToolFormat::Hermes if self.bare => State::Text,
                    ToolFormat::Hermes => State::Raw,
                    _ => State::Plain,
                };
                self.bare = false;
                true
            }
        }
    }

    /// After a call's arguments: its closing brace, then the format's way
    /// to the next call or the region's end.
    fn after(&mut self) -> bool {
        if self.bare {
            // The object's closing brace; then maybe another bare call.
            let s = self.buf.trim_start();
            if s.is_empty() {
                return false;
            }
            let rest = s.strip_prefix('}').unwrap_or(s).len();
            self.buf.drain(..self.buf.len() - rest);
            self.bare = false;
            self.state = State::Lead;
            return true;
        }
        if self.format == ToolFormat::Hermes {
            let Some(at) = self.buf.find(HERMES_CLOSE) else {
                return false;
            };
            self.buf.drain(..at + HERMES_CLOSE.len());
            self.state = State::Text;
            return true;
        }
        let s = self.buf.trim_start();
        let s = s.strip_prefix('}').map(str::trim_start).unwrap_or(s);
        let Some(first) = s.chars().next() else {
            return false;
        };
        let at = self.buf.len() - s.len();
        self.buf.drain(..at);
        self.state = match (self.format, first) {
            (ToolFormat::Mistral, ',') | (ToolFormat::Llama3, ';') => State::Head { skip: 1 },
            (ToolFormat::Llama3, '{') => State::Head { skip: 0 },
            (ToolFormat::Mistral, ']') => {
                self.buf.drain(..1);
                State::Plain
            }
            _ => State::Plain,
        };
        true
    }

    /// A whole Hermes block whose head did not stream: a call if it parses
    /// as one naming a known tool, else content as it was.
    fn raw_block(&mut self, block: &str, closed: bool, out: &mut Vec<ToolEvent>) {
        let body = &block[HERMES_OPEN.len().min(block.len())..];
        let body = if closed {
            &body[..body.len() - HERMES_CLOSE.len()]
        } else {
            body
        };
        match call_object(body.trim(), &self.names) {
            Some((name, arguments)) => {
                self.calls += 1;
                out.push(ToolEvent::Call(ToolCallDelta {
                    index: self.calls - 1,
                    id: Some(new_call_id()),
                    name: Some(name),
                    arguments,
                }));
            }
            None => content(block, out),
        }
    }
}

/// `{"name": ..., "arguments" | "parameters": ...}` naming a known tool:
/// the name and the arguments as JSON text.
fn call_object(body: &str, names: &[String]) -> Option<(String, String)> {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(body) else {
        return None;
    };
    let name = obj.get("name")?.as_str()?;
    let args = obj.get("arguments").or_else(|| obj.get("parameters"))?;
    names.iter().any(|n| n == name).then(|| {
        let text = match args {
            // Some models write the arguments as a string of JSON already.
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        (name.to_string(), text)
    })
}

fn content(text: &str, out: &mut Vec<ToolEvent>) {
    if text.is_empty() {
        return;
    }
    if let Some(ToolEvent::Content(last)) = out.last_mut() {
        last.push_str(text);
    } else {
        out.push(ToolEvent::Content(text.to_string()));
    }
}

/// Bytes at the end of `text` that are a proper start of `marker`.
fn partial_suffix(text: &str, marker: &str) -> usize {
    marker
        .char_indices()
        .skip(1)
        .map(|(end, _)| &marker[..end])
        .filter(|start| text.ends_with(start))
        .map(str::len)
        .max()
        .unwrap_or(0)
}
