//! Load-time check that every `{{ variable }}` a rule reads can be defined,
//! as Kyverno checks a policy when it is created (and its CLI when it loads
//! one): a typo such as `{{ zne }}` is refused with the rule and the
//! variable named, instead of failing on every request later.
//!
//! Kyverno's rule, which this follows: an expression is accepted when it
//! mentions one of the built-in variables (`request`, `element`,
//! `elementIndex`, `images`, `image`, `serviceAccountName`,
//! `serviceAccountNamespace`, `@`) or calls a function, or when it starts
//! with the name of one of the rule's context entries (a ConfigMap entry
//! through `.data` or `.metadata`); in a rule with `mutate.targets`, also
//! `target.`. These are the admission-time names (Kyverno's background mode,
//! which narrows them, has no counterpart here).

use serde_json::Value;

use super::variables;

/// Substrings that make an expression refer to a built-in variable.
const BUILT_IN: [&str; 8] = [
    "request",
    "serviceAccountName",
    "serviceAccountNamespace",
    "element",
    "elementIndex",
    "@",
    "images",
    "image",
];

/// Checks the rules of the raw settings (bare `rules` or a pasted policy's
/// `spec.rules`). Settings that do not parse are left to the schema check.
pub fn check(settings: &Value) -> Result<(), String> {
    let mut lists = Vec::new();
    lists.extend(
        settings
            .get("rules")
            .map(|r| (r, "settings.rules".to_string())),
    );
    lists.extend(
        settings
            .pointer("/spec/rules")
            .map(|r| (r, "settings.spec.rules".to_string())),
    );
    for (i, policy) in settings
        .get("policies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        lists.extend(
            policy
                .pointer("/spec/rules")
                .map(|r| (r, format!("settings.policies[{i}].spec.rules"))),
        );
    }
    for (rules, at) in lists {
        for (i, rule) in rules.as_array().into_iter().flatten().enumerate() {
            check_rule(rule).map_err(|why| {
                let name = rule.get("name").and_then(Value::as_str).unwrap_or_default();
                format!("{at}[{i}] (rule {name:?}): {why}")
            })?;
        }
    }
    Ok(())
}

