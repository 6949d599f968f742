//! Metadata keys a mutation writes as literals, checked at load as the short
//! form's keys are (`label "zone name" is not a valid key: ...`), with where
//! they stand: a key the API server would refuse is refused when the policy
//! loads, not on every request it matches. Found in the parsed tree:
//!
//! - an apply configuration's map literal under a `*.metadata{...}`
//!   construction's `labels` or `annotations`
//!   (`Object{metadata: Object.metadata{labels: {"zone name": ...}}}`), each
//!   branch of a `?:` that gives it;
//! - a `JSONPatch{...}` that adds or replaces with a literal `path`: one key
//!   (`/metadata/labels/zone name`, `~1` and `~0` unescaped), or a map literal
//!   `value` under `/metadata/labels`.
//!
//! Keys computed when the mutation runs are checked then
//! ([`crate::shared::metadata::first_metadata_problem`]); a label value given as a
//! literal string is checked here too.

use ::cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use serde_json::Value;

use crate::cel::program::positions;
use crate::cel::syntax::ast::children;
use crate::shared::metadata::metadata_problem;

/// The first literal metadata key (or label value) in `expr`, a mutation's
/// expression, that the API server would refuse: the message, with the line
/// and column where it stands in `source`.
pub fn refused(source: &str, expr: &IdedExpr) -> Option<String> {
    let (_, message) = first(expr)?;
    // Positions are the crate parser's, by its node ids: the node is found
    // again in its tree, which has the same shape. A string literal starts
    // with its quote (or a raw or bytes prefix).
    let located = positions(source).and_then(|positions| {
        let (node, _) = first(&positions.tree)?;
        let literal = |text: &str| text.starts_with(['"', '\'', 'r', 'R', 'b', 'B']);
        Some(positions.locate(node.id, &literal, &message))
    });
    Some(located.unwrap_or(message))
}

/// The literal that a problem stands at, and the problem.
type Found<'e> = (&'e IdedExpr, String);

fn first(expr: &IdedExpr) -> Option<Found<'_>> {
    match &expr.expr {
        Expr::Struct(construction) => {
            let metadata = construction.type_name == "Object.metadata"
                || construction.type_name.ends_with(".metadata");
            let is_patch = construction.type_name == "JSONPatch";
            if is_patch && let Some(found) = json_patch(&construction.entries) {
                return Some(found);
            }
            for entry in &construction.entries {
                if let EntryExpr::StructField(field) = &entry.expr {
                    let section = field.field.as_str();
                    if metadata
                        && matches!(section, "labels" | "annotations")
                        && let Some(found) = map_literal(section, &field.value)
                    {
                        return Some(found);
                    }
                    if let Some(found) = first(&field.value) {
                        return Some(found);
                    }
                }
            }
            None
        }
        _ => {
            let mut found = None;
            children(expr, &mut |child| {
                if found.is_none() {
                    found = first(child);
                }
            });
            found
        }
    }
}

fn string_literal(expr: &IdedExpr) -> Option<&str> {
    match &expr.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner()),
        _ => None,
    }
}

/// A problem with a literal key or label value of `value`, when it is a map
/// literal (or `?:` between such).
fn map_literal<'e>(section: &str, value: &'e IdedExpr) -> Option<Found<'e>> {
    match &value.expr {
        Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => {
                let key = string_literal(&entry.key)?;
                entry_problem(section, key, &entry.key, &entry.value)
            }
            EntryExpr::StructField(_) => None,
        }),
        Expr::Call(call) if call.func_name == operators::CONDITIONAL => call
            .args
            .iter()
            .skip(1)
            .find_map(|branch| map_literal(section, branch)),
        _ => None,
    }
}

/// The problem with `key` (written at `at`), or else with `value` when it is
/// a literal string.
fn entry_problem<'e>(
    section: &str,
    key: &str,
    at: &'e IdedExpr,
    value: &'e IdedExpr,
) -> Option<Found<'e>> {
    if let Some(problem) = metadata_problem(section, key, None) {
        return Some((at, problem));
    }
    let value_text = string_literal(value)?;
    metadata_problem(section, key, Some(&Value::String(value_text.to_string())))
        .map(|problem| (value, problem))
}

