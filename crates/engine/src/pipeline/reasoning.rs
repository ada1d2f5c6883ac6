//! Reasoning split: a reply that opens with a `<think>` … `</think>` block
//! (Qwen3, DeepSeek-R1 distills) is split into the reasoning (OpenAI-style
//! servers' `reasoning_content`) and the content after the block.
//!
//! When it applies (the rule [`ReasoningSplit::for_chat`] implements):
//! - only for chat replies whose template source mentions `<think>`: a model
//!   whose template never writes the tag has no reasoning block, and its
//!   text is left untouched even if it says `<think>`;
//! - the reply starts inside the block when the rendered prompt, trailing
//!   whitespace aside, ends with `<think>` (the DeepSeek-R1 distills'
//!   generation prompt, `<think>\n`); otherwise it starts outside, and a
//!   block is recognized only at the very start of the reply (leading
//!   whitespace aside), where Qwen3 writes it. A `<think>` later in the
//!   content is content.
//!
//! The tags are matched as text across token (and chunk) boundaries: text
//! that may still be the start of a tag is held back until it cannot, as
//! stop strings are (see `stop_strings`). Whitespace between a tag and the
//! text on either side is dropped, as the templates write `<think>\n` and
//! `\n</think>\n\n`. A reply cut off inside the block is all reasoning.

pub const OPEN: &str = "<think>";
pub const CLOSE: &str = "</think>";

/// Text released by one `push` or `finish`: either part may be empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub reasoning: String,
    pub content: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace seen yet: the reply may still open a block.
    Start,
    /// Inside the block; `leading` while only whitespace has come.
    Reasoning { leading: bool },
    /// After the block (or none): `leading` drops the whitespace after `</think>`.
    Content { leading: bool },
}

/// Splits streamed reply text into reasoning and content.
#[derive(Clone, Debug)]
pub struct ReasoningSplit {
    state: State,
    /// Text received but not yet released: a possible tag's start, and
    /// whitespace that may turn out to precede a tag.
    pending: String,
}

impl ReasoningSplit {
    /// The split for a chat reply, or `None` where it does not apply (the
    /// template never mentions `<think>`). `prompt` is the rendered prompt.
    pub fn for_chat(template_source: &str, prompt: &str) -> Option<ReasoningSplit> {
        if !template_source.contains(OPEN) {
            return None;
        }
        Some(ReasoningSplit::new(prompt.trim_end().ends_with(OPEN)))
    }

    /// A split starting inside the block (`inside`) or before it.
    pub fn new(inside: bool) -> ReasoningSplit {
        let state = if inside {
            State::Reasoning { leading: true }
        } else {
            State::Start
        };
        ReasoningSplit {
            state,
            pending: String::new(),
        }
    }

    /// Whether the text so far ended inside the block.
    pub fn in_reasoning(&self) -> bool {
        matches!(self.state, State::Reasoning { .. })
    }

    /// Takes the next piece of text; returns what may be released now.
    pub fn push(&mut self, text: &str) -> Split {
        let mut out = Split::default();
        self.pending.push_str(text);
        // Each pass either releases text and changes state, or holds the rest.
        loop {
            match self.state {
                State::Start => {
                    let body = self.pending.trim_start();
                    if let Some(rest) = body.strip_prefix(OPEN) {
                        self.pending = rest.to_string();
                        self.state = State::Reasoning { leading: true };
                    } else if OPEN.starts_with(body) {
                        return out; // all whitespace, or a start of `<think>`
                    } else {
                        self.state = State::Content { leading: false };
                    }
                }
                State::Reasoning { leading } => {
                    if leading {
                        let ws = self.pending.len() - self.pending.trim_start().len();
                        self.pending.drain(..ws);
                    }
                    if let Some(at) = self.pending.find(CLOSE) {
                        out.reasoning.push_str(self.pending[..at].trim_end());
                        self.pending.drain(..at + CLOSE.len());
                        self.state = State::Content { leading: true };
                        continue;
                    }
                    // Hold a possible start of `</think>` and the whitespace before it.
                    let tag = partial_len(&self.pending, CLOSE);
                    let keep = self.pending[..self.pending.len() - tag].trim_end().len();
                    if keep > 0 {
                        self.state = State::Reasoning { leading: false };
                    }
                    out.reasoning.extend(self.pending.drain(..keep));
                    return out;
                }
                State::Content { leading } => {
                    let text = if leading {
                        self.pending.trim_start()
                    } else {
                        &self.pending
                    };
                    if !text.is_empty() {
                        self.state = State::Content { leading: false };
                    }
                    out.content.push_str(text);
                    self.pending.clear();
                    return out;
                }
            }
        }
    }

    /// Ends the stream: releases what was held. A cut-off tag inside the
    /// block stays reasoning; before any block, held text is content.
    pub fn finish(&mut self) -> Split {
        let pending = std::mem::take(&mut self.pending);
        match self.state {
            State::Start => Split {
                reasoning: String::new(),
                content: pending,
            },
            // Held whitespace then a cut-off tag: the tag stays, the
            // whitespace before it too (unless nothing came before it).
            State::Reasoning { leading } => Split {
                reasoning: if leading {
                    pending.trim()
                } else {
                    pending.trim_end()
                }
                .to_string(),
                content: String::new(),
            },
            State::Content { .. } => Split::default(),
        }
    }
}

/// Bytes at the end of `text` that are a proper start of `tag` (the longest).
fn partial_len(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "reasoning_tests.rs"]
mod tests;
