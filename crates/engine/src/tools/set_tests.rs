//! Tools and `tool_choice` as requests give them: checked, with each defect
//! named.

use serde_json::json;

use super::*;

const QWEN: &str = "{% if tools %}<tool_call>{% endif %}";

fn weather() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "now"}}])
}

#[test]
fn tool_choices_parse() {
    assert_eq!(ToolChoice::from_json(&json!("auto")), Ok(ToolChoice::Auto));
    assert_eq!(ToolChoice::from_json(&json!("none")), Ok(ToolChoice::None));
    assert_eq!(
        ToolChoice::from_json(&json!("required")),
        Ok(ToolChoice::Required)
    );
    assert_eq!(
        ToolChoice::from_json(&json!({"type": "function", "function": {"name": "f"}})),
        Ok(ToolChoice::Function("f".into()))
    );
    assert!(matches!(
        ToolChoice::from_json(&json!("always")),
        Err(ToolError::BadChoice(_))
    ));
}

#[test]
fn a_tool_set_knows_its_tools_and_format() {
    let set = ToolSet::new(&weather(), ToolChoice::Required, QWEN)
        .unwrap()
        .unwrap();
    assert_eq!(set.format(), ToolFormat::Hermes);
    assert!(set.constrained());
    let names: Vec<_> = set.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["get_weather", "now"]);
    // A tool without parameters takes an empty object.
    assert_eq!(
        set.tools()[1].parameters,
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(set.template_tools(), &weather());
}

#[test]
fn none_and_no_tools_mean_no_tool_set() {
    assert!(ToolSet::new(&weather(), ToolChoice::None, "plain")
        .unwrap()
        .is_none());
    assert!(ToolSet::new(&json!([]), ToolChoice::Auto, QWEN)
        .unwrap()
        .is_none());
    assert!(ToolSet::new(&Value::Null, ToolChoice::Auto, QWEN)
        .unwrap()
        .is_none());
}

#[test]
fn defects_are_named() {
    let err = |tools: Value, choice: ToolChoice, tmpl: &str| {
        ToolSet::new(&tools, choice, tmpl).unwrap_err()
    };
    assert_eq!(
        err(json!({}), ToolChoice::Auto, QWEN),
        ToolError::NotAnArray
    );
    assert!(matches!(
        err(json!([{"type": "function"}]), ToolChoice::Auto, QWEN),
        ToolError::BadTool { index: 0, .. }
    ));
    assert!(matches!(
        err(
            json!([{"type": "retrieval", "function": {"name": "f"}}]),
            ToolChoice::Auto,
            QWEN
        ),
        ToolError::BadTool { index: 0, .. }
    ));
    let twice = json!([{"type": "function", "function": {"name": "f"}},
                       {"type": "function", "function": {"name": "f"}}]);
    assert_eq!(
        err(twice, ToolChoice::Auto, QWEN),
        ToolError::DuplicateName("f".into())
    );
    assert_eq!(
        err(weather(), ToolChoice::Function("fly".into()), QWEN),
        ToolError::UnknownFunction("fly".into())
    );
    assert_eq!(
        err(json!([]), ToolChoice::Required, QWEN),
        ToolError::NoTools("required")
    );
    // SmolLM2's template knows no tools: no guessing at a format.
    assert_eq!(
        err(weather(), ToolChoice::Auto, "{{ messages }}"),
        ToolError::NoFormat
    );
}

#[test]
fn messages_get_argument_objects_and_text_content() {
    let m = messages_for_template(&[json!({"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]})]);
    assert_eq!(m[0]["content"], "");
    assert_eq!(
        m[0]["tool_calls"][0]["function"]["arguments"],
        json!({"city": "Paris"})
    );
    // Arguments that are not JSON stay the text they were.
    let m = messages_for_template(&[json!({"role": "assistant", "content": "x",
        "tool_calls": [{"function": {"name": "f", "arguments": "oops"}}]})]);
    assert_eq!(m[0]["tool_calls"][0]["function"]["arguments"], "oops");
}
