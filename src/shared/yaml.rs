//! YAML read the way Kubernetes' and Kyverno's Go code reads it:
//! `sigs.k8s.io/yaml`'s `YAMLToJSON` over go-yaml v2. Kyverno's CEL
//! `yaml.parse`, its JMESPath `parse_yaml` and its YAML `patchesJson6902` all
//! go through it, so they share its YAML 1.1 reading:
//! - an unquoted `y`, `yes`, `on`, `n`, `no`, `off` (and their capitalised
//!   forms) is a boolean, `017` is octal, `1_000` is 1000, `0b101` is binary;
//! - a key that is not text is written as text (`n: 1` is `{"false": 1}`,
//!   `1.5: x` is `{"1.5": "x"}`), a null key is an error;
//! - `<<` merges mappings, aliases are expanded;
//! - only the first document is read;
//! - a NaN or infinite value is an error (JSON cannot hold it).
//!
//! The syntax comes from `saphyr_parser`'s events; what a scalar means (go-yaml's
//! `resolve`) is decided here, since that is where YAML 1.1 and 1.2 part.

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;

/// Deepest nesting read: deeper documents are refused rather than risk the
/// stack when the value is converted or dropped.
const MAX_DEPTH: usize = 200;

/// Nodes an alias may copy in all: a few aliases of aliases would otherwise
/// expand to billions of nodes (go-yaml refuses "excessive aliasing" too).
const MAX_ALIAS_NODES: usize = 400_000;

/// The JSON `sigs.k8s.io/yaml.YAMLToJSON` makes of `text`.
pub fn to_json(text: &str) -> Result<Value, String> {
    let node = Reader::new(text).document()?;
    json_of(&node)
}

/// A decoded YAML node as go-yaml v2 holds it in an `interface{}`.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Entries in document order; a later entry replaces an earlier one with
    /// the same key, as go-yaml's map assignment does.
    Map(Vec<(Node, Node)>),
}

impl Node {
    fn size(&self) -> usize {
        match self {
            Node::Seq(items) => 1 + items.iter().map(Node::size).sum::<usize>(),
            Node::Map(entries) => {
                1 + entries
                    .iter()
                    .map(|(k, v)| k.size() + v.size())
                    .sum::<usize>()
            }
            _ => 1,
        }
    }
}

struct Reader<'input> {
    parser: Parser<'input, saphyr_parser::StrInput<'input>>,
    anchors: HashMap<usize, Node>,
    alias_nodes: usize,
}

impl<'input> Reader<'input> {
    fn new(text: &'input str) -> Self {
        Reader {
            parser: Parser::new_from_str(text),
            anchors: HashMap::new(),
            alias_nodes: 0,
        }
    }

    fn next(&mut self) -> Result<(Event<'input>, usize), String> {
        match self.parser.next_event() {
            Some(Ok((event, span))) => Ok((event, span.start.line())),
            Some(Err(e)) => Err(format!("yaml: {e}")),
            None => Err("yaml: unexpected end of input".to_string()),
        }
    }

    /// The first document's node; null when the text holds none. Later
    /// documents are not read, as go-yaml's `Unmarshal` does not read them.
    fn document(&mut self) -> Result<Node, String> {
        loop {
            match self.next()?.0 {
                Event::StreamStart | Event::Nothing => {}
                Event::StreamEnd => return Ok(Node::Null),
                Event::DocumentStart(_) => break,
                other => return Err(format!("yaml: unexpected {other:?}")),
            }
        }
        let node = match self.next()? {
            (Event::DocumentEnd, _) => return Ok(Node::Null),
            (event, line) => self.node(event, line, 0)?,
        };
        // libyaml ends a document without looking at what follows (only the
        // next document's start would, and go-yaml never asks for it): text
        // after a flow collection (`[1]\nb: 2`) is no error there, while this
        // parser reports it at the document's end.
        match self.parser.next_event() {
            Some(Err(e)) if e.info() == "did not find expected <document start>" => Ok(node),
            Some(Err(e)) => Err(format!("yaml: {e}")),
            _ => Ok(node),
        }
    }

