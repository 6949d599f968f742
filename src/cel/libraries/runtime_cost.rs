//! cel-go's runtime cost, counted while an expression runs: what
//! kube-apiserver and Kyverno stop an expression on once it passes
//! 1,000,000 (`operation cancelled: actual cost limit exceeded`).
//!
//! The `cel` crate has no hook into its interpreter, so the tree of an
//! expression that can come near the limit is rewritten at load
//! ([`crate::cel::program::metering`]) into calls of the functions here:
//! [`CHARGED`] adds what the nodes of a part of the tree that runs as a whole
//! cost (worked out from the tree at load), and [`ARGUMENT`] / [`CALL`] /
//! [`RESULT`] measure the values a call whose cost depends on them is given
//! or gives (a string's length, a list's size), as cel-go's cost tracker and
//! Kubernetes' `library.CostEstimator` do after each call. Each function
//! hands its first argument back unchanged.
//!
//! Once the count passes the limit the expression is failed whole, as cel-go
//! cancels it: [`cost_tracker`](super::cost_tracker) notes the failure, which
//! `&&` and `||` do not absorb.

use std::cell::RefCell;

use ::cel::common::types::{CelInt, CelOptional, Kind};
use ::cel::common::value::{CowVal, Val};
use ::cel::{Env, ExecutionError, Value};

use super::{Function, dyn_type, global, int_type};

/// Kubernetes' `PerCallLimit`, which Kyverno's MutatingPolicy environment
/// takes over with the rest of Kubernetes' base environment.
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// `@charged(value, cost)`: adds `cost`.
pub const CHARGED: &str = "@charged";
/// `@argument(value, slot, position, formula)`: keeps what `formula` needs
/// of a call's argument at `position`, in `slot`.
pub const ARGUMENT: &str = "@argument";
/// `@call(value, slot, position, arity, formula)`: the call's last
/// argument to be evaluated; adds what `formula` charges for the call.
pub const CALL: &str = "@call";
/// `@result(value, formula)`: adds what `formula` charges for a call's
/// result.
pub const RESULT: &str = "@result_cost";
/// `@present(optional)`: an optional selection (`a.?b`, `m[?k]`) costs 1
/// when it finds a value.
pub const PRESENT: &str = "@present";
/// `@if_none(optional, cost)`: `orValue(x)` and `or(x)` evaluate `x` only
/// when their receiver is empty; `cost` is what `x`'s nodes cost.
pub const IF_NONE: &str = "@if_none";
/// `@evaluated(value)`: `true`, once `value` is (the crate fails the call
/// when it failed). Lets `||` and `&&` go on to the operands cel-go still
/// evaluates after one failed ([`crate::cel::program::metering`]).
pub const EVALUATED: &str = "@evaluated";
/// `@unmeasured(slot, arity, evaluated)`: `false`, each argument of the
/// call at `slot` measured as a failed value is (size 1), and marked
/// unevaluated unless `evaluated` is 1 (cel-go evaluates each), before those
/// that evaluate to a value are measured.
pub const UNMEASURED: &str = "@unmeasured";
/// `@failed_call(slot, arity, formula)`: `false`, once it adds what
/// `formula` charges a call one of whose operands failed. cel-go charges a
/// call only when each of its operands was evaluated (its tracker finds
/// them all on its stack), a failed value being of size 1: a call of two
/// always in kube-apiserver's cel-go, which evaluates both; otherwise only
/// when the failed operand was the last.
pub const FAILED_CALL: &str = "@failed_call";

/// Whether cel-go can charge a call of `formula` more over the operands
/// that evaluated than over failed ones ([`failed_charge`]): where not, the
/// call's failure costs the same whichever operand failed.
pub fn charges_evaluated_operands(formula: Formula) -> bool {
    !matches!(
        formula,
        Formula::Equality | Formula::Ordering | Formula::Addition | Formula::Contains
    )
}

