//! The rest of Kubernetes' lists library (`indexOf` and `lastIndexOf` are in
//! [`environment`](crate::cel::eval::environment)): `isSorted()`, `sum()`,
//! `min()`, `max()` on a list. Not its `includes(x)`: Kubernetes 1.37 gives
//! it to new expressions only at compatibility version 1.37 (1.36 by
//! default), and Kyverno's environment has none. As in Kubernetes, the
//! overload is picked by the type of the list's first item (one that does
//! not order, or for `sum` add, is no overload); items compare as cel-go's
//! `Compare` does (numbers across int, uint and double, the other types with
//! their own), and a pair that does not compare (a NaN, two types) is
//! passed over; `sum` adds ints, uints, doubles or durations, and is the zero
//! of the list's declared type on an empty list; `min` and `max` fail on an
//! empty list. The optional library's `first()` and `last()` on a list. Also
//! cel-go's sets
//! extension, which Kubernetes enables: `sets.contains(a, b)` (every element
//! of `b` is in `a`), `sets.equivalent(a, b)` (both ways) and
//! `sets.intersects(a, b)` (some element is in both), elements compared with
//! CEL's `==`.

use std::cmp::Ordering;
use std::sync::Arc;

use ::cel::common::types::CelOptional;
use ::cel::common::value::{CowVal, Val};
use ::cel::{Env, ExecutionError, Value};

use super::{Function, boolean, dyn_type, error, global, list_type, member, owned, time};

/// Declares cel-go's sets extension.
pub fn register_sets(env: &mut Env) {
    let functions: [(&str, Function); 3] = [
        ("sets.contains", sets_contains),
        ("sets.equivalent", sets_equivalent),
        ("sets.intersects", sets_intersects),
    ];
    for (name, op) in functions {
        global(
            env,
            name,
            &format!("{name}_list_list"),
            vec![list_type(), list_type()],
            op,
        );
    }
}

/// The two lists a sets function compares.
fn two_lists(
    args: &[CowVal<'_, '_>],
    function: &str,
) -> Result<(Vec<Value>, Vec<Value>), ExecutionError> {
    Ok((items_at(args, 0, function)?, items_at(args, 1, function)?))
}

/// Whether every element of `b` is one of `a`.
fn contains_all(a: &[Value], b: &[Value]) -> bool {
    b.iter().all(|x| a.contains(x))
}

fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two_lists(&args, "sets.contains")?;
    boolean(contains_all(&a, &b))
}

fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two_lists(&args, "sets.equivalent")?;
    boolean(contains_all(&a, &b) && contains_all(&b, &a))
}

fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two_lists(&args, "sets.intersects")?;
    boolean(b.iter().any(|x| a.contains(x)))
}

/// Declares the library.
pub fn register(env: &mut Env) {
    let unary: [(&str, Function); 4] = [
        ("isSorted", is_sorted),
        ("sum", sum),
        ("min", min),
        ("max", max),
    ];
    for (name, op) in unary {
        member(env, name, &format!("list_{name}"), list_type(), vec![], op);
    }
    register_typed(env);
    // cel-go's optional library (Kubernetes and Kyverno load its latest
    // version): a list's first and last items, as optionals.
    member(env, "first", "list_first", list_type(), vec![], first);
    member(env, "last", "list_last", list_type(), vec![], last);
}

fn first<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    end_item(items(&args, "first")?.first())
}

fn last<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    end_item(items(&args, "last")?.last())
}

/// `item` as an optional, none for an empty list.
fn end_item<'b, 'v>(item: Option<&Value>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let optional = match item {
        Some(value) => CelOptional::of(Box::<dyn Val>::try_from(value.clone())?),
        None => CelOptional::none(),
    };
    Ok(CowVal::owned(optional))
}

/// `reverse()` as Kubernetes and Kyverno declare it: the lists extension's
/// (version 3), on a list. Their strings extension is version 2, which has
/// no `reverse`, where the crate's extensions declare one on strings too;
/// calls are renamed to this function, so that a string's is no overload,
/// as in cel-go.
pub const REVERSE: super::MemberRename = super::MemberRename {
    name: "reverse",
    arity: 0,
    to: "@reverse",
};

