//! What cel-go's planner refuses when it makes a program of an expression
//! its checker took, so that kube-apiserver and Kyverno refuse the policy
//! ("program instantiation failed"): a bound name whose type is a type value
//! (`[int].exists(t, t == int)`: the planner looks `t` up as a type name),
//! and an index that is a constant type value (`dyn(m)[int]`: the planner
//! makes a constant index a qualifier, and a type is none).

use ::cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr};

use crate::cel::check::declarations::is_type;
use crate::cel::check::types::Ty;

/// Why a reference to the bound name `name`, of type `ty`, is refused.
pub(in crate::cel) fn bound_type_value(name: &str, ty: &Ty) -> Option<String> {
    matches!(ty, Ty::Type(_)).then(|| {
        format!(
            "reference to undefined type: {name} (it holds a type value, which cel-go's planner looks up as a type name)"
        )
    })
}

/// Why the index `call` (`_[_]`, `_[?_]`) is refused; `bound` says whether
/// a name is bound by an enclosing comprehension.
pub(in crate::cel) fn constant_type_index(
    call: &CallExpr,
    bound: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let index = match (call.func_name.as_str(), call.args.as_slice()) {
        ("_[_]" | "_[?_]", [_, index]) => index,
        _ => return None,
    };
    constant_type(index, bound).then(|| {
        "invalid qualifier type: an index that is a constant type value is refused by cel-go's planner"
            .to_string()
    })
}

/// Whether `expr` is a type value cel-go's planner makes a constant of.
fn constant_type(expr: &IdedExpr, bound: &dyn Fn(&str) -> bool) -> bool {
    match &expr.expr {
        Expr::Ident(name) => is_type(name) && !bound(name),
        Expr::Call(call) => match (
            call.func_name.as_str(),
            call.target.as_deref(),
            call.args.as_slice(),
        ) {
            ("dyn", None, [value]) => constant_type(value, bound),
            ("type", None, [value]) => constant(value, bound),
            _ => false,
        },
        _ => false,
    }
}

/// Whether cel-go's planner makes a constant of `expr`: a literal, a type
/// name, and lists, maps, `dyn()` and `type()` of constants.
fn constant(expr: &IdedExpr, bound: &dyn Fn(&str) -> bool) -> bool {
    match &expr.expr {
        Expr::Literal(_) => true,
        Expr::List(list) => {
            list.optional_indices.is_empty() && list.elements.iter().all(|e| constant(e, bound))
        }
        Expr::Map(map) => map.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => {
                !entry.optional && constant(&entry.key, bound) && constant(&entry.value, bound)
            }
            _ => false,
        }),
        Expr::Call(call) if call.func_name == "dyn" && call.target.is_none() => {
            call.args.iter().all(|e| constant(e, bound))
        }
        _ => constant_type(expr, bound),
    }
}