/// What a call is charged, as cel-go (`interpreter/runtimecost.go`), its
/// lists and sets extensions, and Kubernetes' `library.CostEstimator`
/// charge it. `ceil(n * 0.1)` is cel-go's string traversal factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
pub enum Formula {
    /// `==`, `!=`: `ceil(min(size) * 0.1)`, a value without a size being 1.
    Equality = 1,
    /// `<`, `<=`, `>`, `>=`: as `==` over strings and bytes, else 1.
    Ordering,
    /// `+`: over strings and bytes `ceil((a + b) * 0.1)`, else 1.
    Addition,
    /// `in`: a list's size, else 1.
    InList,
    /// `startsWith`, `endsWith`: `ceil(size(prefix) * 0.1)`.
    Affix,
    /// `ceil(size(receiver) * 0.1)`: `lowerAscii`, `quantity`, `format`...
    Scan,
    /// `ceil(size(receiver) * 0.2)`: `replace`, `split`.
    ScanTwice,
    /// `ip(x)`: a string scanned, a CIDR's address 1.
    Ip,
    /// `string(x)`: bytes scanned, else 1.
    StringOfBytes,
    /// `bytes(x)`: a string scanned, else 1.
    BytesOfString,
    /// `matches`, `find`, `findAll`: `ceil((1 + size(s)) * 0.1) * ceil(size(re) * 0.25)`.
    Regex,
    /// `contains` on strings: `ceil(size(s) * 0.1) * ceil(size(t) * 0.1)`.
    Contains,
    /// Kubernetes' list functions (`sum`, `indexOf`...): one traversal.
    Traversal,
    /// `distinct()`, `sort()`: `n² * 2` (`2.1` over strings) + 11.
    SelfCompare,
    /// `sortBy`'s keys: as [`Formula::SelfCompare`] over the keys, its second argument.
    SelfCompareKeys,
    /// `flatten(depth)`: `n * depth` + 11.
    Flatten,
    /// `sets.contains`, `sets.intersects`: `a * b` + 1.
    Sets,
    /// `sets.equivalent`: `2 * a * b` + 1.
    SetsTwice,
    /// `cidr.containsIP(x)`: 1, plus `x` scanned when a string.
    ContainsIp,
    /// `cidr.containsCIDR(x)`: 3, plus `x` scanned when a string.
    ContainsCidr,
    /// Kubernetes' authorizer `fieldSelector`/`labelSelector`.
    Selector,
    /// A format's `validate(s)`: as [`Formula::Regex`] with the format's
    /// longest regular expression.
    Validate,
    /// `join`: `ceil(size(result) * 0.2)`.
    JoinResult,
    /// `lists.range`, `slice`, `reverse`: the result's size + 11.
    ListResult,
}

impl Formula {
    const ALL: [Formula; 24] = [
        Formula::Equality,
        Formula::Ordering,
        Formula::Addition,
        Formula::InList,
        Formula::Affix,
        Formula::Scan,
        Formula::ScanTwice,
        Formula::Ip,
        Formula::StringOfBytes,
        Formula::BytesOfString,
        Formula::Regex,
        Formula::Contains,
        Formula::Traversal,
        Formula::SelfCompare,
        Formula::SelfCompareKeys,
        Formula::Flatten,
        Formula::Sets,
        Formula::SetsTwice,
        Formula::ContainsIp,
        Formula::ContainsCidr,
        Formula::Selector,
        Formula::Validate,
        Formula::JoinResult,
        Formula::ListResult,
    ];

    fn from_code(code: i64) -> Option<Formula> {
        Formula::ALL.into_iter().find(|f| *f as i64 == code)
    }
}

/// What a formula needs of one argument.
#[derive(Debug, Clone, Copy, Default)]
struct Measure {
    /// cel-go's `actualSize`: a string's characters, bytes, a list's
    /// items, a map's entries (an optional's value's); 1 without a size.
    size: u64,
    text: bool,
    bytes: bool,
    /// A list whose first item is a string or bytes.
    text_items: bool,
    /// Kubernetes' `traversalCost`, for [`Formula::Traversal`] only.
    traversal: u64,
    int: Option<i64>,
    /// A named format's longest regular expression.
    regex_size: Option<u64>,
    list: bool,
    opaque: bool,
    /// Not evaluated (see [`UNMEASURED`]).
    unevaluated: bool,
}

#[derive(Default)]
struct Count {
    /// Signed: a call's rest (its charge less what its block charged) can be
    /// negative, and can come before its block's charge.
    cost: i64,
    slots: Vec<Measure>,
}

thread_local! {
    static COUNT: RefCell<Count> = RefCell::new(Count::default());
}

/// Starts an expression's count.
pub(crate) fn clear() {
    COUNT.with_borrow_mut(|count| count.cost = 0);
}