/// Declares [`REVERSE`].
pub fn register_reverse(env: &mut Env) {
    member(
        env,
        REVERSE.to,
        "list_@reverse",
        dyn_type(),
        vec![],
        reverse,
    );
}

fn reverse<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match args
        .first()
        .map(|list| Value::try_from(list.as_ref()))
        .transpose()?
    {
        Some(Value::List(items)) => {
            let mut items = items.as_ref().clone();
            items.reverse();
            owned(Value::List(Arc::new(items)))
        }
        other => Err(ExecutionError::no_such_member_overload(
            "reverse",
            other
                .iter()
                .map(|value| value.type_of().to_string())
                .collect(),
        )),
    }
}

fn items(args: &[CowVal<'_, '_>], function: &str) -> Result<Vec<Value>, ExecutionError> {
    items_at(args, 0, function)
}

/// The elements of argument `index`, which must be a list.
fn items_at(
    args: &[CowVal<'_, '_>],
    index: usize,
    function: &str,
) -> Result<Vec<Value>, ExecutionError> {
    let list = args
        .get(index)
        .ok_or_else(|| error(function, "called without a list"))?;
    match Value::try_from(list.as_ref())? {
        Value::List(items) => Ok(items.as_ref().clone()),
        other => Err(error(
            function,
            format!("{} is not a list", other.type_of()),
        )),
    }
}

/// Whether `value` orders with values of its type: cel-go's
/// `traits.Comparer`, the types Kubernetes' ordering functions are declared
/// for (`comparableTypes`).
fn orders(value: &Value) -> bool {
    matches!(
        value,
        Value::Int(_)
            | Value::UInt(_)
            | Value::Float(_)
            | Value::Bool(_)
            | Value::String(_)
            | Value::Bytes(_)
    ) || time::is_time(value)
}

/// Whether `value` is of a type `sum()` is declared for (`summableTypes`).
fn adds(value: &Value) -> bool {
    matches!(value, Value::Int(_) | Value::UInt(_) | Value::Float(_)) || time::is_duration(value)
}

/// How `a` and `b` order, as cel-go's `Compare` says: numbers across int,
/// uint and double, the other types with their own; `None` where it gives
/// an error instead (a NaN, two types that do not compare), which
/// Kubernetes' functions pass over.
fn order(a: &Value, b: &Value) -> Option<Ordering> {
    let number = |v: &Value| matches!(v, Value::Int(_) | Value::UInt(_) | Value::Float(_));
    match (a, b) {
        (Value::Float(x), _) | (_, Value::Float(x)) if x.is_nan() => None,
        _ if number(a) && number(b) => a.partial_cmp(b),
        (Value::Bool(_), Value::Bool(_)) | (Value::String(_), Value::String(_)) => a.partial_cmp(b),
        (Value::Bytes(a), Value::Bytes(b)) => Some(a.cmp(b)),
        _ => time::order(a, b),
    }
}

/// The item types Kubernetes' lists library declares `isSorted()`, `min()`
/// and `max()` for, one overload each, in its order (`comparableTypes`);
/// `sum()` is declared for [`SUMMABLE`] ones.
pub(crate) const ITEM_TYPES: [&str; 8] = [
    "int",
    "uint",
    "double",
    "bool",
    "duration",
    "timestamp",
    "string",
    "bytes",
];

/// The item types `sum()` is declared for (`summableTypes`).
pub(crate) const SUMMABLE: [&str; 4] = ["int", "uint", "double", "duration"];

/// The functions declared with one overload per item type.
pub(crate) const TYPED: [&str; 4] = ["isSorted", "min", "max", "sum"];

/// The name a call of `function` over a list the type check types as a
/// list of `item_type` is renamed to ([`crate::cel::check::typed_calls`]):
/// cel-go then runs that one overload, whatever the items turn out to be.
pub(crate) fn typed_name(function: &str, item_type: &str) -> String {
    format!("@{function}_{item_type}")
}

/// Whether `value` is of the item type named `item_type`.
fn of_type(value: &Value, item_type: &str) -> bool {
    match value {
        Value::Int(_) => item_type == "int",
        Value::UInt(_) => item_type == "uint",
        Value::Float(_) => item_type == "double",
        Value::Bool(_) => item_type == "bool",
        Value::String(_) => item_type == "string",
        Value::Bytes(_) => item_type == "bytes",
        _ if time::is_duration(value) => item_type == "duration",
        _ if time::is_time(value) => item_type == "timestamp",
        _ => false,
    }
}

