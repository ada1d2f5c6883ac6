//! Replies assembled from steps: a whole choice, a stream's chunks (held
//! for logprobs), and the objects' JSON as OpenAI's clients read it.

use serde_json::{json, Value};

use super::response::{finish_reason, ChatCompletion, ReplyHeader, Usage};
use super::steps::{CallDelta, ChoiceBuilder, ChunkStream, Step};

fn step(text: &str, token: Option<u32>) -> Step {
    Step {
        text: text.into(),
        token_id: token,
        ..Step::default()
    }
}

fn call(index: usize, id: Option<&str>, name: Option<&str>, args: &str) -> CallDelta {
    serde_json::from_value(json!({
        "index": index, "id": id, "type": id.map(|_| "function"),
        "function": { "name": name, "arguments": args },
    }))
    .unwrap()
}

fn to_json(v: &impl serde::Serialize) -> Value {
    serde_json::to_value(v).unwrap()
}

#[test]
fn finish_reasons_are_openai_s() {
    assert_eq!(finish_reason("context_full"), "length");
    for r in ["stop", "length", "tool_calls", "cancelled"] {
        assert_eq!(finish_reason(r), r);
    }
}

#[test]
fn a_header_is_fresh_and_names_the_engine() {
    let (a, b) = (ReplyHeader::new("m"), ReplyHeader::new("m"));
    assert!(
        a.id.starts_with("chatcmpl-") && a.id != b.id,
        "{} {}",
        a.id,
        b.id
    );
    assert!(a.created > 1_600_000_000);
    assert!(a.system_fingerprint.starts_with("wick-"));
}

#[test]
fn a_whole_reply_gathers_content_reasoning_and_calls() {
    let mut text = ChoiceBuilder::default();
    text.push(Step {
        reasoning: Some("hmm".into()),
        ..step("", Some(1))
    });
    text.push(step("Hel", Some(2)));
    text.push(step("lo", None));
    let entries = vec![json!({ "token": "Hel" }), json!({ "token": "lo" })];
    let text = text.finish(0, "context_full", Some(entries.clone()));
    let usage = Usage::new(5, 3, 2);
    let whole = to_json(&ChatCompletion::new(
        ReplyHeader::new("m"),
        vec![text],
        usage,
    ));
    assert_eq!(whole["object"], "chat.completion");
    let choice = &whole["choices"][0];
    assert_eq!(
        choice["message"],
        json!({ "role": "assistant", "content": "Hello", "refusal": null, "reasoning_content": "hmm" })
    );
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(
        choice["logprobs"],
        json!({ "content": entries, "refusal": null })
    );
    assert_eq!(
        whole["usage"],
        json!({ "prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                "prompt_tokens_details": { "cached_tokens": 2 } })
    );

    let mut calls = ChoiceBuilder::default();
    calls.push(Step {
        tool_calls: vec![call(0, Some("call_1"), Some("f"), "{\"a\":")],
        ..step("", Some(1))
    });
    calls.push(Step {
        tool_calls: vec![call(0, None, None, "1}")],
        ..step("", Some(2))
    });
    let m = to_json(&calls.finish(1, "tool_calls", None));
    assert_eq!(m["index"], 1);
    assert_eq!(m["logprobs"], Value::Null);
    assert_eq!(
        m["message"]["content"],
        Value::Null,
        "a reply of calls only"
    );
    assert_eq!(
        m["message"]["tool_calls"],
        json!([{ "id": "call_1", "type": "function", "function": { "name": "f", "arguments": "{\"a\":1}" } }])
    );
}

#[test]
fn a_stream_opens_then_streams_each_step() {
    let mut s = ChunkStream::new(ReplyHeader::new("m"), false);
    let open = to_json(&s.opening());
    assert_eq!(open["object"], "chat.completion.chunk");
    assert_eq!(
        open["choices"][0],
        json!({ "index": 0, "delta": { "role": "assistant", "content": "", "refusal": null },
                "logprobs": null, "finish_reason": null })
    );
    assert!(
        s.push(&step("", Some(1))).is_none(),
        "a step that released nothing"
    );
    let c = to_json(&s.push(&step("Hi", Some(2))).unwrap());
    assert_eq!(c["choices"][0]["delta"], json!({ "content": "Hi" }));
    assert_eq!(c["id"], open["id"]);
    let call = Step {
        tool_calls: vec![call(0, Some("call_1"), Some("f"), "{}")],
        ..step("", Some(3))
    };
    let c = to_json(&s.push(&call).unwrap());
    assert_eq!(
        c["choices"][0]["delta"]["tool_calls"][0]["type"],
        "function"
    );
    let end = s.finish("stop", None, Some(Usage::new(4, 3, 0)));
    let end: Vec<Value> = end.iter().map(to_json).collect();
    assert_eq!(end.len(), 2);
    assert_eq!(end[0]["choices"][0]["delta"], json!({}));
    assert_eq!(end[0]["choices"][0]["finish_reason"], "stop");
    assert_eq!(end[0]["choices"][0]["logprobs"], Value::Null);
    assert_eq!(end[0].get("usage"), None);
    assert_eq!(end[1]["choices"], json!([]));
    assert_eq!(end[1]["usage"]["total_tokens"], 7);
}

#[test]
fn with_logprobs_chunks_wait_and_carry_their_tokens() {
    let mut s = ChunkStream::new(ReplyHeader::new("m"), true);
    // Two tokens for "Hel" (the first released nothing), one for "lo", then
    // an end-of-turn token that released no text.
    assert!(s.push(&step("", Some(1))).is_none());
    assert!(s.push(&step("Hel", Some(2))).is_none());
    assert!(s.push(&step("lo", Some(3))).is_none());
    assert!(s.push(&step("", Some(4))).is_none());
    let entries: Vec<Value> = (0..4).map(|i| json!({ "i": i })).collect();
    let out: Vec<Value> = s
        .finish("stop", Some(entries), None)
        .iter()
        .map(to_json)
        .collect();
    assert_eq!(out.len(), 3, "two held chunks and the finish, no usage");
    let lp = |c: &Value| c["choices"][0]["logprobs"]["content"].clone();
    assert_eq!(out[0]["choices"][0]["delta"]["content"], "Hel");
    assert_eq!(lp(&out[0]), json!([{ "i": 0 }, { "i": 1 }]));
    assert_eq!(lp(&out[1]), json!([{ "i": 2 }]));
    assert_eq!(
        lp(&out[2]),
        json!([{ "i": 3 }]),
        "the rest goes with the finish"
    );
    assert_eq!(out[2]["choices"][0]["logprobs"]["refusal"], Value::Null);
}
