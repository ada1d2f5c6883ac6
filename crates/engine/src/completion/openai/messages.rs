//! OpenAI's chat messages, checked before any model runs (the CLI's
//! `--messages` file, a request's `messages`): an array of `{role, content}`
//! objects whose content is a string or an array of `{"type": "text",
//! "text": ...}` parts. Parts are joined into one string, since chat
//! templates read `content` as text. An assistant message with `tool_calls`
//! may have a null content; a `tool` message carries its `tool_call_id`
//! through (`crate::tools::messages_for_template` readies both for the
//! template).

use serde_json::{Map, Value};

/// The roles a message may have.
pub const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MessagesError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("the messages must be a JSON array of {{role, content}} objects, not {0}")]
    NotAnArray(&'static str),
    #[error("the array of messages is empty")]
    Empty,
    #[error("message {index} is {found}, not an object with a role and content")]
    NotAnObject { index: usize, found: &'static str },
    #[error("message {index} has no \"role\" string")]
    MissingRole { index: usize },
    #[error(
        "message {index} has the unknown role {role:?} (known: system, user, assistant, tool)"
    )]
    UnknownRole { index: usize, role: String },
    #[error("message {index} has no \"content\"")]
    MissingContent { index: usize },
    #[error(
        "message {index}: \"content\" must be a string or an array of text parts, not {found}"
    )]
    BadContent { index: usize, found: &'static str },
    #[error(
        "message {index}: content part {part} is not a text part ({{\"type\": \"text\", \"text\": \"...\"}})"
    )]
    NotATextPart { index: usize, part: usize },
}

/// One message as the chat template takes it: `role`, `content` as a
/// string, and any other fields of the file's message (`name`,
/// `tool_calls`, ...) as they were.
pub fn message(role: &str, content: &str) -> Value {
    serde_json::json!({ "role": role, "content": content })
}

impl MessagesError {
    /// The request field at fault, as a path from `messages`.
    pub fn field(&self) -> String {
        match self {
            MessagesError::NotJson(_) | MessagesError::NotAnArray(_) | MessagesError::Empty => {
                "messages".into()
            }
            MessagesError::NotAnObject { index, .. } => format!("messages[{index}]"),
            MessagesError::MissingRole { index } | MessagesError::UnknownRole { index, .. } => {
                format!("messages[{index}].role")
            }
            MessagesError::MissingContent { index } | MessagesError::BadContent { index, .. } => {
                format!("messages[{index}].content")
            }
            MessagesError::NotATextPart { index, part } => {
                format!("messages[{index}].content[{part}].type")
            }
        }
    }
}

/// Parses and checks a JSON array of messages.
pub fn parse(json: &str) -> Result<Vec<Value>, MessagesError> {
    let value: Value =
        serde_json::from_str(json).map_err(|e| MessagesError::NotJson(e.to_string()))?;
    check(value)
}

/// Checks an array of messages, readying each for the template.
pub fn check(value: Value) -> Result<Vec<Value>, MessagesError> {
    let Value::Array(items) = value else {
        return Err(MessagesError::NotAnArray(kind(&value)));
    };
    if items.is_empty() {
        return Err(MessagesError::Empty);
    }
    items
        .into_iter()
        .enumerate()
        .map(|(index, m)| checked(index, m))
        .collect()
}

fn checked(index: usize, m: Value) -> Result<Value, MessagesError> {
    let Value::Object(mut fields) = m else {
        return Err(MessagesError::NotAnObject {
            index,
            found: kind(&m),
        });
    };
    let mut role = match fields.get("role") {
        Some(Value::String(r)) => r.clone(),
        _ => return Err(MessagesError::MissingRole { index }),
    };
    if role == "developer" {
        // OpenAI's newer name for the system message; chat templates know
        // only `system` (some drop a role they do not know, silently).
        role = "system".into();
        fields.insert("role".into(), Value::String(role.clone()));
    }
    if !ROLES.contains(&role.as_str()) {
        return Err(MessagesError::UnknownRole { index, role });
    }
    // OpenAI's assistant message that only calls tools has a null content.
    let calls = role == "assistant" && fields.get("tool_calls").is_some_and(Value::is_array);
    let content = match fields.remove("content") {
        None | Some(Value::Null) if calls => {
            fields.insert("content".into(), Value::Null);
            return Ok(Value::Object(fields));
        }
        None | Some(Value::Null) => return Err(MessagesError::MissingContent { index }),
        Some(Value::String(s)) => s,
        Some(Value::Array(parts)) => joined_text(index, &parts)?,
        Some(other) => {
            return Err(MessagesError::BadContent {
                index,
                found: kind(&other),
            })
        }
    };
    fields.insert("content".into(), Value::String(content));
    Ok(Value::Object(fields))
}

