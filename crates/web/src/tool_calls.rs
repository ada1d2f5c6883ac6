//! Tool calls in a chat generation: the request's `tools` / `tool_choice`
//! checked into the engine's `ToolSet`, and the generated content split into
//! content and OpenAI-shaped tool-call deltas as it streams (the engine's
//! `ToolCallStream`; everything about formats and parsing lives there).

use serde_json::Value;
use wick::completion::openai::CallDelta;
use wick::tools::{ToolCallStream, ToolChoice, ToolError, ToolEvent, ToolSet};

/// The tools of a request, or `None` when there is nothing to do (no tools,
/// or `tool_choice` `"none"`). Errors name the field they come from.
pub(crate) fn tool_set(
    tools: Option<&Value>,
    choice: Option<&Value>,
    template_source: Option<&str>,
) -> Result<Option<ToolSet>, (&'static str, String)> {
    let choice = match choice {
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(v) => ToolChoice::from_json(v)
            .map_err(|e| ("tool_choice", without_field("tool_choice", e.to_string())))?,
    };
    let tools = tools.unwrap_or(&Value::Null);
    let no_tools = tools.is_null() || tools.as_array().is_some_and(|a| a.is_empty());
    // Checks that need no template first: without tools there is no format
    // to look for, so a model without a template still gets "needs a tool".
    let source = match template_source {
        Some(s) => s,
        None if no_tools || choice == ToolChoice::None => "",
        None => {
            return Err((
                "tools",
                "the model has no chat template, so it has no tool-call format".into(),
            ))
        }
    };
    ToolSet::new(tools, choice, source).map_err(|e| {
        let field = field_of(&e);
        (field, without_field(field, e.to_string()))
    })
}

/// The engine's message less a leading field name: the JS error already
/// opens with it (`tool_choice: ...`).
fn without_field(field: &str, message: String) -> String {
    match message.strip_prefix(field) {
        Some(rest) if rest.starts_with(' ') => rest.trim_start().to_string(),
        _ => message,
    }
}

/// The request field a tool error is about.
fn field_of(e: &ToolError) -> &'static str {
    match e {
        ToolError::BadChoice(_) | ToolError::UnknownFunction(_) | ToolError::NoTools(_) => {
            "tool_choice"
        }
        _ => "tools",
    }
}

/// Content and call deltas of one generation step.
#[derive(Default)]
pub(crate) struct Parted {
    pub content: String,
    pub calls: Vec<CallDelta>,
}

/// A reply's text split into content and calls (everything is content when
/// the request has no tools). The engine's stream holds back whitespace
/// around calls, so a reply of calls streams no content.
pub(crate) struct ToolSplit {
    stream: Option<ToolCallStream>,
    /// Whether any call was made: `finish_reason` is then `"tool_calls"`.
    pub called: bool,
}

impl ToolSplit {
    pub fn new(tools: Option<&ToolSet>) -> ToolSplit {
        ToolSplit {
            stream: tools.map(ToolSet::stream),
            called: false,
        }
    }

    /// The content and calls `text` completes; `last` releases what the
    /// parser held back (the reply is over).
    pub fn push(&mut self, text: &str, last: bool) -> Parted {
        let Some(stream) = &mut self.stream else {
            return Parted {
                content: text.to_string(),
                calls: Vec::new(),
            };
        };
        let mut events = stream.push(text);
        if last {
            events.extend(stream.finish());
        }
        let mut out = Parted::default();
        for e in events {
            match e {
                ToolEvent::Content(t) => out.content.push_str(&t),
                ToolEvent::Call(d) => {
                    self.called = true;
                    out.calls.push(d.into());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::without_field;

    #[test]
    fn a_leading_field_name_is_dropped_once() {
        let drop = |field: &str, m: &str| without_field(field, m.to_string());
        assert_eq!(drop("tool_choice", "tool_choice must be x"), "must be x");
        assert_eq!(drop("tools", "tool 0: no name"), "tool 0: no name");
        assert_eq!(drop("tools", "toolset"), "toolset");
        assert_eq!(
            drop("tools", "two tools are named \"f\""),
            "two tools are named \"f\""
        );
    }
}
