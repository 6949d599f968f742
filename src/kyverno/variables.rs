//! `{{ ... }}` variable substitution, as Kyverno does it: JMESPath over the
//! rule's context, innermost braces first, `\{{` escapes, a value that is
//! exactly one variable keeps its type, embedded ones are stringified, and a
//! variable that resolves to nothing is an error naming it.

use jmespath::{Rcvar, Variable};
use serde_json::Value;

use super::jmes::{self, Functions};
use super::jmes_values;

/// At most this many substitutions in one string: nested braces cannot make
/// one value loop for ever.
pub const MAX_SUBSTITUTIONS: usize = 64;
/// Longest string substitution may produce.
pub const MAX_SUBSTITUTED_LEN: usize = 256 * 1024;

const ESCAPED_OPEN: &str = "\u{0}escaped-open\u{0}";

/// What `{{@}}` (the value at the patched location) stands for.
#[derive(Clone, Copy)]
pub enum At<'v> {
    /// Not in a patch: `{{@}}` is an error.
    Unavailable,
    /// In a patch, before merging: strings holding `{{@}}` are left as they
    /// are, to be substituted where they land.
    Defer,
    /// Where the string lands: the object's value there (null if none).
    Value(&'v Value),
}

/// Substitutes every variable in `value` (strings at any depth, and object
/// keys).
pub fn substitute(rt: &Functions, value: &Value, data: &Rcvar) -> Result<Value, String> {
    substitute_with(rt, value, data, At::Unavailable)
}

/// [`substitute`] for a strategic merge patch: `{{@}}` is resolved later.
pub fn substitute_patch(rt: &Functions, value: &Value, data: &Rcvar) -> Result<Value, String> {
    substitute_with(rt, value, data, At::Defer)
}

