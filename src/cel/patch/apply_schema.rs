//! Kubernetes' structural schema of the built-in kinds, as server-side apply
//! reads it: which fields each type has, which lists are associative and by
//! which keys, which lists, maps and structs are atomic.
//!
//! The table is generated (`tools/apply-schema.py`, from client-go's
//! `applyconfigurations/internal/internal.go`) into one byte blob, read in
//! place: no allocation and no decoding per request, and the records of a
//! walk sit together, so a fresh instance touches few of its pages. The
//! format is described in the generator.
//!
//! The table lies in writable data with the time zones ([`crate::cel::tables`]).

use crate::cel::tables::APPLY_SCHEMA;

fn byte(at: usize) -> Option<u8> {
    APPLY_SCHEMA.byte(at)
}

/// A type in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaType(u16);

/// What a type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    String,
    Numeric,
    Boolean,
    /// Any scalar: a quantity, an int-or-string, a time.
    AnyScalar,
    /// Any value; maps merged by key unless `atomic`, lists replaced.
    Untyped {
        atomic: bool,
    },
    Struct {
        atomic: bool,
    },
    Map {
        element: SchemaType,
        atomic: bool,
    },
    List {
        element: SchemaType,
        kind: ListKind,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Atomic,
    Set,
    /// Merged item by item by the keys (`SchemaType::same_keys`).
    Map,
}

/// The type of objects of this `apiVersion` and `kind`, if the table has it.
pub fn kind(api_version: &str, kind: &str) -> Option<SchemaType> {
    let buckets = usize::from(u16_at(0)?);
    let key = || api_version.bytes().chain([b'/']).chain(kind.bytes());
    let mut hash: u32 = 0x811C_9DC5;
    for byte in key() {
        hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
    }
    let bucket = usize::try_from(hash).ok()? % buckets.max(1);
    let mut at = usize::from(u16_at(2 + 2 * bucket)?);
    if at == 0 {
        return None;
    }
    loop {
        let length = usize::from(byte(at)?);
        if length == 0 {
            return None;
        }
        if name_is(at, key()) {
            return u16_at(at + 1 + length).map(SchemaType);
        }
        at += 1 + length + 2;
    }
}

impl SchemaType {
    /// Anything, merged whole: what an untyped atomic value's items are.
    pub const UNTYPED_ATOMIC: SchemaType = SchemaType(4);

    pub fn shape(self) -> Option<Shape> {
        let at = usize::from(self.0);
        Some(match self.0 {
            0 => Shape::String,
            1 => Shape::Numeric,
            2 => Shape::Boolean,
            3 => Shape::AnyScalar,
            4 => Shape::Untyped { atomic: true },
            5 => Shape::Untyped { atomic: false },
            _ => match byte(at)? {
                1 => Shape::Struct {
                    atomic: byte(at + 1)? == 1,
                },
                2 => Shape::Map {
                    element: SchemaType(u16_at(at + 2)?),
                    atomic: byte(at + 1)? == 1,
                },
                3 => Shape::List {
                    element: SchemaType(u16_at(at + 2)?),
                    kind: match byte(at + 1)? {
                        1 => ListKind::Set,
                        2 => ListKind::Map,
                        _ => ListKind::Atomic,
                    },
                },
                _ => return None,
            },
        })
    }

    /// The type of a struct's field; `None` for a field the struct does not
    /// declare (or a type that is not a struct).
    pub fn field(self, name: &str) -> Option<SchemaType> {
        let at = usize::from(self.0);
        if self.0 < 8 || byte(at) != Some(1) {
            return None;
        }
        let count = byte(at + 2)?;
        let mut at = at + 3;
        for _ in 0..count {
            let length = usize::from(byte(at)?);
            if name_is(at, name.bytes()) {
                return u16_at(at + 1 + length).map(SchemaType);
            }
            at += 1 + length + 2;
        }
        None
    }

    /// The type of the member `name` of an object of this type: a struct's
    /// field (`None` where the struct does not declare it), a map's element,
    /// an untyped value's own type. `None` for a type that is not an object.
    pub fn member(self, name: &str) -> Option<SchemaType> {
        match self.shape()? {
            Shape::Struct { .. } => self.field(name),
            Shape::Map { element, .. } => Some(element),
            Shape::Untyped { .. } => Some(self),
            _ => None,
        }
    }

    /// Whether two items of this map-type list have the same keys, a key
    /// left out counting as the value Kubernetes gives it (ports' protocol:
    /// TCP).
    pub fn same_keys(self, a: &serde_json::Value, b: &serde_json::Value) -> bool {
        let at = usize::from(self.0);
        if self.0 < 8 || byte(at) != Some(3) {
            return false;
        }
        let count = byte(at + 4).unwrap_or(0);
        let mut at = at + 5;
        let (mut key, mut default) = ([0u8; 64], [0u8; 64]);
        for _ in 0..count {
            let (Some(key), Some(default)) = (
                copy_name(&mut at, &mut key),
                copy_name(&mut at, &mut default),
            ) else {
                return false;
            };
            let value = |item: &serde_json::Value| match item.get(key) {
                Some(value) => value.clone(),
                None if default.is_empty() => serde_json::Value::Null,
                None => serde_json::Value::String(default.to_string()),
            };
            if value(a) != value(b) {
                return false;
            }
        }
        true
    }
}

