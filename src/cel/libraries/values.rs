//! CEL values back to JSON. The `cel` crate's own conversion stops at struct
//! values (`Object{...}`, `JSONPatch{...}`), which are what mutations return.

use std::sync::Arc;

use ::cel::Value;
use serde_json::{Map, Value as Json};

/// Deepest value converted; CEL values built from JSON and expressions are
/// far shallower, and this bounds the recursion.
const MAX_DEPTH: usize = 128;

/// The JSON form of a CEL value, or why it has none.
pub fn to_json(value: &Value) -> Result<Json, String> {
    convert(value, 0)
}

fn convert(value: &Value, depth: usize) -> Result<Json, String> {
    if depth > MAX_DEPTH {
        return Err(format!("a value nested more than {MAX_DEPTH} deep"));
    }
    let depth = depth + 1;
    Ok(match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .ok_or_else(|| format!("{f} has no JSON form"))?,
        Value::String(s) => Json::String(s.to_string()),
        Value::Bytes(b) => {
            use base64::Engine;
            Json::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        Value::List(items) => Json::Array(
            items
                .iter()
                .map(|item| convert(item, depth))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(map) => {
            let mut object = Map::new();
            for (key, item) in map.map.iter() {
                object.insert(key.to_string(), convert(item, depth)?);
            }
            Json::Object(object)
        }
        Value::Struct(structure) => {
            let mut object = Map::new();
            for (field, item) in structure.field_values() {
                let item = Value::try_from(item.as_ref()).map_err(|e| e.to_string())?;
                object.insert(field, convert(&item, depth)?);
            }
            Json::Object(object)
        }
        #[allow(unreachable_patterns)]
        _ => match super::time::to_json(value) {
            Some(text) => Json::String(text),
            None => return Err(format!("{} has no JSON form", value.type_of())),
        },
    })
}

/// A JSON value as CEL sees it: `object`, `oldObject`, answers of the host.
pub fn from_json(json: &Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Value::Int(i),
            (None, Some(u), _) => Value::UInt(u),
            (_, _, Some(f)) => Value::Float(f),
            _ => Value::Null,
        },
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(items) => Value::List(Arc::new(items.iter().map(from_json).collect())),
        Json::Object(map) => {
            let entries: std::collections::HashMap<::cel::objects::Key, Value> = map
                .iter()
                .map(|(k, v)| (::cel::objects::Key::from(k.as_str()), from_json(v)))
                .collect();
            Value::Map(::cel::objects::Map {
                map: Arc::new(entries),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trips() {
        let original = json!({"a": [1, "x", null, true, 1.5], "b": {"c": {}}});
        assert_eq!(to_json(&from_json(&original)).unwrap(), original);
    }
}
