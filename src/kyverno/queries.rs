//! The queries a rule makes over its context: every JMESPath expression it
//! holds (for the load-time checks), and which context entries a query
//! names, for Kyverno's deferred loading (on by default): an entry is loaded
//! when a query first names it, not when the rule starts. So an entry nothing
//! reads, or one only a patch reads when the preconditions do not hold, is
//! never loaded: its read is not made and its failure is no error. An entry's
//! own queries load the entries before it that they name.

use serde_json::{Value, json};

use crate::kyverno::spec::{Condition, Conditions, ContextEntry, ForeachSpec, RuleSpec};
use crate::kyverno::variables;

/// The context entries in scope, a rule's then a foreach's, and which of
/// them are loaded.
#[derive(Clone, Default)]
pub struct Deferred<'r> {
    entries: Vec<&'r ContextEntry>,
    loaded: Vec<bool>,
}

impl<'r> Deferred<'r> {
    /// These entries and, after them, `entries`, none of which is loaded.
    pub fn with(&self, entries: &'r [ContextEntry]) -> Deferred<'r> {
        let mut deferred = self.clone();
        deferred.entries.extend(entries.iter());
        deferred.loaded.extend(entries.iter().map(|_| false));
        deferred
    }

    /// How many entries are in scope.
    pub fn count(&self) -> usize {
        self.entries.len()
    }

    /// The first entry before `limit` not loaded yet that one of `queries`
    /// names, marked loaded: Kyverno loads each once, in their order.
    pub fn next_named(
        &mut self,
        queries: &[String],
        limit: usize,
    ) -> Option<(usize, &'r ContextEntry)> {
        for (i, entry) in self.entries.iter().enumerate().take(limit) {
            let Some(loaded) = self.loaded.get_mut(i) else {
                break;
            };
            if !*loaded && queries.iter().any(|query| names(query, &entry.name)) {
                *loaded = true;
                return Some((i, *entry));
            }
        }
        None
    }
}

/// Whether `query` names the entry `name`, as Kyverno's matcher decides it:
/// the name after the start, a space or a character that is not `.`, a
/// letter or a digit, and followed by a word boundary (`zone` in `zone.a`,
/// not in `node.zone` or `zones`).
pub fn names(query: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let ends_in_word = name.chars().next_back().is_some_and(word);
    query.match_indices(name).any(|(at, _)| {
        let before = query.get(..at).and_then(|s| s.chars().next_back());
        let after = query.get(at + name.len()..).and_then(|s| s.chars().next());
        let starts =
            before.is_none_or(|c| c.is_whitespace() || !(c == '.' || c.is_ascii_alphanumeric()));
        let boundary = ends_in_word != after.is_some_and(word);
        starts && boundary
    })
}

/// The queries in a settings value as Kyverno runs them: each outermost
/// `{{ ... }}` with the ones it nests, which are run first and name entries
/// too (`{{ zones.data."{{zone}}" }}` names `zones` and `zone`).
fn queries_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => {
            let mut depth = 0usize;
            let mut start = 0;
            let mut at = 0;
            while let Some(rest) = text.get(at..) {
                if rest.len() < 2 {
                    break;
                }
                let escaped = at > 0 && text.get(at - 1..at) == Some("\\");
                if rest.starts_with("{{") && !(depth == 0 && escaped) {
                    if depth == 0 {
                        start = at + 2;
                    }
                    depth += 1;
                    at += 2;
                } else if rest.starts_with("}}") && depth > 0 {
                    depth -= 1;
                    if depth == 0 {
                        out.extend(text.get(start..at).map(str::to_string));
                    }
                    at += 2;
                } else {
                    at += rest.chars().next().map_or(1, char::len_utf8);
                }
            }
            if depth > 0 {
                out.extend(text.get(start..).map(str::to_string));
            }
        }
        Value::Array(items) => items.iter().for_each(|item| queries_in(item, out)),
        Value::Object(map) => map.iter().for_each(|(key, item)| {
            queries_in(&Value::String(key.clone()), out);
            queries_in(item, out);
        }),
        _ => {}
    }
}

/// The queries the preconditions make.
pub fn condition_queries(conditions: Option<&Conditions>) -> Vec<String> {
    let mut out = Vec::new();
    for condition in conditions_of(conditions) {
        queries_in(&condition.key, &mut out);
        queries_in(&condition.value, &mut out);
    }
    out
}

