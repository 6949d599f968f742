//! What each kind of expression must give, checked at load where its type
//! is known (see [`crate::cel::check::type_check`]): a match condition that gives a
//! string, a mutation that builds a list where an `Object{...}` belongs.
//! Kubernetes' and Kyverno's type checkers refuse these when the policy is
//! created; an expression of type `dyn` is found out when it runs.

use ::cel::common::ast::{EntryExpr, Expr, IdedExpr, operators};

use crate::cel::check::types::Ty;
use crate::cel::spec::Place;
use crate::cel::syntax::ast::children;

/// Why a value of type `ty`, at `place`, cannot be what that place needs.
pub fn mismatch(place: Place, ty: &Ty) -> Option<String> {
    // What Kyverno's reads give, and a type not worked out here, are checked
    // when the expression runs, as `dyn` is.
    let ty = if ty.is_open() { &Ty::Dyn } else { ty };
    let (wanted, fits) = match place {
        Place::MatchCondition(_) | Place::TargetCondition(_) => {
            ("a bool", matches!(ty, Ty::Bool | Ty::Dyn))
        }
        Place::Mutation(_, "jsonPatch") => (
            "a list of JSONPatch{...}",
            match ty {
                Ty::List(element) => **element == Ty::JsonPatch || element.is_open(),
                other => *other == Ty::Dyn,
            },
        ),
        // A map is merged as an object is, so it is let through.
        Place::Mutation(..) => (
            "an Object{...}",
            matches!(ty, Ty::Object | Ty::Map(..) | Ty::Dyn),
        ),
        Place::AuditAnnotation(_) => (
            "a string or null",
            matches!(ty, Ty::String | Ty::Null | Ty::Dyn),
        ),
        Place::Variable(_) | Place::TargetExpression => return None,
    };
    let article = if matches!(ty, Ty::Int | Ty::Object) {
        "an"
    } else {
        "a"
    };
    (!fits).then(|| format!("gives {article} {ty}; it must give {wanted}"))
}

/// Kubernetes names each `Object` construction by its field path from the
/// root (`Object{spec: Object.spec{...}}`), and an apply configuration must
/// give `Object` itself. Where the nesting is written out (a field's value,
/// the items of a list literal, the branches of `?:`), a name off the path
/// is found here; Kubernetes finds it when the mutation runs. Constructions
/// that reach a field through a variable or a macro are not followed.
pub fn misnamed(place: Place, expr: &IdedExpr) -> Option<String> {
    if let Place::Mutation(_, "applyConfiguration") = place {
        for root in branches(expr) {
            if let Expr::Struct(s) = &root.expr
                && s.type_name.starts_with("Object.")
            {
                return Some(format!("must evaluate to Object but got {}", s.type_name));
            }
        }
    }
    let mut found = None;
    visit(expr, &mut found);
    found
}

fn visit(expr: &IdedExpr, found: &mut Option<String>) {
    if found.is_some() {
        return;
    }
    if let Expr::Struct(s) = &expr.expr
        && (s.type_name == "Object" || s.type_name.starts_with("Object."))
    {
        for entry in &s.entries {
            let EntryExpr::StructField(field) = &entry.expr else {
                continue;
            };
            let expected = format!("{}.{}", s.type_name, field.field);
            for value in branches(&field.value) {
                let items: Vec<&IdedExpr> = match &value.expr {
                    Expr::List(list) => list.elements.iter().flat_map(branches).collect(),
                    _ => vec![value],
                };
                for item in items {
                    if let Expr::Struct(inner) = &item.expr
                        && inner.type_name.starts_with("Object")
                        && inner.type_name != expected
                    {
                        *found = Some(format!(
                            "type mismatch: unexpected type name \"{}\", expected \"{expected}\", which matches field name path from root Object type",
                            inner.type_name
                        ));
                        return;
                    }
                }
            }
        }
    }
    children(expr, &mut |child| visit(child, found));
}

/// An expression's possible values as written: both branches of `?:`.
fn branches(expr: &IdedExpr) -> Vec<&IdedExpr> {
    match &expr.expr {
        Expr::Call(call) if call.func_name == operators::CONDITIONAL => {
            call.args.iter().skip(1).flat_map(branches).collect()
        }
        _ => vec![expr],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(place: Place, source: &str) -> Option<String> {
        mismatch(
            place,
            &crate::testing::cel_libraries::check_source(source).ok()?,
        )
    }

    #[test]
    fn what_each_place_must_give() {
        let condition = Place::MatchCondition(0);
        let apply = Place::Mutation(0, "applyConfiguration");
        let patch = Place::Mutation(0, "jsonPatch");
        for (place, source) in [
            (condition, "object.metadata.name == 'a'"),
            (condition, "has(object.spec) && !false"),
            (condition, "object.spec.paused"),
            (condition, "'a' in object.metadata.labels"),
            (apply, "Object{metadata: Object.metadata{}}"),
            (apply, "object.spec.x ? Object{} : Object{}"),
            (apply, "{'metadata': {'labels': {'a': 'b'}}}"),
            (apply, "variables.patch"),
            (patch, "[JSONPatch{op: 'add', path: '/x', value: 1}]"),
            (Place::AuditAnnotation(0), "'x'"),
            (Place::Variable(0), "1"),
        ] {
            assert_eq!(check(place, source), None, "{source}");
        }
        for (place, source, message) in [
            (condition, "'true'", "gives a string; it must give a bool"),
            (
                condition,
                "object.x ? 1 : 2",
                "gives an int; it must give a bool",
            ),
            (
                apply,
                "[Object{}]",
                "gives a list(Object); it must give an Object{...}",
            ),
            (
                apply,
                "JSONPatch{op: 'add'}",
                "gives a JSONPatch; it must give an Object{...}",
            ),
            (
                patch,
                "JSONPatch{op: 'add', path: '/x'}",
                "gives a JSONPatch; it must give a list of JSONPatch{...}",
            ),
            (
                Place::AuditAnnotation(0),
                "1 == 1",
                "gives a bool; it must give a string or null",
            ),
        ] {
            assert_eq!(check(place, source).as_deref(), Some(message), "{source}");
        }
    }

    #[test]
    fn constructions_are_named_by_their_field_path() {
        let named = |place: Place, source: &str| {
            let compiled = crate::cel::program::compile(source, "x").unwrap();
            misnamed(place, &compiled.expression)
        };
        let apply = Place::Mutation(0, "applyConfiguration");
        let patch = Place::Mutation(0, "jsonPatch");
        for source in [
            "Object{spec: Object.spec{containers: [Object.spec.containers{name: 'a'}]}}",
            "Object{spec: x ? Object.spec{} : Object.spec{paused: true}}",
            "Object{spec: Object.spec{containers: object.spec.containers.map(c, Object.spec.containers{name: c.name})}}",
        ] {
            assert_eq!(named(apply, source), None, "{source}");
        }
        assert_eq!(
            named(apply, "Object{spec: Object.specx{replicas: 1}}").as_deref(),
            Some(
                "type mismatch: unexpected type name \"Object.specx\", expected \"Object.spec\", which matches field name path from root Object type"
            )
        );
        assert_eq!(
            named(apply, "Object.spec.metadata{}").as_deref(),
            Some("must evaluate to Object but got Object.spec.metadata")
        );
        assert!(
            named(
                patch,
                "[JSONPatch{op: 'add', path: '/spec/x', value: Object.spec.x{ports: [Object.spec.x.portsZ{}]}}]"
            )
            .is_some_and(|m| m.contains("expected \"Object.spec.x.ports\""))
        );
    }
}
