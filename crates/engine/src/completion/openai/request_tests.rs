//! The request checker: what each field becomes, and every refusal named by
//! field, unsupported or invalid.

use serde_json::{json, Value};

use super::error::Problem;
use super::request::ChatRequest;
use super::MessagesError;
use crate::constrain::Grammar;

fn hi() -> Value {
    json!([{ "role": "user", "content": "Hi" }])
}

/// A request of one user message and `extra`'s fields.
fn parse(extra: Value) -> Result<ChatRequest, super::RequestError> {
    let mut body = json!({ "messages": hi() });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    ChatRequest::parse(&body)
}

/// The refusal of `extra`: (field, unsupported, message without the field).
fn refusal(extra: Value) -> (String, bool, String) {
    let e = parse(extra.clone()).expect_err(&format!("{extra} is refused"));
    (e.field.clone(), e.unsupported(), e.reason())
}

fn invalid(extra: Value, field: &str) -> String {
    let (f, unsupported, why) = refusal(extra.clone());
    assert_eq!(f, field, "{extra}");
    assert!(!unsupported, "{extra}: invalid, not unsupported");
    why
}

fn unsupported(extra: Value, field: &str) -> String {
    let (f, unsupported, why) = refusal(extra.clone());
    assert_eq!(f, field, "{extra}");
    assert!(unsupported, "{extra}: unsupported");
    why
}

#[test]
fn defaults_are_openai_s() {
    let r = parse(json!({})).unwrap();
    assert_eq!(r.messages, hi().as_array().unwrap().clone());
    let s = &r.sampling;
    assert_eq!(
        (s.temperature, s.top_p, s.top_k, s.min_p),
        (1.0, 1.0, 0, 0.0)
    );
    assert_eq!(
        (
            s.repetition_penalty,
            s.frequency_penalty,
            s.presence_penalty
        ),
        (1.0, 0.0, 0.0)
    );
    assert!(s.logit_bias.is_empty() && s.seed.is_none());
    assert_eq!((r.n, r.stream, r.include_usage), (1, false, false));
    assert_eq!(
        (r.max_tokens, r.logprobs, r.grammar.clone()),
        (None, None, None)
    );
    assert!(r.stop.is_empty() && r.tools.is_none() && r.chat_template_kwargs.is_none());
}

#[test]
fn every_field_is_honoured() {
    let r = parse(json!({
        "model": "any", "user": "u", "temperature": 0, "top_p": 0.5, "top_k": 5, "min_p": 0.1,
        "repetition_penalty": 1.1, "frequency_penalty": -2, "presence_penalty": 2,
        "logit_bias": { "5": -100, "7": 3.5 }, "seed": 9, "n": 3, "max_tokens": 7,
        "max_completion_tokens": 4, "stop": "END", "logprobs": true, "top_logprobs": 20,
        "response_format": { "type": "json_object" }, "chat_template_kwargs": { "enable_thinking": false },
        "tools": [{ "type": "function", "function": { "name": "f" } }], "tool_choice": "auto",
    }))
    .unwrap();
    let s = &r.sampling;
    assert_eq!(
        (s.temperature, s.top_p, s.top_k, s.min_p),
        (0.0, 0.5, 5, 0.1)
    );
    assert_eq!(s.logit_bias, vec![(5, -100.0), (7, 3.5)]);
    assert_eq!((s.seed, r.n, r.max_tokens), (Some(9), 3, Some(4)));
    assert_eq!(r.stop, vec!["END".to_string()]);
    assert_eq!(r.logprobs, Some(20));
    assert_eq!(r.grammar, Some(Grammar::JsonObject));
    assert_eq!(r.active_tools(), r.tools.as_ref());
    assert_eq!(r.template_kwargs().unwrap()["enable_thinking"], false);
    // logprobs alone: no alternatives.
    assert_eq!(
        parse(json!({ "logprobs": true })).unwrap().logprobs,
        Some(0)
    );
    // Streaming with usage.
    let r = parse(json!({ "stream": true, "stream_options": { "include_usage": true } })).unwrap();
    assert!(r.stream && r.include_usage);
    // A float that is whole is an integer, as JavaScript's numbers are.
    assert_eq!(parse(json!({ "n": 2.0 })).unwrap().n, 2);
}

