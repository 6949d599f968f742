//! What the rules read of a context variable, found in their settings text:
//! the field masks for a `configMap` entry, so that the host sends only the
//! fields some expression can reach (Kubewarden 1.35 prunes with
//! `field_masks` before it serialises the object).
//!
//! A context variable is read by name from expressions evaluated over the
//! rule's data: `{{ ... }}` in any string, and the raw JMESPath of
//! `jmesPath` and `foreach.list` fields. Each such expression is parsed and
//! every reference to the name at the top scope is followed for as long as it
//! is a chain of plain fields (`pools.data."pool-a"`). Anything the analysis
//! cannot follow (the bare name, `@`, an expression that does not parse, a
//! key built from another variable) keeps the whole object: masks only ever
//! remove what no expression can read.

use std::cell::RefCell;
use std::collections::BTreeMap;

use jmespath::ast::{Ast, KeyValuePair};
use serde_json::Value;

use crate::shared::reach::Reach;

/// Stands for a nested `{{ ... }}` while the outer expression is parsed: its
/// value is only known at evaluation.
const DYNAMIC: &str = "\u{e000}nested\u{e000}";

/// Stands for an escaped `\{{` while templates are looked for.
const ESCAPED_OPEN: &str = "\u{e000}escaped\u{e000}";

/// Templates nested deeper than this, or more unmatched `{{` than this in
/// one string, are not followed (the object is read whole), which bounds the
/// work on any settings text.
const MAX_TEMPLATE_NESTING: usize = 16;

/// The field masks of each ConfigMap context entry, worked out once per
/// entry name for the whole evaluation: a `foreach` may read the same entry
/// for every element.
pub struct ConfigMapMasks<'s> {
    settings: &'s str,
    known: RefCell<BTreeMap<String, Vec<String>>>,
}

impl<'s> ConfigMapMasks<'s> {
    /// For the rules in `settings` (the settings text).
    pub fn new(settings: &'s str) -> Self {
        ConfigMapMasks {
            settings,
            known: RefCell::default(),
        }
    }

    /// The masks for the entry named `name`.
    pub fn for_entry(&self, name: &str) -> Vec<String> {
        if let Some(masks) = self.known.borrow().get(name) {
            return masks.clone();
        }
        let masks = field_masks(self.settings, name);
        self.known
            .borrow_mut()
            .insert(name.to_string(), masks.clone());
        masks
    }
}

/// The field masks for context variable `name` as the rules in `settings`
/// read it; empty when the whole object is needed (or nothing reads it).
pub fn field_masks(settings: &str, name: &str) -> Vec<String> {
    let Ok(settings) = serde_json::from_str::<Value>(settings) else {
        return Vec::new();
    };
    let mut reads = Reads {
        name,
        paths: Vec::new(),
        whole: false,
    };
    reads.value(&settings, None);
    if reads.whole {
        return Vec::new();
    }
    // Masks follow the same rules as an `apiCall`'s: a step with a dot keeps
    // the map above it whole. A step only known at evaluation names no field
    // either: the path stops before it and takes all below.
    let mut reach = Reach::Fields(Vec::new());
    for path in &reads.paths {
        reach.take(
            path.iter()
                .map(String::as_str)
                .take_while(|step| !step.contains(DYNAMIC)),
        );
    }
    crate::shared::reach::field_masks(&reach)
}

/// The paths read below the variable, gathered over the whole settings.
struct Reads<'n> {
    name: &'n str,
    /// Each reference's chain of fields after the name.
    paths: Vec<Vec<String>>,
    /// Some reference could not be followed: the whole object is needed.
    whole: bool,
}

