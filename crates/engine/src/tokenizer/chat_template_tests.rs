//! Chat templates against Hugging Face's renderings and llama.cpp's token ids
//! (`chat_templates_public.json`), real templates of the newer architectures
//! against transformers' renderings (`chat_templates_new_archs.json`), plus
//! the jinja2 behaviours templates rely on.
//!
//! Golden JSON: `$WICK_GOLDEN_DIR`, else `<workspace>/tests/fixtures/golden`,
//! else `<workspace>/../shared/golden`. Models: `$WICK_MODELS_DIR`, else
//! `<workspace>/models`; a missing one fails the test.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::*;
use crate::format::gguf::{GgufFile, MetaValue};
use crate::format::gguf_write::GgufWriter;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden() -> Json {
    golden_file("chat_templates_public.json")
}

fn golden_file(name: &str) -> Json {
    let ws = workspace();
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
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found in {dirs:?}"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// The header of a model file, read in growing prefixes.
fn header(name: &str) -> GgufFile {
    let dir = std::env::var_os("WICK_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("models"));
    let path = dir.join(name);
    let f = File::open(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/fetch-models.sh all)", path.display()));
    GgufFile::read_header(f).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn messages_of(case: &Json) -> Vec<ChatMessage> {
    case["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| ChatMessage::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect()
}

#[test]
fn renders_like_hugging_face() {
    for entry in golden().as_array().unwrap() {
        let model = entry["model"].as_str().unwrap();
        let t = ChatTemplate::new(
            entry["chat_template"].as_str().unwrap(),
            entry["bos_token"].as_str().unwrap(),
            entry["eos_token"].as_str().unwrap(),
        )
        .unwrap();
        for case in entry["cases"].as_array().unwrap() {
            let agp = case["add_generation_prompt"].as_bool().unwrap();
            let want = case["rendered"].as_str().unwrap();
            assert_eq!(t.render(&messages_of(case), agp).unwrap(), want, "{model}");
            let json = case["messages"].to_string();
            assert_eq!(t.render_json(&json, None, agp).unwrap(), want, "{model}");
        }
    }
}

/// The real templates of Gemma 2, Phi-3.5, Phi-3 (tiny-phi3's), SmolLM3 and
/// Qwen3-Coder as transformers renders them (`chat_templates_new_archs.json`,
/// made by tests/fixtures/chat_templates/make_renders.py with jinja2): every
/// case renders to the same text, or fails with the template's own
/// `raise_exception` message as a typed error. Each entry point that can take
/// the case gives the same answer.
#[test]
fn new_arch_templates_render_like_transformers() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for entry in golden_file("chat_templates_new_archs.json")
        .as_array()
        .unwrap()
    {
        let model = entry["model"].as_str().unwrap();
        let t = ChatTemplate::new(
            entry["chat_template"].as_str().unwrap(),
            entry["bos_token"].as_str().unwrap(),
            entry["eos_token"].as_str().unwrap(),
        )
        .unwrap_or_else(|e| panic!("{model}: {e}"))
        .at_time(entry["strftime_now_unix"].as_u64().unwrap());
        for case in entry["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let agp = case["add_generation_prompt"].as_bool().unwrap();
            let want = match case.get("error") {
                Some(msg) => Err(ChatTemplateError::Raised(msg.as_str().unwrap().into())),
                None => Ok(case["rendered"].as_str().unwrap().to_string()),
            };
            let messages = case["messages"].to_string();
            let tools = (!case["tools"].is_null()).then(|| case["tools"].to_string());
            let mut kwargs = case["kwargs"].as_object().unwrap().clone();
            let plain = kwargs.is_empty();
            if !case["tools"].is_null() {
                kwargs.insert("tools".into(), case["tools"].clone());
            }
            let mut got = vec![(
                "render_json_with_kwargs",
                t.render_json_with_kwargs(&messages, agp, &Json::Object(kwargs).to_string()),
            )];
            if plain {
                got.push((
                    "render_json",
                    t.render_json(&messages, tools.as_deref(), agp),
                ));
            }
            let text_only = case["messages"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m.as_object().unwrap().len() == 2 && m["content"].is_string());
            if plain && tools.is_none() && text_only {
                got.push(("render", t.render(&messages_of(case), agp)));
            }
            for (how, got) in got {
                checked += 1;
                if got != want {
                    failures.push(format!(
                        "{model} / {name} ({how}):\n  want {want:?}\n  got  {got:?}"
                    ));
                }
            }
        }
    }
    assert!(checked > 40, "{checked} renders checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} renders differ from transformers':\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn gguf_templates_render_and_tokenize_like_llama_cpp() {
    for entry in golden().as_array().unwrap() {
        let model = entry["model"].as_str().unwrap();
        let file = header(model);
        let tok = Tokenizer::from_gguf(&file).unwrap();
        let t = ChatTemplate::from_gguf(&file, &tok).unwrap();
        assert_eq!(
            t.source(),
            entry["chat_template"].as_str().unwrap(),
            "{model}"
        );
        assert_eq!(t.eos_token, entry["eos_token"].as_str().unwrap(), "{model}");
        for case in entry["cases"].as_array().unwrap() {
            let agp = case["add_generation_prompt"].as_bool().unwrap();
            let text = t.render(&messages_of(case), agp).unwrap();
            assert_eq!(text, case["rendered"].as_str().unwrap(), "{model}");
            let want: Vec<u32> = case["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect();
            assert_eq!(t.encode(&tok, &text).unwrap(), want, "{model}: {text:?}");
        }
        // Generation stops at the template's end of turn.
        let eot = tok.token_id(&t.eos_token).unwrap();
        assert!(tok.stop_ids().contains(&eot), "{model}");
    }
}

#[test]
fn missing_template_is_a_typed_error() {
    let entry = &golden()[0];
    let tok = Tokenizer::from_gguf(&header(entry["model"].as_str().unwrap())).unwrap();
    let bytes = GgufWriter::new()
        .meta("general.architecture", MetaValue::String("llama".into()))
        .to_bytes();
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(
        ChatTemplate::from_gguf(&file, &tok).unwrap_err(),
        ChatTemplateError::Missing
    );
}

fn render(src: &str, messages: &[ChatMessage]) -> Result<String, ChatTemplateError> {
    ChatTemplate::new(src, "<s>", "</s>")?.render(messages, true)
}

#[test]
fn errors_are_typed() {
    let msgs = [ChatMessage::new("user", "hi")];
    assert!(matches!(
        ChatTemplate::new("{% for m in messages %}", "", ""),
        Err(ChatTemplateError::Syntax(_))
    ));
    let raised =
        "{% if messages[0].role != 'system' %}{{ raise_exception('System first!') }}{% endif %}";
    assert_eq!(
        render(raised, &msgs),
        Err(ChatTemplateError::Raised("System first!".into()))
    );
    assert!(matches!(
        render("{{ messages | no_such_filter }}", &msgs),
        Err(ChatTemplateError::Syntax(_) | ChatTemplateError::Render(_))
    ));
    assert!(matches!(
        render("{{ messages[0].content.no_such_method() }}", &msgs),
        Err(ChatTemplateError::Render(_))
    ));
    let t = ChatTemplate::new("{{ messages }}", "", "").unwrap();
    assert!(matches!(
        t.render_json("{\"role\": \"user\"}", None, true),
        Err(ChatTemplateError::Messages(_))
    ));
    assert!(matches!(
        t.render_json("[{\"content\": \"x\"}]", None, true),
        Err(ChatTemplateError::Messages(_))
    ));
    assert!(matches!(
        t.render_json("not json", None, true),
        Err(ChatTemplateError::Messages(_))
    ));
}

/// Found by fuzzing: minijinja panics reversing an empty string; natively
/// the render fails with a typed error instead (see `render_values`).
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn a_panic_inside_the_template_engine_is_a_render_error() {
    let msgs = [ChatMessage::new("user", "")];
    assert!(matches!(
        render("{{ messages[0].content[::-1] }}", &msgs),
        Err(ChatTemplateError::Render(_))
    ));
    // Reversing a non-empty string still works.
    let msgs = [ChatMessage::new("user", "abc")];
    assert_eq!(
        render("{{ messages[0].content[::-1] }}", &msgs).unwrap(),
        "cba"
    );
}

/// Jinja2's `iterable` test, as transformers renders: none is not iterable,
/// so a template that asks `tools is iterable and tools | length > 0`
/// (Qwen3-Coder's) renders without tools instead of failing on `length`.
#[test]
fn none_is_not_iterable() {
    let msgs = [ChatMessage::new("user", "hi")];
    let src = "{% if tools is iterable and tools | length > 0 %}{{ tools | length }} tools\
               {% else %}no tools{% endif %}|{{ messages is iterable }}|{{ 'ab' is iterable }}\
               |{{ 3 is iterable }}|{{ nothing is iterable }}";
    assert_eq!(
        render(src, &msgs).unwrap(),
        "no tools|True|True|False|False"
    );
    let t = ChatTemplate::new(src, "<s>", "</s>").unwrap();
    let with_tools = t
        .render_json(
            r#"[{"role": "user", "content": "hi"}]"#,
            Some(r#"[{"type": "function"}]"#),
            true,
        )
        .unwrap();
    assert!(with_tools.starts_with("1 tools|"), "{with_tools}");
}

#[test]
fn jinja2_behaviours() {
    let msgs = [
        ChatMessage::new("system", "  Be brief.  "),
        ChatMessage::new("user", "Hello"),
    ];
    // trim_blocks + lstrip_blocks, and the final newline dropped.
    let src = "{% for m in messages %}\n    {% if m.role == 'user' %}\n[{{ m.content }}]\n    {% endif %}\n{% endfor %}\n";
    assert_eq!(render(src, &msgs).unwrap(), "[Hello]\n");
    // Python string methods (pycompat), loop controls, Python's True.
    let src = "{% for m in messages %}{% if m.role == 'user' %}{% break %}{% endif %}\
               {{ m.content.strip().upper() }}|{{ m.role.startswith('sys') }}{% endfor %}";
    assert_eq!(render(src, &msgs).unwrap(), "BE BRIEF.|True");
    // bos/eos and add_generation_prompt.
    let src = "{{ bos_token }}{% if add_generation_prompt %}go{% endif %}{{ eos_token }}";
    assert_eq!(render(src, &msgs).unwrap(), "<s>go</s>");
}

#[test]
fn tojson_is_pythons_json_dumps() {
    let t = ChatTemplate::new(
        "{{ tools | tojson }}|{{ tools[0] | tojson(indent=2) }}",
        "",
        "",
    )
    .unwrap();
    let tools = r#"[{"name": "f<x>", "b": 1, "a": [1.5, 2.0, "é\"\n", null, true], "e": {}}]"#;
    let out = t.render_json("[]", Some(tools), false).unwrap();
    assert_eq!(
        out,
        "[{\"name\": \"f<x>\", \"b\": 1, \"a\": [1.5, 2.0, \"é\\\"\\n\", null, true], \"e\": {}}]|{\n  \
         \"name\": \"f<x>\",\n  \"b\": 1,\n  \"a\": [\n    1.5,\n    2.0,\n    \"é\\\"\\n\",\n    null,\n    true\n  ],\n  \"e\": {}\n}"
    );
    assert_eq!(python_float(1e16), "1e+16");
    assert_eq!(python_float(1.5e-7), "1.5e-07");
    assert_eq!(python_float(0.1), "0.1");
    assert_eq!(python_float(-3.0), "-3.0");
}

#[test]
fn strftime_formats_utc_dates() {
    assert_eq!(strftime("%d %b %Y", 0), "01 Jan 1970");
    // 2023-11-14 22:13:20 UTC, a Tuesday
    assert_eq!(
        strftime("%A %a %d %B %m %y %H:%M:%S %-d %%", 1_700_000_000),
        "Tuesday Tue 14 November 11 23 22:13:20 14 %"
    );
    assert_eq!(civil_from_days(19_782), (2024, 2, 29));
}

#[test]
fn every_model_template_renders_a_conversation() {
    let msgs = [
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", "Hi"),
        ChatMessage::new("assistant", "Hello!"),
        ChatMessage::new("user", "Bye"),
    ];
    for model in [
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "gemma-3-270m-q4_k_m.gguf",
        "qwen2.5-coder-0.5b-instruct-awq.gguf",
    ] {
        let file = header(model);
        let tok = Tokenizer::from_gguf(&file).unwrap();
        let t = match ChatTemplate::from_gguf(&file, &tok) {
            Ok(t) => t,
            // gemma-3-270m (the base model) ships no template.
            Err(ChatTemplateError::Missing) => continue,
            Err(e) => panic!("{model}: {e}"),
        };
        let text = t.render(&msgs, true).unwrap();
        assert!(
            text.contains("Be brief.") && text.contains("Bye"),
            "{model}: {text:?}"
        );
        let ids = t.encode(&tok, &text).unwrap();
        // BOS at most once, whether the template or the tokenizer writes it.
        if let Some(bos) = tok.bos_id() {
            let n = ids.iter().take(2).filter(|&&id| id == bos).count();
            assert!(n <= 1 || ids[0] != ids[1], "{model}: double BOS in {ids:?}");
        }
        assert_eq!(
            tok.decode(&ids, false).unwrap().trim_start(),
            text.trim_start(),
            "{model}"
        );
    }
}

#[test]
fn kwargs_become_variables_and_override_special_tokens() {
    let src = "{{ bos_token }}{% if enable_thinking is defined and not enable_thinking %}\
               <no-think>{% endif %}{{ tools | length if tools else 'none' }}|\
               {{ documents is none }}|{{ messages[0].content }}{{ add_generation_prompt }}";
    let t = ChatTemplate::new(src, "<s>", "</s>").unwrap();
    let msgs = r#"[{"role": "user", "content": "hi"}]"#;
    let out = |kwargs: &str| t.render_json_with_kwargs(msgs, true, kwargs);
    assert_eq!(out("{}").unwrap(), "<s>none|True|hiTrue");
    assert_eq!(
        out(r#"{"enable_thinking": false, "bos_token": "[B]", "tools": [{"name": "f"}]}"#).unwrap(),
        "[B]<no-think>1|True|hiTrue"
    );
    // messages and add_generation_prompt come from their own arguments.
    assert_eq!(
        out(r#"{"add_generation_prompt": false, "messages": []}"#).unwrap(),
        "<s>none|True|hiTrue"
    );
    assert!(matches!(out("[1]"), Err(ChatTemplateError::Messages(_))));
    assert!(matches!(out("{"), Err(ChatTemplateError::Messages(_))));
}

#[test]
fn generation_tags_render_their_body() {
    let msgs = [
        ChatMessage::new("user", "Hi"),
        ChatMessage::new("assistant", "Hello"),
    ];
    let src = "{% for m in messages %}{% if m.role == 'assistant' %}\n\
               {%- generation %}[{{ m.content }}]{% endgeneration -%}\n\
               {% else %}{{ m.content }}\n{% endif %}{% endfor %}";
    assert_eq!(render(src, &msgs).unwrap(), "Hi\n[Hello]");
    assert_eq!(
        without_generation_tags("a{%- generation +%}b{%endgeneration%}{% if x %}"),
        "a{%- if true +%}b{% endif %}{% if x %}"
    );
}

#[test]
fn printed_lists_and_dicts_are_python_reprs() {
    let t = ChatTemplate::new(
        "{{ messages[0].content }}|{{ messages[1].content | string }}|{{ messages[1].content.b[1] }}",
        "",
        "",
    )
    .unwrap();
    let msgs = r#"[
        {"role": "user", "content": ["a", "it's", null, true, 1.5,
            {"k": "v\n\"q\"", "n": 1e16}, "\u00a0\u200b🙂\\"]},
        {"role": "user", "content": {"b": [1, 2.0]}}
    ]"#;
    assert_eq!(
        t.render_json(msgs, None, false).unwrap(),
        "['a', \"it's\", None, True, 1.5, {'k': 'v\\n\"q\"', 'n': 1e+16}, \
         '\\xa0\\u200b🙂\\\\']|{'b': [1, 2.0]}|2.0"
    );
}

/// `{{ x }}` is `str(x)` in jinja2: a float prints in Python's notation
/// (`1e-05`, `1e+16`, `2.0`, `inf`), as `| string` and `repr` do; `tojson`
/// keeps json.dumps' names for the non-finite ones. Qwen3-Coder prints a
/// tool parameter's enum values this way.
#[test]
fn printed_floats_are_pythons_str() {
    let t = ChatTemplate::new(
        "{% for x in messages[0].content %}{{ x }}|{{ x | string }}|{% endfor %}\
         {{ messages[0].content }}|{{ 1e300 * 1e300 }}|{{ -1e300 * 1e300 }}|\
         {{ [1e300 * 1e300] | tojson }}",
        "",
        "",
    )
    .unwrap();
    let msgs =
        r#"[{"role": "user", "content": [1e-05, 1e16, 2.0, 0.1, 123456.789, 3, true, null]}]"#;
    assert_eq!(
        t.render_json(msgs, None, false).unwrap(),
        "1e-05|1e-05|1e+16|1e+16|2.0|2.0|0.1|0.1|123456.789|123456.789|3|3|True|True|None|None|\
         [1e-05, 1e+16, 2.0, 0.1, 123456.789, 3, True, None]|inf|-inf|[Infinity]"
    );
}

#[test]
fn generation_tags_scan_never_reads_one_percent_as_open_and_close() {
    // `{%}` once made the tag's inside a reversed slice (found by fuzzing).
    for src in [
        "{%}",
        "{%}%}",
        "a{%}b{% generation %}c{% endgeneration %}",
        "{%%}",
    ] {
        let out = without_generation_tags(src);
        assert!(
            out.starts_with(&src[..src.find("{%").unwrap() + 2]),
            "{src:?} -> {out:?}"
        );
    }
    assert_eq!(without_generation_tags("{%}%}"), "{%}%}");
}