/// A `JSONPatch{op, path, value}` that writes into labels or annotations
/// with a literal path.
fn json_patch(entries: &[::cel::common::ast::IdedEntryExpr]) -> Option<Found<'_>> {
    let field = |name: &str| {
        entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::StructField(f) if f.field == name => Some(&f.value),
            _ => None,
        })
    };
    let op = field("op").and_then(string_literal)?;
    if !matches!(op, "add" | "replace" | "copy" | "move") {
        return None;
    }
    let path_node = field("path")?;
    let path = string_literal(path_node)?;
    // The written value is `value` for add and replace; copy and move take
    // theirs from `from`.
    let value = field("value").filter(|_| matches!(op, "add" | "replace"));
    // `.../metadata/labels` (the whole map) or `.../metadata/labels/KEY`.
    let (head, last) = path.rsplit_once('/')?;
    let section = |path: &str| {
        ["labels", "annotations"].into_iter().find(|section| {
            path.strip_suffix(section)
                .is_some_and(|p| p.ends_with("/metadata/"))
        })
    };
    if let Some(section) = section(path) {
        return value.and_then(|value| map_literal(section, value));
    }
    let section = section(head)?;
    let key = last.replace("~1", "/").replace("~0", "~");
    match value {
        Some(value) => entry_problem(section, &key, path_node, value),
        None => metadata_problem(section, &key, None).map(|problem| (path_node, problem)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::program::compile;

    fn check(source: &str) -> Option<String> {
        let compiled = compile(source, "e").unwrap();
        refused(source, &compiled.expression)
    }

    const BAD_KEY: &str =
        "name part \"zone name\" may contain only letters, digits, '-', '_' and '.'";

    #[test]
    fn literal_keys_are_refused_where_they_stand() {
        for (source, message) in [
            (
                "Object{metadata: Object.metadata{labels: {\"topology.kubernetes.io/zone name\": variables.zone}}}",
                "line 1, column 43: label \"topology.kubernetes.io/zone name\" is not a valid key: name part \"zone name\" may contain only letters, digits, '-', '_' and '.'".to_string(),
            ),
            (
                "Object{metadata: Object.metadata{\n  annotations: {'ok': 'x', 'zone name': 'y'}}}",
                format!("line 2, column 28: annotation \"zone name\" is not a valid key: {BAD_KEY}"),
            ),
            (
                // A Pod template's metadata, each branch of a `?:`.
                "Object{spec: Object.spec{template: Object.spec.template{metadata: Object.spec.template.metadata{labels: object.metadata.name == 'a' ? {'a': 'b'} : {'zone name': 'c'}}}}}",
                format!("line 1, column 149: label \"zone name\" is not a valid key: {BAD_KEY}"),
            ),
            (
                "Object{metadata: Object.metadata{labels: {'zone': 'not valid!'}}}",
                "line 1, column 51: label \"zone\": value \"not valid!\" is not a valid label value: may contain only letters, digits, '-', '_' and '.'".to_string(),
            ),
            (
                "[JSONPatch{op: 'add', path: '/metadata/labels/zone name', value: 'x'}]",
                format!("line 1, column 29: label \"zone name\" is not a valid key: {BAD_KEY}"),
            ),
            (
                "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {\"zone name\": 'x'}}]",
                format!("line 1, column 62: annotation \"zone name\" is not a valid key: {BAD_KEY}"),
            ),
            (
                "[JSONPatch{op: 'replace', path: '/spec/template/metadata/labels/a~1b~1c', value: 'x'}]",
                "line 1, column 33: label \"a/b/c\" is not a valid key: name part \"b/c\" may contain only letters, digits, '-', '_' and '.'".to_string(),
            ),
        ] {
            assert_eq!(check(source).as_deref(), Some(message.as_str()), "{source}");
        }
    }

    #[test]
    fn computed_keys_and_other_fields_are_left_to_admission() {
        for source in [
            "Object{metadata: Object.metadata{labels: {'topology.kubernetes.io/zone': variables.zone, 'a.b/c-d_e': 'x'}}}",
            "Object{metadata: Object.metadata{labels: {object.metadata.name + ' x': 'y'}}}",
            "Object{spec: Object.spec{nodeSelector: {'zone name': 'x'}}}",
            "Object{metadata: Object.metadata{name: 'zone name'}}",
            "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('k8s.io/x~y'), value: 'x'}]",
            "[JSONPatch{op: 'remove', path: '/metadata/labels/zone name'}]",
            "[JSONPatch{op: 'add', path: '/spec/nodeSelector/zone name', value: 'x'}]",
            "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}]",
        ] {
            assert_eq!(check(source), None, "{source}");
        }
    }
}
