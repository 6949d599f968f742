//! Kyverno's `json`, `yaml` and `user` libraries: `json.unmarshal(s)`,
//! `json.marshal(v)`, `yaml.parse(s)`, and `user.parseServiceAccount(s)`
//! (also `parseServiceAccount(s)`). Kyverno decodes into Go's `any`, so every
//! number comes back a double (`json.unmarshal('1') == 1.0`); a service
//! account has the fields of Kyverno's Go type, `Name` and `Namespace`.

use std::collections::HashMap;
use std::sync::Arc;

use ::cel::common::value::CowVal;
use ::cel::objects::{Key, Map};
use ::cel::{Env, ExecutionError, Value};
use serde_json::Value as Json;

use super::{dyn_type, error, global, owned, string, string_arg, string_type};

/// Declares `json.*`.
pub fn register_json(env: &mut Env) {
    global(
        env,
        "json.unmarshal",
        "json_unmarshal_string",
        vec![string_type()],
        unmarshal,
    );
    global(
        env,
        "json.marshal",
        "json_marshal_dyn",
        vec![dyn_type()],
        marshal,
    );
}

/// Declares `yaml.*`.
pub fn register_yaml(env: &mut Env) {
    global(
        env,
        "yaml.parse",
        "yaml_parse_string",
        vec![string_type()],
        parse,
    );
}

/// Declares `user.parseServiceAccount` and `parseServiceAccount`.
pub fn register_user(env: &mut Env) {
    for (name, id) in [
        (
            "user.parseServiceAccount",
            "parse_service_account_string_prefixed",
        ),
        (
            "parseServiceAccount",
            "parse_service_account_string_non_prefixed",
        ),
    ] {
        global(env, name, id, vec![string_type()], service_account);
    }
}

/// Deepest document decoded: what the crate's values and their conversion
/// back to JSON recurse through.
const MAX_DEPTH: usize = 100;

/// A decoded document as Go's `any` holds it: numbers are doubles.
fn from_go_any(json: &Json, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("a document nested more than {MAX_DEPTH} deep"));
    }
    Ok(match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(items) => Value::List(Arc::new(
            items
                .iter()
                .map(|item| from_go_any(item, depth + 1))
                .collect::<Result<_, _>>()?,
        )),
        Json::Object(map) => {
            let mut entries: HashMap<Key, Value> = HashMap::with_capacity(map.len());
            for (key, item) in map {
                entries.insert(Key::from(key.as_str()), from_go_any(item, depth + 1)?);
            }
            Value::Map(Map {
                map: Arc::new(entries),
            })
        }
    })
}

fn unmarshal<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "json.unmarshal";
    let text = string_arg(&args, 0, F)?;
    let json: Json = serde_json::from_str(text).map_err(|e| error(F, e.to_string()))?;
    owned(from_go_any(&json, 0).map_err(|e| error(F, e))?)
}

fn parse<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "yaml.parse";
    let text = string_arg(&args, 0, F)?;
    let json = crate::shared::yaml::to_json(text).map_err(|e| error(F, e))?;
    owned(from_go_any(&json, 0).map_err(|e| error(F, e))?)
}

fn marshal<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "json.marshal";
    let value = args
        .first()
        .ok_or_else(|| ExecutionError::invalid_argument_count(1, 0))?;
    let value = Value::try_from(value.as_ref())?;
    let json = crate::cel::libraries::values::to_json(&value).map_err(|e| error(F, e))?;
    string(crate::shared::go_json::to_string(&json))
}

fn service_account<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let user = string_arg(&args, 0, "parseServiceAccount")?;
    let (namespace, name) = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .unwrap_or_default();
    let entries: HashMap<Key, Value> = [("Namespace", namespace), ("Name", name)]
        .into_iter()
        .map(|(k, v)| (Key::from(k), Value::from(v)))
        .collect();
    owned(Value::Map(Map {
        map: Arc::new(entries),
    }))
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{b, s, table};
    use ::cel::Value;

    #[test]
    fn json_and_yaml_decode_as_go_does() {
        table(&[
            (
                r#"json.unmarshal('{"a": [1, "x", true, null]}').a[0] == 1.0"#,
                b(true),
            ),
            (r#"json.unmarshal('{"a": {"b": "c"}}').a.b"#, s("c")),
            ("json.unmarshal('2')", Some(Value::Float(2.0))),
            ("json.unmarshal('')", None),
            ("json.unmarshal('{')", None),
            (
                r#"json.marshal({'b': dyn([dyn(1), dyn('x')]), 'a': dyn(true)})"#,
                s(r#"{"a":true,"b":[1,"x"]}"#),
            ),
            (
                r#"json.marshal(json.unmarshal('{"n": 3}'))"#,
                s(r#"{"n":3}"#),
            ),
            ("json.marshal('x')", s(r#""x""#)),
            ("json.marshal(1.5)", s("1.5")),
            (
                "yaml.parse('name: dory\\nfriends: [marlin]').friends[0]",
                s("marlin"),
            ),
            ("yaml.parse('a: 1').a == 1.0", b(true)),
            ("yaml.parse('42') == 42.0", b(true)),
            ("yaml.parse('') == null", b(true)),
            ("yaml.parse('- a\\n- b').size()", Some(Value::Int(2))),
            ("yaml.parse('a: [')", None),
            // Kyverno 1.19.1 (make differential, seed 1, mpol-128): YAML 1.1
            // keys, and Go's json.Marshal of a large double.
            (
                "json.marshal(yaml.parse('On: ~\\nNO: 18446744073709551615\\ntrue: |\\n  yes\\n'))",
                s(r#"{"false":18446744073709552000,"true":"yes\n"}"#),
            ),
            (
                "json.marshal({'a': '<&>'})",
                s(r#"{"a":"\u003c\u0026\u003e"}"#),
            ),
        ]);
    }

    #[test]
    fn service_accounts_are_read_from_user_names() {
        table(&[
            (
                "user.parseServiceAccount('system:serviceaccount:foo:bar').Namespace",
                s("foo"),
            ),
            (
                "user.parseServiceAccount('system:serviceaccount:foo:bar').Name",
                s("bar"),
            ),
            (
                "parseServiceAccount('system:serviceaccount:foo:bar:baz').Name",
                s("bar:baz"),
            ),
            ("parseServiceAccount('alice').Name", s("")),
            (
                "parseServiceAccount('system:serviceaccount:foo').Namespace",
                s(""),
            ),
            ("parseServiceAccount(true)", None),
        ]);
    }
}
