//! What kube-apiserver's and Kyverno's CEL cost tracking does to an
//! expression whose `sort()`, `distinct()`, `sortBy()` or `flatten(depth)`
//! is given a value that failed to evaluate: cel-go calls the lists
//! extension's cost function with the failed value, which asserts that it is
//! a list (or, for `flatten`, an int) and panics; cel-go reports the panic as
//! an internal error of the whole evaluation, which `&&`, `||` and
//! `exists()` do not absorb. So `[1 / 0].sort() == [] && false` fails there,
//! where CEL's own rules give `false`.
//!
//! The `cel` crate calls no function with a failed argument, so the check
//! layer ([`crate::cel::check::typed_calls`]) rewrites each such argument
//! `x` into `(@tracked(x) || @tracked_failed()) ? @tracked_value() : null`:
//! `@tracked` keeps `x`'s value and gives `true`; when `x` fails, `||`
//! evaluates `@tracked_failed()`, which notes the failure (and gives `false`,
//! so that the condition and the call still fail); `@tracked_value()` hands
//! the kept value back (the other branch is never taken). `x` is evaluated once. The evaluation
//! ([`crate::cel::eval::evaluation`]) clears the note before an expression
//! and fails the expression when it is set after it. A variable is an
//! expression of its own there too (Kubernetes and Kyverno evaluate each in
//! its own program): one that failed so is a failed variable, which `||`
//! absorbs in an expression that reads it.

use std::cell::RefCell;

use ::cel::common::value::CowVal;
use ::cel::{Env, ExecutionError, Value};

use super::{Function, boolean, dyn_type, global, owned};

/// The functions of the rewrite.
pub(crate) const TRACKED: &str = "@tracked";
pub(crate) const TRACKED_FAILED: &str = "@tracked_failed";
pub(crate) const TRACKED_VALUE: &str = "@tracked_value";

/// What an evaluation's tracked arguments left: the values kept (innermost
/// last) and whether one failed.
#[derive(Default)]
struct Tracking {
    kept: Vec<Value>,
    /// Why the whole expression fails, once it does.
    failed: Option<&'static str>,
}

thread_local! {
    static TRACKING: RefCell<Tracking> = RefCell::new(Tracking::default());
}

/// Starts an expression's evaluation.
pub(crate) fn clear() {
    TRACKING.with_borrow_mut(|tracking| *tracking = Tracking::default());
}

/// Why the expression fails since [`clear`], if it does: a tracked
/// argument failed ([`FAILURE`]) or the cost limit was passed
/// ([`COST_LIMIT`]).
pub(crate) fn failed() -> Option<&'static str> {
    TRACKING.with_borrow(|tracking| tracking.failed)
}

fn fail(why: &'static str) {
    TRACKING.with_borrow_mut(|tracking| {
        tracking.failed.get_or_insert(why);
    });
}

/// The message an expression fails with when [`failed`].
pub(crate) const FAILURE: &str = "internal error: a list given to sort(), distinct() or sortBy(), \
     or the depth given to flatten(), failed to evaluate (kube-apiserver's and Kyverno's cost \
     tracking then fail the whole expression; && and || do not absorb it)";

/// `flatten(depth)` as both run it under their cost limit: cel-go's lists
/// extension (version 3, theirs) charges it the list's size times the depth,
/// plus 11, and both stop an expression whose cost passes 1,000,000
/// (Kubernetes' `PerCallLimit`). That charge alone is checked here (the
/// rest of the expression's cost is not counted): `[[1], [2]].flatten(600000)`
/// fails as there. The check layer renames `flatten(depth)` to this.
pub(crate) const FLATTEN_WITHIN_COST: &str = "@flatten_within_cost";

/// The message an expression fails with past the cost limit.
pub(crate) const COST_LIMIT: &str = "operation cancelled: actual cost limit exceeded (cel-go charges flatten(depth) the list's size times the depth; Kubernetes and Kyverno stop an expression past 1,000,000)";

/// What cel-go charges `flatten(depth)` over `size` items (a negative depth
/// counts as 1).
fn flatten_cost(size: usize, depth: i64) -> f64 {
    let factor = if depth < 0 { 1.0 } else { depth as f64 };
    size as f64 * factor + 11.0
}

fn flatten_within_cost<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let arg = |i: usize| {
        args.get(i)
            .map(|value| Value::try_from(value.as_ref()))
            .transpose()
    };
    let (list, depth) = match (arg(0)?, arg(1)?) {
        (Some(Value::List(items)), Some(Value::Int(depth))) => (items, depth),
        _ => {
            return Err(ExecutionError::function_error(
                "flatten",
                "no such overload",
            ));
        }
    };
    if flatten_cost(list.len(), depth) > 1_000_000.0 {
        // Stopped whole, as cel-go's cancellation: `||` does not absorb it.
        fail(COST_LIMIT);
        return Err(ExecutionError::function_error("flatten", COST_LIMIT));
    }
    let depth = u64::try_from(depth)
        .map_err(|_| ExecutionError::function_error("flatten", "level must be non-negative"))?;
    let mut flat = Vec::new();
    flatten_into(&list, depth, &mut flat);
    owned(Value::List(std::sync::Arc::new(flat)))
}

/// `items` with the items of nested lists spliced in, `depth` levels deep.
fn flatten_into(items: &[Value], depth: u64, flat: &mut Vec<Value>) {
    for item in items {
        match item {
            Value::List(inner) if depth > 0 => flatten_into(inner, depth - 1, flat),
            other => flat.push(other.clone()),
        }
    }
}

/// Declares the rewrite's functions.
pub fn register(env: &mut Env) {
    super::member(
        env,
        FLATTEN_WITHIN_COST,
        FLATTEN_WITHIN_COST,
        super::list_type(),
        vec![super::int_type()],
        flatten_within_cost,
    );
    let functions: [(&str, Vec<::cel::common::types::Type>, Function); 3] = [
        (TRACKED, vec![dyn_type()], keep),
        (TRACKED_FAILED, vec![], note_failure),
        (TRACKED_VALUE, vec![], kept),
    ];
    for (name, args, op) in functions {
        global(env, name, name, args, op);
    }
}

fn keep<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = match args.first() {
        Some(value) => Value::try_from(value.as_ref())?,
        None => Value::Null,
    };
    TRACKING.with_borrow_mut(|tracking| tracking.kept.push(value));
    boolean(true)
}

fn note_failure<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    fail(FAILURE);
    boolean(false)
}

fn kept<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match TRACKING.with_borrow_mut(|tracking| tracking.kept.pop()) {
        Some(value) => owned(value),
        None => Err(ExecutionError::function_error(
            TRACKED_VALUE,
            "no value kept",
        )),
    }
}