fn substitute_with(rt: &Functions, value: &Value, data: &Rcvar, at: At) -> Result<Value, String> {
    Ok(match value {
        Value::String(text) => substitute_str_at(rt, text, data, at)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| substitute_with(rt, item, data, at))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (key, item) in map {
                let key = match substitute_str(rt, key, data)? {
                    Value::String(key) => key,
                    other => other.to_string(),
                };
                out.insert(key, substitute_with(rt, item, data, at)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

/// Substitutes the variables of one string.
pub fn substitute_str(rt: &Functions, text: &str, data: &Rcvar) -> Result<Value, String> {
    substitute_str_at(rt, text, data, At::Unavailable)
}

/// Whether a string holds `{{@}}` (spaces allowed inside the braces).
pub fn mentions_at(text: &str) -> bool {
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = rest.get(open + 2..).unwrap_or("");
        if after
            .trim_start()
            .strip_prefix('@')
            .is_some_and(|r| r.trim_start().starts_with("}}"))
        {
            return true;
        }
        rest = after;
    }
    false
}

/// Substitutes the variables of one string, `{{@}}` as `at` says.
pub fn substitute_str_at(
    rt: &Functions,
    text: &str,
    data: &Rcvar,
    at: At,
) -> Result<Value, String> {
    if matches!(at, At::Defer) && mentions_at(text) {
        return Ok(Value::String(text.to_string()));
    }
    if !text.contains("{{") {
        return Ok(Value::String(text.to_string()));
    }
    let mut current = text.replace("\\{{", ESCAPED_OPEN);
    for _ in 0..MAX_SUBSTITUTIONS {
        // The first closing braces and the last opening before them delimit
        // an innermost variable.
        let Some((open, close)) = innermost(&current) else {
            break;
        };
        let expression = current.get(open + 2..close).unwrap_or("").trim();
        let whole = open == 0 && close + 2 == current.len();
        let value = match (expression, at) {
            ("@", At::Value(Value::Null)) => {
                return Err("variable {{@}}: the patched field has no value in the object".into());
            }
            ("@", At::Value(value)) => value.clone(),
            ("@", _) => {
                return Err("variable {{@}} is only available in patchStrategicMerge".into());
            }
            _ => resolve(rt, expression, data)?,
        };
        if whole {
            return Ok(value);
        }
        let rendered = match value {
            Value::String(s) => s,
            // As Kyverno v1.19.1 writes a number inside a string: `n-1e+25`,
            // `n-3.3333333333333334e-08`, `n-1000000000000`.
            Value::Number(number) => jmes_values::number_text(&number, true),
            other => other.to_string(),
        };
        let (head, tail) = (
            current.get(..open).unwrap_or(""),
            current.get(close + 2..).unwrap_or(""),
        );
        if head.len() + rendered.len() + tail.len() > MAX_SUBSTITUTED_LEN {
            return Err(format!(
                "substituting {{{{{expression}}}}} makes a value longer than {MAX_SUBSTITUTED_LEN} bytes"
            ));
        }
        // Joined, not formatted: this runs on every request that substitutes.
        current = [head, rendered.as_str(), tail].concat();
    }
    if innermost(&current).is_some() {
        return Err(format!(
            "more than {MAX_SUBSTITUTIONS} variables in one value"
        ));
    }
    Ok(Value::String(current.replace(ESCAPED_OPEN, "{{")))
}

/// The first `}}` that has a `{{` before it, and the last such `{{`.
fn innermost(text: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    loop {
        let close = from + text.get(from..)?.find("}}")?;
        if let Some(open) = text.get(..close).and_then(|head| head.rfind("{{")) {
            return Some((open, close));
        }
        from = close + 2;
    }
}

fn resolve(rt: &Functions, expression: &str, data: &Rcvar) -> Result<Value, String> {
    if expression.is_empty() {
        return Err("empty variable {{}}".to_string());
    }
    match jmes::search_var(rt, expression, data) {
        // Kyverno's JMESPath fails a field that names a key the object does
        // not have; a null got otherwise (a filter that kept nothing, `[0]`
        // of an empty list, a key whose value is null) is substituted.
        Ok(var) if matches!(*var, Variable::Null) && jmes::names_missing_key(expression, data) => {
            Err(format!(
                "variable {{{{{expression}}}}} could not be resolved"
            ))
        }
        Ok(var) => Ok(jmes_values::to_value(&var)),
        Err(e) => Err(format!("variable {{{{{expression}}}}}: {e}")),
    }
}

/// Every `{{ expression }}` in a settings value, for load-time checks.
pub fn expressions(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => {
            let mut rest = text.as_str();
            while let Some(open) = rest.find("{{") {
                let after = rest.get(open + 2..).unwrap_or("");
                let Some(close) = after.find("}}") else { break };
                let inner = after.get(..close).unwrap_or("");
                // Nested braces are checked after substitution, at evaluation.
                if !inner.contains("{{") && !rest.get(..open).unwrap_or("").ends_with('\\') {
                    out.push(inner.trim().to_string());
                }
                rest = after.get(close + 2..).unwrap_or("");
            }
        }
        Value::Array(items) => items.iter().for_each(|i| expressions(i, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            expressions(&Value::String(k.clone()), out);
            expressions(v, out);
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sub(text: &str, data: Value) -> Result<Value, String> {
        substitute_str(&jmes::Functions::all(), text, &jmes_values::to_var(&data))
    }

    #[test]
    fn a_whole_value_keeps_its_type_and_embedded_ones_are_strings() {
        let data = json!({"n": 3, "o": {"a": 1}, "s": "x"});
        assert_eq!(sub("{{n}}", data.clone()).unwrap(), json!(3));
        assert_eq!(sub("{{ o }}", data.clone()).unwrap(), json!({"a": 1}));
        assert_eq!(
            sub("n={{n}} s={{s}}", data.clone()).unwrap(),
            json!("n=3 s=x")
        );
        assert_eq!(sub("o={{o}}", data).unwrap(), json!("o={\"a\":1}"));
    }

    #[test]
    fn inner_braces_first_and_escapes() {
        let data = json!({"key": "zone", "labels": {"zone": "a"}});
        assert_eq!(
            sub("{{ labels.{{key}} }}", data.clone()).unwrap(),
            json!("a")
        );
        assert_eq!(
            sub("\\{{ key }} stays", data.clone()).unwrap(),
            json!("{{ key }} stays")
        );
        assert_eq!(
            sub("\\{{ key }} and {{ key }}", data.clone()).unwrap(),
            json!("{{ key }} and zone")
        );
        assert_eq!(sub("no variables", data).unwrap(), json!("no variables"));
    }

    /// kyverno/kyverno `mutate/e2e/jmespath-logic`: a filter that keeps
    /// nothing gives null, which Kyverno substitutes; a missing key fails.
    #[test]
    fn null_is_substituted_unless_a_key_is_missing() {
        let data = json!({"items": [{"name": "a", "v": null}], "labels": {}});
        assert_eq!(
            sub("{{ items[?name == 'b'].v | [0] }}", data.clone()),
            Ok(json!(null))
        );
        assert_eq!(sub("{{ items[0].v }}", data.clone()), Ok(json!(null)));
        assert_eq!(sub("x={{ items[5] }}", data.clone()), Ok(json!("x=null")));
        for missing in ["{{ labels.app }}", "{{ items[0].w }}", "{{ nothing }}"] {
            let err = sub(missing, data.clone()).unwrap_err();
            assert!(err.contains("could not be resolved"), "{missing}: {err}");
        }
    }

    #[test]
    fn unresolved_variables_are_errors_naming_them() {
        let err = sub("{{ missing.path }}", json!({})).unwrap_err();
        assert_eq!(err, "variable {{missing.path}} could not be resolved");
        assert_eq!(sub("{{ missing || '' }}", json!({})).unwrap(), json!(""));
        assert!(
            sub("{{ a.[ }}", json!({}))
                .unwrap_err()
                .starts_with("variable {{a.[}}:")
        );
    }

    #[test]
    fn substitution_is_bounded() {
        let many = "{{'x'}}".repeat(MAX_SUBSTITUTIONS + 1);
        assert!(
            sub(&many, json!({}))
                .unwrap_err()
                .contains("more than 64 variables")
        );
    }

    #[test]
    fn keys_and_nested_values_are_substituted() {
        let rt = jmes::Functions::all();
        let value = json!({"metadata": {"annotations": {"{{k}}": "{{v}}"}}, "list": ["{{v}}"]});
        let out = substitute(
            &rt,
            &value,
            &jmes_values::to_var(&json!({"k": "zone", "v": "a"})),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"metadata": {"annotations": {"zone": "a"}}, "list": ["a"]})
        );
        let mut found = Vec::new();
        expressions(&value, &mut found);
        assert_eq!(found, ["v", "k", "v"]);
    }
}