#[test]
fn response_format_becomes_the_grammar() {
    let schema = json!({ "type": "object", "properties": { "a": { "type": "integer" } } });
    let r = parse(json!({ "response_format": { "type": "json_schema",
        "json_schema": { "name": "answer", "schema": schema, "strict": true } } }))
    .unwrap();
    assert_eq!(r.grammar, Some(Grammar::JsonSchema(schema)));
    let r = parse(
        json!({ "response_format": { "type": "json_schema", "json_schema": { "name": "a-b_1" } } }),
    )
    .unwrap();
    assert_eq!(r.grammar, Some(Grammar::JsonSchema(json!({}))));
    assert_eq!(
        parse(json!({ "response_format": { "type": "text" } }))
            .unwrap()
            .grammar,
        None
    );
}

#[test]
fn tool_choice_none_leaves_the_tools_out() {
    let r = parse(json!({
        "tools": [{ "type": "function", "function": { "name": "f" } }], "tool_choice": "none",
        "chat_template_kwargs": { "tools": [], "x": 1 },
    }))
    .unwrap();
    assert!(r.tools_off() && r.active_tools().is_none());
    let kwargs = r.template_kwargs().unwrap();
    assert!(!kwargs.contains_key("tools") && kwargs["x"] == 1);
}

#[test]
fn unknown_fields_and_a_body_signal_are_unsupported() {
    assert_eq!(
        unsupported(json!({ "frobnicate": 1 }), "frobnicate"),
        "not supported by wick"
    );
    // Null is a value: only a field left out is absent.
    unsupported(json!({ "frobnicate": null }), "frobnicate");
    let why = unsupported(json!({ "signal": {} }), "signal");
    assert!(why.contains("create(body, { signal })"), "{why}");
    unsupported(
        json!({ "stream": true, "stream_options": { "chunk": 1 } }),
        "stream_options.chunk",
    );
    assert!(ChatRequest::parse(&json!([1])).is_err());
}

#[test]
fn numbers_out_of_range_are_invalid() {
    assert_eq!(
        invalid(json!({ "temperature": 3 }), "temperature"),
        "must be a number in [0, 2], got 3"
    );
    invalid(json!({ "temperature": "1" }), "temperature");
    invalid(json!({ "top_p": 1.5 }), "top_p");
    invalid(json!({ "min_p": -0.1 }), "min_p");
    invalid(json!({ "repetition_penalty": 11 }), "repetition_penalty");
    invalid(json!({ "frequency_penalty": -2.5 }), "frequency_penalty");
    invalid(json!({ "presence_penalty": 2.5 }), "presence_penalty");
    assert_eq!(
        invalid(json!({ "top_k": -1 }), "top_k"),
        "must be an integer >= 0, got -1"
    );
    invalid(json!({ "seed": 1.5 }), "seed");
    invalid(json!({ "n": 0 }), "n");
    invalid(json!({ "max_tokens": 0 }), "max_tokens");
    invalid(
        json!({ "max_completion_tokens": "4" }),
        "max_completion_tokens",
    );
    invalid(json!({ "stream": "yes" }), "stream");
}

#[test]
fn bad_logit_bias_is_invalid() {
    let why = invalid(json!({ "logit_bias": [1] }), "logit_bias");
    assert_eq!(why, "must be an object of token id -> bias");
    let why = invalid(json!({ "logit_bias": { "x": 1 } }), "logit_bias");
    assert_eq!(why, "key \"x\" is not a token id");
    invalid(json!({ "logit_bias": { "-1": 1 } }), "logit_bias");
    let why = invalid(json!({ "logit_bias": { "5": 200 } }), "logit_bias");
    assert_eq!(why, "bias of 5 must be in [-100, 100]");
}

#[test]
fn bad_stop_strings_are_invalid() {
    let why = invalid(json!({ "stop": ["a", "b", "c", "d", "e"] }), "stop");
    assert_eq!(why, "at most 4 strings, got 5");
    let why = invalid(json!({ "stop": [""] }), "stop");
    assert_eq!(why, "an empty string never ends anything");
    invalid(json!({ "stop": ["a", 1] }), "stop");
    invalid(json!({ "stop": 5 }), "stop");
}