    fn node(&mut self, event: Event<'input>, line: usize, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "yaml: line {line}: nested more than {MAX_DEPTH} deep"
            ));
        }
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let node = scalar(&text, style, tag.as_deref())
                    .map_err(|e| format!("yaml: line {line}: {e}"))?;
                Ok(self.anchored(anchor, node))
            }
            Event::Alias(id) => self.alias(id, line),
            Event::SequenceStart(anchor, _) => {
                let mut items = Vec::new();
                loop {
                    match self.next()? {
                        (Event::SequenceEnd, _) => break,
                        (event, line) => items.push(self.node(event, line, depth + 1)?),
                    }
                }
                Ok(self.anchored(anchor, Node::Seq(items)))
            }
            Event::MappingStart(anchor, _) => {
                let mut entries = Vec::new();
                loop {
                    let (event, line) = match self.next()? {
                        (Event::MappingEnd, _) => break,
                        next => next,
                    };
                    let merge = is_merge_key(&event);
                    let key = self.node(event, line, depth + 1)?;
                    let (event, line) = self.next()?;
                    let value = self.node(event, line, depth + 1)?;
                    if merge {
                        merge_into(&mut entries, value)
                            .map_err(|e| format!("yaml: line {line}: {e}"))?;
                    } else {
                        entries.push((key, value));
                    }
                }
                Ok(self.anchored(anchor, Node::Map(entries)))
            }
            other => Err(format!("yaml: line {line}: unexpected {other:?}")),
        }
    }

    fn anchored(&mut self, anchor: usize, node: Node) -> Node {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        node
    }

    fn alias(&mut self, id: usize, line: usize) -> Result<Node, String> {
        // An anchor is stored once its node is complete, so an alias inside
        // its own anchor's node finds nothing: go-yaml refuses that as well.
        let node = self.anchors.get(&id).cloned().ok_or_else(|| {
            format!("yaml: line {line}: an alias to an anchor whose value contains it")
        })?;
        self.alias_nodes = self.alias_nodes.saturating_add(node.size());
        if self.alias_nodes > MAX_ALIAS_NODES {
            return Err("yaml: document contains excessive aliasing".to_string());
        }
        Ok(node)
    }
}

/// `<<` as a key, untagged and unquoted or tagged `!!merge`.
fn is_merge_key(event: &Event) -> bool {
    match event {
        Event::Scalar(text, style, _, tag) => {
            text.as_ref() == "<<"
                && match tag.as_deref() {
                    None => *style == ScalarStyle::Plain,
                    Some(tag) => tag.is_yaml_core_schema() && tag.suffix == "merge",
                }
        }
        _ => false,
    }
}

/// go-yaml's merge: a mapping's entries, or each mapping's of a sequence, the
/// earlier ones taking precedence.
fn merge_into(entries: &mut Vec<(Node, Node)>, value: Node) -> Result<(), String> {
    const WANT_MAP: &str = "map merge requires map or sequence of maps as the value";
    match value {
        Node::Map(merged) => entries.extend(merged),
        Node::Seq(maps) => {
            for map in maps.into_iter().rev() {
                match map {
                    Node::Map(merged) => entries.extend(merged),
                    _ => return Err(WANT_MAP.to_string()),
                }
            }
        }
        _ => return Err(WANT_MAP.to_string()),
    }
    Ok(())
}

