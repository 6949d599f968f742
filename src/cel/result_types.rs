//! What each kind of expression must give, checked at load where the
//! expression's outermost form already tells its type: a match condition
//! that is a string literal, a mutation that builds a list where an
//! `Object{...}` belongs. Kubernetes' and Kyverno's type checkers refuse
//! these when the policy is created; without a type checker here (the `cel`
//! crate has none) the rest is found when the expression runs.

use ::cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};

use super::Place;

/// Why `expr`, at `place`, cannot give what that place needs.
pub fn mismatch(place: Place, expr: &IdedExpr) -> Option<String> {
    let evident = evident_type(expr)?;
    let (wanted, fits): (&str, bool) = match place {
        Place::MatchCondition(_) | Place::TargetCondition(_) => ("a bool", evident == "bool"),
        Place::Mutation(_, "jsonPatch") => ("a list of JSONPatch{...}", evident == "list"),
        // A map is merged as an object is, so it is let through.
        Place::Mutation(..) => ("an Object{...}", matches!(evident, "Object" | "map")),
        Place::AuditAnnotation(_) => ("a string or null", matches!(evident, "string" | "null")),
        Place::Variable(_) | Place::TargetExpression => return None,
    };
    let article = if matches!(evident, "int" | "Object") {
        "an"
    } else {
        "a"
    };
    (!fits).then(|| format!("gives {article} {evident}; it must give {wanted}"))
}

/// The type of `expr`'s value when its form alone tells it.
fn evident_type(expr: &IdedExpr) -> Option<&'static str> {
    match &expr.expr {
        Expr::Literal(literal) => Some(match literal {
            LiteralValue::Boolean(_) => "bool",
            LiteralValue::Bytes(_) => "bytes",
            LiteralValue::Double(_) => "double",
            LiteralValue::Int(_) => "int",
            LiteralValue::Null => "null",
            LiteralValue::String(_) => "string",
            LiteralValue::UInt(_) => "uint",
        }),
        Expr::List(_) => Some("list"),
        Expr::Map(_) => Some("map"),
        Expr::Struct(s) if s.type_name == "JSONPatch" => Some("JSONPatch"),
        Expr::Struct(s) if s.type_name == "Object" => Some("Object"),
        Expr::Call(call) if call.target.is_none() => match call.func_name.as_str() {
            operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS
            | operators::LOGICAL_AND
            | operators::LOGICAL_OR
            | operators::LOGICAL_NOT
            | operators::IN => Some("bool"),
            operators::CONDITIONAL => {
                let (Some(a), Some(b)) = (call.args.get(1), call.args.get(2)) else {
                    return None;
                };
                let a = evident_type(a)?;
                (Some(a) == evident_type(b)).then_some(a)
            }
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::program::compile;
    use super::*;

    fn check(place: Place, source: &str) -> Option<String> {
        mismatch(place, &compile(source, "e").ok()?.expression)
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
                "gives a list; it must give an Object{...}",
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