/// What a context entry's name lets expressions read.
enum Declared<'r> {
    /// Anything below the name.
    Any(&'r str),
    /// A ConfigMap: its `data` and `metadata`.
    ConfigMap(&'r str),
}

fn check_rule(rule: &Value) -> Result<(), String> {
    let mut declared = Vec::new();
    declarations(rule, &mut declared);
    let targets = rule.pointer("/mutate/targets").is_some();
    let mut expressions = Vec::new();
    if let Some(map) = rule.as_object() {
        // Kyverno does not substitute variables in a rule's name or in what
        // it matches (the latter it refuses outright).
        for (field, value) in map {
            if !matches!(field.as_str(), "name" | "match" | "exclude") {
                variables::expressions(value, &mut expressions);
            }
        }
    }
    for expression in &expressions {
        if !defined(expression, &declared, targets) {
            let names: Vec<String> = declared
                .iter()
                .map(|d| match d {
                    Declared::Any(name) => format!("{name:?}"),
                    Declared::ConfigMap(name) => {
                        format!("{name:?} (a ConfigMap: .data, .metadata)")
                    }
                })
                .collect();
            let context = if names.is_empty() {
                "the rule has no context entries".to_string()
            } else {
                format!("its context entries are {}", names.join(", "))
            };
            return Err(format!(
                "variable {{{{{expression}}}}} is not defined: a rule reads request, element, elementIndex, images, serviceAccountName, serviceAccountNamespace{}, function calls and its context entries, and {context}",
                if targets { ", target" } else { "" }
            ));
        }
    }
    Ok(())
}

/// Every context entry in the rule, its `foreach` loops and its targets.
fn declarations<'r>(value: &'r Value, out: &mut Vec<Declared<'r>>) {
    match value {
        Value::Object(map) => {
            for (field, inner) in map {
                if field == "context" {
                    for entry in inner.as_array().into_iter().flatten() {
                        let Some(name) = entry.get("name").and_then(Value::as_str) else {
                            continue;
                        };
                        out.push(if entry.get("configMap").is_some() {
                            Declared::ConfigMap(name)
                        } else {
                            Declared::Any(name)
                        });
                    }
                }
                declarations(inner, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| declarations(item, out)),
        _ => {}
    }
}

fn defined(expression: &str, declared: &[Declared], targets: bool) -> bool {
    // Kyverno compares with the quotes of `"my-map".data` removed.
    let expression = expression.replace('"', "");
    let expression = expression.trim();
    if BUILT_IN.iter().any(|name| expression.contains(name))
        || calls_function(expression)
        || (targets && expression.contains("target."))
    {
        return true;
    }
    declared.iter().any(|entry| match entry {
        Declared::Any(name) => expression.starts_with(name),
        Declared::ConfigMap(name) => ["data", "metadata"].iter().any(|part| {
            expression
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('.'))
                .and_then(|rest| rest.strip_prefix(part))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        }),
    })
}

/// A function call: a name of lowercase letters, digits or `_`, then `(`
/// and something other than a brace.
fn calls_function(expression: &str) -> bool {
    let bytes = expression.as_bytes();
    bytes.iter().enumerate().any(|(i, b)| {
        *b == b'('
            && i > 0
            && bytes
                .get(i.saturating_sub(1))
                .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
            && bytes.get(i + 1).is_some_and(|c| *c != b'{' && *c != b'}')
    })
}

#[cfg(test)]
mod tests {
    use super::check;
    use serde_json::json;

    fn rule_with(context: serde_json::Value, annotation: &str) -> serde_json::Value {
        json!({"rules": [{
            "name": "r",
            "match": {"any": [{"resources": {"kinds": ["Pod/binding"]}}]},
            "context": context,
            "mutate": {"patchStrategicMerge": {"metadata": {"annotations": {"a": annotation}}}}
        }]})
    }

    #[test]
    fn a_misspelt_variable_is_refused_naming_the_rule_and_what_is_defined() {
        let settings = rule_with(
            json!([{"name": "zone", "apiCall": {"urlPath": "/api/v1/nodes/{{request.object.target.name}}"}}]),
            "{{ zne }}",
        );
        let err = check(&settings).unwrap_err();
        assert!(
            err.starts_with("settings.rules[0] (rule \"r\"): variable {{zne}} is not defined"),
            "{err}"
        );
        assert!(err.contains("its context entries are \"zone\""), "{err}");
    }

    #[test]
    fn what_kyverno_accepts_is_accepted() {
        let context = json!([
            {"name": "node", "apiCall": {"urlPath": "/api/v1/nodes/x"}},
            {"name": "pools", "configMap": {"name": "pools", "namespace": "default"}}
        ]);
        for ok in [
            "{{ request.object.metadata.name }}",
            "{{ node.metadata.labels.\"topology.kubernetes.io/zone\" }}",
            "{{ \"pools\".data.a }}",
            "{{ pools.data.\"pool-a\" || 'none' }}",
            "{{ pools.metadata.name }}",
            "{{ to_upper('x') }}",
            "{{ images.containers.app.tag }}",
            "{{ element.name }}",
            "{{ @ }}",
            "plain text",
            "\\{{ escaped }}",
        ] {
            assert_eq!(check(&rule_with(context.clone(), ok)), Ok(()), "{ok}");
        }
    }

    #[test]
    fn a_configmap_is_read_through_data_or_metadata() {
        let context =
            json!([{"name": "pools", "configMap": {"name": "pools", "namespace": "default"}}]);
        assert!(check(&rule_with(context.clone(), "{{ pools }}")).is_err());
        assert!(check(&rule_with(context, "{{ poolsdata }}")).is_err());
    }

    #[test]
    fn foreach_context_and_targets_count() {
        let settings = json!({"spec": {"rules": [{
            "name": "r",
            "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "mutate": {
                "targets": [{"apiVersion": "v1", "kind": "Pod", "name": "{{ request.name }}"}],
                "foreach": [{
                    "list": "request.object.spec.containers",
                    "context": [{"name": "each", "variable": {"value": 1}}],
                    "patchStrategicMerge": {"metadata": {"labels": {"a": "{{ each }}", "b": "{{ target.metadata.name }}"}}}
                }]
            }
        }]}});
        assert_eq!(check(&settings), Ok(()));
        let err = check(&json!({"spec": {"rules": [{"name": "r", "mutate": {"patchesJson6902": "[{\"op\":\"add\",\"path\":\"/x\",\"value\":\"{{ target.x }}\"}]"}}]}}))
            .unwrap_err();
        assert!(err.starts_with("settings.spec.rules[0]"), "{err}");
    }
}
