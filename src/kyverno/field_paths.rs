//! The JMESPath most Kyverno rules are made of, evaluated without the
//! parser: field paths (`request.object.target.name`,
//! `metadata.labels."topology.kubernetes.io/zone"`), raw string literals
//! (`'empty'`) and `||` between them. policy-server starts a fresh instance
//! for every request, so every expression would otherwise be parsed (and its
//! syntax tree built and dropped) on every evaluation; these shapes are read
//! in one pass over the text. Anything else returns `None` and goes to the
//! full JMESPath engine, which gives the same answer for these shapes (a test
//! below compares the two).

use std::collections::BTreeMap;
use std::rc::Rc;

use jmespath::{Rcvar, Variable};
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Whitespace the JMESPath lexer skips between tokens.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// One alternative of an `a || b || ...` chain.
enum Term<'e> {
    /// A field path, already checked; its segments are read again when
    /// evaluated.
    Path(&'e str),
    /// A raw string literal's text (without quotes or escapes).
    Literal(&'e str),
}

/// Up to four alternatives, without allocating; longer chains go to the
/// engine.
type Terms<'e> = [Option<Term<'e>>; 4];

/// `expression` over `data`, or `None` when it is not one of the shapes
/// this module reads (the caller then uses the JMESPath engine).
pub fn search(expression: &str, data: &Rcvar) -> Option<Rcvar> {
    let terms = terms(expression)?;
    let mut result = Rc::new(Variable::Null);
    for term in terms.iter().flatten() {
        result = match term {
            Term::Path(path) => follow(path, data),
            Term::Literal(text) => Rc::new(Variable::String((*text).to_string())),
        };
        if result.is_truthy() {
            break;
        }
    }
    Some(result)
}

/// The parts of a document an expression can reach: the whole of it, or
/// some of its fields (and parts of those).
#[derive(Debug, PartialEq)]
pub enum Reach<'e> {
    Whole,
    Fields(Vec<(&'e str, Reach<'e>)>),
}

/// What `expression` reads of its data, when it is one this module reads:
/// a document decoded with [`Pruned`] to that reach gives the expression the
/// same answer as the whole document.
pub fn reach(expression: &str) -> Option<Reach<'_>> {
    let mut reach = Reach::Fields(Vec::new());
    for term in terms(expression)?.iter().flatten() {
        let Term::Path(path) = term else { continue };
        reach.take(segments(path));
    }
    Some(reach)
}

impl<'e> Reach<'e> {
    /// Adds a path (field names from the top) and all below it.
    pub fn take(&mut self, path: impl IntoIterator<Item = &'e str>) {
        let mut at = self;
        for name in path {
            let Reach::Fields(fields) = at else {
                // An earlier path already takes all of this.
                return;
            };
            let index = match fields.iter().position(|(n, _)| *n == name) {
                Some(index) => index,
                None => {
                    fields.push((name, Reach::Fields(Vec::new())));
                    fields.len() - 1
                }
            };
            let Some((_, inner)) = fields.get_mut(index) else {
                return;
            };
            at = inner;
        }
        *at = Reach::Whole;
    }
}

/// The host field masks (dotted paths, Kubewarden 1.35) that keep what a
/// [`Reach`] takes. A field whose name has a dot cannot be named in a mask,
/// so its parent is kept whole; a reach of the whole document needs none.
pub fn field_masks(reach: &Reach) -> Vec<String> {
    fn walk(reach: &Reach, prefix: &str, out: &mut Vec<String>) {
        match reach {
            Reach::Fields(fields) if !fields.is_empty() => {
                if fields
                    .iter()
                    .any(|(name, _)| name.contains('.') || name.is_empty())
                {
                    out.push(prefix.to_string());
                    return;
                }
                for (name, inner) in fields {
                    let path = if prefix.is_empty() {
                        (*name).to_string()
                    } else {
                        [prefix, ".", name].concat()
                    };
                    walk(inner, &path, out);
                }
            }
            _ => out.push(prefix.to_string()),
        }
    }
    let mut masks = Vec::new();
    walk(reach, "", &mut masks);
    if masks.iter().any(String::is_empty) {
        return Vec::new();
    }
    masks.sort();
    masks.dedup();
    masks
}

/// Decodes only what a [`Reach`] takes: fields outside it are skipped
/// without being built, which is most of a Node.
pub struct Pruned<'r, 'e>(pub &'r Reach<'e>);

impl<'de> DeserializeSeed<'de> for Pruned<'_, '_> {
    type Value = Variable;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Variable, D::Error> {
        match self.0 {
            Reach::Whole => Variable::deserialize(deserializer),
            Reach::Fields(fields) => deserializer.deserialize_any(FieldsVisitor(fields)),
        }
    }
}