/// A scalar's value: quoted and block scalars are text unless tagged, plain
/// ones are resolved as YAML 1.1.
fn scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Node, String> {
    let Some(tag) = tag else {
        return Ok(if style == ScalarStyle::Plain {
            resolve_plain(text)
        } else {
            Node::Str(text.to_string())
        });
    };
    if !tag.is_yaml_core_schema() {
        // go-yaml keeps the text of a scalar with a tag it does not know.
        return Ok(Node::Str(text.to_string()));
    }
    let resolved = resolve_plain(text);
    let mismatch = |kind: &str| format!("cannot decode `{text}` as a !!{kind}");
    match tag.suffix.as_str() {
        "str" => Ok(Node::Str(text.to_string())),
        "binary" => binary(text),
        "null" => match resolved {
            Node::Null => Ok(Node::Null),
            _ => Err(mismatch("null")),
        },
        "bool" => match resolved {
            Node::Bool(b) => Ok(Node::Bool(b)),
            _ => Err(mismatch("bool")),
        },
        "int" => match resolved {
            Node::Int(_) | Node::Uint(_) => Ok(resolved),
            _ => Err(mismatch("int")),
        },
        "float" => match resolved {
            Node::Float(_) => Ok(resolved),
            Node::Int(i) => Ok(Node::Float(i as f64)),
            _ => Err(mismatch("float")),
        },
        // A timestamp decoded into an `interface{}` stays its text.
        "timestamp" if looks_like_timestamp(text) => Ok(Node::Str(text.to_string())),
        "timestamp" => Err(mismatch("timestamp")),
        _ => Ok(Node::Str(text.to_string())),
    }
}

fn binary(text: &str) -> Result<Node, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| "!!binary value contains invalid base64 data".to_string())?;
    Ok(Node::Str(String::from_utf8_lossy(&bytes).into_owned()))
}

/// go-yaml's quick check before it tries its timestamp layouts: four digits
/// and a dash.
fn looks_like_timestamp(text: &str) -> bool {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    digits == 4 && text.as_bytes().get(4) == Some(&b'-')
}

/// go-yaml v2's `resolve` for an untagged plain scalar.
fn resolve_plain(text: &str) -> Node {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Node::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Node::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Node::Bool(false);
        }
        ".nan" | ".NaN" | ".NAN" => return Node::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Node::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Node::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match text.as_bytes().first() {
        Some(b'.') => match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Node::Float(f),
            _ => Node::Str(text.to_string()),
        },
        Some(b'+' | b'-' | b'0'..=b'9') => {
            number(text).unwrap_or_else(|| Node::Str(text.to_string()))
        }
        _ => Node::Str(text.to_string()),
    }
}

/// An integer as Go's `strconv.ParseInt(s, 0, 64)` then `ParseUint` read it
/// (underscores dropped first), else a float YAML 1.1 writes.
fn number(text: &str) -> Option<Node> {
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    if let Some(node) = go_integer(&plain) {
        return Some(node);
    }
    if is_yaml_float(&plain) {
        // Go refuses a float out of range; the text stays a string.
        return plain
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Node::Float);
    }
    // go-yaml's own binary branch: `0b` then what `ParseInt(_, 2)` reads (a
    // sign included), or `-0b` then unsigned binary digits.
    if let Some(digits) = plain.strip_prefix("-0b") {
        return signed(true, digits_value(digits, 2)?, false);
    }
    let (negative, digits) = split_sign(plain.strip_prefix("0b")?);
    signed(negative, digits_value(digits, 2)?, false)
}

fn split_sign(text: &str) -> (bool, &str) {
    match text.as_bytes().first() {
        Some(b'-') => (true, text.get(1..).unwrap_or_default()),
        Some(b'+') => (false, text.get(1..).unwrap_or_default()),
        _ => (false, text),
    }
}

