//! Python's view of values, for chat templates rendered as jinja2 renders
//! them: `tojson` as `json.dumps`, printed lists and dicts as `repr`, floats
//! as `repr(float)`, `strftime` dates.

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind, Output, State};

/// Writes `{{ value }}` as jinja2 does: `str(value)`, which for lists and
/// dicts is their Python `repr` (`['a', 1]`, `{'k': None}`), where
/// minijinja would print JSON-like text, and for floats the shortest round
/// trip in Python's notation (`1e-05`, `1e+16`), where minijinja would print
/// `0.00001` and `10000000000000000.0`.
pub(super) fn python_formatter(
    out: &mut Output,
    state: &State,
    value: &Value,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {
            let mut s = String::new();
            write_repr(value, &mut s)?;
            out.write_str(&s).map_err(Error::from)
        }
        ValueKind::Number if !value.is_integer() => out
            .write_str(&python_float(f64::try_from(value.clone())?))
            .map_err(Error::from),
        _ => minijinja::escape_formatter(out, state, value),
    }
}

/// `x | string` as Python's `str(x)` (a list or dict becomes its `repr`).
pub(super) fn python_str(value: Value) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {
            let mut s = String::new();
            write_repr(&value, &mut s)?;
            Ok(Value::from(s))
        }
        ValueKind::String => Ok(value),
        ValueKind::None => Ok(Value::from("None")),
        ValueKind::Bool => Ok(Value::from(if value.is_true() { "True" } else { "False" })),
        ValueKind::Undefined => Ok(Value::from("")),
        ValueKind::Number if !value.is_integer() => {
            Ok(Value::from(python_float(f64::try_from(value)?)))
        }
        _ => Ok(Value::from(value.to_string())),
    }
}

/// Python's `repr` of a value from JSON-like data.
fn write_repr(v: &Value, out: &mut String) -> Result<(), Error> {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number if v.is_integer() => out.push_str(&v.to_string()),
        ValueKind::Number => out.push_str(&python_float(f64::try_from(v.clone())?)),
        ValueKind::String | ValueKind::Bytes => {
            write_str_repr(&v.to_str().unwrap_or_default(), out)
        }
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (i, item) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(&item, out)?;
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, k) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(&k, out)?;
                out.push_str(": ");
                write_repr(&v.get_item(&k)?, out)?;
            }
            out.push('}');
        }
        _ => out.push_str(&v.to_string()),
    }
    Ok(())
}

/// Python's `str.isprintable` for the characters text may hold: not a
/// control character, not a separator other than the space, not a format
/// character (the common ones), not a private-use or surrogate code point.
fn python_printable(c: char) -> bool {
    !matches!(c as u32,
        0..=0x1f | 0x7f..=0xa0 | 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f
        | 0x1680 | 0x180e | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x206f | 0x3000 | 0xd800..=0xf8ff | 0xfeff | 0xfff9..=0xfffb
        | 0xe0001 | 0xe0020..=0xe007f | 0xf0000..)
}

/// Python's `repr(str)`: single quotes unless the text has a single quote and
/// no double quote; backslash escapes for quotes, `\\`, `\n`, `\r`, `\t`
/// and other non-printable characters.
fn write_str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !python_printable(c) => {
                let n = c as u32;
                match n {
                    0..=0xff => out.push_str(&format!("\\x{n:02x}")),
                    0x100..=0xffff => out.push_str(&format!("\\u{n:04x}")),
                    _ => out.push_str(&format!("\\U{n:08x}")),
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// `x | tojson(indent=None)` as Python's `json.dumps(x, ensure_ascii=False, indent=indent)`.
pub(super) fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    // ensure_ascii / separators are accepted; the defaults are what HF uses.
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<Value> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    write_json(&value, indent, sort_keys.unwrap_or(false), 0, &mut out)?;
    Ok(Value::from(out))
}

fn write_json(
    v: &Value,
    indent: Option<usize>,
    sort_keys: bool,
    depth: usize,
    out: &mut String,
) -> Result<(), Error> {
    let newline = |out: &mut String, depth: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * depth));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if v.is_integer() {
                out.push_str(&v.to_string());
            } else {
                let f = f64::try_from(v.clone())?;
                // json.dumps writes the non-finite floats as JavaScript names.
                out.push_str(&match f {
                    f if f.is_nan() => "NaN".into(),
                    f if f.is_infinite() => if f > 0.0 { "Infinity" } else { "-Infinity" }.into(),
                    f => python_float(f),
                });
            }
        }
        ValueKind::String | ValueKind::Bytes => {
            let s = v.to_str().unwrap_or_default();
            out.push_str(&serde_json::to_string(&*s).expect("strings serialize"));
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, depth + 1);
                write_json(item, indent, sort_keys, depth + 1, out)?;
            }
            newline(out, depth);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if sort_keys {
                keys.sort();
            }
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, depth + 1);
                let key = match k.as_str() {
                    Some(s) => s.to_string(),
                    None => k.to_string(),
                };
                out.push_str(&serde_json::to_string(&key).expect("strings serialize"));
                out.push_str(": ");
                write_json(&v.get_item(k)?, indent, sort_keys, depth + 1, out)?;
            }
            newline(out, depth);
            out.push('}');
        }
        ValueKind::Plain | ValueKind::Invalid => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: cannot serialize {v}"),
            ));
        }
        _ => out.push_str("null"),
    }
    Ok(())
}

/// Python's `repr(float)` (and `str`): shortest round trip, `1.0` not `1`,
/// `1e+16` / `1e-05` exponents, `nan`, `inf`.
pub(super) fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    let a = f.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let s = format!("{f:e}"); // "1e16", "1.5e-7"
        let (mant, exp) = s.split_once('e').expect("exponent form");
        let exp: i32 = exp.parse().expect("exponent");
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", exp.abs());
    }
    format!("{f:?}")
}

/// `time.strftime` for the common codes, in UTC.
pub(super) fn strftime(fmt: &str, unix_secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = unix_secs / 86400;
    let (y, m, d) = civil_from_days(days as i64);
    let secs = unix_secs % 86400;
    let weekday = DAYS[(days % 7) as usize];
    let month = MONTHS[(m - 1) as usize];
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y % 100)),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            // glibc's unpadded forms
            Some('-') => match chars.next() {
                Some('d') => out.push_str(&d.to_string()),
                Some('m') => out.push_str(&m.to_string()),
                Some(other) => out.extend(['%', '-', other]),
                None => out.push_str("%-"),
            },
            Some('B') => out.push_str(month),
            Some('b') => out.push_str(&month[..3]),
            Some('A') => out.push_str(weekday),
            Some('a') => out.push_str(&weekday[..3]),
            Some('H') => out.push_str(&format!("{:02}", secs / 3600)),
            Some('M') => out.push_str(&format!("{:02}", secs / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", secs % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
pub(super) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}