/// The queries loading an entry makes over the context: its `{{ }}`
/// expressions, and a variable's JMESPath, which Kyverno runs over the
/// context when the variable has no `value`.
pub fn queries_of(entry: &ContextEntry) -> Vec<String> {
    let mut out = Vec::new();
    let mut texts = |value: Option<&Value>| {
        if let Some(value) = value {
            queries_in(value, &mut out);
        }
    };
    let text = |s: &Option<String>| s.as_ref().map(|s| Value::String(s.clone()));
    if let Some(variable) = &entry.variable {
        texts(variable.value.as_ref());
        texts(variable.default.as_ref());
        texts(text(&variable.jmes_path).as_ref());
    }
    if let Some(call) = &entry.api_call {
        texts(text(&call.url_path).as_ref());
        texts(text(&call.jmes_path).as_ref());
        texts(call.default.as_ref());
    }
    if let Some(config_map) = &entry.config_map {
        texts(Some(&Value::String(config_map.name.clone())));
        texts(text(&config_map.namespace).as_ref());
    }
    if let Some(registry) = &entry.image_registry {
        texts(Some(&Value::String(registry.reference.clone())));
        texts(text(&registry.jmes_path).as_ref());
    }
    if let Some(variable) = &entry.variable
        && variable.value.is_none()
        && let Some(path) = &variable.jmes_path
    {
        out.push(path.clone());
    }
    out
}

/// Every JMESPath expression a rule holds, for checking at load time.
pub fn expressions_of(rule: &RuleSpec) -> Vec<String> {
    let mut out = Vec::new();
    context_expressions(&rule.context, &mut out);
    condition_expressions(rule.preconditions.as_ref(), &mut out);
    if let Some(mutate) = &rule.mutate {
        patch_expressions(
            mutate.patch_strategic_merge.as_ref(),
            mutate.patches_json6902.as_deref(),
            &mut out,
        );
        foreach_expressions(mutate.foreach.as_deref(), &mut out);
    }
    out
}

fn context_expressions(entries: &[ContextEntry], out: &mut Vec<String>) {
    for entry in entries {
        if let Some(v) = &entry.variable {
            out.extend(v.jmes_path.iter().filter(|p| !p.contains("{{")).cloned());
            if let Some(value) = &v.value {
                variables::expressions(value, out);
            }
        }
        if let Some(call) = &entry.api_call {
            out.extend(call.jmes_path.iter().filter(|p| !p.contains("{{")).cloned());
            variables::expressions(&json!(call.url_path), out);
        }
        if let Some(registry) = &entry.image_registry {
            out.extend(
                registry
                    .jmes_path
                    .iter()
                    .filter(|p| !p.contains("{{"))
                    .cloned(),
            );
            variables::expressions(&json!(registry.reference), out);
        }
    }
}

fn conditions_of(conditions: Option<&Conditions>) -> Vec<&Condition> {
    match conditions {
        Some(Conditions::List(all)) => all.iter().collect(),
        Some(Conditions::Blocks(b)) => b
            .any
            .iter()
            .flatten()
            .chain(b.all.iter().flatten())
            .collect(),
        None => Vec::new(),
    }
}

fn condition_expressions(conditions: Option<&Conditions>, out: &mut Vec<String>) {
    for condition in conditions_of(conditions) {
        variables::expressions(&condition.key, out);
        variables::expressions(&condition.value, out);
    }
}

/// The queries a mutation makes once its preconditions hold: its patches'
/// expressions and its loops' lists.
pub fn mutation_queries(
    strategic: Option<&Value>,
    json6902: Option<&str>,
    loops: Option<&[ForeachSpec]>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(patch) = strategic {
        queries_in(patch, &mut out);
    }
    if let Some(text) = json6902 {
        queries_in(&Value::String(text.to_string()), &mut out);
    }
    out.extend(loops.into_iter().flatten().map(|each| each.list.clone()));
    out
}

fn patch_expressions(strategic: Option<&Value>, json6902: Option<&str>, out: &mut Vec<String>) {
    if let Some(patch) = strategic {
        variables::expressions(patch, out);
    }
    if let Some(text) = json6902 {
        variables::expressions(&json!(text), out);
    }
}

fn foreach_expressions(loops: Option<&[ForeachSpec]>, out: &mut Vec<String>) {
    for each in loops.into_iter().flatten() {
        if !each.list.contains("{{") {
            out.push(each.list.clone());
        }
        context_expressions(&each.context, out);
        condition_expressions(each.preconditions.as_ref(), out);
        patch_expressions(
            each.patch_strategic_merge.as_ref(),
            each.patches_json6902.as_deref(),
            out,
        );
        foreach_expressions(each.foreach.as_deref(), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_queries_are_queries_too() {
        let mut out = Vec::new();
        queries_in(
            &serde_json::json!({"a": "{{ zones.data.\"{{zone}}\" }}-x", "b": ["\\{{ no }} {{ n }}", "{{ open"]}),
            &mut out,
        );
        assert_eq!(out, [" zones.data.\"{{zone}}\" ", " n ", " open"]);
        assert!(names(&out[0], "zone") && names(&out[0], "zones"));
    }

    #[test]
    fn a_query_names_an_entry_as_kyvernos_matcher_reads_it() {
        for (query, named) in [
            ("zone", true),
            ("zone.a", true),
            ("to_upper(zone)", true),
            ("x || zone", true),
            ("node.zone", false),
            ("zones", false),
            ("myzone", false),
            ("`zone`", true),
            ("'zone'", true),
            ("_zone", true),
            ("zone_a", false),
        ] {
            assert_eq!(names(query, "zone"), named, "{query}");
        }
    }
}