impl Reads<'_> {
    /// `key` is the field holding `value`, which tells raw JMESPath apart.
    fn value(&mut self, value: &Value, key: Option<&str>) {
        if self.whole {
            return;
        }
        match value {
            Value::String(text) => {
                if matches!(key, Some("jmesPath" | "list")) {
                    self.expression(&flatten(text));
                }
                self.templates(text);
            }
            Value::Array(items) => items.iter().for_each(|item| self.value(item, key)),
            Value::Object(map) => {
                for (field, inner) in map {
                    self.templates(field);
                    self.value(inner, Some(field));
                }
            }
            _ => {}
        }
    }

    /// Every `{{ ... }}` in `text`, the innermost first, each read as an
    /// expression with its nested ones standing for unknown text.
    fn templates(&mut self, text: &str) {
        // `\{{` is text, not a template, as the engine reads it.
        if text.contains("\\{{") {
            self.templates_at(&text.replace("\\{{", ESCAPED_OPEN), 0);
        } else {
            self.templates_at(text, 0);
        }
    }

    fn templates_at(&mut self, text: &str, depth: usize) {
        // Without braces nothing is evaluated; a nested template may name
        // any variable, so it is read even when the name is not in sight.
        if !text.contains("{{") {
            return;
        }
        if depth > MAX_TEMPLATE_NESTING {
            self.whole = true;
            return;
        }
        let mut rest = text;
        let mut unmatched = 0;
        while let Some(open) = rest.find("{{") {
            let after = rest.get(open + 2..).unwrap_or("");
            let Some(body) = balanced(after) else {
                // An unmatched `{{` is text; templates after it still count
                // (the engine resolves the innermost ones). Each one costs a
                // scan of the rest, so only so many are looked past.
                unmatched += 1;
                if unmatched > MAX_TEMPLATE_NESTING {
                    self.whole = true;
                    return;
                }
                rest = after;
                continue;
            };
            self.templates_at(body, depth + 1);
            self.expression(&flatten(body));
            rest = after.get(body.len() + 2..).unwrap_or("");
        }
    }

    fn expression(&mut self, text: &str) {
        if !text.contains(self.name) && !text.contains(DYNAMIC) {
            return;
        }
        // The parser recurses: what the engine would not parse is not
        // parsed here either.
        if super::jmes::check_bounds(text).is_err() {
            self.whole = true;
            return;
        }
        match jmespath::parse(text) {
            Ok(ast) => self.visit(&ast, true),
            Err(_) => self.whole = true,
        }
    }

    /// `top`: the node is evaluated over the rule's data, where a field is a
    /// variable. Elsewhere (a projection's right side, an `&expression`) a
    /// field is one of the current element's.
    fn visit(&mut self, ast: &Ast, top: bool) {
        match ast {
            Ast::Field { name, .. } if top => {
                if name.contains(DYNAMIC) {
                    // A variable whose name is only known at evaluation.
                    self.whole = true;
                } else if name == self.name {
                    self.paths.push(Vec::new());
                }
            }
            Ast::Identity { .. } if top => self.whole = true,
            Ast::Subexpr { .. } => {
                let mut steps = Vec::new();
                spine(ast, &mut steps);
                let mut steps = steps.into_iter();
                match steps.next() {
                    Some(Ast::Field { name, .. }) if top && name == self.name => {
                        let mut path = Vec::new();
                        for step in steps.by_ref() {
                            match step {
                                Ast::Field { name, .. } => path.push(name.clone()),
                                other => {
                                    // The rest reads inside what the fields reached.
                                    self.visit(other, false);
                                    break;
                                }
                            }
                        }
                        steps.for_each(|step| self.visit(step, false));
                        self.paths.push(path);
                    }
                    Some(first) => {
                        self.visit(first, top);
                        steps.for_each(|step| self.visit(step, false));
                    }
                    None => {}
                }
            }
            Ast::Projection { lhs, rhs, .. } => {
                self.visit(lhs, top);
                self.visit(rhs, false);
            }
            Ast::Expref { ast, .. } => self.visit(ast, false),
            Ast::Comparison { lhs, rhs, .. }
            | Ast::And { lhs, rhs, .. }
            | Ast::Or { lhs, rhs, .. } => {
                self.visit(lhs, top);
                self.visit(rhs, top);
            }
            Ast::Condition {
                predicate, then, ..
            } => {
                self.visit(predicate, top);
                self.visit(then, top);
            }
            Ast::Flatten { node, .. } | Ast::ObjectValues { node, .. } | Ast::Not { node, .. } => {
                self.visit(node, top)
            }
            Ast::Function { args, .. } => args.iter().for_each(|arg| self.visit(arg, top)),
            Ast::MultiList { elements, .. } => elements.iter().for_each(|e| self.visit(e, top)),
            Ast::MultiHash { elements, .. } => elements
                .iter()
                .for_each(|KeyValuePair { value, .. }| self.visit(value, top)),
            Ast::Field { .. }
            | Ast::Identity { .. }
            | Ast::Index { .. }
            | Ast::Literal { .. }
            | Ast::Slice { .. } => {}
        }
    }
}

/// A left-nested chain `a.b.c` as its steps `[a, b, c]`.
fn spine<'a>(ast: &'a Ast, out: &mut Vec<&'a Ast>) {
    match ast {
        Ast::Subexpr { lhs, rhs, .. } => {
            spine(lhs, out);
            spine(rhs, out);
        }
        other => out.push(other),
    }
}

/// The text up to the `}}` that closes the `{{` just before `text`.
fn balanced(text: &str) -> Option<&str> {
    let mut depth = 0usize;
    let mut at = 0;
    let bytes = text.as_bytes();
    while let Some(pair) = bytes.get(at..at + 2) {
        match pair {
            b"{{" => {
                depth += 1;
                at += 2;
            }
            b"}}" if depth == 0 => return text.get(..at),
            b"}}" => {
                depth -= 1;
                at += 2;
            }
            _ => at += 1,
        }
    }
    None
}