#[test]
fn logprobs_and_top_logprobs_are_checked_together() {
    let why = invalid(json!({ "top_logprobs": 2 }), "top_logprobs");
    assert_eq!(why, "requires logprobs: true");
    invalid(
        json!({ "logprobs": false, "top_logprobs": 2 }),
        "top_logprobs",
    );
    let why = invalid(
        json!({ "logprobs": true, "top_logprobs": 21 }),
        "top_logprobs",
    );
    assert_eq!(why, "must be an integer in [0, 20], got 21");
    invalid(
        json!({ "logprobs": true, "top_logprobs": -1 }),
        "top_logprobs",
    );
    let why = invalid(json!({ "logprobs": 1 }), "logprobs");
    assert_eq!(why, "must be a boolean, got 1");
}

#[test]
fn bad_response_formats_are_refused() {
    let why = unsupported(
        json!({ "response_format": { "type": "xml" } }),
        "response_format.type",
    );
    assert_eq!(
        why,
        "\"xml\" is not supported (\"text\", \"json_object\" or \"json_schema\")"
    );
    invalid(json!({ "response_format": "json" }), "response_format");
    invalid(
        json!({ "response_format": { "type": "json_schema" } }),
        "response_format.json_schema",
    );
    for name in [json!(null), json!(""), json!("a b"), json!("x".repeat(65))] {
        invalid(
            json!({ "response_format": { "type": "json_schema", "json_schema": { "name": name, "schema": {} } } }),
            "response_format.json_schema.name",
        );
    }
    invalid(
        json!({ "response_format": { "type": "json_schema", "json_schema": { "name": "a", "strict": "yes" } } }),
        "response_format.json_schema.strict",
    );
    invalid(
        json!({ "response_format": { "type": "json_schema", "json_schema": { "name": "a", "schema": [1] } } }),
        "response_format.json_schema.schema",
    );
}

#[test]
fn bad_tools_are_refused() {
    assert_eq!(invalid(json!({ "tools": {} }), "tools"), "must be an array");
    let why = unsupported(
        json!({ "tools": [{ "type": "code_interpreter" }] }),
        "tools[0].type",
    );
    assert_eq!(
        why,
        "\"code_interpreter\" tools are not supported (\"function\" only)"
    );
    invalid(
        json!({ "tools": [{ "type": "function", "function": { "name": "f" } }, { "type": "function", "function": {} }] }),
        "tools[1].function.name",
    );
    invalid(
        json!({ "chat_template_kwargs": [1] }),
        "chat_template_kwargs",
    );
    invalid(
        json!({ "chat_template_kwargs": "enable_thinking" }),
        "chat_template_kwargs",
    );
}

#[test]
fn stream_options_need_a_stream_and_n_no_stream() {
    let why = invalid(
        json!({ "stream_options": { "include_usage": true } }),
        "stream_options",
    );
    assert_eq!(why, "is only allowed with stream: true");
    invalid(
        json!({ "stream": true, "stream_options": 1 }),
        "stream_options",
    );
    invalid(
        json!({ "stream": true, "stream_options": { "include_usage": 1 } }),
        "stream_options.include_usage",
    );
    let why = unsupported(json!({ "n": 2, "stream": true }), "n");
    assert_eq!(why, "n > 1 is supported without stream only");
}

#[test]
fn messages_are_checked_first_and_named_by_path() {
    let e = ChatRequest::parse(&json!({ "frobnicate": 1 })).unwrap_err();
    assert_eq!(e.field, "messages");
    let e = ChatRequest::parse(&json!({ "messages": [
        { "role": "user", "content": [{ "type": "image_url", "image_url": {} }] }] }))
    .unwrap_err();
    assert_eq!(e.field, "messages[0].content[0].type");
    assert!(e.unsupported());
    assert_eq!(
        e.problem,
        Problem::Message(MessagesError::NotATextPart { index: 0, part: 0 })
    );
    let e = ChatRequest::parse(&json!({ "messages": [{ "role": "bot", "content": "x" }] }))
        .unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.unsupported()),
        ("messages[0].role", false)
    );
    let r = ChatRequest::parse(&json!({ "messages": [
        { "role": "user", "content": [{ "type": "text", "text": "Say " }, { "type": "text", "text": "hi." }] }] }))
    .unwrap();
    assert_eq!(r.messages[0]["content"], "Say hi.");
}