/// `ParseInt(text, 0, 64)`, falling back to `ParseUint(text, 0, 64)`.
fn go_integer(text: &str) -> Option<Node> {
    let (negative, unsigned) = split_sign(text);
    let has_sign = unsigned.len() != text.len();
    let (base, digits) = match unsigned.as_bytes() {
        [b'0', b'b' | b'B', _, ..] => (2, unsigned.get(2..)?),
        [b'0', b'o' | b'O', _, ..] => (8, unsigned.get(2..)?),
        [b'0', b'x' | b'X', _, ..] => (16, unsigned.get(2..)?),
        [b'0', ..] => (8, unsigned.get(1..)?),
        _ => (10, unsigned),
    };
    if base == 8 && digits.is_empty() && unsigned == "0" {
        return Some(Node::Int(0));
    }
    let magnitude = digits_value(digits, base)?;
    signed(negative, magnitude, !has_sign)
}

/// The value of `digits` in `base`, when all are digits of it and it fits in
/// 64 bits unsigned.
fn digits_value(digits: &str, base: u32) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.chars().try_fold(0u64, |acc, c| {
        let digit = u64::from(c.to_digit(base)?);
        acc.checked_mul(u64::from(base))?.checked_add(digit)
    })
}

/// An int64 when it fits, else (for text without a sign) a uint64.
fn signed(negative: bool, magnitude: u64, unsigned_allowed: bool) -> Option<Node> {
    if negative {
        if magnitude <= i64::MAX as u64 + 1 {
            return Some(Node::Int((magnitude as i64).wrapping_neg()));
        }
        return None;
    }
    match i64::try_from(magnitude) {
        Ok(i) => Some(Node::Int(i)),
        Err(_) if unsigned_allowed => Some(Node::Uint(magnitude)),
        Err(_) => None,
    }
}

/// go-yaml's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(text: &str) -> bool {
    let (_, rest) = split_sign(text);
    let mantissa_end = rest.find(['e', 'E']).unwrap_or(rest.len());
    let (mantissa, exponent) = rest.split_at(mantissa_end);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        None => digits(mantissa),
        Some(("", fraction)) => digits(fraction),
        Some((whole, fraction)) => digits(whole) && (fraction.is_empty() || digits(fraction)),
    };
    let exponent_ok = match exponent.get(1..) {
        None => true,
        Some(power) => digits(split_sign(power).1) && !power.starts_with(['e', 'E']),
    };
    mantissa_ok && exponent_ok
}

/// `convertToJSONableObject` then `json.Marshal`.
fn json_of(node: &Node) -> Result<Value, String> {
    Ok(match node {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(*b),
        Node::Int(i) => Value::from(*i),
        Node::Uint(u) => Value::from(*u),
        Node::Float(f) if !f.is_finite() => {
            return Err(format!("json: unsupported value: {}", go_special_float(*f)));
        }
        // Go's encoder writes a whole float without a fraction.
        Node::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Value::from(*f as i64),
        Node::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Node::Str(s) => Value::String(s.clone()),
        Node::Seq(items) => Value::Array(items.iter().map(json_of).collect::<Result<_, _>>()?),
        Node::Map(entries) => {
            // A repeated key's last value is the one go-yaml keeps; the ones
            // it replaced are never converted, so they cannot fail.
            let mut map = Map::with_capacity(entries.len());
            for (key, value) in entries.iter().rev() {
                let key = key_text(key)?;
                if !map.contains_key(key.as_ref()) {
                    map.insert(key.into_owned(), json_of(value)?);
                }
            }
            Value::Object(map)
        }
    })
}

fn go_special_float(f: f64) -> &'static str {
    if f.is_nan() {
        "NaN"
    } else if f > 0.0 {
        "+Inf"
    } else {
        "-Inf"
    }
}