struct FieldsVisitor<'r, 'e>(&'r [(&'e str, Reach<'e>)]);

impl<'de> Visitor<'de> for FieldsVisitor<'_, '_> {
    type Value = Variable;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Variable, A::Error> {
        let mut object = BTreeMap::new();
        while let Some(found) = map.next_key_seed(FieldName(self.0))? {
            match found.and_then(|index| self.0.get(index)) {
                Some((name, reach)) => {
                    let value = map.next_value_seed(Pruned(reach))?;
                    object.insert((*name).to_string(), Rc::new(value));
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Variable::Object(object))
    }

    // Anything but an object has no fields: following a path into it gives
    // null, so it is skipped.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Variable, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Variable::Null)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_str<E>(self, _: &str) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_unit<E>(self) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
}

/// Decodes a JSON document keeping, inside objects, only the fields a
/// [`Reach`] takes; anything else (a list, a string where the reach expects
/// an object) is kept whole, as CEL tells those apart from a missing field.
pub struct PrunedJson<'r, 'e>(pub &'r Reach<'e>);

impl<'de> DeserializeSeed<'de> for PrunedJson<'_, '_> {
    type Value = serde_json::Value;

    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<serde_json::Value, D::Error> {
        match self.0 {
            Reach::Whole => serde_json::Value::deserialize(deserializer),
            Reach::Fields(fields) => deserializer.deserialize_any(JsonFieldsVisitor(fields)),
        }
    }
}

struct JsonFieldsVisitor<'r, 'e>(&'r [(&'e str, Reach<'e>)]);

impl<'de> Visitor<'de> for JsonFieldsVisitor<'_, '_> {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<serde_json::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(found) = map.next_key_seed(FieldName(self.0))? {
            match found.and_then(|index| self.0.get(index)) {
                Some((name, reach)) => {
                    let value = map.next_value_seed(PrunedJson(reach))?;
                    object.insert((*name).to_string(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(serde_json::Value::Object(object))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<serde_json::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<serde_json::Value>()? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }
    fn visit_bool<E>(self, b: bool) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<serde_json::Value, E> {
        Ok(n.into())
    }
    fn visit_u64<E>(self, n: u64) -> Result<serde_json::Value, E> {
        Ok(n.into())
    }
    fn visit_f64<E>(self, n: f64) -> Result<serde_json::Value, E> {
        Ok(serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, Into::into))
    }
    fn visit_str<E>(self, s: &str) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::String(s.to_string()))
    }
    fn visit_unit<E>(self) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Null)
    }
}

/// A key, as the index of the wanted field it names (compared without
/// allocating a string for it).
struct FieldName<'r, 'e>(&'r [(&'e str, Reach<'e>)]);

impl<'de> DeserializeSeed<'de> for FieldName<'_, '_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldName<'_, '_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|(name, _)| *name == key))
    }
}

/// The terms of `expression`, or `None` when it is not a shape read here.
fn terms(expression: &str) -> Option<Terms<'_>> {
    let mut terms: Terms = [None, None, None, None];
    let bytes = expression.as_bytes();
    let mut at = skip_space(bytes, 0);
    let mut count = 0;
    loop {
        let (term, end) = term(expression, at)?;
        *terms.get_mut(count)? = Some(term);
        count += 1;
        at = skip_space(bytes, end);
        if at == bytes.len() {
            break;
        }
        if bytes.get(at..at + 2)? != b"||" {
            return None;
        }
        at = skip_space(bytes, at + 2);
    }
    Some(terms)
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|b| is_space(*b)) {
        at += 1;
    }
    at
}

/// A path or literal starting at `at`, and where it ends.
fn term(expression: &str, at: usize) -> Option<(Term<'_>, usize)> {
    let bytes = expression.as_bytes();
    if bytes.get(at) == Some(&b'\'') {
        let len = bytes.get(at + 1..)?.iter().position(|b| *b == b'\'')?;
        let text = expression.get(at + 1..at + 1 + len)?;
        // Escapes (`\'`, `\\`) are the engine's business.
        if text.contains('\\') {
            return None;
        }
        return Some((Term::Literal(text), at + len + 2));
    }
    let mut end = segment_end(bytes, at)?;
    while bytes.get(end) == Some(&b'.') {
        end = segment_end(bytes, end + 1)?;
    }
    Some((Term::Path(expression.get(at..end)?), end))
}

/// Where the identifier starting at `at` ends: an unquoted identifier, or
/// a quoted one without escapes.
fn segment_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => {
            let len = bytes.get(at + 1..)?.iter().position(|b| *b == b'"')?;
            let inner = bytes.get(at + 1..at + 1 + len)?;
            // JSON string characters only: no escapes, no control characters.
            if inner.is_empty() || inner.iter().any(|b| *b == b'\\' || *b < 0x20) {
                return None;
            }
            Some(at + len + 2)
        }
        first if first.is_ascii_alphabetic() || *first == b'_' => {
            let len = bytes
                .get(at..)?
                .iter()
                .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
                .unwrap_or(bytes.len() - at);
            Some(at + len)
        }
        _ => None,
    }
}

