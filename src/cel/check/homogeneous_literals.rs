//! cel-go's homogeneous aggregate literals validator, which Kubernetes' and
//! Kyverno's environments run: a literal's items (a map's keys, its values)
//! have one type, that of the first. It reads the final types, once the
//! whole expression is checked (a parameter still free is `dyn`; `dyn` and
//! `string` are not one type); refused here where both types are known
//! exactly.

use std::collections::HashMap;

use crate::cel::check::type_parameters::Mapping;
use crate::cel::check::types::Ty;

/// A literal whose items must have one type, checked once the whole
/// expression is typed (as cel-go's validator checks it, on the final types).
pub(super) enum Literal {
    /// The list's items, and whether each is optional (`[?x]`).
    List(Vec<(u64, bool)>),
    /// The map's keys and values, and whether each value is optional.
    Map(Vec<(u64, u64, bool)>),
}

/// The first literal whose items do not have one type, in cel-go's words.
pub(super) fn check(
    literals: &[Literal],
    types: &HashMap<u64, Ty>,
    mapping: &Mapping,
) -> Result<(), String> {
    let final_type = |id: &u64, optional: bool| {
        let ty = mapping.finish(types.get(id).unwrap_or(&Ty::Unknown));
        if optional { unwrap_optional(ty) } else { ty }
    };
    for literal in literals {
        match literal {
            Literal::List(items) => {
                let mut types = items.iter().map(|(id, optional)| final_type(id, *optional));
                if let Some(first) = types.next() {
                    for (i, ty) in types.enumerate() {
                        homogeneous(&first, &ty, "item", i + 1)?;
                    }
                }
            }
            Literal::Map(entries) => {
                let mut types = entries.iter().map(|(key, value, optional)| {
                    (final_type(key, false), final_type(value, *optional))
                });
                if let Some((first_key, first_value)) = types.next() {
                    for (i, (key, value)) in types.enumerate() {
                        homogeneous(&first_key, &key, "key", i + 1)?;
                        homogeneous(&first_value, &value, "value", i + 1)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// An item of a literal against its first: cel-go's message where both types
/// are known exactly and differ.
fn homogeneous(first: &Ty, ty: &Ty, part: &str, at: usize) -> Result<(), String> {
    if !exact(first) || !exact(ty) || first == ty {
        return Ok(());
    }
    Err(format!(
        "expected type '{first}' but found '{ty}' ({part} {} of a literal: its items must have one type)",
        at + 1
    ))
}

/// Whether `ty` is a type this check knows as cel-go's checker does: no type
/// not worked out in it (a type value's included), no object whose fields
/// are not known.
fn exact(ty: &Ty) -> bool {
    match ty {
        Ty::List(element) | Ty::Optional(element) | Ty::Type(element) => exact(element),
        Ty::Map(key, value) => exact(key) && exact(value),
        Ty::Unknown
        | Ty::Free
        | Ty::Var(_)
        | Ty::Pair(..)
        | Ty::Any
        | Ty::Object
        | Ty::Declared(_) => false,
        Ty::Dyn
        | Ty::Null
        | Ty::Bool
        | Ty::Int
        | Ty::Uint
        | Ty::Double
        | Ty::String
        | Ty::Bytes
        | Ty::Timestamp
        | Ty::Duration
        | Ty::JsonPatch
        | Ty::Opaque(_) => true,
    }
}

/// An optional item's type in a literal (`[?x]`, `{?k: v}`): what the
/// optional holds.
pub(super) fn unwrap_optional(ty: Ty) -> Ty {
    match ty {
        Ty::Optional(inner) => *inner,
        other if other.is_open() => other,
        _ => Ty::Unknown,
    }
}
