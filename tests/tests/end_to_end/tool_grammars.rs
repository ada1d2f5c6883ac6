//! The grammars that force tool calls (no GPU): for each format, compiled
//! against a real vocabulary (Qwen2.5's), and, where a tool's arguments are
//! fully determined, the text the grammar forces read back by the same
//! format's parser as that call. A schema llguidance cannot compile is an
//! error naming its tool.

use serde_json::json;
use wick::constrain::{Grammar, GrammarCompiler};
use wick::format::gguf::GgufFile;
use wick::tokenizer::Tokenizer;
use wick::tools::{ToolChoice, ToolError, ToolFormat, ToolSet};
use wick_tests::model_path;

fn qwen_tokenizer() -> Tokenizer {
    let path = model_path("qwen2.5-coder-0.5b-instruct-awq.gguf");
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: read-only mapping of a test fixture nothing else writes.
    let bytes = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let gguf = GgufFile::parse_header(&bytes).unwrap();
    Tokenizer::from_gguf(&gguf).unwrap()
}

/// Template sources that select each format (see `ToolFormat::detect`).
const TEMPLATES: [(&str, ToolFormat); 3] = [
    ("{{ '<tool_call>' }}", ToolFormat::Hermes),
    ("{{ '[TOOL_CALLS]' }}", ToolFormat::Mistral),
    ("{{ '<|python_tag|>' }}", ToolFormat::Llama3),
];

#[test]
fn forced_calls_read_back_as_calls_in_every_format() {
    let tok = qwen_tokenizer();
    let compiler = GrammarCompiler::new(&tok, tok.vocab_size()).unwrap();
    let tools = json!([
        {"type": "function", "function": {"name": "now",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}},
        {"type": "function", "function": {"name": "add",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}},
                           "required": ["a"]}}}
    ]);
    for (source, format) in TEMPLATES {
        let required = ToolSet::new(&tools, ToolChoice::Required, source)
            .unwrap()
            .unwrap();
        assert_eq!(required.format(), format);
        let grammar = required.grammar(&compiler, &tok).unwrap().unwrap();
        compiler
            .compile(&grammar)
            .unwrap_or_else(|e| panic!("{format:?}: {e}"));
        // `now` takes no arguments: its whole call is forced.
        let named = ToolSet::new(&tools, ToolChoice::Function("now".into()), source)
            .unwrap()
            .unwrap();
        let grammar = named.grammar(&compiler, &tok).unwrap().unwrap();
        let Grammar::Lark(lark) = &grammar else {
            panic!()
        };
        let mut constraint = compiler.compile(&grammar).unwrap();
        let forced = constraint.take_forced().unwrap();
        let text = tok.decode(&forced, true).unwrap();
        eprintln!("{format:?}: {text:?}\n{lark}");
        let reply = named.parse(&text);
        assert_eq!(reply.tool_calls.len(), 1, "{format:?}: {text:?}");
        assert_eq!(reply.tool_calls[0].name, "now");
        assert_eq!(reply.tool_calls[0].arguments, "{}");
        assert_eq!(reply.content, None, "{format:?}: {text:?}");
    }
}

#[test]
fn a_schema_llguidance_cannot_compile_names_its_tool() {
    let tok = qwen_tokenizer();
    let compiler = GrammarCompiler::new(&tok, tok.vocab_size()).unwrap();
    let tools = json!([
        {"type": "function", "function": {"name": "fine"}},
        {"type": "function", "function": {"name": "lookahead",
            "parameters": {"type": "object", "properties": {
                "x": {"type": "string", "pattern": "a(?=b)"}}}}}
    ]);
    let set = ToolSet::new(&tools, ToolChoice::Required, "<tool_call>")
        .unwrap()
        .unwrap();
    match set.grammar(&compiler, &tok) {
        Err(ToolError::Schema { tool, message }) => {
            assert_eq!(tool, "lookahead");
            assert!(!message.is_empty());
        }
        other => panic!("{other:?}"),
    }
    // "auto" needs no grammar, so nothing is compiled.
    let auto = ToolSet::new(&tools, ToolChoice::Auto, "<tool_call>")
        .unwrap()
        .unwrap();
    assert!(auto.grammar(&compiler, &tok).unwrap().is_none());
}
