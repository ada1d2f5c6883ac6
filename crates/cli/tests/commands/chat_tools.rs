//! `wick chat --tools`: bad tools files and choices refused before the model
//! loads, a template without a tool-call format refused by name, and under
//! Qwen2.5's template `--tool-choice required --messages --json` printing
//! OpenAI's `tool_calls` with `finish_reason: "tool_calls"` and a null
//! content. That runs on the tiny qwen3moe fixture with Qwen2.5's template
//! (what is checked is the CLI's output, and the grammar makes any model's
//! reply a call); a real model's calls are `tool_calls.rs`'s, in the
//! end-to-end tests.

use std::path::PathBuf;
use std::process::Output;

use crate::common;
use serde_json::Value;

const TOOLS: &str = r#"[
  {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                  "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add", "description": "Add two integers",
   "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": -999, "maximum": 999},
                                                   "b": {"type": "integer", "minimum": -999, "maximum": 999}},
                  "required": ["a", "b"], "additionalProperties": false}}}]"#;

fn model(file: &str) -> PathBuf {
    let dir = std::env::var_os("WICK_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"));
    dir.join(file)
}

/// `text` in a file named `name`, in a directory of its own: the tests run
/// in parallel threads of one process and reuse names ("tools.json"), and
/// a shared file could be read by one test's CLI while another rewrites it.
fn temp_file(name: &str, text: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("wick-chat-tools-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn chat(model_file: &str, args: &[&str]) -> Output {
    let out = common::wick_command()
        .args(["chat", "--model", model(model_file).to_str().unwrap()])
        // Short replies: compile only the kernels they use.
        .arg("--no-warmup")
        .args(args)
        .output()
        .expect("run wick");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "wick chat panicked: {stderr}");
    out
}

fn refused(out: &Output, case: &str, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{case}: {stderr}");
    assert!(out.stdout.is_empty(), "{case}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains(needle),
        "{case}: expected {needle:?} in {stderr}"
    );
}

#[test]
fn bad_tools_and_choices_are_refused() {
    let messages = temp_file("m.json", r#"[{"role": "user", "content": "hi"}]"#);
    let m = messages.to_str().unwrap();
    let cases = [
        (
            "object.json",
            r#"{"name": "f"}"#,
            "auto",
            "must be an array",
        ),
        (
            "no-name.json",
            r#"[{"type": "function", "function": {}}]"#,
            "auto",
            "tool 0: no \"function.name\"",
        ),
        (
            "tools.json",
            TOOLS,
            "fly",
            "names the function \"fly\", which is not among the tools",
        ),
        ("empty.json", "[]", "required", "needs at least one tool"),
    ];
    // The file model does not exist: these must fail before any load.
    for (name, text, choice, needle) in cases {
        let tools = temp_file(name, text);
        let out = chat(
            "no-such-model.gguf",
            &[
                "--messages",
                m,
                "--tools",
                tools.to_str().unwrap(),
                "--tool-choice",
                choice,
            ],
        );
        refused(&out, name, needle);
    }
    // SmolLM2's template teaches no tool calls.
    let tools = temp_file("tools.json", TOOLS);
    let out = chat(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        &["--messages", m, "--tools", tools.to_str().unwrap()],
    );
    refused(&out, "SmolLM2", "defines no tool-call format");
}

/// The tiny qwen3moe fixture under Qwen2.5's chat template (a Hermes
/// `<tool_call>` format), written beside the test's other files.
fn tiny_with_qwen_template() -> PathBuf {
    let template =
        wick_tests::gguf_edit::chat_template_of(&model("qwen2.5-coder-0.5b-instruct-awq.gguf"));
    let bytes = wick_tests::gguf_edit::with_chat_template(
        &wick_tests::model_path("tiny-qwen3moe.q8_0.gguf"),
        &template,
    );
    let path = temp_file("tiny-qwen3moe-tools.gguf", "");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn required_prints_openai_tool_calls() {
    let fixture = tiny_with_qwen_template();
    let tools = temp_file("tools.json", TOOLS);
    let messages = temp_file(
        "weather.json",
        r#"[{"role": "user", "content": "What is the weather like in Paris today?"}]"#,
    );
    let out = chat(
        fixture.to_str().unwrap(),
        &[
            "--messages",
            messages.to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--tool-choice",
            "required",
            "--max-tokens",
            "256",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    let message = &choice["message"];
    assert_eq!(message["content"], Value::Null, "{v}");
    let call = &message["tool_calls"][0];
    assert!(call["id"].as_str().unwrap().starts_with("call_"), "{v}");
    assert_eq!(call["type"], "function");
    let name = call["function"]["name"].as_str().unwrap();
    assert!(["get_weather", "add"].contains(&name), "{v}");
    // Arguments are JSON text, as OpenAI sends them.
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(args.is_object(), "{v}");
}