/// The field names of a checked path.
fn segments(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (name, after) = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
            None => rest.split_at(rest.find('.').unwrap_or(rest.len())),
        };
        rest = after.strip_prefix('.').unwrap_or(after);
        Some(name)
    })
}

/// Follows a checked path: a field of anything but an object is null.
fn follow(path: &str, data: &Rcvar) -> Rcvar {
    let mut current = data.clone();
    for name in segments(path) {
        let next = match &*current {
            Variable::Object(map) => map.get(name).cloned(),
            _ => None,
        };
        let Some(next) = next else {
            return Rc::new(Variable::Null);
        };
        current = next;
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data() -> Rcvar {
        Rc::new(
            serde_json::from_value(json!({
                "request": {"object": {"target": {"name": "node-1"}, "n": 0, "e": "", "l": [], "o": {}}},
                "metadata": {"labels": {"topology.kubernetes.io/zone": "us-east-2a", "a.b": "dotted"}},
                "a": {"b": "a.b-nested"},
                "_x1": true,
                "null": "a field named null",
                "f": false
            }))
            .unwrap(),
        )
    }

    #[test]
    fn masks_keep_what_the_reach_takes() {
        let masks = |e: &str| field_masks(&reach(e).unwrap());
        assert_eq!(
            masks("metadata.labels.foo || 'empty'"),
            ["metadata.labels.foo"]
        );
        assert_eq!(
            masks(r#"metadata.labels."topology.kubernetes.io/zone""#),
            ["metadata.labels"],
            "a key with dots cannot be a mask step: its map is kept whole"
        );
        assert_eq!(
            masks("metadata.name || spec.providerID"),
            ["metadata.name", "spec.providerID"]
        );
        assert_eq!(masks("metadata || metadata.name"), ["metadata"]);
        assert!(
            reach("length(@)").is_none(),
            "other expressions read the whole object"
        );
    }

    #[test]
    fn reach_is_what_paths_name() {
        assert_eq!(
            reach("metadata.labels.\"a.b\" || metadata.name || 'x'").unwrap(),
            Reach::Fields(vec![(
                "metadata",
                Reach::Fields(vec![
                    ("labels", Reach::Fields(vec![("a.b", Reach::Whole)])),
                    ("name", Reach::Whole)
                ])
            )])
        );
        assert_eq!(
            reach("metadata.labels || metadata.labels.zone").unwrap(),
            Reach::Fields(vec![(
                "metadata",
                Reach::Fields(vec![("labels", Reach::Whole)])
            )])
        );
        assert_eq!(reach("'only a literal'").unwrap(), Reach::Fields(vec![]));
        assert!(reach("items[].metadata").is_none());
    }

    /// Every expression below, read here and by the JMESPath engine, gives
    /// the same answer, or this module declines it.
    #[test]
    fn agrees_with_the_engine() {
        let rt = jmespath::Runtime::new();
        let read = [
            "request.object.target.name",
            "request.object.target",
            "request.missing.deeper",
            "request.object.target.name.deeper",
            "metadata.labels.\"topology.kubernetes.io/zone\"",
            "metadata.labels.\"a.b\"",
            "\"a\".\"b\"",
            "metadata.labels.\"missing\" || 'empty'",
            "metadata.labels.\"topology.kubernetes.io/zone\" || 'empty'",
            "  request.object.n || 'zero is true'  ",
            "request.object.e || request.object.l || request.object.o || 'all empty'",
            "f || 'false is false'",
            "null",
            "_x1",
            "'just a literal'",
            "'' || ''",
            "missing",
            "a.b",
        ];
        for expression in read {
            let fast = search(expression, &data())
                .unwrap_or_else(|| panic!("{expression:?} should be read here"));
            let ast = jmespath::parse(expression).unwrap();
            let mut ctx = jmespath::Context::new(expression, &rt);
            let slow = jmespath::interpret(&data(), &ast, &mut ctx).unwrap();
            assert_eq!(fast, slow, "{expression:?}");
        }
        let declined = [
            "request.object.*",
            "request . object",
            "metadata.labels.\"with \\\" escape\"",
            "'it\\'s'",
            "a || b || c || d || e",
            "a | b",
            "a && b",
            "a[0]",
            "to_upper(a)",
            "`\"x\"`",
            "1a",
            "a.",
            ".a",
            "a ||",
            "\"\"",
            "'unterminated",
            "\"unterminated",
            "",
        ];
        // Decoded only as far as each expression reaches, the document
        // gives the same answers.
        let text = serde_json::to_string(&*data()).unwrap();
        for expression in read {
            let reach = reach(expression).unwrap();
            let pruned: Variable = Pruned(&reach)
                .deserialize(&mut serde_json::Deserializer::from_str(&text))
                .unwrap();
            assert_eq!(
                search(expression, &Rc::new(pruned)),
                search(expression, &data()),
                "{expression:?} over {reach:?}"
            );
        }
        for expression in declined {
            assert!(
                search(expression, &data()).is_none(),
                "{expression:?} should go to the engine"
            );
        }
    }
}
