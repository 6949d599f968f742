//! Kyverno's functions over documents and their structure: JSON and YAML
//! text parsed, keys looked up, objects turned into lists of entries and
//! back, labels compared.

use std::rc::Rc;

use jmespath::functions::ArgumentType as T;
use jmespath::{Rcvar, Variable};
use serde_json::Value;

use crate::kyverno::jmes_values::{Body, fail, str_arg, to_value, to_var};

/// Registers the functions through `add(name, argument types, body)`.
pub(super) fn register(add: &mut dyn FnMut(&str, Vec<T>, Body)) {
    let s = || T::String;
    let n = || T::Number;
    // go-jmespath's `to_string`, which Kyverno's runtime has: a string as it
    // is, anything else as Go's `json.Marshal` writes it (`<` as `\u003c`,
    // `1e+21`, every number a float64). Registered after JMESPath's own, it
    // replaces it.
    add(
        "to_string",
        vec![T::Any],
        Box::new(|a, _| {
            Ok(match a.first().map(|v| &**v) {
                Some(Variable::String(s)) => Rc::new(Variable::String(s.clone())),
                Some(other) => Rc::new(Variable::String(
                    crate::shared::go_json::to_string_as_doubles(&to_value(other)),
                )),
                None => Rc::new(Variable::Null),
            })
        }),
    );
    add(
        "parse_json",
        vec![s()],
        Box::new(|a, c| {
            let value: Value = serde_json::from_str(str_arg(a, 0, c)?)
                .map_err(|e| fail(c, format!("parse_json: {e}")))?;
            Ok(to_var(&value))
        }),
    );
    add(
        "parse_yaml",
        vec![s()],
        Box::new(|a, c| {
            let value = crate::shared::yaml::to_json(str_arg(a, 0, c)?)
                .map_err(|e| fail(c, format!("parse_yaml: {e}")))?;
            Ok(to_var(&value))
        }),
    );
    add(
        "label_match",
        vec![T::Object, T::Object],
        Box::new(|a, c| {
            let (Some(selector), Some(labels)) = (
                a.first().and_then(|v| v.as_object()),
                a.get(1).and_then(|v| v.as_object()),
            ) else {
                return Err(fail(c, "label_match needs two objects".into()));
            };
            let all = selector
                .iter()
                .all(|(k, v)| labels.get(k).is_some_and(|l| l == v));
            Ok(Rc::new(Variable::Bool(all)))
        }),
    );
    add(
        "lookup",
        vec![
            T::Union(vec![T::Object, T::Array]),
            T::Union(vec![s(), n()]),
        ],
        Box::new(|a, c| {
            let found = match (a.first().map(|v| &**v), a.get(1).map(|v| &**v)) {
                (Some(Variable::Object(map)), Some(Variable::String(key))) => map.get(key).cloned(),
                (Some(Variable::Array(items)), Some(Variable::Number(index))) => index
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| items.get(i).cloned()),
                _ => {
                    return Err(fail(
                        c,
                        "lookup needs (object, string) or (array, number)".into(),
                    ));
                }
            };
            Ok(found.unwrap_or_else(|| Rc::new(Variable::Null)))
        }),
    );
    add(
        "items",
        vec![T::Union(vec![T::Object, T::Array]), s(), s()],
        Box::new(|a, c| {
            let (key_name, value_name) = (str_arg(a, 1, c)?, str_arg(a, 2, c)?);
            let pair = |k: Variable, v: Rcvar| {
                let mut entry = std::collections::BTreeMap::new();
                entry.insert(key_name.to_string(), Rc::new(k));
                entry.insert(value_name.to_string(), v);
                Rc::new(Variable::Object(entry))
            };
            let items: Vec<Rcvar> = match a.first().map(|v| &**v) {
                Some(Variable::Object(map)) => map
                    .iter()
                    .map(|(k, v)| pair(Variable::String(k.clone()), v.clone()))
                    .collect(),
                Some(Variable::Array(list)) => list
                    .iter()
                    .enumerate()
                    .map(|(i, v)| pair(Variable::Number(serde_json::Number::from(i)), v.clone()))
                    .collect(),
                _ => Vec::new(),
            };
            Ok(Rc::new(Variable::Array(items)))
        }),
    );
    add(
        "object_from_lists",
        vec![T::Array, T::Array],
        Box::new(|a, c| {
            let (Some(keys), Some(values)) = (
                a.first().and_then(|v| v.as_array()),
                a.get(1).and_then(|v| v.as_array()),
            ) else {
                return Err(fail(c, "object_from_lists needs two arrays".into()));
            };
            let mut object = std::collections::BTreeMap::new();
            for (i, key) in keys.iter().enumerate() {
                let Some(key) = key.as_string() else {
                    return Err(fail(c, "object_from_lists: keys must be strings".into()));
                };
                object.insert(
                    key.clone(),
                    values
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| Rc::new(Variable::Null)),
                );
            }
            Ok(Rc::new(Variable::Object(object)))
        }),
    );
}

#[cfg(test)]
mod tests {
    use crate::testing::jmes_functions::{eval, eval_on};
    use serde_json::json;

    #[test]
    fn kyverno_structure_functions() {
        assert_eq!(
            eval_on("parse_json('{\"a\":[1]}').a[0]", json!({})),
            json!(1)
        );
        assert_eq!(eval_on("lookup(@, 'a.b')", json!({"a.b": 5})), json!(5));
        assert_eq!(
            eval_on("items(@, 'k', 'v')", json!({"x": 1})),
            json!([{"k":"x","v":1}])
        );
        assert_eq!(
            eval_on("object_from_lists(`[\"a\",\"b\"]`, `[1,2]`)", json!({})),
            json!({"a":1,"b":2})
        );
        assert_eq!(
            eval_on(
                "label_match(`{\"app\":\"web\"}`, `{\"app\":\"web\",\"x\":\"y\"}`)",
                json!({})
            ),
            json!(true)
        );
        // Kyverno 1.19.1's runtime: go-jmespath's to_string is json.Marshal.
        assert_eq!(
            eval(
                r#"to_string(`{"a": "<b>&", "n": 1e21, "m": 1.5e-7, "k": 18446744073709551615}`)"#
            ),
            json!(r#"{"a":"\u003cb\u003e\u0026","k":18446744073709552000,"m":1.5e-7,"n":1e+21}"#)
        );
        assert_eq!(eval("to_string(`[1.0, 2.5]`)"), json!("[1,2.5]"));
        assert_eq!(eval("to_string('x<')"), json!("x<"));
        // YAML 1.1, as Kyverno reads it (sigs.k8s.io/yaml): an unquoted `y`
        // is true, a key that is not text is written as text.
        assert_eq!(
            eval("parse_yaml('a: 1\nb: [x, y, \\'y\\']\nno: 2')"),
            json!({"a": 1, "b": ["x", true, "y"], "false": 2})
        );
    }
}