/// What the expression has cost since [`clear`].
pub(crate) fn spent() -> u64 {
    COUNT.with_borrow(|count| u64::try_from(count.cost).unwrap_or(0))
}

/// The message an expression fails with past the limit.
pub const COST_LIMIT: &str = "operation cancelled: actual cost limit exceeded (its cost in cel-go's runtime cost model passed 1,000,000, where Kubernetes and Kyverno stop an expression)";

fn charge(cost: u64) -> Result<(), ExecutionError> {
    charge_less(cost, 0)
}

/// Adds `cost` less `charged`, what the call's block already charged for it.
fn charge_less(cost: u64, charged: u64) -> Result<(), ExecutionError> {
    let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let total = COUNT.with_borrow_mut(|count| {
        count.cost = count
            .cost
            .saturating_add(signed(cost))
            .saturating_sub(signed(charged));
        count.cost
    });
    if total > signed(PER_CALL_LIMIT) {
        // Stopped whole, as cel-go's cancellation: `||` does not absorb it.
        super::cost_tracker::fail(COST_LIMIT);
        return Err(ExecutionError::function_error("cost", COST_LIMIT));
    }
    Ok(())
}

fn ceil_tenths(size: u64, tenths: u64) -> u64 {
    (size.saturating_mul(tenths)).div_ceil(10)
}

fn measure(value: &dyn Val, formula: Formula) -> Measure {
    let kind = value.get_type().kind();
    if kind == Kind::Opaque
        && let Some(optional) = value.downcast_ref::<CelOptional>()
    {
        return match optional.inner() {
            Some(inner) => measure(inner, formula),
            None => Measure {
                size: 1,
                opaque: true,
                ..Measure::default()
            },
        };
    }
    let size = value
        .as_sizer()
        .map_or(1, |sizer| u64::try_from(*sizer.size().inner()).unwrap_or(0));
    let mut measure = Measure {
        size,
        text: kind == Kind::String,
        bytes: kind == Kind::Bytes,
        opaque: kind == Kind::Opaque,
        list: kind == Kind::List,
        int: value.downcast_ref::<CelInt>().map(|i| *i.inner()),
        ..Measure::default()
    };
    let needs_items = matches!(
        formula,
        Formula::Traversal | Formula::SelfCompare | Formula::SelfCompareKeys
    );
    if formula == Formula::Validate && measure.opaque {
        measure.regex_size = super::format::max_regex_size(value);
    }
    if needs_items && let Ok(owned) = Value::try_from(value) {
        measure.traversal = traversal(&owned);
        if let Value::List(items) = &owned {
            measure.text_items = matches!(items.first(), Some(Value::String(_) | Value::Bytes(_)));
        }
    }
    measure
}

/// Kubernetes' `traversalCost`: a tenth of a string's bytes (rounded down),
/// the sum over a list's items or a map's keys and values, else 1.
fn traversal(value: &Value) -> u64 {
    match value {
        Value::String(s) => s.len() as u64 / 10,
        Value::Bytes(b) => b.len() as u64 / 10,
        Value::List(items) => items.iter().map(traversal).sum(),
        Value::Map(map) => map
            .map
            .iter()
            .map(|(key, value)| {
                let key = match key {
                    ::cel::objects::Key::String(s) => s.len() as u64 / 10,
                    _ => 1,
                };
                key + traversal(value)
            })
            .sum(),
        _ => 1,
    }
}

fn self_compare(list: &Measure) -> u64 {
    let squared = list.size.saturating_mul(list.size);
    let factor_tenths = if list.text_items { 21 } else { 20 };
    // cel-go: uint64(float64(n*n) * factor), truncated.
    (squared.saturating_mul(factor_tenths) / 10).saturating_add(11)
}

