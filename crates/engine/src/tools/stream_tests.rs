//! The tool-call parser on sample replies, streamed split at every point
//! (and char by char): the gathered reply never depends on the splits.

use super::{ToolCallStream, ToolEvent, ToolFormat, ToolReply};

fn names() -> Vec<String> {
    vec!["get_weather".into(), "add".into()]
}

/// Streams `pieces`, gathers the reply; also checks the delta shape (the
/// first delta of a call has id and name, later ones neither).
fn run(format: ToolFormat, pieces: &[&str]) -> ToolReply {
    let mut s = ToolCallStream::new(format, names());
    let mut reply = ToolReply::default();
    let mut events: Vec<ToolEvent> = Vec::new();
    for p in pieces {
        events.extend(s.push(p));
    }
    events.extend(s.finish());
    let mut seen = 0;
    for e in &events {
        if let ToolEvent::Call(d) = e {
            assert_eq!(d.id.is_some(), d.index == seen, "{events:?}");
            assert_eq!(d.name.is_some(), d.index == seen, "{events:?}");
            if d.index == seen {
                assert!(d.id.as_ref().unwrap().starts_with("call_"));
                seen += 1;
            }
        }
        reply.apply(e);
    }
    reply.finish();
    reply
}

/// The reply as (content, [(name, arguments)]), split at every byte
/// boundary into two pieces and into characters: all must agree.
fn parse(format: ToolFormat, text: &str) -> (Option<String>, Vec<(String, String)>) {
    let summary = |r: ToolReply| {
        let calls = r
            .tool_calls
            .into_iter()
            .map(|c| (c.name, c.arguments))
            .collect();
        (r.content, calls)
    };
    let whole = summary(run(format, &[text]));
    for (at, _) in text.char_indices().skip(1) {
        let split = summary(run(format, &[&text[..at], &text[at..]]));
        assert_eq!(
            split,
            whole,
            "split at {at}: {:?} | {:?}",
            &text[..at],
            &text[at..]
        );
    }
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let chars: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(summary(run(format, &chars)), whole, "char by char");
    whole
}

/// A call as generated (arguments are never re-serialized).
fn call(name: &str, args: &str) -> (String, String) {
    (name.to_string(), args.to_string())
}

