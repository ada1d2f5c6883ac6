//! Assembling a kernel's WGSL text from its sources, flags and defines.
//!
//! Two mechanisms, each checked so that a mistake is an error at assembly
//! rather than WGSL that compiles to the wrong kernel or fails far away:
//!
//! - Conditional lines. A line `#if NAME` (or `#if !NAME`), an optional
//!   `#else` and `#endif` keep or drop the lines between them by a boolean
//!   flag; blocks nest. Directive lines may be indented and may end in a
//!   `//` comment; they never reach the output.
//! - Values. `{{NAME}}` anywhere in a kept line is replaced by its define's
//!   text (a number, a type name, a piece of code chosen in Rust). Replaced
//!   text is not scanned again.
//!
//! Errors: an `#if` naming a flag not given, an `#else`/`#endif` without
//! its `#if` (or an `#if` never closed, a second `#else`, an unknown `#`
//! line), a placeholder in a kept line with no define, a name given twice,
//! and a flag or define that the text never names (in kept lines or not:
//! a variant may drop the lines that use it).

use std::borrow::Cow;

/// A boolean that `#if NAME` tests.
pub type Flag<'a> = (&'a str, bool);

/// A value substituted for `{{NAME}}`.
pub type Define<'a> = (&'a str, Cow<'a, str>);

/// Why a kernel's text could not be assembled. Lines count from 1 in the
/// text as assembled (the parameter block's struct, then the sources).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WgslAssemblyError {
    #[error("line {line}: `#if {flag}` tests a flag that is not given")]
    UnknownFlag { flag: String, line: usize },
    #[error("line {line}: `#{directive}` without an open `#if`")]
    Unopened {
        directive: &'static str,
        line: usize,
    },
    #[error("line {line}: a second `#else` for the `#if` of line {opened}")]
    SecondElse { line: usize, opened: usize },
    #[error("the `#if` of line {line} has no `#endif`")]
    Unclosed { line: usize },
    #[error("line {line}: `{text}` is not `#if NAME`, `#if !NAME`, `#else` or `#endif`")]
    BadDirective { text: String, line: usize },
    #[error("line {line}: `{{{{{name}}}}}` has no define")]
    Unreplaced { name: String, line: usize },
    #[error("`{name}` is given twice")]
    Duplicate { name: String },
    #[error("flag `{name}` is given but no `#if` tests it")]
    UnusedFlag { name: String },
    #[error("define `{name}` is given but the text never uses `{{{{{name}}}}}`")]
    UnusedDefine { name: String },
}

/// One open `#if` block.
struct Block {
    /// Line of its `#if`.
    line: usize,
    /// The flag's value, negated for `!NAME`: whether the `#if` branch keeps.
    test: bool,
    /// Whether the enclosing blocks keep their lines.
    outer: bool,
    /// Past its `#else`.
    in_else: bool,
}

impl Block {
    fn keeps(&self) -> bool {
        self.outer && (self.test != self.in_else)
    }
}

/// A directive line's meaning.
enum Directive<'t> {
    If { name: &'t str, negated: bool },
    Else,
    Endif,
}

/// The text of `source` with its `#if` blocks resolved by `flags` and its
/// placeholders replaced by `defines`.
pub fn assemble(
    source: &str,
    flags: &[Flag],
    defines: &[Define],
) -> Result<String, WgslAssemblyError> {
    check_unique(flags.iter().map(|f| f.0).chain(defines.iter().map(|d| d.0)))?;
    let mut flag_used = vec![false; flags.len()];
    let mut define_used = vec![false; defines.len()];
    let mut blocks: Vec<Block> = Vec::new();
    let mut out = String::with_capacity(source.len());
    for (i, line) in source.lines().enumerate() {
        let line_no = i + 1;
        let keeping = blocks.last().is_none_or(Block::keeps);
        if let Some(directive) = directive(line, line_no)? {
            match directive {
                Directive::If { name, negated } => {
                    let Some(at) = flags.iter().position(|f| f.0 == name) else {
                        return Err(WgslAssemblyError::UnknownFlag {
                            flag: name.to_string(),
                            line: line_no,
                        });
                    };
                    flag_used[at] = true;
                    blocks.push(Block {
                        line: line_no,
                        test: flags[at].1 != negated,
                        outer: keeping,
                        in_else: false,
                    });
                }
                Directive::Else => match blocks.last_mut() {
                    None => {
                        return Err(WgslAssemblyError::Unopened {
                            directive: "else",
                            line: line_no,
                        })
                    }
                    Some(b) if b.in_else => {
                        return Err(WgslAssemblyError::SecondElse {
                            line: line_no,
                            opened: b.line,
                        })
                    }
                    Some(b) => b.in_else = true,
                },
                Directive::Endif => {
                    if blocks.pop().is_none() {
                        return Err(WgslAssemblyError::Unopened {
                            directive: "endif",
                            line: line_no,
                        });
                    }
                }
            }
            continue;
        }
        substitute(line, line_no, keeping, defines, &mut define_used, &mut out)?;
    }
    if let Some(open) = blocks.last() {
        return Err(WgslAssemblyError::Unclosed { line: open.line });
    }
    if let Some(at) = flag_used.iter().position(|used| !used) {
        return Err(WgslAssemblyError::UnusedFlag {
            name: flags[at].0.to_string(),
        });
    }
    if let Some(at) = define_used.iter().position(|used| !used) {
        return Err(WgslAssemblyError::UnusedDefine {
            name: defines[at].0.to_string(),
        });
    }
    Ok(out)
}

