//! The parts of a document an expression can reach, the host field masks
//! that keep them, and decoding only those parts: what Kyverno's field-path
//! JMESPath (`kyverno::field_paths`), CEL's resource reads and the cluster
//! reads built on both have in common.

use std::collections::BTreeMap;
use std::rc::Rc;

use jmespath::Variable;
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The parts of a document an expression can reach: the whole of it, or
/// some of its fields (and parts of those).
#[derive(Debug, PartialEq)]
pub enum Reach<'e> {
    Whole,
    Fields(Vec<(&'e str, Reach<'e>)>),
}

impl<'e> Reach<'e> {
    /// Adds a path (field names from the top) and all below it.
    pub fn take(&mut self, path: impl IntoIterator<Item = &'e str>) {
        let mut at = self;
        for name in path {
            let Reach::Fields(fields) = at else {
                // An earlier path already takes all of this.
                return;
            };
            let index = match fields.iter().position(|(n, _)| *n == name) {
                Some(index) => index,
                None => {
                    fields.push((name, Reach::Fields(Vec::new())));
                    fields.len() - 1
                }
            };
            let Some((_, inner)) = fields.get_mut(index) else {
                return;
            };
            at = inner;
        }
        *at = Reach::Whole;
    }
}

/// The host field masks (dotted paths, Kubewarden 1.35) that keep what a
/// [`Reach`] takes. A field whose name has a dot cannot be named in a mask,
/// so its parent is kept whole; a reach of the whole document needs none.
pub fn field_masks(reach: &Reach) -> Vec<String> {
    fn walk(reach: &Reach, prefix: &str, out: &mut Vec<String>) {
        match reach {
            Reach::Fields(fields) if !fields.is_empty() => {
                if fields
                    .iter()
                    .any(|(name, _)| name.contains('.') || name.is_empty())
                {
                    out.push(prefix.to_string());
                    return;
                }
                for (name, inner) in fields {
                    let path = if prefix.is_empty() {
                        (*name).to_string()
                    } else {
                        [prefix, ".", name].concat()
                    };
                    walk(inner, &path, out);
                }
            }
            _ => out.push(prefix.to_string()),
        }
    }
    let mut masks = Vec::new();
    walk(reach, "", &mut masks);
    if masks.iter().any(String::is_empty) {
        return Vec::new();
    }
    masks.sort();
    masks.dedup();
    masks
}

/// Decodes only what a [`Reach`] takes: fields outside it are skipped
/// without being built, which is most of a Node.
pub struct Pruned<'r, 'e>(pub &'r Reach<'e>);

impl<'de> DeserializeSeed<'de> for Pruned<'_, '_> {
    type Value = Variable;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Variable, D::Error> {
        match self.0 {
            Reach::Whole => Variable::deserialize(deserializer),
            Reach::Fields(fields) => deserializer.deserialize_any(FieldsVisitor(fields)),
        }
    }
}

struct FieldsVisitor<'r, 'e>(&'r [(&'e str, Reach<'e>)]);

impl<'de> Visitor<'de> for FieldsVisitor<'_, '_> {
    type Value = Variable;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Variable, A::Error> {
        let mut object = BTreeMap::new();
        while let Some(found) = map.next_key_seed(FieldName(self.0))? {
            match found.and_then(|index| self.0.get(index)) {
                Some((name, reach)) => {
                    let value = map.next_value_seed(Pruned(reach))?;
                    object.insert((*name).to_string(), Rc::new(value));
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Variable::Object(object))
    }

    // Anything but an object has no fields: following a path into it gives
    // null, so it is skipped.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Variable, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Variable::Null)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_str<E>(self, _: &str) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
    fn visit_unit<E>(self) -> Result<Variable, E> {
        Ok(Variable::Null)
    }
}

/// Decodes a JSON document keeping, inside objects, only the fields a
/// [`Reach`] takes; anything else (a list, a string where the reach expects
/// an object) is kept whole, as CEL tells those apart from a missing field.
pub struct PrunedJson<'r, 'e>(pub &'r Reach<'e>);

impl<'de> DeserializeSeed<'de> for PrunedJson<'_, '_> {
    type Value = serde_json::Value;

    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<serde_json::Value, D::Error> {
        match self.0 {
            Reach::Whole => serde_json::Value::deserialize(deserializer),
            Reach::Fields(fields) => deserializer.deserialize_any(JsonFieldsVisitor(fields)),
        }
    }
}

struct JsonFieldsVisitor<'r, 'e>(&'r [(&'e str, Reach<'e>)]);

impl<'de> Visitor<'de> for JsonFieldsVisitor<'_, '_> {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<serde_json::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(found) = map.next_key_seed(FieldName(self.0))? {
            match found.and_then(|index| self.0.get(index)) {
                Some((name, reach)) => {
                    let value = map.next_value_seed(PrunedJson(reach))?;
                    object.insert((*name).to_string(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(serde_json::Value::Object(object))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<serde_json::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<serde_json::Value>()? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }
    fn visit_bool<E>(self, b: bool) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<serde_json::Value, E> {
        Ok(n.into())
    }
    fn visit_u64<E>(self, n: u64) -> Result<serde_json::Value, E> {
        Ok(n.into())
    }
    fn visit_f64<E>(self, n: f64) -> Result<serde_json::Value, E> {
        Ok(serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, Into::into))
    }
    fn visit_str<E>(self, s: &str) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::String(s.to_string()))
    }
    fn visit_unit<E>(self) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Null)
    }
}

/// A key, as the index of the wanted field it names (compared without
/// allocating a string for it).
struct FieldName<'r, 'e>(&'r [(&'e str, Reach<'e>)]);

impl<'de> DeserializeSeed<'de> for FieldName<'_, '_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldName<'_, '_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|(name, _)| *name == key))
    }
}