#[test]
fn hermes_calls_and_the_text_around_them() {
    let text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": [2, {\"c\": \"}\"}]}}\n</tool_call>";
    let (content, calls) = parse(ToolFormat::Hermes, text);
    assert_eq!(content.as_deref(), Some("Let me check.\n\n"));
    assert_eq!(
        calls,
        [
            (
                "get_weather".into(),
                r#"{"city": "Paris", "unit": "c"}"#.into()
            ),
            ("add".into(), r#"{"a": 1, "b": [2, {"c": "}"}]}"#.into()),
        ]
    );
}

#[test]
fn hermes_only_calls_have_no_content() {
    let text = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2}}\n</tool_call>";
    assert_eq!(
        parse(ToolFormat::Hermes, text),
        (None, vec![call("add", r#"{"a": 2}"#)])
    );
}

#[test]
fn plain_text_and_near_misses_are_content() {
    for text in [
        "The capital of France is Paris.",
        "a <tool_cal and < and <tool",
        "x < y",
        "",
    ] {
        assert_eq!(
            parse(ToolFormat::Hermes, text),
            (Some(text.into()), vec![]),
            "{text:?}"
        );
    }
}

#[test]
fn malformed_or_unknown_hermes_calls_stay_content() {
    // Unknown tool: the whole block, markers included, is content.
    let unknown = "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>";
    assert_eq!(
        parse(ToolFormat::Hermes, unknown),
        (Some(unknown.into()), vec![])
    );
    // Not JSON.
    let bad = "<tool_call>\nget_weather(city=Paris)\n</tool_call> ok";
    assert_eq!(parse(ToolFormat::Hermes, bad), (Some(bad.into()), vec![]));
    // Never closed, head unreadable: content at the end.
    let open = "<tool_call>\n{\"nom\": ";
    assert_eq!(parse(ToolFormat::Hermes, open), (Some(open.into()), vec![]));
}

#[test]
fn hermes_keys_in_another_order_parse_whole() {
    let text = "<tool_call>\n{\"arguments\": {\"a\": 1}, \"name\": \"add\"}\n</tool_call>";
    assert_eq!(
        parse(ToolFormat::Hermes, text),
        // Parsed whole, the arguments are re-serialized (compact).
        (None, vec![call("add", r#"{"a":1}"#)])
    );
}

#[test]
fn arguments_are_handed_on_as_generated() {
    // Bad JSON inside a known call's arguments: still a call (OpenAI's rule:
    // the caller validates arguments).
    let text = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": tru}}\n</tool_call>";
    let (_, calls) = parse(ToolFormat::Hermes, text);
    assert_eq!(calls, [("add".to_string(), "{\"a\": tru}".to_string())]);
    // Cut by max_tokens inside the arguments: the call keeps what it has.
    let cut = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    let (content, calls) = parse(ToolFormat::Hermes, cut);
    assert_eq!(content, None);
    assert_eq!(calls, [("get_weather".into(), "{\"city\": \"Par".into())]);
}

#[test]
fn llama3_calls_open_the_reply() {
    let text = " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
    assert_eq!(
        parse(ToolFormat::Llama3, text),
        (None, vec![call("get_weather", r#"{"city": "Oslo"}"#)])
    );
    let two = "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1}}; {\"name\": \"add\", \"parameters\": {\"a\": 2}}";
    assert_eq!(
        parse(ToolFormat::Llama3, two).1,
        [call("add", r#"{"a": 1}"#), call("add", r#"{"a": 2}"#)]
    );
    // JSON later in the reply is content: Llama 3 calls are whole replies.
    let later = "Here: {\"name\": \"add\", \"parameters\": {}}";
    assert_eq!(
        parse(ToolFormat::Llama3, later),
        (Some(later.into()), vec![])
    );
    let other = "{\"answer\": 42}";
    assert_eq!(
        parse(ToolFormat::Llama3, other),
        (Some(other.into()), vec![])
    );
}

#[test]
fn mistral_call_lists() {
    let text = "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]";
    assert_eq!(
        parse(ToolFormat::Mistral, text),
        (
            None,
            vec![
                call("add", r#"{"a": 1}"#),
                call("get_weather", r#"{"city": "Rome"}"#)
            ]
        )
    );
    // The control token is usually not in decoded text.
    let bare = " [{\"name\": \"add\", \"arguments\": {}}]";
    assert_eq!(parse(ToolFormat::Mistral, bare).1, [call("add", r#"{}"#)]);
    let prose = "[1] is a citation";
    assert_eq!(
        parse(ToolFormat::Mistral, prose),
        (Some(prose.into()), vec![])
    );
}

#[test]
fn ids_differ() {
    let text = "<tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>";
    let r = run(ToolFormat::Hermes, &[text]);
    assert_eq!(r.tool_calls.len(), 2);
    assert_ne!(r.tool_calls[0].id, r.tool_calls[1].id);
}

#[test]
fn hermes_bare_calls_open_the_reply() {
    // Qwen2.5-Coder 0.5B's own reply to a weather question, tags left out.
    let text =
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n{\"temperature\": 18}";
    assert_eq!(
        parse(ToolFormat::Hermes, text),
        (
            Some("\n{\"temperature\": 18}".into()),
            vec![call("get_weather", r#"{"city": "Paris"}"#)]
        )
    );
    // Two bare calls; JSON that is not a call is content.
    let two =
        "{\"name\": \"add\", \"arguments\": {}}\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}";
    assert_eq!(
        parse(ToolFormat::Hermes, two).1,
        [call("add", "{}"), call("add", r#"{"a": 1}"#)]
    );
    let json = "{\"answer\": 42} and <tool_call>";
    assert_eq!(parse(ToolFormat::Hermes, json), (Some(json.into()), vec![]));
    // Later in the reply, only tagged calls count.
    let later = "Try {\"name\": \"add\", \"arguments\": {}}";
    assert_eq!(
        parse(ToolFormat::Hermes, later),
        (Some(later.into()), vec![])
    );
}

/// The events of `text` streamed char by char: what an interactive reader
/// of the stream (`wick chat`, the browser's chunks) sees.
fn events_char_by_char(text: &str) -> Vec<ToolEvent> {
    let mut s = ToolCallStream::new(ToolFormat::Hermes, names());
    let mut events = Vec::new();
    for c in text.chars() {
        events.extend(s.push(&c.to_string()));
    }
    events.extend(s.finish());
    events
}

fn contents(events: &[ToolEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            ToolEvent::Content(t) => Some(t.clone()),
            ToolEvent::Call(_) => None,
        })
        .collect()
}

#[test]
fn whitespace_around_calls_is_not_streamed_as_content() {
    let call = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2}}\n</tool_call>";
    // Calls only, with newlines before, between and after them.
    let events = events_char_by_char(&format!("\n\n{call}\n{call}\n"));
    assert_eq!(contents(&events), Vec::<String>::new(), "{events:?}");
    let calls = events.iter().filter(|e| matches!(e, ToolEvent::Call(_)));
    assert!(calls.count() >= 2, "{events:?}");
    // Real content after a call: the held whitespace leads it, once.
    let events = events_char_by_char(&format!("\n{call}\nDone."));
    let first_content = events
        .iter()
        .position(|e| matches!(e, ToolEvent::Content(_)))
        .unwrap();
    assert!(
        matches!(events[0], ToolEvent::Call(_)) && first_content > 0,
        "{events:?}"
    );
    assert_eq!(contents(&events).concat(), "\n\nDone.");
    // No calls: whitespace-only text is the reply's content, whole.
    assert_eq!(contents(&events_char_by_char(" \n\t")).concat(), " \n\t");
    // Text that starts with whitespace streams once it has a visible char,
    // and then as it comes.
    let events = events_char_by_char("\n\nHi there");
    assert_eq!(contents(&events).concat(), "\n\nHi there");
    assert!(contents(&events).len() > 2, "{events:?}");
}