fn check_unique<'n>(names: impl Iterator<Item = &'n str>) -> Result<(), WgslAssemblyError> {
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(WgslAssemblyError::Duplicate {
                name: name.to_string(),
            });
        }
    }
    Ok(())
}

/// The directive on `line`, if it is one (its first non-blank character is
/// `#`, which WGSL itself never starts a line with).
fn directive(line: &str, line_no: usize) -> Result<Option<Directive<'_>>, WgslAssemblyError> {
    let Some(rest) = line.trim_start().strip_prefix('#') else {
        return Ok(None);
    };
    let body = rest.split("//").next().unwrap_or("");
    let words: Vec<&str> = body.split_whitespace().collect();
    let parsed = match words[..] {
        ["if", name] => {
            let (name, negated) = match name.strip_prefix('!') {
                Some(name) => (name, true),
                None => (name, false),
            };
            is_name(name).then_some(Directive::If { name, negated })
        }
        ["else"] => Some(Directive::Else),
        ["endif"] => Some(Directive::Endif),
        _ => None,
    };
    match parsed {
        Some(d) => Ok(Some(d)),
        None => Err(WgslAssemblyError::BadDirective {
            text: line.trim().to_string(),
            line: line_no,
        }),
    }
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Notes the defines `line` names and, where it is kept, appends it to
/// `out` with its placeholders replaced. A `{{` that does not open a
/// placeholder (`{{NAME}}`) is plain text.
fn substitute(
    line: &str,
    line_no: usize,
    keeping: bool,
    defines: &[Define],
    used: &mut [bool],
    out: &mut String,
) -> Result<(), WgslAssemblyError> {
    let mut rest = line;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let name = after.find("}}").map(|close| &after[..close]);
        let Some(name) = name.filter(|n| is_name(n)) else {
            // Not a placeholder: keep the braces and look past them.
            if keeping {
                out.push_str(&rest[..open + 2]);
            }
            rest = after;
            continue;
        };
        let at = defines.iter().position(|d| d.0 == name);
        if let Some(at) = at {
            used[at] = true;
        }
        if keeping {
            out.push_str(&rest[..open]);
            match at {
                Some(at) => out.push_str(&defines[at].1),
                None => {
                    return Err(WgslAssemblyError::Unreplaced {
                        name: name.to_string(),
                        line: line_no,
                    })
                }
            }
        }
        rest = &after[name.len() + 2..];
    }
    if keeping {
        out.push_str(rest);
        out.push('\n');
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        source: &str,
        flags: &[Flag],
        defines: &[(&str, &str)],
    ) -> Result<String, WgslAssemblyError> {
        let defines: Vec<Define> = defines
            .iter()
            .map(|&(n, v)| (n, Cow::Borrowed(v)))
            .collect();
        assemble(source, flags, &defines)
    }

    #[test]
    fn a_flag_keeps_one_branch_and_drops_the_directives() {
        let source = "a\n#if X\nb\n#else // otherwise\nc\n#endif\nd\n";
        assert_eq!(run(source, &[("X", true)], &[]).unwrap(), "a\nb\nd\n");
        assert_eq!(run(source, &[("X", false)], &[]).unwrap(), "a\nc\nd\n");
        let negated = "  #if !X\nb\n  #endif\n";
        assert_eq!(run(negated, &[("X", false)], &[]).unwrap(), "b\n");
        assert_eq!(run(negated, &[("X", true)], &[]).unwrap(), "");
    }

    #[test]
    fn blocks_nest_and_an_outer_drop_wins() {
        let source =
            "#if A\na\n#if B\nab\n#else\na!b\n#endif\n#else\n!a\n#if B\n!ab\n#endif\n#endif\n";
        let cases = [
            (true, true, "a\nab\n"),
            (true, false, "a\na!b\n"),
            (false, true, "!a\n!ab\n"),
            (false, false, "!a\n"),
        ];
        for (a, b, want) in cases {
            assert_eq!(
                run(source, &[("A", a), ("B", b)], &[]).unwrap(),
                want,
                "{a} {b}"
            );
        }
    }

    #[test]
    fn defines_replace_their_placeholders_once() {
        let source = "const N: u32 = {{N}}u; let x = f_{{T}}({{N}});\n";
        let got = run(source, &[], &[("N", "4"), ("T", "{{N}}")]).unwrap();
        assert_eq!(got, "const N: u32 = 4u; let x = f_{{N}}(4);\n");
        // Braces that do not hold a name are text.
        assert_eq!(run("{{ x }} {{}}\n", &[], &[]).unwrap(), "{{ x }} {{}}\n");
    }

    #[test]
    fn a_dropped_line_needs_no_define_but_still_uses_one() {
        let source = "#if X\nlet a = {{A}};\nlet b = {{B}};\n#endif\n";
        assert_eq!(run(source, &[("X", false)], &[("A", "1")]).unwrap(), "");
    }

    #[test]
    fn an_unknown_flag_is_an_error_even_where_dropped() {
        let err = run("#if X\n#if Y\n#endif\n#endif\n", &[("X", false)], &[]).unwrap_err();
        assert_eq!(
            err,
            WgslAssemblyError::UnknownFlag {
                flag: "Y".into(),
                line: 2
            }
        );
    }

    #[test]
    fn unbalanced_blocks_are_errors() {
        let flags = [("X", true)];
        assert_eq!(
            run("#if X\na\n", &flags, &[]).unwrap_err(),
            WgslAssemblyError::Unclosed { line: 1 }
        );
        assert_eq!(
            run("#if X\n#endif\n#endif\n", &flags, &[]).unwrap_err(),
            WgslAssemblyError::Unopened {
                directive: "endif",
                line: 3
            }
        );
        assert_eq!(
            run("a\n#else\n", &[], &[]).unwrap_err(),
            WgslAssemblyError::Unopened {
                directive: "else",
                line: 2
            }
        );
        assert_eq!(
            run("#if X\n#else\n#else\n#endif\n", &flags, &[]).unwrap_err(),
            WgslAssemblyError::SecondElse { line: 3, opened: 1 }
        );
    }

    #[test]
    fn a_malformed_directive_is_an_error() {
        for bad in [
            "#if", "#if X Y", "#ifdef X", "#if 1X", "#endif X", "#elif X",
        ] {
            let err = run(&format!("{bad}\n"), &[("X", true)], &[]).unwrap_err();
            assert!(
                matches!(&err, WgslAssemblyError::BadDirective { text, line: 1 } if text == bad),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_placeholder_left_in_a_kept_line_is_an_error() {
        let err = run("a\nlet n = {{N}};\n", &[], &[]).unwrap_err();
        assert_eq!(
            err,
            WgslAssemblyError::Unreplaced {
                name: "N".into(),
                line: 2
            }
        );
        assert_eq!(err.to_string(), "line 2: `{{N}}` has no define");
    }

    #[test]
    fn a_name_given_and_never_used_is_an_error() {
        assert_eq!(
            run("#if X\n#endif\n", &[("X", true), ("Y", true)], &[]).unwrap_err(),
            WgslAssemblyError::UnusedFlag { name: "Y".into() }
        );
        assert_eq!(
            run("{{A}}\n", &[], &[("A", "1"), ("B", "2")]).unwrap_err(),
            WgslAssemblyError::UnusedDefine { name: "B".into() }
        );
    }

    #[test]
    fn a_name_given_twice_is_an_error() {
        assert_eq!(
            run("{{A}}\n", &[], &[("A", "1"), ("A", "2")]).unwrap_err(),
            WgslAssemblyError::Duplicate { name: "A".into() }
        );
        assert_eq!(
            run("#if A\n{{A}}\n#endif\n", &[("A", true)], &[("A", "1")]).unwrap_err(),
            WgslAssemblyError::Duplicate { name: "A".into() }
        );
    }
}
