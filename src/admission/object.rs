//! The object a request carries (a Binding or a Pod), decoded only as far as
//! the policy needs.
//!
//! The short form writes metadata and nothing else, so the object is kept as
//! the JSON received, field by field, with only `metadata` decoded; what goes
//! back to policy-server is that JSON with the new metadata in its place, so
//! every other field survives byte for byte and is never turned into a
//! `Value` and back (for a Binding a small saving; for a placed Pod, whose
//! spec is large, most of the decoding). A Kyverno rule reads and patches
//! the whole object: the first rule to run decodes the rest.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::shared::json_fields::JsonFields;

/// Deeper objects take the whole-`Value` path, whose decoding refuses them
/// the way it always has (serde_json stops at 128 levels).
const MAX_SHALLOW_DEPTH: usize = 100;

#[derive(Debug)]
pub enum Object<'a> {
    /// The fields as received; `head` holds the decoded `metadata` (as
    /// `{"metadata": …}`, or `{}` when there is none) for the code that
    /// writes it.
    Shallow { fields: JsonFields<'a>, head: Value },
    /// The whole object, decoded.
    Whole(Value),
}

impl<'a> Object<'a> {
    /// `raw` kept as received, with `metadata` decoded; `None` when it is not
    /// a JSON object, repeats a key, or nests deeper than the whole-object
    /// decoding would accept.
    pub fn shallow(raw: &'a RawValue) -> Option<Object<'a>> {
        // Counting brackets bounds the depth cheaply; the exact scan runs only
        // for objects with many of them.
        let text = raw.get();
        let brackets = text.bytes().filter(|b| matches!(b, b'{' | b'[')).count();
        if brackets > MAX_SHALLOW_DEPTH && nesting_depth(text) > MAX_SHALLOW_DEPTH {
            return None;
        }
        let fields: JsonFields<'a> = serde_json::from_str(text).ok()?;
        let repeats = fields
            .fields
            .iter()
            .enumerate()
            .any(|(i, (key, _))| fields.fields.iter().skip(i + 1).any(|(k, _)| k == key));
        if repeats {
            return None;
        }
        let mut head = Map::new();
        if let Some(metadata) = fields.raw("metadata") {
            head.insert(
                "metadata".to_string(),
                serde_json::from_str(metadata.get()).ok()?,
            );
        }
        Some(Object::Shallow {
            fields,
            head: Value::Object(head),
        })
    }

    /// A top-level field as received (`Whole` objects have none to give).
    pub fn raw(&self, name: &str) -> Option<&'a RawValue> {
        match self {
            Object::Shallow { fields, .. } => fields.raw(name),
            Object::Whole(_) => None,
        }
    }

    /// What the metadata-writing code works on: an object whose `metadata`
    /// is the object's.
    pub fn metadata_holder(&mut self) -> &mut Value {
        match self {
            Object::Shallow { head, .. } => head,
            Object::Whole(value) => value,
        }
    }

    /// The whole object, decoding the fields not decoded yet. On an error
    /// the object stays as it was.
    pub fn whole(&mut self) -> Result<&mut Value, String> {
        if let Object::Shallow { fields, head } = self {
            let value = decode_whole(fields, head)?;
            *self = Object::Whole(value);
        }
        match self {
            Object::Whole(value) => Ok(value),
            Object::Shallow { .. } => Err("the object could not be decoded".to_string()),
        }
    }

    pub fn into_value(self) -> Result<Value, String> {
        match self {
            Object::Whole(value) => Ok(value),
            Object::Shallow { fields, mut head } => decode_whole(&fields, &mut head),
        }
    }
}

/// The fields decoded, with the metadata moved out of `head` once all of
/// them have decoded.
fn decode_whole(fields: &JsonFields, head: &mut Value) -> Result<Value, String> {
    let mut map = Map::new();
    for (key, raw) in &fields.fields {
        if key != "metadata" {
            let value = serde_json::from_str(raw.get())
                .map_err(|e| format!("the object cannot be decoded: {e}"))?;
            map.insert(key.to_string(), value);
        }
    }
    if let Some(metadata) = head.get_mut("metadata") {
        map.insert("metadata".to_string(), metadata.take());
    }
    Ok(Value::Object(map))
}

impl Serialize for Object<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (fields, head) = match self {
            Object::Whole(value) => return value.serialize(serializer),
            Object::Shallow { fields, head } => (fields, head),
        };
        let metadata = head.get("metadata");
        let mut map = serializer.serialize_map(None)?;
        for (key, raw) in &fields.fields {
            if key == "metadata" {
                map.serialize_entry(key, &metadata)?;
            } else {
                map.serialize_entry(key, raw)?;
            }
        }
        if let Some(metadata) = metadata
            && fields.raw("metadata").is_none()
        {
            map.serialize_entry("metadata", metadata)?;
        }
        map.end()
    }
}

/// How deeply arrays and objects nest in `json` (valid JSON).
fn nesting_depth(json: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for byte in json.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth = depth.saturating_add(1);
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_string()).unwrap()
    }

    #[test]
    fn only_metadata_is_decoded_and_the_rest_goes_back_as_received() {
        let text =
            r#"{"kind":"Binding","target":{"name":"n1", "x" : [1, 2.50]},"metadata":{"name":"p"}}"#;
        let raw = raw(text);
        let mut object = Object::shallow(&raw).unwrap();
        object.metadata_holder()["metadata"]["annotations"] = serde_json::json!({"a": "b"});
        let out = serde_json::to_string(&object).unwrap();
        // Untouched fields keep their exact text, number formatting included.
        assert!(
            out.contains(r#""target":{"name":"n1", "x" : [1, 2.50]}"#),
            "{out}"
        );
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["metadata"]["annotations"]["a"], "b");
        assert_eq!(value, object.into_value().unwrap());
    }

    #[test]
    fn metadata_added_where_there_was_none() {
        let raw = raw(r#"{"target":{"name":"n1"}}"#);
        let mut object = Object::shallow(&raw).unwrap();
        object.metadata_holder()["metadata"] = serde_json::json!({"labels": {"k": "v"}});
        let out: Value = serde_json::to_value(&object).unwrap();
        assert_eq!(out["metadata"]["labels"]["k"], "v");
        assert_eq!(out["target"]["name"], "n1");
        let whole = object.whole().unwrap().clone();
        assert_eq!(whole, out);
    }

    #[test]
    fn odd_objects_take_the_whole_path() {
        assert!(Object::shallow(&raw(r#"[1]"#)).is_none());
        assert!(Object::shallow(&raw(r#""text""#)).is_none());
        assert!(Object::shallow(&raw(r#"{"a":1,"a":2}"#)).is_none());
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(120), "]".repeat(120));
        assert!(Object::shallow(&raw(&deep)).is_none());
        // Brackets inside strings do not count.
        let quoted = format!("{{\"a\":\"{}\\\"\"}}", "[".repeat(120));
        assert!(Object::shallow(&raw(&quoted)).is_some());
    }
}
