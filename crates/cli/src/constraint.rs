//! `--json-schema FILE | --regex R | --grammar FILE`: the grammar a
//! generation's output must match.

use std::path::PathBuf;

use wick::constrain::Grammar;

/// At most one of these; none means free generation.
#[derive(clap::Args)]
#[group(multiple = false)]
pub struct ConstraintArgs {
    /// Constrain the output to JSON valid under this JSON schema file.
    #[arg(long, value_name = "FILE")]
    pub json_schema: Option<PathBuf>,
    /// Constrain the output to match this regular expression (Rust syntax).
    #[arg(long, value_name = "REGEX")]
    pub regex: Option<String>,
    /// Constrain the output to this grammar file (llguidance's Lark syntax).
    #[arg(long, value_name = "FILE")]
    pub grammar: Option<PathBuf>,
}

impl ConstraintArgs {
    /// The grammar asked for, read from its file; `None` for free generation.
    pub fn grammar(&self) -> Result<Option<Grammar>, Box<dyn std::error::Error>> {
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read '{}': {e}", path.display()))
        };
        Ok(match (&self.json_schema, &self.regex, &self.grammar) {
            (Some(path), _, _) => {
                let schema = serde_json::from_str(&read(path)?)
                    .map_err(|e| format!("'{}' is not JSON: {e}", path.display()))?;
                Some(Grammar::JsonSchema(schema))
            }
            (_, Some(rx), _) => Some(Grammar::Regex(rx.clone())),
            (_, _, Some(path)) => Some(Grammar::Lark(read(path)?)),
            _ => None,
        })
    }
}
