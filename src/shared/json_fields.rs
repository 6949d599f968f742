//! A JSON object read field by field: each field kept as the JSON received,
//! decoded only when asked for. The admission request and the object it
//! carries are both read this way.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// A JSON object's fields, each kept as the JSON received: decoded once, then
/// read field by field.
#[derive(Default, Debug)]
pub struct JsonFields<'a> {
    /// In the order received; a request has a dozen or so fields.
    pub fields: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'de: 'a, 'a> Deserialize<'de> for JsonFields<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Fields<'a> {
            type Value = JsonFields<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Self::Value, M::Error> {
                // A Binding has four fields, a request a dozen or so: start
                // small, every byte of a fresh instance's heap is paid for.
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((Key(key), value)) = map.next_entry::<Key<'a>, &'a RawValue>()? {
                    fields.push((key, value));
                }
                Ok(JsonFields { fields })
            }
        }
        deserializer.deserialize_map(Fields(std::marker::PhantomData))
    }
}

impl<'a> JsonFields<'a> {
    pub fn raw(&self, name: &str) -> Option<&'a RawValue> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| *value)
    }

    /// A field decoded as `T`; absent, null or malformed reads as the default.
    pub fn field<T: Default + Deserialize<'a>>(&self, name: &str) -> T {
        self.raw(name)
            .and_then(|raw| serde_json::from_str::<Option<T>>(raw.get()).ok())
            .flatten()
            .unwrap_or_default()
    }
}

/// A string (a field name, or a value classification compares), borrowed
/// from the payload unless it holds escapes (serde's own `Cow` always copies).
#[derive(Default)]
pub(crate) struct Key<'a>(pub(crate) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Name<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'a>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        deserializer.deserialize_str(Name(std::marker::PhantomData))
    }
}