/// The overloads a call may run: those of every item type, picked by the
/// first item when it runs (over a list of `dyn`), or the one the type
/// check picked.
#[derive(Clone, Copy)]
enum Overloads {
    Any,
    One(&'static str),
}

impl Overloads {
    /// The one of [`ITEM_TYPES`] at `at` (a typed function's parameter).
    fn at(at: usize) -> Overloads {
        ITEM_TYPES
            .get(at)
            .map_or(Overloads::Any, |t| Overloads::One(t))
    }
}

/// The items of the list a function is called on, when an overload takes
/// them: cel-go checks the type of the first item only (an empty list fits
/// any), so a list whose first item is of no type the function is declared
/// for (`[object.spec]`), or not of the one the type check picked, is no
/// overload.
fn selected(
    args: &[CowVal<'_, '_>],
    function: &str,
    overloads: Overloads,
    declared_for: fn(&Value) -> bool,
) -> Result<Vec<Value>, ExecutionError> {
    let items = items(args, function)?;
    let fits = |first: &Value| match overloads {
        Overloads::Any => declared_for(first),
        Overloads::One(item_type) => of_type(first, item_type),
    };
    match items.first() {
        Some(first) if !fits(first) => Err(no_overload(function, first)),
        _ => Ok(items),
    }
}

fn no_overload(function: &str, item: &Value) -> ExecutionError {
    error(
        function,
        format!("no such overload for a list of {}", item.type_of()),
    )
}

fn is_sorted_over<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    overloads: Overloads,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = selected(&args, "isSorted", overloads, orders)?;
    let mut previous: Option<&Value> = None;
    for item in &items {
        if !orders(item) {
            return Err(no_overload("isSorted", item));
        }
        if previous.is_some_and(|p| order(p, item) == Some(Ordering::Greater)) {
            return boolean(false);
        }
        previous = Some(item);
    }
    boolean(true)
}

/// The items added, from the zero of the overload's type: the first item's,
/// or `int`'s for an empty list over `dyn`.
fn sum_over<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    overloads: Overloads,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = selected(&args, "sum", overloads, adds)?;
    let overflow = || error("sum", "integer overflow");
    let item_type = match (overloads, items.first()) {
        (Overloads::One(item_type), _) => item_type,
        (Overloads::Any, Some(first)) => SUMMABLE
            .into_iter()
            .find(|t| of_type(first, t))
            .unwrap_or("int"),
        (Overloads::Any, None) => "int",
    };
    let mut total = match item_type {
        "uint" => Value::UInt(0),
        "double" => Value::Float(0.0),
        "duration" => time::zero_duration(),
        _ => Value::Int(0),
    };
    for item in &items {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::UInt(a), Value::UInt(b)) => {
                Value::UInt(a.checked_add(*b).ok_or_else(overflow)?)
            }
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (a, b) if time::is_time(a) || time::is_time(b) => time::add_values(a, b)?,
            (a, b) => {
                return Err(error(
                    "sum",
                    format!("cannot add {} and {}", a.type_of(), b.type_of()),
                ));
            }
        };
    }
    owned(total)
}

/// `min()` or `max()`: the first item no later one is `prefer`red to, items
/// that do not order with it passed over, as in Kubernetes.
fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    overloads: Overloads,
    prefer: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = selected(&args, function, overloads, orders)?;
    let mut best: Option<&Value> = None;
    for item in &items {
        if !orders(item) {
            return Err(no_overload(function, item));
        }
        best = match best {
            Some(current) if order(current, item) != Some(prefer) => Some(current),
            _ => Some(item),
        };
    }
    match best {
        Some(value) => owned(value.clone()),
        None => Err(error(function, format!("{function} called on empty list"))),
    }
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    is_sorted_over(args, Overloads::Any)
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    sum_over(args, Overloads::Any)
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", Overloads::Any, Ordering::Greater)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", Overloads::Any, Ordering::Less)
}

