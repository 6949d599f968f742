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
/// ([`super::runtime_cost::COST_LIMIT`]).
pub(crate) fn failed() -> Option<&'static str> {
    TRACKING.with_borrow(|tracking| tracking.failed)
}

pub(crate) fn fail(why: &'static str) {
    TRACKING.with_borrow_mut(|tracking| {
        tracking.failed.get_or_insert(why);
    });
}

/// The message an expression fails with when [`failed`].
pub(crate) const FAILURE: &str = "internal error: a list given to sort(), distinct() or sortBy(), \
     or the depth given to flatten(), failed to evaluate (kube-apiserver's and Kyverno's cost \
     tracking then fail the whole expression; && and || do not absorb it)";

/// `@uncounted()`: `false`, once it fails the whole expression with
/// [`UNCOUNTED`]: an operand failed in a call whose operands the cost
/// metering leaves in the crate's order
/// ([`crate::cel::program::metering`], past its nesting limit).
pub(crate) const UNCOUNTED_FAILURE: &str = "@uncounted";

/// The message an expression fails with when [`UNCOUNTED_FAILURE`] ran and
/// it gave no error of its own.
pub(crate) const UNCOUNTED: &str = "an operand failed in a call nested too deep among calls whose operands \
     are evaluated in cel-go's order (a chain of more than four) for this policy to count the expression's \
     cost as cel-go does: the expression fails whole, where cel-go's && and || may absorb the failure";

/// `flatten(depth)`, under a name of its own so that its depth can be
/// tracked (above); its cost is counted with the rest of the expression's
/// ([`super::runtime_cost`]): `[[1], [2]].flatten(600000)` passes the limit
/// as there. The check layer renames `flatten(depth)` to this.
pub(crate) const FLATTEN_DEPTH: &str = "@flatten_depth";

fn flatten_depth<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
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
        FLATTEN_DEPTH,
        FLATTEN_DEPTH,
        super::list_type(),
        vec![super::int_type()],
        flatten_depth,
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

/// [`UNCOUNTED_FAILURE`] (declared with the cost metering's functions,
/// [`super::runtime_cost::register`]).
pub(crate) fn uncounted<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    fail(UNCOUNTED);
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
