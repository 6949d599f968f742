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
//!
//! It also wraps the arguments that cel-go's cost tracking fails the whole
//! expression on when they failed ([`crate::cel::libraries::cost_tracker`]):
//! the list of a `sort()` the check types as a list of one item type (over a
//! `dyn`, cel-go's check leaves several overloads and tracks none), of every
//! `distinct()`, the depth of `flatten(depth)`, and the keys (and, in
//! Kubernetes' kind, the list) of a `sortBy()` whose keys are of one item
//! type.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ::cel::IdedExpr;
use ::cel::common::ast::{Expr, LiteralValue, operators};

use crate::cel::check::type_check::{self, FunctionNames};
use crate::cel::check::types::{self, Ty};
use crate::cel::libraries::cost_tracker::{FLATTEN_DEPTH, TRACKED, TRACKED_FAILED, TRACKED_VALUE};
use crate::cel::libraries::lists::{ITEM_TYPES, SUMMABLE, TYPED, typed_name};
use crate::cel::policy::CelPolicy;
use crate::cel::program::Compiled;
use crate::cel::program::comprehensions::max_id;
use crate::cel::spec::Place;
use crate::cel::syntax::ast::children_mut;
use crate::cel::syntax::extension_macros::{SORT_BY_INPUT, SORT_BY_KEYS};
use crate::cel::syntax::macro_builder::Builder;

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
        compiled.open_overloads = open_overloads(&compiled.expression, &nodes);
        rename_typed_calls(&mut compiled.expression, &nodes);
        let mut next_id = max_id(&compiled.expression) + 1;
        track_arguments(
            &mut compiled.expression,
            &nodes,
            kyverno,
            &mut Builder {
                next_id: &mut next_id,
            },
        );
        if let Place::Variable(i) = place
            && let Some(variable) = policy.spec.variables.get(i)
        {
            variable_types.insert(variable.name.clone(), types::declared_variable(ty, kyverno));
        }
    }
}