/// `text` with each nested `{{ ... }}` replaced by [`DYNAMIC`].
fn flatten(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(rest.get(..open).unwrap_or(""));
        let after = rest.get(open + 2..).unwrap_or("");
        let Some(body) = balanced(after) else {
            out.push_str(rest.get(open..).unwrap_or(""));
            return out;
        };
        out.push_str(DYNAMIC);
        rest = after.get(body.len() + 2..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn masks(rule: Value) -> Vec<String> {
        field_masks(&json!({"rules": [rule]}).to_string(), "pools")
    }

    #[test]
    fn field_paths_through_templates_and_raw_jmespath() {
        assert_eq!(
            masks(
                json!({"mutate": {"patchStrategicMerge": {"metadata": {"labels": {
                "a": "{{ pools.data.a }}", "b": "x-{{ pools.data.b || 'none' }}"}}}}})
            ),
            ["data.a", "data.b"]
        );
        assert_eq!(
            masks(
                json!({"context": [{"name": "x", "variable": {"jmesPath": "pools.metadata.labels.team"}}],
                "mutate": {"foreach": [{"list": "pools.data.list"}]}})
            ),
            ["data.list", "metadata.labels.team"]
        );
        assert_eq!(
            masks(
                json!({"preconditions": {"all": [{"key": "{{ length(pools.data) }}", "operator": "GreaterThan", "value": 0}]},
                "mutate": {"patchStrategicMerge": {"x": "{{ pools.data.a }}"}}})
            ),
            ["data"],
            "a mask under another one is dropped"
        );
    }

    #[test]
    fn what_cannot_be_followed_keeps_the_object_whole() {
        for rule in [
            json!({"mutate": {"patchStrategicMerge": {"x": "{{ pools }}"}}}),
            json!({"mutate": {"patchStrategicMerge": {"x": "{{ to_string(@) }}"}}}),
            json!({"mutate": {"patchStrategicMerge": {"x": "{{ {{which}}.data }}"}}}),
            json!({"mutate": {"patchStrategicMerge": {"x": "{{ pools.data[0 }}"}}}),
            json!({"mutate": {"patchStrategicMerge": {"x": "{{ pools.data.a }}"}}, "context": [
                {"name": "y", "variable": {"jmesPath": "pools"}}]}),
            json!({"mutate": {"patchStrategicMerge": {"x": "nothing reads it"}}}),
            json!({"mutate": {"patchStrategicMerge": {"x": "\\{{ {{ pools }}", "y": "{{ pools.data.a }}"}}}),
            json!({"mutate": {"patchStrategicMerge": {"x": "{{ oops {{ pools }}", "y": "{{ pools.data.a }}"}}}),
            json!({"mutate": {"patchStrategicMerge": {"x": format!("{} {{{{ pools.data.b }}}}", "{{ ".repeat(50_000)), "y": "{{ pools.data.a }}"}}}),
            json!({"mutate": {"patchStrategicMerge": {"x": format!("{}pools.data.a{}", "{{".repeat(5000), "}}".repeat(5000))}}}),
            json!({"mutate": {"patchStrategicMerge": {"x": format!("{{{{ pools.data.a || {}1{} }}}}", "(".repeat(40), ")".repeat(40))}}}),
        ] {
            assert_eq!(masks(rule.clone()), Vec::<String>::new(), "{rule}");
        }
    }

    #[test]
    fn a_nested_key_keeps_the_map_it_indexes() {
        assert_eq!(
            masks(json!({"mutate": {"patchStrategicMerge": {"x": "{{ pools.data.\"a.b\" }}"}}})),
            ["data"],
            "a key with dots cannot be a mask step"
        );
        assert_eq!(
            masks(
                json!({"mutate": {"patchStrategicMerge": {"x": "{{ pools.data.\"{{ zone }}\" }}"}}})
            ),
            ["data"]
        );
        assert_eq!(
            masks(json!({"context": [{"name": "allowed", "variable": {
                "jmesPath": "items(parse_json(pools.data.\"{{ pool }}\" || '{}'), 'key', 'value')[?!(starts_with(key, 'pools'))]"}}]})),
            ["data"]
        );
    }

    #[test]
    fn fields_of_elements_are_not_the_variable() {
        assert_eq!(
            masks(
                json!({"mutate": {"patchStrategicMerge": {"x": "{{ items[*].pools }}", "y": "{{ sort_by(list, &pools) }}", "z": "{{ pools.data.z }}"}}})
            ),
            ["data.z"]
        );
        assert_eq!(
            masks(
                json!({"mutate": {"patchStrategicMerge": {"x": "{{ pools.data.list[?name == 'a'].value }}"}}})
            ),
            ["data.list"]
        );
    }
}
