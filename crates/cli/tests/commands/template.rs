//! `wick template` renders every case of the chat-template golden file
//! (Hugging Face's renderings) byte for byte.
//!
//! Golden JSON: `$WICK_GOLDEN_DIR`, else `<workspace>/tests/fixtures/golden`,
//! else `<workspace>/../shared/golden`.

use std::path::PathBuf;

use crate::common;
use serde_json::{json, Value};

fn golden() -> Value {
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dirs: Vec<PathBuf> = std::env::var_os("WICK_GOLDEN_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            ws.join("tests/fixtures/golden"),
            ws.join("../shared/golden"),
        ])
        .collect();
    let path = dirs
        .iter()
        .map(|d| d.join("chat_templates_public.json"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("chat_templates_public.json not found in {dirs:?}"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Runs `wick template` with `extra` arguments; returns stdout, or the
/// failure's stderr.
fn wick_template(
    template: &str,
    messages: &Value,
    extra: &[&str],
    tag: &str,
) -> Result<Vec<u8>, String> {
    let dir = std::env::temp_dir().join(format!("wick-template-test-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (t, m) = (dir.join("template.jinja"), dir.join("messages.json"));
    std::fs::write(&t, template).unwrap();
    std::fs::write(&m, serde_json::to_vec(messages).unwrap()).unwrap();
    let mut args = vec![
        "template".to_string(),
        "--template".into(),
        t.display().to_string(),
        "--messages".into(),
        m.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = common::wick_command()
        .args(&args)
        .output()
        .expect("run wick");
    std::fs::remove_dir_all(&dir).unwrap();
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn renders_every_golden_case_byte_identically() {
    let mut cases = 0;
    for (i, entry) in golden().as_array().unwrap().iter().enumerate() {
        let model = entry["model"].as_str().unwrap();
        let template = entry["chat_template"].as_str().unwrap();
        for (j, case) in entry["cases"].as_array().unwrap().iter().enumerate() {
            let mut args = vec![
                "--bos",
                entry["bos_token"].as_str().unwrap(),
                "--eos",
                entry["eos_token"].as_str().unwrap(),
                "--json",
            ];
            if case["add_generation_prompt"].as_bool().unwrap() {
                args.push("--add-generation-prompt");
            }
            let tag = format!("{i}-{j}");
            let out = wick_template(template, &case["messages"], &args, &tag)
                .unwrap_or_else(|e| panic!("{model} case {j}: {e}"));
            let got: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(got, json!({ "text": case["rendered"] }), "{model} case {j}");
            cases += 1;
        }
    }
    assert!(cases > 0);
}

#[test]
fn without_json_prints_the_bare_text_and_kwargs_reach_the_template() {
    let messages = json!([{ "role": "user", "content": "hi" }]);
    let template =
        "{{ bos_token }}{{ messages[0].content }}{% if greet %} {{ greet }}{% endif %}\n";
    let out = wick_template(
        template,
        &messages,
        &["--bos", "<s>", "--kwargs", r#"{"greet": "there"}"#],
        "bare",
    )
    .unwrap();
    // The template's final newline is dropped, as jinja2 drops it.
    assert_eq!(out, b"<s>hi there");
}

#[test]
fn bad_templates_and_messages_are_clear_errors() {
    let messages = json!([{ "role": "user", "content": "hi" }]);
    let cases: [(&str, &Value, &[&str], &str); 4] = [
        ("{% if %}", &messages, &[], "does not parse"),
        (
            "{{ raise_exception('no system role') }}",
            &messages,
            &[],
            "no system role",
        ),
        (
            "{{ messages }}",
            &json!({ "role": "user" }),
            &[],
            "must be an array",
        ),
        (
            "{{ x }}",
            &messages,
            &["--kwargs", "[]"],
            "must be a JSON object",
        ),
    ];
    for (k, (template, messages, extra, needle)) in cases.into_iter().enumerate() {
        let err = wick_template(template, messages, extra, &format!("bad{k}")).unwrap_err();
        assert!(
            err.contains(needle) && !err.contains("panicked"),
            "{template}: {err}"
        );
    }
}
