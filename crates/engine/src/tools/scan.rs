//! Incremental pieces of a call object's JSON: its head
//! (`{"name": "f", "arguments": `), read once whole, and its arguments value,
//! scanned character by character so it can be streamed as it is generated.
//! Full parsing is serde_json's; these only find where things end.

/// The outcome of reading a prefix of a stream that may still grow.
#[derive(Debug, PartialEq)]
pub enum Parse<T> {
    /// More text is needed to decide.
    Incomplete,
    /// The text can never be this shape.
    Mismatch,
    Done(T),
}

/// Reads `{"name": NAME, "arguments": ` (or `"parameters"`), free whitespace
/// between tokens; returns the name and the bytes read. Keys in another
/// order are a mismatch here (the caller parses such a call whole).
pub fn head(s: &str) -> Parse<(String, usize)> {
    let mut c = Cursor { s, at: 0 };
    macro_rules! step {
        ($e:expr) => {
            match $e {
                Parse::Done(v) => v,
                Parse::Incomplete => return Parse::Incomplete,
                Parse::Mismatch => return Parse::Mismatch,
            }
        };
    }
    step!(c.lit("{"));
    step!(c.lit("\"name\""));
    step!(c.lit(":"));
    let name = step!(c.string());
    step!(c.lit(","));
    match c.lit("\"arguments\"") {
        Parse::Done(()) => {}
        Parse::Incomplete => return Parse::Incomplete,
        Parse::Mismatch => step!(c.lit("\"parameters\"")),
    }
    step!(c.lit(":"));
    c.ws();
    Parse::Done((name, c.at))
}

struct Cursor<'a> {
    s: &'a str,
    at: usize,
}

impl Cursor<'_> {
    fn ws(&mut self) {
        let rest = &self.s[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }

    /// Whitespace, then `lit`.
    fn lit(&mut self, lit: &str) -> Parse<()> {
        self.ws();
        let rest = &self.s[self.at..];
        if rest.starts_with(lit) {
            self.at += lit.len();
            Parse::Done(())
        } else if lit.starts_with(rest) {
            Parse::Incomplete
        } else {
            Parse::Mismatch
        }
    }

    /// Whitespace, then a JSON string, decoded.
    fn string(&mut self) -> Parse<String> {
        self.ws();
        let rest = &self.s[self.at..];
        if rest.is_empty() {
            return Parse::Incomplete;
        }
        if !rest.starts_with('"') {
            return Parse::Mismatch;
        }
        let mut scan = ValueScan::default();
        for (i, ch) in rest.char_indices() {
            if scan.push(ch) == Scanned::Last {
                let end = i + ch.len_utf8();
                return match serde_json::from_str(&rest[..end]) {
                    Ok(name) => {
                        self.at += end;
                        Parse::Done(name)
                    }
                    Err(_) => Parse::Mismatch,
                };
            }
        }
        Parse::Incomplete
    }
}

/// Where one JSON value ends, fed a character at a time: tracks strings,
/// escapes and nesting, not full syntax (serde_json judges that later, if
/// at all: OpenAI hands arguments over as generated).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ValueScan {
    started: bool,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// A number or `true` / `false` / `null`: ends before a delimiter.
    bare: bool,
    done: bool,
}

/// What `ValueScan::push` made of a character.
#[derive(Debug, PartialEq)]
pub enum Scanned {
    /// Whitespace before the value: not part of it.
    Skipped,
    /// Part of the value, which goes on.
    Part,
    /// The value's last character.
    Last,
    /// Not part of the value, which ended just before it.
    After,
}

impl ValueScan {
    pub fn push(&mut self, ch: char) -> Scanned {
        if self.done {
            return Scanned::After;
        }
        if !self.started {
            if ch.is_whitespace() {
                return Scanned::Skipped;
            }
            self.started = true;
            match ch {
                '"' => self.in_string = true,
                '{' | '[' => self.depth = 1,
                _ => self.bare = true,
            }
            return Scanned::Part;
        }
        if self.bare {
            if ch.is_whitespace() || matches!(ch, ',' | '}' | ']') {
                self.done = true;
                return Scanned::After;
            }
            return Scanned::Part;
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if ch == '\\' {
                self.escaped = true;
            } else if ch == '"' {
                self.in_string = false;
                if self.depth == 0 {
                    self.done = true;
                    return Scanned::Last;
                }
            }
            return Scanned::Part;
        }
        match ch {
            '"' => self.in_string = true,
            '{' | '[' => self.depth += 1,
            '}' | ']' => {
                self.depth -= 1;
                if self.depth == 0 {
                    self.done = true;
                    return Scanned::Last;
                }
            }
            _ => {}
        }
        Scanned::Part
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_read_whole_or_not_at_all() {
        let full = r#"{"name": "get_weather", "arguments": {"city"#;
        let Parse::Done((name, used)) = head(full) else {
            panic!("{:?}", head(full))
        };
        assert_eq!(name, "get_weather");
        assert_eq!(&full[used..], r#"{"city"#);
        // Every prefix short of its colon is incomplete.
        let end = full.find(r#": {"city"#).unwrap() + 1;
        for cut in 0..end {
            assert_eq!(head(&full[..cut]), Parse::Incomplete, "{:?}", &full[..cut]);
        }
        assert!(matches!(
            head("{ \"name\" :\"f\\u0021\" ,\n \"parameters\":{}"),
            Parse::Done((n, _)) if n == "f!"
        ));
        assert_eq!(head(r#"{"arguments": {}, "name": "f"}"#), Parse::Mismatch);
        assert_eq!(head("Sure, {"), Parse::Mismatch);
        assert_eq!(head(r#"{"name": 3"#), Parse::Mismatch);
    }

    fn scan(s: &str) -> Option<usize> {
        let mut v = ValueScan::default();
        for (i, ch) in s.char_indices() {
            match v.push(ch) {
                Scanned::Last => return Some(i + ch.len_utf8()),
                Scanned::After => return Some(i),
                _ => {}
            }
        }
        None
    }

    #[test]
    fn values_end_where_json_says() {
        assert_eq!(scan(r#"{"a": "}\"{", "b": [1, {}]}}"#), Some(27));
        assert_eq!(scan(r#"  "x\\"rest"#), Some(7));
        assert_eq!(scan("42}"), Some(2));
        assert_eq!(scan(r#"{"a": ["#), None);
    }
}
