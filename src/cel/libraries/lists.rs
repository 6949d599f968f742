//! The rest of Kubernetes' lists library (`indexOf` and `lastIndexOf` are in
//! [`environment`](crate::cel::eval::environment)): `isSorted()`, `sum()`,
//! `min()`, `max()` on a list, and `includes(x)`. Elements compare as CEL
//! compares them (numbers across int, uint and double; strings, bools,
//! bytes); `sum` adds ints, uints or doubles, one kind per list, and is 0 on
//! an empty list; `min` and `max` fail on an empty list. Also cel-go's sets
//! extension, which Kubernetes enables: `sets.contains(a, b)` (every element
//! of `b` is in `a`), `sets.equivalent(a, b)` (both ways) and
//! `sets.intersects(a, b)` (some element is in both), elements compared with
//! CEL's `==`.

use std::cmp::Ordering;
use std::sync::Arc;

use ::cel::common::value::CowVal;
use ::cel::{Env, ExecutionError, Value};

use super::{Function, boolean, dyn_type, error, global, list_type, member, owned};

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
    member(
        env,
        "includes",
        "list_includes_dyn_dyn",
        dyn_type(),
        vec![dyn_type()],
        includes,
    );
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

fn compare(a: &Value, b: &Value, function: &str) -> Result<Ordering, ExecutionError> {
    let ordering = match (a, b) {
        (Value::Bytes(a), Value::Bytes(b)) => Some(a.cmp(b)),
        (Value::List(_) | Value::Map(_), _) | (_, Value::List(_) | Value::Map(_)) => None,
        _ => a.partial_cmp(b),
    };
    ordering.ok_or_else(|| {
        error(
            function,
            format!("no ordering between {} and {}", a.type_of(), b.type_of()),
        )
    })
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = items(&args, "isSorted")?;
    for pair in items.windows(2) {
        if let [a, b] = pair
            && compare(a, b, "isSorted")? == Ordering::Greater
        {
            return boolean(false);
        }
    }
    boolean(true)
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = items(&args, "sum")?;
    let overflow = || error("sum", "integer overflow");
    let mut total = match items.first() {
        None | Some(Value::Int(_)) => Value::Int(0),
        Some(Value::UInt(_)) => Value::UInt(0),
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(other) => return Err(error("sum", format!("cannot add {}", other.type_of()))),
    };
    for item in &items {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::UInt(a), Value::UInt(b)) => {
                Value::UInt(a.checked_add(*b).ok_or_else(overflow)?)
            }
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
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

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    prefer: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = items(&args, function)?;
    let mut best: Option<&Value> = None;
    for item in &items {
        best = match best {
            None => Some(item),
            Some(current) if compare(current, item, function)? == prefer => Some(item),
            keep => keep,
        };
    }
    match best {
        Some(value) => owned(value.clone()),
        None => Err(error(function, format!("{function} called on empty list"))),
    }
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", Ordering::Greater)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", Ordering::Less)
}

/// Whether the target list holds the element, or the target equals it.
fn includes<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (Some(target), Some(wanted)) = (args.first(), args.get(1)) else {
        return Err(ExecutionError::invalid_argument_count(2, args.len()));
    };
    if let Some(list) = target.as_iterable() {
        let mut items = list.iter();
        while let Some(item) = items.next() {
            if item.equals(wanted.as_ref()) {
                return boolean(true);
            }
        }
        return boolean(false);
    }
    boolean(target.equals(wanted.as_ref()))
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
            ("[1, 'a'].isSorted()", None),
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
            ("[1, 2, 3].includes(2)", b(true)),
            ("[1, 2, 3].includes(4)", b(false)),
            ("'a'.includes('a')", b(true)),
            ("[[1], [2]].includes([2])", b(true)),
            ("[1, 2, 2, 3].indexOf(2)", i(1)),
            ("['a', 'b', 'b', 'c'].lastIndexOf('b')", i(2)),
        ]);
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
