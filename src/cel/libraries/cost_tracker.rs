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
    failed: bool,
}

thread_local! {
    static TRACKING: RefCell<Tracking> = RefCell::new(Tracking::default());
}

/// Starts an expression's evaluation.
pub(crate) fn clear() {
    TRACKING.with_borrow_mut(|tracking| *tracking = Tracking::default());
}

/// Whether a tracked argument failed since [`clear`].
pub(crate) fn failed() -> bool {
    TRACKING.with_borrow(|tracking| tracking.failed)
}

/// The message an expression fails with when [`failed`].
pub(crate) const FAILURE: &str = "internal error: a list given to sort(), distinct() or sortBy(), \
     or the depth given to flatten(), failed to evaluate (kube-apiserver's and Kyverno's cost \
     tracking then fail the whole expression; && and || do not absorb it)";

/// Declares the rewrite's functions.
pub fn register(env: &mut Env) {
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
    TRACKING.with_borrow_mut(|tracking| tracking.failed = true);
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
