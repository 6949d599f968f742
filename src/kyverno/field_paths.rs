//! The JMESPath most Kyverno rules are made of, evaluated without the
//! parser: field paths (`request.object.target.name`,
//! `metadata.labels."topology.kubernetes.io/zone"`), raw string literals
//! (`'empty'`) and `||` between them. policy-server starts a fresh instance
//! for every request, so every expression would otherwise be parsed (and its
//! syntax tree built and dropped) on every evaluation; these shapes are read
//! in one pass over the text. Anything else returns `None` and goes to the
//! full JMESPath engine, which gives the same answer for these shapes (a test
//! below compares the two).

use std::rc::Rc;

use jmespath::{Rcvar, Variable};

use crate::shared::reach::Reach;

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

/// What `expression` reads of its data, when it is one this module reads:
/// a document decoded with [`Pruned`](crate::shared::reach::Pruned) to that reach gives the expression the
/// same answer as the whole document.
pub fn reach(expression: &str) -> Option<Reach<'_>> {
    let mut reach = Reach::Fields(Vec::new());
    for term in terms(expression)?.iter().flatten() {
        let Term::Path(path) = term else { continue };
        reach.take(segments(path));
    }
    Some(reach)
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
    use crate::shared::reach::{Pruned, field_masks};
    use serde::de::DeserializeSeed;
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
