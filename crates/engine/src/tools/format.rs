//! Tool-call formats: how a model writes a call, found from its chat
//! template's source. The rule, first match wins:
//!
//! 1. `<tool_call>` in the template: **Hermes** (Qwen2.5, Qwen3, Hermes 2/3).
//!    Calls are `<tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>`,
//!    as many as the model writes, anywhere in the reply; text outside them
//!    is content. A bare call object (`{"name": ..., "arguments": ...}`, no
//!    tags) that opens the reply is a call too: Qwen2.5-Coder writes them so.
//! 2. `[TOOL_CALLS]` in the template: **Mistral** (v3 tokenizers: Mistral
//!    7B v0.3, Nemo, Small). The reply is `[TOOL_CALLS] [{"name": N,
//!    "arguments": {...}}, ...]` from its first character; `[TOOL_CALLS]` is a
//!    control token, so decoded text may lack it and is matched without it.
//!    (The later `[TOOL_CALLS]name[ARGS]{...}` form is not recognized.)
//! 3. `<|python_tag|>`, or `<|start_header_id|>` with `"parameters"`, in the
//!    template: **Llama 3** (3.1, 3.2, 3.3). The reply is `{"name": N,
//!    "parameters": {...}}` from its first character (after an optional
//!    `<|python_tag|>`), several separated by `;`.
//!
//! A template matching none has no tool-call format: asking it for tools is
//! an error (`ToolError::NoFormat`), not a guess.

/// A tool-call syntax a chat template teaches its model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolFormat {
    Hermes,
    Mistral,
    Llama3,
}

impl ToolFormat {
    /// The format `template_source` defines, by the rule above.
    pub fn detect(template_source: &str) -> Option<ToolFormat> {
        let has = |s: &str| template_source.contains(s);
        if has("<tool_call>") {
            Some(ToolFormat::Hermes)
        } else if has("[TOOL_CALLS]") {
            Some(ToolFormat::Mistral)
        } else if has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\"")) {
            Some(ToolFormat::Llama3)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ToolFormat::Hermes => "hermes",
            ToolFormat::Mistral => "mistral",
            ToolFormat::Llama3 => "llama3",
        }
    }

    /// The key a call object holds its arguments under, as the model is
    /// taught; the parser accepts either key in any format.
    pub fn arguments_key(self) -> &'static str {
        match self {
            ToolFormat::Llama3 => "parameters",
            _ => "arguments",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ToolFormat;

    #[test]
    fn the_golden_templates_are_recognized() {
        // The repository's public template goldens: Qwen2.5's defines
        // <tool_call>, SmolLM2's no tools at all.
        let json = include_str!("../../../../tests/fixtures/golden/chat_templates_public.json");
        let goldens: Vec<serde_json::Value> = serde_json::from_str(json).unwrap();
        let format = |model: &str| {
            let g = goldens.iter().find(|g| g["model"] == model).unwrap();
            ToolFormat::detect(g["chat_template"].as_str().unwrap())
        };
        assert_eq!(
            format("qwen2.5-coder-0.5b-instruct-awq.gguf"),
            Some(ToolFormat::Hermes)
        );
        assert_eq!(format("SmolLM2-135M-Instruct.Q4_1.gguf"), None);
    }

    #[test]
    fn mistral_and_llama3_markers() {
        let mistral = "{%- if message.tool_calls %}[TOOL_CALLS] [{{ calls }}]{% endif %}";
        assert_eq!(ToolFormat::detect(mistral), Some(ToolFormat::Mistral));
        let llama =
            r#"<|start_header_id|>assistant<|end_header_id|>{"name": "f", "parameters": {}}"#;
        assert_eq!(ToolFormat::detect(llama), Some(ToolFormat::Llama3));
        assert_eq!(
            ToolFormat::detect("{{ '<|python_tag|>' }}"),
            Some(ToolFormat::Llama3)
        );
        // A Llama 3 template without tools defines no format.
        assert_eq!(
            ToolFormat::detect("<|start_header_id|>{{ m.content }}<|eot_id|>"),
            None
        );
    }
}
