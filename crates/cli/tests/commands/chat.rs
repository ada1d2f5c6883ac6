//! `wick chat` as a user runs it: a piped interactive session whose later
//! turns reuse the cached history and answer as a fresh run of the same
//! conversation does, `--messages --json` in OpenAI's shape, a full context
//! reported (not a panic) and recovered from with /reset, and malformed
//! messages refused with one error line.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Output, Stdio};

use serde_json::{json, Value};

use crate::common;
use common::smollm2 as model;

/// Runs `wick chat --model SmolLM2 ARGS` with `stdin` piped in.
fn chat(args: &[&str], stdin: &str) -> Output {
    chat_with(&model(), args, stdin)
}

fn chat_with(m: &std::path::Path, args: &[&str], stdin: &str) -> Output {
    let mut child = common::wick_command()
        .args(["chat", "--model", m.to_str().unwrap()])
        // Short replies: compile only the kernels they use.
        .arg("--no-warmup")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run wick");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "wick chat panicked: {stderr}");
    out
}

fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The numbers of one `/stats` line.
#[derive(Debug)]
struct Stats {
    prompt: usize,
    cached: usize,
    prefilled: usize,
    context_used: usize,
}

/// `stats: prompt P tokens (C cached, F prefilled), G generated; ...; context U/L`
fn parse_stats(line: &str) -> Stats {
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .filter(|w| !w.is_empty() && !w.contains('.'))
        .map(|w| w.parse().unwrap())
        .collect();
    // P, C, F, G, U, L (the speeds have decimals and are left out).
    assert_eq!(numbers.len(), 6, "unexpected stats line: {line}");
    Stats {
        prompt: numbers[0],
        cached: numbers[1],
        prefilled: numbers[2],
        context_used: numbers[4],
    }
}

/// Splits a session's stdout into each reply and the `/stats` line that
/// followed it (the input sends `/stats` after every message).
fn replies_and_stats(stdout: &str) -> Vec<(String, Stats)> {
    let mut turns = Vec::new();
    let mut reply = Vec::new();
    for line in stdout.lines() {
        if line.starts_with("stats: ") {
            turns.push((reply.join("\n"), parse_stats(line)));
            reply.clear();
        } else {
            reply.push(line);
        }
    }
    assert!(reply.is_empty(), "output after the last /stats: {reply:?}");
    turns
}

const QUESTIONS: [&str; 3] = [
    "Hi, who are you?",
    "What is the capital of France?",
    "And of Italy?",
];

#[test]
fn later_turns_prefill_only_the_new_part_and_answer_as_a_fresh_run() {
    let input = format!(
        "{}\n/stats\n{}\n/stats\n{}\n/stats\n/reset\n{}\n/stats\n/exit\n",
        QUESTIONS[0], QUESTIONS[1], QUESTIONS[2], QUESTIONS[0]
    );
    let out = chat(&["--max-tokens", "6"], &input);
    let turns = replies_and_stats(&succeeded(&out));
    assert_eq!(turns.len(), 4, "{turns:?}");
    assert_eq!(turns[0].1.cached, 0);
    for t in 1..3 {
        let (before, now) = (&turns[t - 1].1, &turns[t].1);
        // Everything the cache held after the last turn (its prompt and
        // reply) is reused; only the new message and its framing run.
        assert_eq!(now.cached, before.context_used, "turn {t}: {now:?}");
        assert!(now.cached > before.prompt, "turn {t}: {now:?}");
        assert_eq!(now.prefilled, now.prompt - now.cached, "turn {t}: {now:?}");
    }
    // After /reset the same first message is prefilled whole again.
    assert_eq!(turns[3].1.cached, 0);
    assert_eq!(turns[3].1.prompt, turns[0].1.prompt);
    assert_eq!(turns[3].0, turns[0].0);

    // The same conversation from scratch (the first message as text parts)
    // gives the same last reply, greedy: reuse changes nothing.
    let history = json!([
        {"role": "user", "content": [{"type": "text", "text": "Hi, "},
                                     {"type": "text", "text": "who are you?"}]},
        {"role": "assistant", "content": turns[0].0},
        {"role": "user", "content": QUESTIONS[1]},
        {"role": "assistant", "content": turns[1].0},
        {"role": "user", "content": QUESTIONS[2]},
    ]);
    let file = temp_file("history.json", &history.to_string());
    let out = chat(
        &[
            "--messages",
            file.to_str().unwrap(),
            "--max-tokens",
            "6",
            "--json",
        ],
        "",
    );
    let v: Value = serde_json::from_str(&succeeded(&out)).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], turns[2].0.as_str());
    assert_eq!(v["usage"]["prompt_tokens"], turns[2].1.prompt);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_chat_completion_shape(&v);
}