// The same, with the overload of the item type at `T` in [`ITEM_TYPES`].

fn is_sorted_of<'b, 'v, const T: usize>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    is_sorted_over(args, Overloads::at(T))
}

fn sum_of<'b, 'v, const T: usize>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    sum_over(args, Overloads::at(T))
}

fn min_of<'b, 'v, const T: usize>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", Overloads::at(T), Ordering::Greater)
}

fn max_of<'b, 'v, const T: usize>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", Overloads::at(T), Ordering::Less)
}

/// `$f` for each of the eight item types, in [`ITEM_TYPES`]' order.
macro_rules! for_each_item_type {
    ($f:ident) => {
        [
            $f::<0>, $f::<1>, $f::<2>, $f::<3>, $f::<4>, $f::<5>, $f::<6>, $f::<7>,
        ]
    };
}

/// Declares [`TYPED`]'s functions for each item type.
fn register_typed(env: &mut Env) {
    let typed: [(&str, [Function; 8]); 4] = [
        ("isSorted", for_each_item_type!(is_sorted_of)),
        ("min", for_each_item_type!(min_of)),
        ("max", for_each_item_type!(max_of)),
        ("sum", for_each_item_type!(sum_of)),
    ];
    for (function, ops) in typed {
        for (item_type, op) in ITEM_TYPES.into_iter().zip(ops) {
            if function != "sum" || SUMMABLE.contains(&item_type) {
                let name = typed_name(function, item_type);
                member(env, &name, &format!("list_{name}"), list_type(), vec![], op);
            }
        }
    }
}

#[cfg(test)]
mod tests {

    /// The lists extension's `reverse`; on a string (the strings extension's
    /// version 3, not declared by Kubernetes or Kyverno) no overload, as in
    /// cel-go: `object.metadata.name.reverse()` fails when it runs.
    #[test]
    fn reverse_is_the_lists_extensions_only() {
        assert_eq!(
            crate::testing::cel_libraries::eval("[1, 2, 3].reverse()"),
            Ok(Value::List(std::sync::Arc::new(vec![
                Value::Int(3),
                Value::Int(2),
                Value::Int(1)
            ])))
        );
        let message = crate::testing::cel_libraries::eval("dyn('abc').reverse()")
            .unwrap_err()
            .to_string();
        assert!(message.contains("reverse"), "{message}");
        assert!(crate::testing::cel_libraries::eval("'abc'.reverse()").is_err());
    }
    use crate::testing::cel_libraries::{b, i, s, table};
    use ::cel::Value;

    #[test]
    fn lists_work_as_in_kubernetes() {
        table(&[
            ("[1, 2, 3].isSorted()", b(true)),
            ("['a', 'b', 'b', 'c'].isSorted()", b(true)),
            ("[2.0, 1.0].isSorted()", b(false)),
            ("[1].isSorted()", b(true)),
            ("[].isSorted()", b(true)),
            // As kube-apiserver v0.37.2 answers: the overload is picked by
            // the first item; a pair that does not compare is passed over.
            ("[dyn(1), dyn('a')].isSorted()", b(true)),
            ("[dyn(2), dyn('a'), dyn(1)].isSorted()", b(true)),
            ("[dyn('a'), dyn(1)].max()", s("a")),
            ("[dyn(1), dyn('a')].min()", i(1)),
            ("[double('NaN'), 1.0].isSorted()", b(true)),
            ("[1.0, double('NaN')].max()", Some(Value::Float(1.0))),
            ("[dyn({'a': 1})].isSorted()", None),
            ("[dyn([1])].max()", None),
            ("[dyn(null)].isSorted()", None),
            ("[dyn(1), dyn(null)].isSorted()", None),
            ("[dyn(1), dyn(2u)].sum()", None),
            (
                "[duration('1s'), duration('2s')].sum() == duration('3s')",
                b(true),
            ),
            (
                "[duration('1s'), duration('-3s')].min() == duration('-3s')",
                b(true),
            ),
            (
                "[timestamp('2021-01-01T00:00:00Z'), timestamp('2020-01-01T00:00:00Z')].isSorted()",
                b(false),
            ),
            (
                "[duration('9223372036s'), duration('9223372036s')].sum()",
                None,
            ),
            ("[1, 3].sum()", i(4)),
            ("[1.0, 3.0].sum()", Some(Value::Float(4.0))),
            ("[1u, 3u].sum()", Some(Value::UInt(4))),
            ("[].sum()", i(0)),
            ("[1, 2.0].sum()", None),
            ("['a'].sum()", None),
            ("[9223372036854775807, 1].sum()", None),
            ("[1, 3].min()", i(1)),
            ("[1, 3].max()", i(3)),
            ("[].min()", None),
            ("[].max()", None),
            ("[1].min()", i(1)),
            ("(['b', 'a'] + []).min()", s("a")),
            ("[b'b', b'a'].max() == b'b'", b(true)),
            ("[1, 2].first() == optional.of(1)", b(true)),
            ("[1, 2].last() == optional.of(2)", b(true)),
            ("[].first().hasValue()", b(false)),
            ("[].last().hasValue()", b(false)),
            ("[1, 2, 2, 3].indexOf(2)", i(1)),
            ("['a', 'b', 'b', 'c'].lastIndexOf('b')", i(2)),
        ]);
    }

