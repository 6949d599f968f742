//! Helpers over the `cel` crate's parsed trees, which every layer above the
//! parser walks: the children of a node, field selections, and the bounds
//! the parsers share. Facts about an expression are read from its tree
//! through these, never from its text.

use ::cel::IdedExpr;
use ::cel::common::ast::{EntryExpr, Expr};

/// A field selection, plain (`a.b`, `has(a.b)`) or optional (`a.?b`), or an
/// index by a string literal (`m["k"]`, `m[?"k"]`): its operand and field.
pub(in crate::cel) fn selection(expr: &IdedExpr) -> Option<(&IdedExpr, &str)> {
    use ::cel::common::ast::operators::{INDEX, OPT_INDEX, OPT_SELECT};
    match &expr.expr {
        Expr::Select(select) => Some((&select.operand, select.field.as_str())),
        // `m["key"]` and `m[?"key"]` read one field of a map, as `m.key`.
        Expr::Call(call)
            if call.target.is_none()
                && (call.func_name == OPT_SELECT
                    || call.func_name == INDEX
                    || call.func_name == OPT_INDEX) =>
        {
            match call.args.as_slice() {
                [operand, field] => match &field.expr {
                    Expr::Literal(::cel::common::ast::LiteralValue::String(name)) => {
                        Some((operand, name.inner()))
                    }
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}

/// Deepest expression tree accepted. Brackets are bounded by
/// `program::MAX_NESTING`, but a chain of operators (`1 + 1 + ... + 1`) nests
/// without them, and evaluating recurses once per level: this keeps that
/// within the module's stack (the e2e case `cel_deepest_chain_runs`).
pub const MAX_DEPTH: usize = 100;

/// Most nodes an expression may parse into (a list literal of 10,000
/// elements is refused).
pub const MAX_NODES: usize = 5_000;

/// Calls `f` on each direct subexpression.
pub(crate) fn children<'e>(expr: &'e IdedExpr, f: &mut dyn FnMut(&'e IdedExpr)) {
    match &expr.expr {
        Expr::Call(call) => {
            call.target.iter().for_each(|t| f(t));
            call.args.iter().for_each(f);
        }
        Expr::Select(select) => f(&select.operand),
        Expr::Comprehension(c) => {
            for part in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                f(part);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(f),
        Expr::Map(::cel::common::ast::MapExpr { entries })
        | Expr::Struct(::cel::common::ast::StructExpr { entries, .. }) => {
            for entry in entries {
                match &entry.expr {
                    EntryExpr::StructField(field) => f(&field.value),
                    EntryExpr::MapEntry(entry) => {
                        f(&entry.key);
                        f(&entry.value);
                    }
                }
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Calls `f` on each direct subexpression, mutably.
pub(crate) fn children_mut(expr: &mut IdedExpr, f: &mut dyn FnMut(&mut IdedExpr)) {
    match &mut expr.expr {
        Expr::Call(call) => {
            call.target.iter_mut().for_each(|t| f(t));
            call.args.iter_mut().for_each(f);
        }
        Expr::Select(select) => f(&mut select.operand),
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                f(part);
            }
        }
        Expr::List(list) => list.elements.iter_mut().for_each(f),
        Expr::Map(::cel::common::ast::MapExpr { entries })
        | Expr::Struct(::cel::common::ast::StructExpr { entries, .. }) => {
            for entry in entries {
                match &mut entry.expr {
                    EntryExpr::StructField(field) => f(&mut field.value),
                    EntryExpr::MapEntry(entry) => {
                        f(&mut entry.key);
                        f(&mut entry.value);
                    }
                }
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The first call in the tree `wanted` takes.
pub fn first_call<'e>(
    expr: &'e IdedExpr,
    wanted: &dyn Fn(&::cel::common::ast::CallExpr) -> bool,
) -> Option<&'e ::cel::common::ast::CallExpr> {
    if let Expr::Call(call) = &expr.expr
        && wanted(call)
    {
        return Some(call);
    }
    let mut found = None;
    children(expr, &mut |child| {
        if found.is_none() {
            found = first_call(child, wanted);
        }
    });
    found
}