/// A key as `convertToJSONableObject` writes it.
fn key_text(key: &Node) -> Result<Cow<'_, str>, String> {
    match key {
        Node::Str(s) => Ok(Cow::Borrowed(s)),
        Node::Int(i) => Ok(Cow::Owned(i.to_string())),
        Node::Bool(b) => Ok(Cow::Borrowed(if *b { "true" } else { "false" })),
        Node::Float(f) => Ok(Cow::Owned(float32_key(*f))),
        Node::Uint(_) => Err("unsupported map key of type: uint64".to_string()),
        Node::Null => Err("unsupported map key of type: <nil>".to_string()),
        Node::Seq(_) | Node::Map(_) => Err("invalid map key: a sequence or mapping".to_string()),
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 32)`, with go-yaml's names for the
/// special values: the shortest digits that read back as the same float32,
/// in exponent form when the exponent is below -4 or at least 6 (what `%g`
/// decides for shortest output).
fn float32_key(f: f64) -> String {
    let single = f as f32;
    if single.is_nan() {
        return ".nan".to_string();
    }
    if single.is_infinite() {
        return if single > 0.0 { ".inf" } else { "-.inf" }.to_string();
    }
    crate::shared::go_float::shortest_g(&format!("{single:e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Value {
        match to_json(text) {
            Ok(value) => value,
            Err(e) => panic!("{text:?}: {e}"),
        }
    }

    #[test]
    fn unquoted_yaml_1_1_words_are_booleans_and_keys_become_text() {
        // Kyverno 1.19.1's `yaml.parse('k: v\nn: 1.5')` is {"false": 1.5, "k": "v"}.
        assert_eq!(read("k: v\nn: 1.5"), json!({"false": 1.5, "k": "v"}));
        assert_eq!(
            read("a: yes\nb: Off\nc: 'no'\nd: y\ne: ON\nf: oN"),
            json!({"a": true, "b": false, "c": "no", "d": true, "e": true, "f": "oN"})
        );
        assert_eq!(
            read("1: a\n1.5: b\ntrue: c\n1e7: d"),
            json!({"1": "a", "1.5": "b", "true": "c", "1e+07": "d"})
        );
    }

    #[test]
    fn numbers_are_read_as_go_reads_them() {
        assert_eq!(
            read("[017, 0x1F, 0o17, 0b101, 1_000, 09, +5, -0x10, .5, 1e3, 1.0, 1e400, 0x, 12:30]"),
            json!([
                15, 31, 15, 5, 1000, 9, 5, -16, 0.5, 1000, 1, "1e400", "0x", "12:30"
            ])
        );
        assert_eq!(read("18446744073709551615"), json!(18446744073709551615u64));
        assert_eq!(read("-9223372036854775808"), json!(i64::MIN));
    }

    #[test]
    fn nulls_tags_merges_and_documents() {
        assert_eq!(read(""), Value::Null);
        assert_eq!(read("# only a comment\n"), Value::Null);
        assert_eq!(
            read("a:\nb: ~\nc: !!str 12\nd: !!int '7'"),
            json!({"a": null, "b": null, "c": "12", "d": 7})
        );
        assert_eq!(
            read("base: &b {p: 1, q: 2}\nmore: {<<: *b, q: 3}\ny: 1"),
            json!({"base": {"p": 1, "q": 2}, "more": {"p": 1, "q": 3}, "true": 1})
        );
        assert_eq!(read("a: 1\n---\nb: 2"), json!({"a": 1}));
    }

    #[test]
    fn what_json_cannot_hold_is_an_error() {
        assert!(to_json("a: .nan").is_err());
        assert!(to_json("~: 1").is_err());
        assert!(to_json("18446744073709551615: 1").is_err());
        assert!(to_json("a: [1, 2").is_err());
        assert!(to_json("!!int abc").is_err());
        assert_eq!(read(".inf: 1"), json!({".inf": 1}));
    }

    #[test]
    fn aliases_are_bounded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(to_json(&text).is_err());
        assert!(to_json("a: &a [*a]").is_err());
    }

    #[test]
    fn float_keys_are_written_as_float32_g() {
        for (f, text) in [
            (1.5, "1.5"),
            (0.1, "0.1"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-0.0, "-0"),
            (1.23456789012, "1.2345679"),
            (1e300, ".inf"),
        ] {
            assert_eq!(float32_key(f), text, "{f}");
        }
    }
}