    /// kube-apiserver v0.37.2 refuses `includes` in a new expression (its
    /// lists library's version 1 is for compatibility version 1.37), and
    /// Kyverno's lists library has none.
    #[test]
    fn includes_is_not_declared() {
        for kind in ["MutatingAdmissionPolicy", "MutatingPolicy"] {
            let message = crate::testing::cel_libraries::policy_loads(kind, "[1].includes(1)")
                .err()
                .unwrap_or_default();
            assert!(
                message.contains("undeclared reference to 'includes'"),
                "{kind}: {message}"
            );
        }
    }

    /// The crate keeps no type value in the variables (it reads back as its
    /// name): a variable that gives one is refused at load, where
    /// Kubernetes answers `variables.t == int` with `true`.
    #[test]
    fn a_variable_holding_a_type_value_is_refused() {
        for expression in ["type(1)", "[int]", "{'a': optional.of(string)}"] {
            let message =
                crate::testing::cel_libraries::policy_loads("MutatingAdmissionPolicy", expression)
                    .err()
                    .unwrap_or_default();
            assert!(
                message.contains("holds a type value"),
                "{expression}: {message}"
            );
        }
        assert_eq!(
            crate::testing::cel_libraries::policy_loads(
                "MutatingAdmissionPolicy",
                "type(1) == int"
            ),
            Ok(())
        );
    }

    /// cel-go's sets extension tests (ext/sets_test.go), a sample.
    #[test]
    fn sets_work_as_in_cel_go() {
        table(&[
            ("sets.contains([], [])", b(true)),
            ("sets.contains([1], [])", b(true)),
            ("sets.contains([1], [1])", b(true)),
            ("sets.contains([1], [1, 1])", b(true)),
            ("sets.contains([1, 1], [1])", b(true)),
            ("sets.contains([2, 1], [1])", b(true)),
            ("sets.contains([1], [2])", b(false)),
            ("sets.contains([1, 2], [2, 3])", b(false)),
            ("sets.contains([1], [dyn(1.0), dyn(1u)])", b(true)),
            ("sets.contains([[1], [2, 3]], [[2, 3]])", b(true)),
            ("sets.contains(['hello'], ['hello', 'world'])", b(false)),
            ("sets.equivalent([], [])", b(true)),
            ("sets.equivalent([1], [1, 1])", b(true)),
            ("sets.equivalent([1, 2], [2, 1, 1])", b(true)),
            (
                "sets.equivalent([1, 2, 3], [dyn(3u), dyn(2.0), dyn(1)])",
                b(true),
            ),
            ("sets.equivalent([1], [2])", b(false)),
            ("sets.equivalent([1, 2], [1])", b(false)),
            ("sets.intersects([1], [1])", b(true)),
            ("sets.intersects([1], [1, 1])", b(true)),
            ("sets.intersects([2, 1], [1])", b(true)),
            ("sets.intersects([1], [dyn(1.0), dyn(2)])", b(true)),
            ("sets.intersects([], [])", b(false)),
            ("sets.intersects([1], [])", b(false)),
            ("sets.intersects([1], [2])", b(false)),
        ]);
    }
}