/// What `formula` charges a call given these arguments (cel-go's order:
/// the receiver first).
fn call_cost(formula: Formula, args: &[Measure]) -> u64 {
    let arg = |i: usize| args.get(i).copied().unwrap_or_default();
    let (a, b) = (arg(0), arg(1));
    let text = |m: &Measure| m.text || m.bytes;
    match formula {
        Formula::Equality => ceil_tenths(a.size.min(b.size), 1),
        Formula::Ordering if text(&a) && text(&b) => ceil_tenths(a.size.min(b.size), 1),
        Formula::Addition if text(&a) && text(&b) => ceil_tenths(a.size.saturating_add(b.size), 1),
        Formula::Ordering | Formula::Addition => 1,
        Formula::InList if b.list => b.size,
        Formula::InList => 1,
        Formula::Affix => ceil_tenths(b.size, 1),
        Formula::Scan => ceil_tenths(a.size, 1),
        Formula::ScanTwice => ceil_tenths(a.size, 2),
        Formula::Ip if a.opaque => 1,
        Formula::Ip => ceil_tenths(a.size, 1),
        Formula::StringOfBytes if a.bytes => ceil_tenths(a.size, 1),
        Formula::BytesOfString if a.text => ceil_tenths(a.size, 1),
        Formula::StringOfBytes | Formula::BytesOfString => 1,
        Formula::Regex => ceil_tenths(a.size.saturating_add(1), 1)
            .saturating_mul(b.size.saturating_mul(25).div_ceil(100)),
        Formula::Contains if a.text && b.text => {
            ceil_tenths(a.size, 1).saturating_mul(ceil_tenths(b.size, 1))
        }
        Formula::Contains => 1,
        Formula::Traversal => a.traversal,
        Formula::SelfCompare => self_compare(&a),
        Formula::SelfCompareKeys => self_compare(&b),
        Formula::Flatten => {
            let depth = if args.len() == 2 {
                b.int.unwrap_or(1)
            } else {
                1
            };
            // cel-go: uint64(float64(n) * depth), a negative depth counting as 1.
            let depth = if depth < 0 { 1 } else { depth as u64 };
            a.size.saturating_mul(depth).saturating_add(11)
        }
        Formula::Sets => a.size.saturating_mul(b.size).saturating_add(1),
        Formula::SetsTwice => a
            .size
            .saturating_mul(b.size)
            .saturating_mul(2)
            .saturating_add(1),
        Formula::ContainsIp => 1 + if b.text { ceil_tenths(b.size, 1) } else { 0 },
        Formula::ContainsCidr => 3 + if b.text { ceil_tenths(b.size, 1) } else { 0 },
        Formula::Selector => {
            let length = b.size;
            let requirements = ceil_tenths(length, 5);
            10 + ceil_tenths(length, 1) + requirements.saturating_mul(50)
        }
        Formula::Validate => match a.regex_size {
            Some(regex) => ceil_tenths(b.size.saturating_add(1), 1)
                .saturating_mul(regex.saturating_mul(25).div_ceil(100)),
            None => 1,
        },
        Formula::JoinResult => ceil_tenths(a.size, 2),
        Formula::ListResult => a.size.saturating_add(11),
    }
}

/// What cel-go charges a call of `formula` that failed, or was given a failed
/// value (of size 1): the metering charges it with the call's block, and the
/// rest when the call runs.
pub fn failed_charge(formula: Formula) -> u64 {
    match formula {
        // A list of one item: 1 + 1 + 10.
        Formula::ListResult => 12,
        _ => 1,
    }
}

/// An int the rewrite passes a counting call (a cost, a slot, a formula).
fn int_at(args: &[CowVal], i: usize) -> Result<i64, ExecutionError> {
    super::int_arg(args, i, "cost")
}

fn formula_at(args: &[CowVal], i: usize) -> Result<Formula, ExecutionError> {
    Formula::from_code(int_at(args, i)?)
        .ok_or_else(|| ExecutionError::function_error("cost", "unknown cost formula"))
}

fn first<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    args.into_iter()
        .next()
        .ok_or_else(|| ExecutionError::function_error("cost", "malformed cost call"))
}

fn slot_index(args: &[CowVal], slot: usize, position: usize) -> Result<usize, ExecutionError> {
    let at = int_at(args, slot)?.saturating_add(int_at(args, position)?);
    usize::try_from(at).map_err(|_| ExecutionError::function_error("cost", "malformed cost call"))
}

fn keep(at: usize, measure: Measure) {
    COUNT.with_borrow_mut(|count| {
        if count.slots.len() <= at {
            count.slots.resize(at + 1, Measure::default());
        }
        if let Some(slot) = count.slots.get_mut(at) {
            *slot = measure;
        }
    });
}

fn charged<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let cost = int_at(&args, 1)?;
    charge(u64::try_from(cost).unwrap_or(0))?;
    first(args)
}

