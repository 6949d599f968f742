//! What cel-go's optimizer (`cel.OptOptimize`, which Kubernetes' base
//! environment sets and Kyverno's inherits) changes in what a program
//! answers, beyond refusing constants that fail ([`crate::cel::check`]'s
//! `constants`): a membership test against a constant empty list is planned
//! as `false`, so its left operand never runs (`[0][1] in []` is `false`,
//! not an error).

use ::cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};

use crate::cel::syntax::ast::children_mut;

/// Folds each `x in []` into `false` (not `x in dyn([])`, which
/// kube-apiserver evaluates).
pub fn fold_empty_membership(expr: &mut IdedExpr) {
    children_mut(expr, &mut fold_empty_membership);
    if let Expr::Call(call) = &expr.expr
        && call.func_name == operators::IN
        && call.target.is_none()
        && let [_, list] = call.args.as_slice()
        && matches!(&list.expr, Expr::List(list) if list.elements.is_empty())
    {
        expr.expr = Expr::Literal(LiteralValue::Boolean(false.into()));
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{b, table};

    #[test]
    fn membership_in_a_constant_empty_list_is_false_without_its_operand() {
        // kube-apiserver v0.37.2 and Kyverno v1.19.1 answer these so.
        table(&[
            ("[0, 9223372036854775807][2] in []", b(false)),
            ("1 / 0 in dyn([])", None),
            ("1 in [1]", b(true)),
            // Not a constant: the operand runs.
            ("1 / 0 in [].filter(x, false)", None),
            ("1 / 0 in [1]", None),
        ]);
    }
}
