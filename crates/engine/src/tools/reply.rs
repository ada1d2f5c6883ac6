//! A whole reply (content and calls) gathered from its streamed events, as
//! a non-streaming `chat.completion` message holds it.

use super::{ToolCall, ToolEvent};

/// A reply's content and calls, gathered from its events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolReply {
    /// The content; `None` when the reply is calls and whitespace only.
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
}

impl ToolReply {
    pub fn apply(&mut self, event: &ToolEvent) {
        match event {
            ToolEvent::Content(text) => self.content.get_or_insert_with(String::new).push_str(text),
            ToolEvent::Call(d) => {
                if d.index == self.tool_calls.len() {
                    self.tool_calls.push(ToolCall {
                        id: d.id.clone().unwrap_or_default(),
                        name: d.name.clone().unwrap_or_default(),
                        arguments: String::new(),
                    });
                }
                if let Some(call) = self.tool_calls.get_mut(d.index) {
                    call.arguments.push_str(&d.arguments);
                }
            }
        }
    }

    /// Settles `content` once the reply is over: whitespace around calls is
    /// no content; a reply without calls keeps its text as it is.
    pub fn finish(&mut self) {
        if !self.tool_calls.is_empty()
            && self.content.as_deref().is_some_and(|c| c.trim().is_empty())
        {
            self.content = None;
        }
        if self.tool_calls.is_empty() && self.content.is_none() {
            self.content = Some(String::new());
        }
    }
}