fn assert_chat_completion_shape(v: &Value) {
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"), "{v}");
    assert_eq!(v["object"], "chat.completion");
    assert!(v["created"].as_u64().unwrap() > 1_600_000_000);
    assert_eq!(v["model"], "SmolLM2-135M-Instruct.Q4_1.gguf");
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 1);
    assert_eq!(choices[0]["index"], 0);
    assert_eq!(choices[0]["message"]["role"], "assistant");
    assert!(choices[0]["message"]["content"].is_string());
    let finish = choices[0]["finish_reason"].as_str().unwrap();
    assert!(finish == "stop" || finish == "length", "{finish}");
    let usage = &v["usage"];
    let (prompt, completion) = (
        usage["prompt_tokens"].as_u64().unwrap(),
        usage["completion_tokens"].as_u64().unwrap(),
    );
    assert!(prompt > 0 && (1..=6).contains(&completion), "{usage}");
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), prompt + completion);
}

#[test]
fn a_full_context_is_reported_and_reset_recovers() {
    // The first reply fills a 36-position context; the next message cannot
    // fit; /reset makes room again.
    let out = chat(
        &["--ctx-len", "36"],
        "Hi\n/stats\nTell me a story.\n/reset\nHi\n/stats\n",
    );
    let stdout = succeeded(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the context is full"), "{stderr}");
    assert!(
        stderr.contains("error: the conversation takes")
            && stderr.contains("the context holds 36: no room for a reply; /reset"),
        "{stderr}"
    );
    let turns = replies_and_stats(&stdout);
    assert_eq!(turns.len(), 2, "{stdout}");
    assert_eq!(turns[0].1.context_used, 36);
    assert_eq!(turns[1].1.cached, 0);
    assert_eq!(turns[1].0, turns[0].0);
}

#[test]
fn kwargs_reach_the_template() {
    // tiny-mixtral carries Qwen2.5's template, which lists `tools` in its
    // system turn: the same message takes more prompt tokens with them.
    let m = wick_tests::model_path("tiny-mixtral.q8_0.gguf");
    let messages = temp_file("tools.json", r#"[{"role": "user", "content": "Weather?"}]"#);
    let tools = json!({"tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]});
    let prompt_tokens = |kwargs: &str| {
        let args = [
            "--messages",
            messages.to_str().unwrap(),
            "--max-tokens",
            "1",
            "--json",
        ];
        let out = chat_with(&m, &[&args[..], &["--kwargs", kwargs]].concat(), "");
        let v: Value = serde_json::from_str(&succeeded(&out)).unwrap();
        v["usage"]["prompt_tokens"].as_u64().unwrap()
    };
    let plain = prompt_tokens("{}");
    let with_tools = prompt_tokens(&tools.to_string());
    assert!(with_tools > plain + 20, "{plain} vs {with_tools}");
}

#[test]
fn a_model_without_a_chat_template_is_refused() {
    let m = wick_tests::model_path("tiny-llama3.q8_0.gguf");
    let out = chat_with(&m, &[], "Hi\n");
    refused(&out, "tiny-llama3", "the model has no chat template");
}

/// `text` in a file named `name`, in a directory of its own: the tests run
/// in parallel threads of one process, and a name two of them used would be
/// one file.
fn temp_file(name: &str, text: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("wick-chat-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn malformed_messages_are_refused_with_one_error_line() {
    let cases = [
        ("not-json.json", "[{\"role\": ", "not JSON"),
        (
            "object.json",
            r#"{"role": "user", "content": "hi"}"#,
            "must be a JSON array",
        ),
        ("empty.json", "[]", "empty"),
        ("number.json", r#"[7]"#, "message 0 is a number"),
        (
            "no-role.json",
            r#"[{"content": "hi"}]"#,
            "message 0 has no \"role\"",
        ),
        (
            "bad-role.json",
            r#"[{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]"#,
            "message 1 has the unknown role \"robot\"",
        ),
        (
            "no-content.json",
            r#"[{"role": "user"}]"#,
            "message 0 has no \"content\"",
        ),
        (
            "bad-content.json",
            r#"[{"role": "user", "content": {"text": "hi"}}]"#,
            "\"content\" must be a string or an array of text parts, not an object",
        ),
        (
            "image.json",
            r#"[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]"#,
            "content part 0 is not a text part",
        ),
    ];
    for (name, text, needle) in cases {
        let file = temp_file(name, text);
        let out = chat(&["--messages", file.to_str().unwrap(), "--json"], "");
        refused(&out, name, needle);
    }
    let missing = std::env::temp_dir().join("wick-chat-no-such-file.json");
    let out = chat(&["--messages", missing.to_str().unwrap()], "");
    refused(&out, "a missing file", "cannot read the messages file");
    let out = chat(&["--kwargs", "[1]"], "");
    refused(&out, "--kwargs [1]", "--kwargs must be a JSON object");
}

fn refused(out: &Output, case: &str, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{case}: {stderr}");
    assert!(out.stdout.is_empty(), "{case}: stdout {:?}", out.stdout);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{case}: {stderr}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "{case}: expected {needle:?} in {stderr}"
    );
}