fn u16_at(at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([byte(at)?, byte(at + 1)?]))
}

/// Whether the length-prefixed name at `at` is `name`.
fn name_is(at: usize, name: impl Iterator<Item = u8>) -> bool {
    let Some(length) = byte(at) else { return false };
    let mut count = 0;
    for (i, wanted) in name.enumerate() {
        if i >= usize::from(length) || byte(at + 1 + i) != Some(wanted) {
            return false;
        }
        count += 1;
    }
    count == usize::from(length)
}

/// Copies the length-prefixed name at `*at` into `buffer` (the generator
/// keeps list keys under 64 bytes), moving `*at` past it.
fn copy_name<'b>(at: &mut usize, buffer: &'b mut [u8; 64]) -> Option<&'b str> {
    let length = usize::from(byte(*at)?);
    let target = buffer.get_mut(..length)?;
    for (i, slot) in target.iter_mut().enumerate() {
        *slot = byte(*at + 1 + i)?;
    }
    *at += 1 + length;
    std::str::from_utf8(target).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(root: SchemaType, fields: &[&str]) -> SchemaType {
        let mut at = root;
        for field in fields {
            at = match at.shape() {
                Some(Shape::List { element, .. } | Shape::Map { element, .. }) => element,
                _ => at,
            };
            at = at.field(field).unwrap();
        }
        at
    }

    #[test]
    fn kinds_are_found_by_api_version_and_kind() {
        assert!(kind("v1", "Pod").is_some());
        assert!(kind("v1", "Binding").is_some());
        assert!(kind("apps/v1", "Deployment").is_some());
        assert!(kind("rbac.authorization.k8s.io/v1", "ClusterRole").is_some());
        assert!(kind("networking.k8s.io/v1", "Ingress").is_some());
        assert_eq!(kind("v1", "Deployment"), None);
        assert_eq!(kind("example.com/v1", "Widget"), None);
        assert_eq!(kind("", ""), None);
    }

    #[test]
    fn pod_fields_lists_and_atomics() {
        let pod = kind("v1", "Pod").unwrap();
        assert_eq!(pod.field("spec").unwrap().field("nodeNamee"), None);
        let containers = path(pod, &["spec", "containers"]);
        assert!(matches!(
            containers.shape(),
            Some(Shape::List {
                kind: ListKind::Map,
                ..
            })
        ));
        assert!(containers.same_keys(&json!({"name": "a", "image": "x"}), &json!({"name": "a"})));
        assert!(!containers.same_keys(&json!({"name": "a"}), &json!({"name": "b"})));
        let ports = path(pod, &["spec", "containers", "ports"]);
        assert!(ports.same_keys(
            &json!({"containerPort": 80}),
            &json!({"containerPort": 80, "protocol": "TCP"})
        ));
        assert!(!ports.same_keys(
            &json!({"containerPort": 80}),
            &json!({"containerPort": 80, "protocol": "UDP"})
        ));
        let args = path(pod, &["spec", "containers", "args"]);
        assert!(matches!(
            args.shape(),
            Some(Shape::List {
                kind: ListKind::Atomic,
                ..
            })
        ));
        let node_selector = path(pod, &["spec", "nodeSelector"]);
        assert!(matches!(
            node_selector.shape(),
            Some(Shape::Map { atomic: true, .. })
        ));
        let annotations = path(pod, &["metadata", "annotations"]);
        assert_eq!(
            annotations.shape(),
            Some(Shape::Map {
                element: SchemaType(0),
                atomic: false
            })
        );
        let finalizers = path(pod, &["metadata", "finalizers"]);
        assert!(matches!(
            finalizers.shape(),
            Some(Shape::List {
                kind: ListKind::Set,
                ..
            })
        ));
        let field_ref = path(pod, &["spec", "containers", "env", "valueFrom", "fieldRef"]);
        assert_eq!(field_ref.shape(), Some(Shape::Struct { atomic: true }));
        let quantity = path(pod, &["spec", "containers", "resources", "limits"]);
        assert!(matches!(
            quantity.shape(),
            Some(Shape::Map {
                element: SchemaType(3),
                ..
            })
        ));
    }

    #[test]
    fn binding_target_is_an_atomic_reference() {
        let binding = kind("v1", "Binding").unwrap();
        assert_eq!(
            binding.field("target").unwrap().shape(),
            Some(Shape::Struct { atomic: true })
        );
        assert!(binding.field("metadata").unwrap().field("labels").is_some());
    }
}
