//! What each kind of expression must give, checked at load where its type
//! is known (see [`super::type_check`]): a match condition that gives a
//! string, a mutation that builds a list where an `Object{...}` belongs.
//! Kubernetes' and Kyverno's type checkers refuse these when the policy is
//! created; an expression of type `dyn` is found out when it runs.

use super::Place;
use super::type_check::Ty;

/// Why a value of type `ty`, at `place`, cannot be what that place needs.
pub fn mismatch(place: Place, ty: &Ty) -> Option<String> {
    let (wanted, fits) = match place {
        Place::MatchCondition(_) | Place::TargetCondition(_) => {
            ("a bool", matches!(ty, Ty::Bool | Ty::Dyn))
        }
        Place::Mutation(_, "jsonPatch") => (
            "a list of JSONPatch{...}",
            match ty {
                Ty::List(element) => matches!(**element, Ty::JsonPatch | Ty::Dyn),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check(place: Place, source: &str) -> Option<String> {
        mismatch(place, &super::super::type_check::check_source(source).ok()?)
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
}
