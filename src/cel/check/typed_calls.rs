//! Calls whose value depends on the type cel-go's checker gives their
//! receiver, not only on its value: Kubernetes' `sum()` is one overload per
//! item type, and on an empty list it gives that type's zero
//! (`[1.0].filter(x, false).sum()` is `0.0`, over a list of durations
//! `duration('0s')`; over a `dyn` the overload is picked when it runs, and
//! an empty list is `0`). The type check works the list's type out; this
//! renames such calls, in the trees parsed for a request, to the function
//! for that type ([`crate::cel::libraries::lists`]). It runs only for a
//! policy that calls `sum()`.

use std::collections::{BTreeMap, HashMap};

use ::cel::IdedExpr;
use ::cel::common::ast::Expr;

use crate::cel::check::type_check::{self, FunctionNames};
use crate::cel::check::types::{self, Ty};
use crate::cel::libraries::lists::TYPED_SUMS;
use crate::cel::policy::CelPolicy;
use crate::cel::program::Compiled;
use crate::cel::spec::Place;
use crate::cel::syntax::ast::children_mut;

/// Renames the `sum()` calls of `expressions` (the policy's, in the order
/// of [`CelPolicy::sources`]) whose list the check types as a list of
/// `double`, `uint` or `duration`. The variables' types are worked out in
/// order, as at load; an expression that does not check (it failed at load
/// too, and fails when it runs) is left as it is.
pub(crate) fn retype(policy: &CelPolicy, expressions: &mut [Result<Compiled, String>]) {
    let kyverno = policy.kind.is_kyverno();
    let mut functions = FunctionNames::new();
    let mut variable_types = BTreeMap::new();
    for ((place, source), compiled) in policy.sources().zip(expressions.iter_mut()) {
        let Ok(compiled) = compiled else {
            continue;
        };
        let Ok((ty, nodes)) = type_check::node_types(
            source,
            &compiled.expression,
            &variable_types,
            &mut functions,
            kyverno,
        ) else {
            continue;
        };
        rename_sums(&mut compiled.expression, &nodes);
        if let Place::Variable(i) = place
            && let Some(variable) = policy.spec.variables.get(i)
        {
            let ty = if kyverno {
                ty
            } else {
                types::kubernetes_variable(ty)
            };
            variable_types.insert(variable.name.clone(), ty);
        }
    }
}

/// The function a `sum()` over a list of `item` is renamed to, if any.
fn typed_sum(item: &Ty) -> Option<&'static str> {
    let name = match item {
        Ty::Double => "double",
        Ty::Uint => "uint",
        // A `null` fits only the duration overload.
        Ty::Duration | Ty::Null => "duration",
        _ => return None,
    };
    TYPED_SUMS
        .iter()
        .find(|(item, _)| *item == name)
        .map(|(_, function)| *function)
}

fn rename_sums(expr: &mut IdedExpr, nodes: &HashMap<u64, Ty>) {
    children_mut(expr, &mut |child| rename_sums(child, nodes));
    if let Expr::Call(call) = &mut expr.expr
        && call.func_name == "sum"
        && call.args.is_empty()
        && let Some(Ty::List(item)) = call.target.as_ref().and_then(|t| nodes.get(&t.id))
        && let Some(function) = typed_sum(item)
    {
        call.func_name = function.to_string();
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::annotated;

    /// kube-apiserver v0.37.2's answers: the zero of the type the list is
    /// declared with; over a `dyn`, an `int`.
    #[test]
    fn an_empty_lists_sum_is_the_zero_of_its_declared_type() {
        for (list, expected) in [
            ("[1.0].filter(x, false)", "double"),
            ("[1u].filter(x, false)", "uint"),
            ("[duration('1s')].filter(x, false)", "duration"),
            ("[[1.0]].map(l, l.filter(x, false))[0]", "double"),
            ("dyn([1.0]).filter(x, false)", "int"),
            ("[]", "int"),
        ] {
            let sum = format!("type({list}.sum())");
            let expression = format!(
                "{sum} == int ? 'int' : {sum} == uint ? 'uint' : {sum} == double ? 'double' : {sum} == type(duration('0s')) ? 'duration' : 'other'"
            );
            assert_eq!(annotated(&expression)["result"], expected, "{list}.sum()");
        }
    }
}