fn joined_text(index: usize, parts: &[Value]) -> Result<String, MessagesError> {
    let mut text = String::new();
    for (part, p) in parts.iter().enumerate() {
        let p = p.as_object().filter(|p| is_text_part(p));
        match p.and_then(|p| p.get("text")).and_then(Value::as_str) {
            Some(t) => text.push_str(t),
            None => return Err(MessagesError::NotATextPart { index, part }),
        }
    }
    Ok(text)
}

fn is_text_part(part: &Map<String, Value>) -> bool {
    part.get("type").and_then(Value::as_str) == Some("text")
}

/// How a JSON value is named in an error.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_parts_are_joined_and_other_fields_kept() {
        let m = parse(
            r#"[{"role": "user", "name": "ann",
                 "content": [{"type": "text", "text": "Hi, "}, {"type": "text", "text": "there"}]}]"#,
        )
        .unwrap();
        assert_eq!(m[0]["content"], "Hi, there");
        assert_eq!(m[0]["name"], "ann");
    }

    #[test]
    fn tool_calls_may_come_without_content() {
        let m = parse(
            r#"[{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                 "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "42"}]"#,
        )
        .unwrap();
        assert_eq!(m[0]["content"], Value::Null);
        assert_eq!(m[0]["tool_calls"][0]["id"], "call_1");
        assert_eq!(m[1]["tool_call_id"], "call_1");
        // Without tool_calls, an assistant's content is still required.
        assert_eq!(
            parse(r#"[{"role": "assistant", "content": null}]"#).unwrap_err(),
            MessagesError::MissingContent { index: 0 }
        );
    }

    #[test]
    fn each_defect_is_named() {
        let err = |json: &str| parse(json).unwrap_err();
        assert!(matches!(err("{oops"), MessagesError::NotJson(_)));
        assert_eq!(
            err(r#"{"role": "user"}"#),
            MessagesError::NotAnArray("an object")
        );
        assert_eq!(err("[]"), MessagesError::Empty);
        assert_eq!(
            err(r#"[{"role": "user", "content": "a"}, 3]"#),
            MessagesError::NotAnObject {
                index: 1,
                found: "a number"
            }
        );
        assert_eq!(
            err(r#"[{"content": "a"}]"#),
            MessagesError::MissingRole { index: 0 }
        );
        assert_eq!(
            err(r#"[{"role": "bot", "content": "a"}]"#),
            MessagesError::UnknownRole {
                index: 0,
                role: "bot".into()
            }
        );
        assert_eq!(
            err(r#"[{"role": "user"}]"#),
            MessagesError::MissingContent { index: 0 }
        );
        assert_eq!(
            parse(r#"[{"role": "developer", "content": "Be brief."}]"#).unwrap()[0]["role"],
            "system"
        );
        assert_eq!(
            err(r#"[{"role": "user", "content": 5}]"#),
            MessagesError::BadContent {
                index: 0,
                found: "a number"
            }
        );
        assert_eq!(
            err(r#"[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]"#),
            MessagesError::NotATextPart { index: 0, part: 0 }
        );
    }

    #[test]
    fn each_defect_names_its_field() {
        let field = |json: &str| parse(json).unwrap_err().field();
        assert_eq!(field("[]"), "messages");
        assert_eq!(
            field(r#"[{"role": "user", "content": "a"}, 3]"#),
            "messages[1]"
        );
        assert_eq!(
            field(r#"[{"role": "bot", "content": "a"}]"#),
            "messages[0].role"
        );
        assert_eq!(
            field(r#"[{"role": "user", "content": 5}]"#),
            "messages[0].content"
        );
        assert_eq!(
            field(r#"[{"role": "user", "content": ["a", {"type": "image_url"}]}]"#),
            "messages[0].content[0].type"
        );
    }
}