fn argument<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let at = slot_index(&args, 1, 2)?;
    let formula = formula_at(&args, 3)?;
    if let Some(value) = args.first() {
        keep(at, measure(value.as_ref(), formula));
    }
    first(args)
}

fn call<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let at = slot_index(&args, 1, 2)?;
    let base = usize::try_from(int_at(&args, 1)?).unwrap_or(0);
    let arity = usize::try_from(int_at(&args, 3)?).unwrap_or(0);
    let formula = formula_at(&args, 4)?;
    if let Some(value) = args.first() {
        keep(at, measure(value.as_ref(), formula));
    }
    charge_call(base, arity, formula)?;
    first(args)
}

/// Adds what `formula` charges the call whose arguments are measured in
/// the `arity` slots from `base`, less what its block charged.
fn charge_call(base: usize, arity: usize, formula: Formula) -> Result<(), ExecutionError> {
    let cost = COUNT.with_borrow(|count| {
        let measures = base
            .checked_add(arity)
            .and_then(|end| count.slots.get(base..end))
            .unwrap_or(&[]);
        call_cost(formula, measures)
    });
    charge_less(cost, failed_charge(formula))
}

fn result<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let formula = formula_at(&args, 1)?;
    if let Some(value) = args.first() {
        let cost = call_cost(formula, &[measure(value.as_ref(), formula)]);
        charge_less(cost, failed_charge(formula))?;
    }
    first(args)
}

fn optional_value(value: &dyn Val) -> Option<bool> {
    value
        .downcast_ref::<CelOptional>()
        .map(|optional| optional.inner().is_some())
}

fn present<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    if args
        .first()
        .and_then(|value| optional_value(value.as_ref()))
        == Some(true)
    {
        charge(1)?;
    }
    first(args)
}

fn if_none<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    if args
        .first()
        .and_then(|value| optional_value(value.as_ref()))
        == Some(false)
    {
        charge(u64::try_from(int_at(&args, 1)?).unwrap_or(0))?;
    }
    first(args)
}

fn evaluated<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    super::boolean(true)
}

fn unmeasured<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let slot = usize::try_from(int_at(&args, 0)?).unwrap_or(0);
    let arity = usize::try_from(int_at(&args, 1)?).unwrap_or(0);
    let unevaluated = int_at(&args, 2)? != 1;
    for at in slot..slot.saturating_add(arity) {
        keep(
            at,
            Measure {
                size: 1,
                unevaluated,
                ..Measure::default()
            },
        );
    }
    super::boolean(false)
}

fn failed_call<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let base = usize::try_from(int_at(&args, 0)?).unwrap_or(0);
    let arity = usize::try_from(int_at(&args, 1)?).unwrap_or(0);
    // The operand that failed was the last evaluated: each before it
    // evaluated to a value (the last is unevaluated whether it failed or
    // was never reached).
    let reached_last = COUNT.with_borrow(|count| {
        let before_last = base.saturating_add(arity.saturating_sub(1));
        count
            .slots
            .get(base..before_last)
            .is_some_and(|measures| measures.iter().all(|m| !m.unevaluated))
    });
    if reached_last {
        charge_call(base, arity, formula_at(&args, 2)?)?;
    }
    super::boolean(false)
}

/// Declares the rewrite's functions.
pub fn register(env: &mut Env) {
    let int = int_type;
    let functions: [(&str, Vec<::cel::common::types::Type>, Function); 10] = [
        (CHARGED, vec![dyn_type(), int()], charged),
        (ARGUMENT, vec![dyn_type(), int(), int(), int()], argument),
        (CALL, vec![dyn_type(), int(), int(), int(), int()], call),
        (RESULT, vec![dyn_type(), int()], result),
        (PRESENT, vec![dyn_type()], present),
        (IF_NONE, vec![dyn_type(), int()], if_none),
        (EVALUATED, vec![dyn_type()], evaluated),
        (UNMEASURED, vec![int(), int(), int()], unmeasured),
        (FAILED_CALL, vec![int(), int(), int()], failed_call),
        (
            super::cost_tracker::UNCOUNTED_FAILURE,
            vec![],
            super::cost_tracker::uncounted,
        ),
    ];
    for (name, args, op) in functions {
        global(env, name, name, args, op);
    }
}
