//! JSON text as Go's `encoding/json` `Marshal` writes it, which Kyverno's
//! `json.marshal` (CEL) and `to_string` (JMESPath) give: keys sorted, no
//! spaces, `<`, `>` and `&` escaped as `\u003c`, `\u003e`, `\u0026` (and
//! U+2028, U+2029), and a double in plain decimal from 1e-6 to 1e21
//! (`18446744073709552000`), in exponent form outside (`1e+21`, `1e-7`).

use std::fmt::Write as _;

use serde_json::Value;

/// `json.Marshal(value)`; objects' keys in byte order, as Go sorts a map's.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, false);
    out
}

/// `json.Marshal` of what `json.Unmarshal` into `any` gives: every number a
/// float64 (`18446744073709551615` is written `18446744073709552000`).
pub fn to_string_as_doubles(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, true);
    out
}

fn write_value(out: &mut String, value: &Value, doubles: bool) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) if doubles => out.push_str(&n.as_f64().map_or("null".into(), float)),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (_, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (_, _, Some(f)) => out.push_str(&float(f)),
            _ => out.push_str("null"),
        },
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, doubles);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, item, doubles);
            }
            out.push('}');
        }
    }
}

/// Go's float64 text in JSON: `strconv` 'f' with the shortest digits, or
/// 'e' below 1e-6 and from 1e21, its exponent without a leading zero.
pub fn float(f: f64) -> String {
    let magnitude = f.abs();
    if magnitude != 0.0 && !(1e-6..1e21).contains(&magnitude) {
        // Rust's `{:e}`: the same shortest digits, `1e21`, `-1.5e-7`.
        let scientific = format!("{f:e}");
        return match scientific.split_once("e-") {
            Some((mantissa, exponent)) => format!("{mantissa}e-{exponent}"),
            None => scientific.replacen('e', "e+", 1),
        };
    }
    // Rust's `{}` of a double is the shortest digits in plain decimal.
    format!("{f}")
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_what_go_marshal_writes() {
        // Go 1.25's json.Marshal of the same values.
        assert_eq!(
            to_string(&json!({"b": [1, 2.5, -0.0], "a": "<x & y>\u{2028}\u{1}\t", "c": null})),
            r#"{"a":"\u003cx \u0026 y\u003e\u2028\u0001\t","b":[1,2.5,-0],"c":null}"#
        );
        for (f, text) in [
            (18446744073709551615.0, "18446744073709552000"),
            (1e21, "1e+21"),
            (1.5e-7, "1.5e-7"),
            (1e-6, "0.000001"),
            (123456789.0, "123456789"),
            (1.2e-10, "1.2e-10"),
            (2.5e300, "2.5e+300"),
        ] {
            assert_eq!(float(f), text, "{f}");
        }
    }
}