/// The calls of `expr` whose overload cel-go's check cannot pick, their
/// operands being `dyn` (`string(object.x)`, `object.a + object.b`,
/// `x in object.items`): several overloads fit, the call is made by name,
/// and its cost tracker charges it 1 whatever the values
/// ([`crate::cel::program::metering`]).
pub(crate) fn open_overloads(expr: &IdedExpr, nodes: &HashMap<u64, Ty>) -> BTreeSet<u64> {
    let mut open = BTreeSet::new();
    let mut stack = vec![expr];
    while let Some(node) = stack.pop() {
        crate::cel::syntax::ast::children(node, &mut |child| stack.push(child));
        let Expr::Call(call) = &node.expr else {
            continue;
        };
        let is_dyn = |arg: Option<&IdedExpr>| {
            arg.is_some_and(|arg| matches!(nodes.get(&arg.id), Some(Ty::Dyn)))
        };
        let (first, second) = (call.args.first(), call.args.get(1));
        let undecided = call.target.is_none()
            && match (call.func_name.as_str(), call.args.len()) {
                ("string" | "bytes", 1) => is_dyn(first),
                (
                    operators::ADD
                    | operators::LESS
                    | operators::LESS_EQUALS
                    | operators::GREATER
                    | operators::GREATER_EQUALS,
                    2,
                ) => is_dyn(first) && is_dyn(second),
                (operators::IN, 2) => is_dyn(second),
                _ => false,
            };
        if undecided {
            open.insert(node.id);
        }
    }
    open
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

/// Wraps the arguments of `expr`'s calls that cost tracking fails the
/// expression on when they fail (see the module's comment). Kyverno's
/// cel-go (v0.30) stops evaluating a call's arguments at the first that
/// fails, before the call is tracked: a `sortBy()` whose list failed is not
/// tracked there; kube-apiserver's (v0.29) evaluates them all.
fn track_arguments(expr: &mut IdedExpr, nodes: &HashMap<u64, Ty>, kyverno: bool, b: &mut Builder) {
    children_mut(expr, &mut |child| track_arguments(child, nodes, kyverno, b));
    // cel-go's check leaves one overload of `sort()` (or of
    // `@sortByAssociatedKeys` over its keys) where `isSorted()` would be
    // renamed to one: its cost is then tracked.
    let list_of_one_type = |e: &IdedExpr| matches!(nodes.get(&e.id), Some(Ty::List(item)) if typed_call("isSorted", item).is_some());
    match &mut expr.expr {
        Expr::Call(call) => match (
            call.func_name.as_str(),
            call.target.as_mut(),
            call.args.as_mut_slice(),
        ) {
            ("sort", Some(list), []) if list_of_one_type(list) => track(list, b),
            ("distinct", Some(list), []) => track(list, b),
            ("flatten", Some(_), [depth]) => {
                track(depth, b);
                call.func_name = FLATTEN_DEPTH.to_string();
            }
            _ => {}
        },
        Expr::Comprehension(bind) if bind.accu_var == SORT_BY_INPUT => {
            if let Expr::Call(call) = &mut bind.result.expr
                && call.func_name == SORT_BY_KEYS
                && let [keys] = call.args.as_mut_slice()
                && list_of_one_type(keys)
            {
                track(keys, b);
                if !kyverno {
                    track(&mut bind.accu_init, b);
                }
            }
        }
        _ => {}
    }
}

/// `x` becomes `(@tracked(x) || @tracked_failed()) ? @tracked_value() : null`.
fn track(x: &mut IdedExpr, b: &mut Builder) {
    let placeholder = b.node(Expr::Literal(LiteralValue::Null));
    let value = std::mem::replace(x, placeholder);
    let keep = b.call(TRACKED, vec![value]);
    let failed = b.call(TRACKED_FAILED, vec![]);
    let condition = b.call(operators::LOGICAL_OR, vec![keep, failed]);
    let kept = b.call(TRACKED_VALUE, vec![]);
    let never = b.node(Expr::Literal(LiteralValue::Null));
    *x = b.call(operators::CONDITIONAL, vec![condition, kept, never]);
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

    /// Kyverno 1.19.1's answers (its MutatingPolicy; kube-apiserver v0.37.2
    /// gives the same, but for the failed list of `sortBy`): cost tracking
    /// fails the whole expression when these calls are given a failed
    /// value, where a `dyn` list leaves `sort()` several overloads and is
    /// not tracked.
    #[test]
    fn a_failed_value_given_to_a_tracked_call_fails_the_expression() {
        for expression in [
            "[1 / 0].sort() == [] || true",
            "[1 / 0].reverse().sort() == [] || true",
            "[1, 0].map(x, [10 / x].sort()).size() > 5 || true",
            "dyn([1 / 0]).distinct() == [] && false",
            "[[1]].flatten(1 / 0) == [] && false",
            "[1, 0].sortBy(x, 1 / x) == [] && false",
        ] {
            let response = bound(&format!("string({expression})"));
            let message = response.message.unwrap_or_default();
            assert!(
                !response.accepted && message.contains("internal error"),
                "{expression}: {message}"
            );
        }
        // Kyverno 1.19.1: "operation cancelled: actual cost limit exceeded".
        for expression in [
            "[[], [[1, 2, 3]]].flatten(600000).size() == 3 || true",
            "[[], [[1, 2, 3]]].flatten(1000000007).size()",
        ] {
            let response = bound(&format!("string({expression})"));
            let message = response.message.unwrap_or_default();
            assert!(
                !response.accepted && message.contains("cost limit exceeded"),
                "{expression}: {message}"
            );
        }
        for (expression, expected) in [
            ("dyn([1 / 0]).sort() == [] && false", "false"),
            ("[dyn(1 / 0)].sort() == [] || true", "true"),
            ("[1, 0].sortBy(x, dyn(1 / x)) == [] && false", "false"),
            // Kyverno's cel-go stops at the failed list (kube-apiserver's
            // does not, and fails the expression).
            ("[1 / 0].sortBy(x, x) == [] && false", "false"),
            ("[[1 / 0]].flatten(1) == [] && false", "false"),
            ("[1 / 0].isSorted() || true", "true"),
            (
                "[3, 1].sortBy(x, -x) == [3, 1] && [1, 1].distinct() == [1]",
                "true",
            ),
            // Under the cost limit: 2 items times 400,000, plus 11.
            ("[[], [[1, 2, 3]]].flatten(400000).size() == 3", "true"),
        ] {
            assert_eq!(
                annotated(&format!("string({expression})"))["result"],
                expected,
                "{expression}"
            );
        }
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
