//! Calls whose value depends on the type cel-go's checker gives their
//! receiver, not only on its value. Kubernetes' `isSorted()`, `min()`,
//! `max()` and `sum()` are one overload per item type; where the check types
//! the list (`list(double)`, or a type parameter the call binds: `.reverse()`
//! of a `dyn` is a `list(A)`, and the first overload, `int`'s, binds `A`),
//! cel-go runs that one overload, which fails when the list's first item is of
//! another type, and gives its type's zero for an empty list's `sum()`
//! (`[1.0].filter(x, false).sum()` is `0.0`). Over a `dyn`, the overload is
//! picked by the first item when it runs. The type check works the list's
//! type out; this renames such calls, in the trees parsed for a request, to
//! the function for that type ([`crate::cel::libraries::lists`]). It runs
//! only for a policy that calls one of them.

use std::collections::{BTreeMap, HashMap};

use ::cel::IdedExpr;
use ::cel::common::ast::Expr;

use crate::cel::check::type_check::{self, FunctionNames};
use crate::cel::check::types::{self, Ty};
use crate::cel::libraries::lists::{ITEM_TYPES, SUMMABLE, TYPED, typed_name};
use crate::cel::policy::CelPolicy;
use crate::cel::program::Compiled;
use crate::cel::spec::Place;
use crate::cel::syntax::ast::children_mut;

/// Renames the calls of `expressions` (the policy's, in the order of
/// [`CelPolicy::sources`]) whose list the check types as a list of one item
/// type. The variables' types are worked out in order, as at load; an
/// expression that does not check (it failed at load too, and fails when it
/// runs) is left as it is.
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
        rename_typed_calls(&mut compiled.expression, &nodes);
        if let Place::Variable(i) = place
            && let Some(variable) = policy.spec.variables.get(i)
        {
            variable_types.insert(variable.name.clone(), types::declared_variable(ty, kyverno));
        }
    }
}

/// The function a call of `function` over a list of `item` is renamed to,
/// if cel-go runs one overload for it.
fn typed_call(function: &str, item: &Ty) -> Option<String> {
    let item_type = match item {
        // A `null` fits the duration overload of `sum()`, and those of
        // durations and timestamps of the others (picked when it runs).
        Ty::Null if function == "sum" => "duration",
        _ => item.kind(),
    };
    let declared = if function == "sum" {
        SUMMABLE.contains(&item_type)
    } else {
        ITEM_TYPES.contains(&item_type)
    };
    declared.then(|| typed_name(function, item_type))
}

fn rename_typed_calls(expr: &mut IdedExpr, nodes: &HashMap<u64, Ty>) {
    children_mut(expr, &mut |child| rename_typed_calls(child, nodes));
    if let Expr::Call(call) = &mut expr.expr
        && TYPED.contains(&call.func_name.as_str())
        && call.args.is_empty()
        && let Some(Ty::List(item)) = call.target.as_ref().and_then(|t| nodes.get(&t.id))
        && let Some(function) = typed_call(&call.func_name, item)
    {
        call.func_name = function;
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{annotated, bound};

    /// kube-apiserver v0.37.2's answers: the overload the type check picks
    /// runs, whatever the items are; over a `dyn`, the first item picks it.
    #[test]
    fn the_overload_is_the_one_the_list_type_picks() {
        for expression in [
            "dyn(['b', 'a']).reverse().isSorted()",
            "dyn(['b']).distinct().max()",
            "dyn([1.5]).slice(0, 1).sum()",
        ] {
            let response = bound(&format!("string({expression})"));
            let message = response.message.unwrap_or_default();
            assert!(
                !response.accepted && message.contains("no such overload"),
                "{expression}: {message}"
            );
        }
        assert_eq!(
            annotated("string(dyn(['b', 'a']).isSorted())")["result"],
            "false"
        );
        assert_eq!(
            annotated("string(dyn([1, 2]).reverse().isSorted())")["result"],
            "false"
        );
    }

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
