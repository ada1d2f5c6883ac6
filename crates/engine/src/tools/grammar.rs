//! The grammar that forces calls (`tool_choice` `"required"` or a named
//! function): llguidance Lark with one alternative per tool, the template's
//! call syntax written out around a `%json` of the tool's `parameters`
//! schema, so the name is always a tool's and the arguments always validate.
//! The head of each call is fixed text, so llguidance forces it without
//! sampling once the tool is chosen.

use serde_json::Value;

use super::{Tool, ToolChoice, ToolError, ToolFormat, ToolSet};
use crate::constrain::{compact, Grammar, GrammarCompiler};
use crate::tokenizer::Tokenizer;

impl ToolSet {
    /// The forcing grammar, or `None` for free decoding (`"auto"`). Each
    /// tool's schema is compiled alone first, so one llguidance cannot take
    /// is reported by name. `tokenizer` resolves a format's control-token
    /// marker (Mistral's `[TOOL_CALLS]`).
    pub fn grammar(
        &self,
        compiler: &GrammarCompiler,
        tokenizer: &Tokenizer,
    ) -> Result<Option<Grammar>, ToolError> {
        let chosen: Vec<&Tool> = match &self.choice {
            ToolChoice::Required => self.tools.iter().collect(),
            ToolChoice::Function(name) => self.tools.iter().filter(|t| &t.name == name).collect(),
            ToolChoice::Auto | ToolChoice::None => return Ok(None),
        };
        for tool in &chosen {
            compiler
                .compile(&Grammar::JsonSchema(tool.parameters.clone()))
                .map_err(|e| ToolError::Schema {
                    tool: tool.name.clone(),
                    message: e.to_string(),
                })?;
        }
        // A named function is called once; "required" allows several.
        let many = self.choice == ToolChoice::Required;
        let tag = tokenizer
            .token_id("[TOOL_CALLS]")
            .filter(|&id| tokenizer.is_control(id));
        let lark = lark(self.format, &chosen, many, tag);
        Ok(Some(Grammar::Lark(lark)))
    }
}

/// `mistral_tag`: the id of Mistral's `[TOOL_CALLS]` control token.
fn lark(format: ToolFormat, tools: &[&Tool], many: bool, mistral_tag: Option<u32>) -> String {
    let key = format.arguments_key();
    let (start, sep) = match format {
        ToolFormat::Hermes => ("call", "\"\\n\""),
        ToolFormat::Llama3 => ("call", "\"; \""),
        ToolFormat::Mistral => ("\"[\" call", "\", \""),
    };
    let mut g = String::new();
    let tail = if many {
        format!(" ({sep} call)*")
    } else {
        String::new()
    };
    let start = match (format, mistral_tag) {
        // The control token by id: no text can spell it.
        (ToolFormat::Mistral, Some(id)) => format!("<[{id}]> {start}"),
        _ => start.to_string(),
    };
    let close = if format == ToolFormat::Mistral {
        " \"]\""
    } else {
        ""
    };
    g.push_str(&format!("start: {start}{tail}{close}\n"));
    let alternatives: Vec<String> = (0..tools.len()).map(|i| format!("call_{i}")).collect();
    g.push_str(&format!("call: {}\n", alternatives.join(" | ")));
    for (i, tool) in tools.iter().enumerate() {
        let head = format!(
            "{{\"name\": {}, \"{key}\": ",
            Value::from(tool.name.as_str())
        );
        let (open, end) = match format {
            ToolFormat::Hermes => (format!("<tool_call>\n{head}"), "}\n</tool_call>"),
            _ => (head, "}"),
        };
        g.push_str(&format!(
            "call_{i}: {} args_{i} {}\n",
            lark_string(&open),
            lark_string(end)
        ));
        g.push_str(&format!("args_{i}: %json {}\n", compact(&tool.parameters)));
    }
    g
}

/// A Lark string literal of `s` (JSON's escapes, which Lark reads alike).
fn lark_string(s: &str) -> String {
    Value::from(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, params: Value) -> Tool {
        Tool {
            name: name.into(),
            parameters: params,
        }
    }

    #[test]
    fn hermes_lark_spells_the_template_syntax() {
        let t = tool("get_weather", json!({"type": "object"}));
        let g = lark(ToolFormat::Hermes, &[&t], true, None);
        assert!(g.starts_with("start: call (\"\\n\" call)*\n"), "{g}");
        assert!(
            g.contains(r#"call_0: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " args_0 "}\n</tool_call>""#),
            "{g}"
        );
        assert!(g.contains("args_0: %json {"), "{g}");
    }
}
