//! Kubernetes' structural schema of the built-in kinds, as server-side apply
//! reads it: which fields each type has, which lists are associative and by
//! which keys, which lists, maps and structs are atomic.
//!
//! The table is generated (`tools/apply-schema.py`, from client-go's
//! `applyconfigurations/internal/internal.go`) into one byte blob: no
//! allocation and no decoding per request, and the records of a walk sit
//! together, so a fresh instance touches few of the blob's pages. The
//! format is described in the generator.

static BLOB: &[u8] = include_bytes!("apply_schema.bin");

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
    /// Merged item by item by the keys (`SchemaType::keys`).
    Map,
}

/// The type of objects of this `apiVersion` and `kind`, if the table has it.
pub fn kind(api_version: &str, kind: &str) -> Option<SchemaType> {
    let buckets = usize::from(u16_at(0)?);
    let length = api_version.len() + 1 + kind.len();
    let mut hash: u32 = 0x811C_9DC5;
    for byte in api_version.bytes().chain([b'/']).chain(kind.bytes()) {
        hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
    }
    let bucket = usize::try_from(hash).ok()? % buckets.max(1);
    let mut at = usize::from(u16_at(2 + 2 * bucket)?);
    if at == 0 {
        return None;
    }
    loop {
        let key = name_at(at)?;
        if key.is_empty() {
            return None;
        }
        let after = at + 1 + key.len();
        if key.len() == length
            && key.starts_with(api_version.as_bytes())
            && key.get(api_version.len()) == Some(&b'/')
            && key.ends_with(kind.as_bytes())
        {
            return u16_at(after).map(SchemaType);
        }
        at = after + 2;
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
            _ => match BLOB.get(at)? {
                1 => Shape::Struct {
                    atomic: *BLOB.get(at + 1)? == 1,
                },
                2 => Shape::Map {
                    element: SchemaType(u16_at(at + 2)?),
                    atomic: *BLOB.get(at + 1)? == 1,
                },
                3 => Shape::List {
                    element: SchemaType(u16_at(at + 2)?),
                    kind: match BLOB.get(at + 1)? {
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
        if self.0 < 8 || BLOB.get(at) != Some(&1) {
            return None;
        }
        let count = *BLOB.get(at + 2)?;
        let mut at = at + 3;
        for _ in 0..count {
            let field = name_at(at)?;
            at += 1 + field.len();
            if field == name.as_bytes() {
                return u16_at(at).map(SchemaType);
            }
            at += 2;
        }
        None
    }

    /// A map-type list's keys, each with the value Kubernetes gives it when
    /// an item leaves it out (`""` when none).
    pub fn keys(self) -> impl Iterator<Item = (&'static str, &'static str)> {
        let at = usize::from(self.0);
        let is_list = self.0 >= 8 && BLOB.get(at) == Some(&3);
        let count = if is_list {
            BLOB.get(at + 4).copied().unwrap_or(0)
        } else {
            0
        };
        let mut at = at + 5;
        (0..count).map_while(move |_| {
            let key = std::str::from_utf8(name_at(at)?).ok()?;
            at += 1 + key.len();
            let default = std::str::from_utf8(name_at(at)?).ok()?;
            at += 1 + default.len();
            Some((key, default))
        })
    }
}

fn u16_at(at: usize) -> Option<u16> {
    let bytes = BLOB.get(at..at + 2)?;
    Some(u16::from_le_bytes([*bytes.first()?, *bytes.get(1)?]))
}

/// A length-prefixed name.
fn name_at(at: usize) -> Option<&'static [u8]> {
    let length = usize::from(*BLOB.get(at)?);
    BLOB.get(at + 1..at + 1 + length)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(containers.keys().collect::<Vec<_>>(), [("name", "")]);
        let ports = path(pod, &["spec", "containers", "ports"]);
        assert_eq!(
            ports.keys().collect::<Vec<_>>(),
            [("containerPort", ""), ("protocol", "TCP")]
        );
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
