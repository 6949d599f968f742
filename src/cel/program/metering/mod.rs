//! The rewrite that counts cel-go's runtime cost while an expression runs
//! (the functions it calls: [`crate::cel::libraries::runtime_cost`]).
//!
//! cel-go charges each step its program takes: 1 for a variable and for
//! each field or index it reads, 10, 30 and 40 for building a list, a map
//! and an object, a call by its function (1, or by the size of what it is
//! given: `==` over strings a tenth of the shorter one, `in` a list's size,
//! an authorizer check 350,000), nothing for a constant, for `&&`, `||` and
//! `?:`, and each comprehension step again for each item. A tree is cut
//! here into the parts that run as a whole (a *block*: the root, each
//! right-hand side of `&&` and `||`, each branch of `?:`, a comprehension's
//! condition and step); what a block's nodes cost is summed at load and
//! charged by one call when the block starts, on its first value to be
//! evaluated. A call whose cost depends on values has its arguments
//! measured as they are evaluated ([`ARGUMENT`], [`CALL`]) or its result
//! ([`RESULT`]).
//!
//! Matches cel-go's count (checked against kube-apiserver's by `make
//! differential`). cel-go evaluates a method's receiver first, the `cel`
//! crate last, and once an operand fails, kube-apiserver's cel-go (v0.29)
//! still evaluates the other of a call of two, and charges the call over
//! both (Kyverno's, v0.30, stops at the first that fails, as the crate
//! does). Where an operand that counts as it runs would be missed, the call
//! is rewritten so that the crate evaluates them as cel-go does
//! ([`Meter::call`]). What a part of the tree that never runs costs is
//! charged with its block all the same: here cel-go counts less.
//!
//! An expression without comprehensions whose every call is charged a
//! constant, or by a literal it is given, cannot come near the limit: it is
//! left as it is, and the direct evaluator keeps it.

use std::collections::BTreeSet;

use ::cel::IdedExpr;
use ::cel::common::ast::{CallExpr, EntryExpr, Expr, operators};

use crate::cel::libraries::cost_tracker::UNCOUNTED_FAILURE;
use crate::cel::libraries::runtime_cost::{
    ARGUMENT, CALL, CHARGED, EVALUATED, FAILED_CALL, Formula, IF_NONE, PER_CALL_LIMIT, PRESENT,
    RESULT, UNMEASURED, charges_evaluated_operands, failed_charge,
};
use crate::cel::syntax::macro_builder::ENTRY;

mod nodes;

pub(crate) use nodes::CONVERSIONS;
use nodes::{
    Dynamic, TYPE_NAMES, boolean, call_of, continues_attribute, counts_as_it_runs, evaluated,
    formula, int, is_accumulator, is_constant, is_constant_regex, is_internal, is_namespace,
    is_namespace_name, literal_size, method_of, walk, wrap,
};

const LIST_COST: u64 = 10;
const MAP_COST: u64 = 30;
const STRUCT_COST: u64 = 40;
/// Kubernetes' authorizer `check()`.
const CHECK_COST: u64 = 350_000;

/// Whose cel-go runs the expression: they differ in the operands of a call
/// they evaluate after one failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interpreter {
    /// kube-apiserver's (cel-go v0.29): both operands of a call of two.
    #[default]
    Kubernetes,
    /// Kyverno's (cel-go v0.30): up to the first that fails.
    Kyverno,
}

/// Rewrites `expr` to count its cost, unless it cannot come near the
/// limit: then gives the most it can cost. `always`: count it anyway (the
/// differential test compares every count).
pub fn meter(
    expr: &mut IdedExpr,
    always: bool,
    interpreter: Interpreter,
    open_overloads: &BTreeSet<u64>,
) -> Option<u64> {
    if !always && let Some(bound) = bounded(expr).filter(|bound| *bound <= PER_CALL_LIMIT) {
        short_circuit_all(expr);
        return Some(bound);
    }
    Meter {
        next_slot: 0,
        interpreter,
        open_overloads: open_overloads.clone(),
    }
    .block(expr, false);
    None
}

/// Whether `expr` will count its cost ([`meter`]) with a call whose charge
/// depends on the overload cel-go's check picks (`string()`, `bytes()`,
/// `+`, the orderings, `in`): then the check's types are worth working out.
pub fn overload_matters(expr: &IdedExpr, always: bool) -> bool {
    let mut by_overload = false;
    walk(expr, &mut |node| {
        if let Expr::Call(call) = &node.expr {
            by_overload |= call.target.is_none()
                && matches!(
                    call.func_name.as_str(),
                    "string"
                        | "bytes"
                        | operators::ADD
                        | operators::LESS
                        | operators::LESS_EQUALS
                        | operators::GREATER
                        | operators::GREATER_EQUALS
                        | operators::IN
                );
        }
    });
    by_overload && (always || bounded(expr).is_none_or(|bound| bound > PER_CALL_LIMIT))
}

/// What `expr` costs at most when it has no comprehension and every call is
/// charged a constant or by a literal; `None` otherwise.
fn bounded(expr: &IdedExpr) -> Option<u64> {
    let mut total = Meter::default().cost(&mut expr.clone(), false);
    let mut unbounded = false;
    walk(expr, &mut |node| match &node.expr {
        Expr::Comprehension(_) => unbounded = true,
        Expr::Call(call) => match formula(call) {
            Some(Dynamic::Sizes(Formula::Equality | Formula::Ordering)) => {
                match literal_size(call) {
                    Some(size) => total = total.saturating_add(size.div_ceil(10)),
                    None => unbounded = true,
                }
            }
            Some(_) => unbounded = true,
            None => {}
        },
        _ => {}
    });
    (!unbounded).then_some(total)
}

/// A call whose operands the crate evaluates in another order than cel-go,
/// or fewer of once one failed (see the module's comment).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Skipped {
    /// A method: cel-go evaluates the receiver first, the crate last.
    Method,
    /// A call of two arguments, both of which Kubernetes' cel-go evaluates.
    SecondArgument,
}

#[derive(Default)]
struct Meter {
    /// The next free slot for a call's measured arguments.
    next_slot: u64,
    interpreter: Interpreter,
    /// Calls cel-go charges 1 (see [`crate::cel::program::Compiled`]).
    open_overloads: BTreeSet<u64>,
}

impl Meter {
    /// What a call costs in its block ([`Meter::call_itself`]). Where cel-go
    /// evaluates the operands of a call in another order than the crate, or
    /// more of them once one failed, and one that counts as it runs would be
    /// missed, or the call would be charged over those that evaluated,
    /// `f(a, b)` becomes
    /// `(@evaluated([a, b]) || <a, b evaluated and counted as cel-go does, then false>) ? f(a, b) : false`:
    /// the crate's `||` evaluates its right side when its left failed, and
    /// then gives the left's error, the first in cel-go's order. The test
    /// evaluates the operands once more, uncounted.
    fn call(&mut self, expr: &mut IdedExpr, branch: bool) -> u64 {
        let site = match &expr.expr {
            Expr::Call(call) => self
                .skipped(call)
                .map(|skipped| (skipped, self.formula(expr.id, call), call.clone())),
            _ => None,
        };
        let cost = self.call_itself(expr, branch);
        if let Some((skipped, dynamic, plain)) = site {
            self.evaluate_skipped(expr, plain, skipped, dynamic);
        }
        cost
    }

    /// How the call `id` is charged by its values: not at all where cel-go
    /// leaves its overload open.
    fn formula(&self, id: u64, call: &CallExpr) -> Option<Dynamic> {
        if self.open_overloads.contains(&id) {
            return None;
        }
        formula(call)
    }

    /// Whether `call` is evaluated otherwise by cel-go (see [`Skipped`]).
    fn skipped(&self, call: &CallExpr) -> Option<Skipped> {
        let name = call.func_name.as_str();
        if is_internal(name)
            || matches!(
                name,
                operators::LOGICAL_AND
                    | operators::LOGICAL_OR
                    | operators::CONDITIONAL
                    | operators::NOT_STRICTLY_FALSE
                    | operators::OPT_SELECT
                    | operators::OPT_INDEX
                    | "or"
                    | "orValue"
            )
            // A comprehension's step keeps the shape the crate reads.
            || call.args.iter().any(is_accumulator)
        {
            return None;
        }
        let method = call.target.as_deref().is_some_and(|t| !is_namespace(t));
        match (method, self.interpreter) {
            (true, _) if !call.args.is_empty() => Some(Skipped::Method),
            (false, Interpreter::Kubernetes) if call.args.len() == 2 => {
                Some(Skipped::SecondArgument)
            }
            _ => None,
        }
    }

    /// Rewrites the metered call `expr` (`plain` before metering) as
    /// [`Meter::call`] says, where an operand counts as it runs.
    fn evaluate_skipped(
        &mut self,
        expr: &mut IdedExpr,
        plain: CallExpr,
        skipped: Skipped,
        dynamic: Option<Dynamic>,
    ) {
        // A call of a compiled pattern is not charged when its string failed.
        let constant_regex = is_constant_regex(&plain);
        let CallExpr { target, args, .. } = plain;
        // cel-go's order: the receiver first.
        let receiver = target.map(|t| *t).filter(|t| !is_namespace(t));
        let operands: Vec<IdedExpr> = receiver.into_iter().chain(args).collect();
        let Some(mut metered) = metered_operands(expr) else {
            return;
        };
        if metered.len() != operands.len() {
            return;
        }
        // The call, charged over the operands that evaluated (where that can
        // charge more than what its block charged).
        let charged = match dynamic {
            Some(Dynamic::Sizes(formula))
                if charges_evaluated_operands(formula) && !constant_regex =>
            {
                Some(formula as u64)
            }
            _ => None,
        };
        let counting: Vec<bool> = metered.iter().map(counts_as_it_runs).collect();
        let missed = charged.is_some()
            || match skipped {
                Skipped::Method => counting.contains(&true),
                Skipped::SecondArgument => counting.get(1) == Some(&true),
            };
        if !missed {
            return;
        }
        // The rewrite copies its operands, and each level of a chain of
        // rewritten calls doubles the tree (`s.replace(..).replace(..)`): past
        // a few rewrites below, the call is left as the crate runs it, and an
        // operand that fails fails the whole expression (its operands tested
        // first, uncounted), so that what is not counted here never lets an
        // expression through that cel-go stops.
        if metered.iter().map(rewrites_in).sum::<usize>() > MAX_REWRITES_COPIED {
            let test = call_of(
                operators::LOGICAL_OR,
                vec![evaluated(operands), call_of(UNCOUNTED_FAILURE, Vec::new())],
            );
            let call = std::mem::take(expr);
            *expr = call_of(operators::CONDITIONAL, vec![test, call, boolean(false)]);
            return;
        }
        let arity = metered.len() as u64;
        let slot = self.next_slot;
        self.next_slot += arity;
        if let Some(code) = charged {
            for (position, operand) in metered.iter_mut().enumerate() {
                wrap(
                    operand,
                    ARGUMENT,
                    vec![int(slot), int(position as u64), int(code)],
                );
            }
        }
        // Each evaluated for what it counts, its error absorbed.
        let absorbed = |operands: Vec<IdedExpr>| {
            call_of(
                operators::LOGICAL_AND,
                vec![evaluated(operands), boolean(false)],
            )
        };
        let both = self.interpreter == Interpreter::Kubernetes && arity == 2;
        let mut steps = Vec::new();
        if charged.is_some() {
            steps.push(call_of(
                UNMEASURED,
                vec![int(slot), int(arity), int(u64::from(both))],
            ));
        }
        if both {
            steps.extend(metered.into_iter().map(|operand| absorbed(vec![operand])));
        } else {
            // Up to the first that fails.
            steps.push(absorbed(metered));
        }
        if let Some(code) = charged {
            steps.push(call_of(FAILED_CALL, vec![int(slot), int(arity), int(code)]));
        }
        let counted = steps
            .into_iter()
            .reduce(|left, right| call_of(operators::LOGICAL_OR, vec![left, right]))
            .unwrap_or_else(|| boolean(false));
        let test = call_of(operators::LOGICAL_OR, vec![evaluated(operands), counted]);
        let call = std::mem::take(expr);
        *expr = call_of(operators::CONDITIONAL, vec![test, call, boolean(false)]);
    }

    /// Charges `expr`'s block where it starts. `branch`: a branch of `?:`
    /// (cel-go reads an attribute there as part of the conditional: its
    /// variable, or the attribute it makes of another value, is free).
    fn block(&mut self, expr: &mut IdedExpr, branch: bool) {
        let branch = branch && continues_attribute(expr);
        let cost = self.cost(expr, branch);
        if cost > 0 {
            charge_first(expr, cost);
        }
    }

    /// What `expr`'s nodes in its block cost; its inner blocks and calls
    /// that depend on values are rewritten to charge themselves.
    fn cost(&mut self, expr: &mut IdedExpr, branch: bool) -> u64 {
        if matches!(expr.expr, Expr::List(_) | Expr::Map(_)) && is_constant(expr) {
            return 0;
        }
        match &mut expr.expr {
            Expr::Literal(_) | Expr::Unspecified => 0,
            Expr::Ident(name) => u64::from(
                !(branch
                    || name == ENTRY
                    || is_namespace_name(name)
                    || TYPE_NAMES.contains(&name.as_str())),
            ),
            Expr::Select(select) if select.test => self.cost(&mut select.operand, branch),
            Expr::Select(select) => {
                if continues_attribute(&select.operand) {
                    1 + self.cost(&mut select.operand, branch)
                } else {
                    relative(branch) + 1 + self.cost(&mut select.operand, false)
                }
            }
            Expr::List(list) => {
                LIST_COST
                    + list
                        .elements
                        .iter_mut()
                        .map(|e| self.cost(e, false))
                        .sum::<u64>()
            }
            Expr::Map(map) => MAP_COST + self.entries(&mut map.entries),
            Expr::Struct(structure) => STRUCT_COST + self.entries(&mut structure.entries),
            Expr::Comprehension(fold) => {
                let binds_entry = matches!(&fold.iter_range.expr, Expr::List(l) if l.elements.is_empty())
                    && matches!(&fold.accu_init.expr, Expr::Call(c) if c.args.first().is_some_and(|a| matches!(&a.expr, Expr::Ident(n) if n == ENTRY)));
                let mut cost = self.cost(&mut fold.iter_range, false);
                if !binds_entry {
                    cost += self.cost(&mut fold.accu_init, false);
                }
                self.block(&mut fold.loop_cond, false);
                self.step(&mut fold.loop_step);
                let result = self.cost(&mut fold.result, false);
                // cel-go reads the result only after a range that did not
                // fail: charged with the range's value (the result itself
                // stays a bare accumulator, whose shape the crate reads).
                let binds = matches!(&fold.iter_range.expr, Expr::List(l) if l.elements.is_empty());
                if binds || result == 0 {
                    return cost + result;
                }
                wrap(&mut fold.iter_range, CHARGED, vec![int(result)]);
                cost
            }
            Expr::Call(_) => self.call(expr, branch),
        }
    }

    fn entries(&mut self, entries: &mut [::cel::common::ast::IdedEntryExpr]) -> u64 {
        let mut cost = 0;
        for entry in entries {
            match &mut entry.expr {
                EntryExpr::StructField(field) => cost += self.cost(&mut field.value, false),
                EntryExpr::MapEntry(entry) => {
                    cost += self.cost(&mut entry.key, false) + self.cost(&mut entry.value, false)
                }
            }
        }
        cost
    }

    /// A comprehension's step: `accu && p`, `accu || p` keep their shape
    /// (the crate folds errors in `all` and `exists` by it), their cost
    /// charged with `p`'s.
    fn step(&mut self, step: &mut IdedExpr) {
        if let Expr::Call(call) = &mut step.expr
            && matches!(
                call.func_name.as_str(),
                operators::LOGICAL_AND | operators::LOGICAL_OR
            )
            && let [accu, predicate] = call.args.as_mut_slice()
            && is_accumulator(accu)
        {
            let own = self.cost(accu, false);
            let cost = own + self.cost(predicate, false);
            if cost > 0 {
                charge_first(predicate, cost);
            }
            return;
        }
        self.block(step, false);
    }

    fn call_itself(&mut self, expr: &mut IdedExpr, branch: bool) -> u64 {
        let Expr::Call(call) = &mut expr.expr else {
            return 0;
        };
        let name = call.func_name.clone();
        match (name.as_str(), call.target.is_some(), call.args.len()) {
            (operators::CONDITIONAL, false, 3) => {
                let [cond, yes, no] = call.args.as_mut_slice() else {
                    return 0;
                };
                let cost = self.cost(cond, false);
                self.block(yes, true);
                self.block(no, true);
                return cost;
            }
            (operators::LOGICAL_AND | operators::LOGICAL_OR, false, 2) => {
                let [left, right] = call.args.as_mut_slice() else {
                    return 0;
                };
                let cost = self.cost(left, false);
                self.block(right, false);
                return cost;
            }
            (operators::INDEX, false, 2) => {
                let chained = call.args.first().is_some_and(continues_attribute);
                let root = if chained { 0 } else { relative(branch) };
                return root + 1 + self.arguments(call, branch && chained);
            }
            (operators::OPT_SELECT | operators::OPT_INDEX, false, 2) => {
                // Over a value that is not a variable's, cel-go charges the
                // attribute it makes, 1, and the step only when present.
                let chained = call.args.first().is_some_and(continues_attribute);
                let root = if chained { 0 } else { relative(branch) };
                let cost = root + self.arguments(call, branch && chained);
                wrap(expr, PRESENT, Vec::new());
                return cost;
            }
            ("orValue" | "or", true, 1) => {
                let plain = call.target.as_deref().cloned();
                let alternative = call.args.first_mut().map_or(0, |arg| self.cost(arg, false));
                let Some(target) = call.target.as_deref_mut() else {
                    return 0;
                };
                let cost = self.cost(target, false);
                if alternative > 0 {
                    wrap(target, IF_NONE, vec![int(alternative)]);
                }
                if let Some(mut plain) = plain {
                    short_circuit_all(&mut plain);
                    short_circuit(expr, plain);
                }
                return cost;
            }
            (operators::IN, false, 2) if call.args.get(1).is_some_and(is_constant) => {
                return call.args.first_mut().map_or(0, |arg| self.cost(arg, false));
            }
            _ => {}
        }
        let dynamic = self.formula(expr.id, call);
        let arguments = self.arguments(call, false);
        if is_internal(&name) {
            return arguments;
        }
        let all_constant = call.target.is_none() && call.args.iter().all(is_constant);
        if all_constant && CONVERSIONS.contains(&name.as_str()) {
            return 0;
        }
        // A call charged by values is charged with its block what cel-go
        // charges it over a failed value, and the rest when it runs: where it
        // or an argument failed, cel-go still charges it.
        match dynamic {
            // By the shorter of the two, a failed value being of size 1:
            // nothing beside an empty literal, failed or not.
            Some(Dynamic::Sizes(Formula::Equality)) if literal_size(call) == Some(0) => arguments,
            Some(Dynamic::Sizes(formula)) if is_constant_regex(call) => {
                // Charged once its string is evaluated, as cel-go charges the
                // call it compiles the pattern into.
                self.measure(call, formula);
                let string = match call.target.as_deref_mut() {
                    Some(target) if !is_namespace(target) => Some(target),
                    _ => call.args.first_mut(),
                };
                if let Some(string) = string {
                    wrap(string, CHARGED, vec![int(failed_charge(formula))]);
                }
                arguments
            }
            Some(Dynamic::Sizes(formula)) => {
                self.measure(call, formula);
                arguments + failed_charge(formula)
            }
            Some(Dynamic::Result(formula)) => {
                wrap(expr, RESULT, vec![int(formula as u64)]);
                arguments + failed_charge(formula)
            }
            None if name == "check" && call.target.is_some() => arguments + CHECK_COST,
            None => arguments + 1,
        }
    }

    /// What a call's arguments and receiver cost (a namespace is not evaluated).
    fn arguments(&mut self, call: &mut CallExpr, branch: bool) -> u64 {
        let mut cost = 0;
        for (i, arg) in call.args.iter_mut().enumerate() {
            cost += self.cost(arg, branch && i == 0);
        }
        if let Some(target) = call.target.as_deref_mut()
            && !is_namespace(target)
        {
            cost += self.cost(target, false);
        }
        cost
    }

    /// Wraps a call's arguments so that the last one evaluated (the
    /// receiver, for a method: the crate evaluates the arguments first)
    /// charges the call.
    fn measure(&mut self, call: &mut CallExpr, formula: Formula) {
        let slot = self.next_slot;
        let code = formula as u64;
        let has_receiver = call.target.as_deref().is_some_and(|t| !is_namespace(t));
        let arity = call.args.len() as u64 + u64::from(has_receiver);
        self.next_slot += arity;
        let first_argument = u64::from(has_receiver);
        let last = call.args.len().saturating_sub(1);
        for (i, arg) in call.args.iter_mut().enumerate() {
            let position = first_argument + i as u64;
            if !has_receiver && i == last {
                wrap(
                    arg,
                    CALL,
                    vec![int(slot), int(position), int(arity), int(code)],
                );
            } else {
                wrap(arg, ARGUMENT, vec![int(slot), int(position), int(code)]);
            }
        }
        if has_receiver && let Some(target) = call.target.as_deref_mut() {
            wrap(target, CALL, vec![int(slot), int(0), int(arity), int(code)]);
        }
    }
}

/// What cel-go charges for the attribute it makes of a value that is not a
/// variable's, to read fields or indexes of it: 1, or nothing in a branch of
/// `?:`.
fn relative(branch: bool) -> u64 {
    u64::from(!branch)
}

/// The operands of the metered call `expr` (its result measured or not), in
/// cel-go's order, without the measures of the call itself.
fn metered_operands(expr: &IdedExpr) -> Option<Vec<IdedExpr>> {
    let Expr::Call(outer) = &expr.expr else {
        return None;
    };
    let call = match outer.args.first().map(|a| &a.expr) {
        Some(Expr::Call(inner)) if outer.func_name == RESULT => inner,
        _ => outer,
    };
    let unmeasured = |operand: &IdedExpr| match &operand.expr {
        Expr::Call(measure) if matches!(measure.func_name.as_str(), ARGUMENT | CALL) => {
            measure.args.first().cloned()
        }
        _ => Some(operand.clone()),
    };
    let receiver = call.target.as_deref().filter(|t| !is_namespace(t));
    receiver
        .into_iter()
        .chain(&call.args)
        .map(unmeasured)
        .collect()
}

/// How many rewrites of [`Meter::evaluate_skipped`] an operand may hold for
/// its call to be rewritten too: the tree grows at most eightfold (a chain
/// of four rewritten calls is counted as cel-go counts it), and is not
/// nested so deep that the crate's evaluator, which recurses, runs out of
/// stack (32-fold did, in the tests' threads).
const MAX_REWRITES_COPIED: usize = 7;

/// The calls of `expr` rewritten by [`Meter::evaluate_skipped`] (each tests
/// its operands once).
fn rewrites_in(expr: &IdedExpr) -> usize {
    let mut count = 0;
    walk(expr, &mut |node| {
        if let Expr::Call(call) = &node.expr
            && call.func_name == operators::CONDITIONAL
            && let Some(Expr::Call(test)) = call.args.first().map(|t| &t.expr)
            && test.func_name == operators::LOGICAL_OR
            && let Some(Expr::Call(evaluated)) = test.args.first().map(|e| &e.expr)
            && evaluated.func_name == EVALUATED
        {
            count += 1;
        }
    });
    count
}

/// cel-go evaluates the alternative of `x.orValue(y)` and `x.or(y)` only
/// when `x` is empty; the crate's functions are given it evaluated, and fail
/// when it failed. The call `expr` (its receiver `plain` before it was
/// metered) becomes `x.hasValue() ? x.value() : y` (`x` for `or`), `x`
/// evaluated once more, uncounted, when it has a value. A constant
/// alternative cannot fail: left as it is.
fn short_circuit(expr: &mut IdedExpr, plain: IdedExpr) {
    let Expr::Call(call) = &mut expr.expr else {
        return;
    };
    if call.args.first().is_none_or(is_constant) {
        return;
    }
    let or_value = call.func_name == "orValue";
    let (Some(target), Some(alternative)) = (call.target.take(), call.args.pop()) else {
        return;
    };
    let test = method_of(*target, "hasValue");
    let value = if or_value {
        method_of(plain, "value")
    } else {
        plain
    };
    *expr = call_of(operators::CONDITIONAL, vec![test, value, alternative]);
}

/// [`short_circuit`] over each `orValue` and `or` of an expression left
/// unmetered.
fn short_circuit_all(expr: &mut IdedExpr) {
    crate::cel::syntax::ast::children_mut(expr, &mut short_circuit_all);
    if let Expr::Call(call) = &expr.expr
        && matches!(call.func_name.as_str(), "orValue" | "or")
        && call.args.len() == 1
        && let Some(target) = call.target.as_deref().cloned()
    {
        short_circuit(expr, target);
    }
}

/// Puts the charge of a block on the first value the crate evaluates in it
/// (a method's arguments come before its receiver), skipping a
/// comprehension's accumulator where the crate reads the step's shape.
fn charge_first(expr: &mut IdedExpr, cost: u64) {
    let next: Option<&mut IdedExpr> =
        match &mut expr.expr {
            Expr::Call(call) => {
                let skip_accumulator =
                    call.args.len() >= 2 && call.args.first().is_some_and(is_accumulator);
                if skip_accumulator {
                    call.args.get_mut(1)
                } else if let Some(first) = call.args.first_mut() {
                    Some(first)
                } else {
                    call.target.as_deref_mut().filter(|t| !is_namespace(t))
                }
            }
            Expr::Select(select) => Some(&mut select.operand),
            Expr::List(list) => list.elements.first_mut(),
            Expr::Map(map) => map.entries.first_mut().map(|entry| match &mut entry.expr {
                EntryExpr::MapEntry(entry) => &mut entry.key,
                EntryExpr::StructField(field) => &mut field.value,
            }),
            Expr::Struct(structure) => structure.entries.first_mut().map(|entry| match &mut entry
                .expr
            {
                EntryExpr::MapEntry(entry) => &mut entry.key,
                EntryExpr::StructField(field) => &mut field.value,
            }),
            // The crate evaluates the accumulator's start before the range.
            Expr::Comprehension(fold) => Some(&mut fold.accu_init),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => None,
        };
    match next {
        Some(next) => charge_first(next, cost),
        None => wrap(expr, CHARGED, vec![int(cost)]),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::testing::cel_libraries::cost;

    /// What kube-apiserver v0.37.2 counts (its MutatingAdmissionPolicy
    /// compiler's `EvalDetails.ActualCost`, read by the differential
    /// test's judge) for each expression over this Pod.
    #[test]
    fn counts_what_kube_apiserver_counts() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c0", "image": "nginx"}, {"name": "c1", "image": "busybox"}]}});
        let cases = [
            ("object.metadata.name", 3),
            ("has(object.metadata.labels)", 2),
            ("object.metadata.labels['app']", 4),
            ("object.?metadata.?labels.?app.orValue('none')", 4),
            // An optional read that finds nothing is free.
            ("object.?metadata.?annotations.?x.orValue('none')", 2),
            ("object.spec.containers[1].name", 5),
            ("[object.metadata.name][0]", 15),
            ("{'a': object.metadata.name}.a", 35),
            ("dyn(object).metadata.name", 5),
            ("object.metadata.name == 'web-1'", 4),
            ("object.metadata.name + '-suffix-that-is-long-enough'", 7),
            ("object.metadata.name.startsWith('web')", 4),
            ("object.metadata.name.matches('^[a-z]+-[0-9]$')", 7),
            // A constant list is a set: the test is free.
            ("object.metadata.name in ['web-1', 'db']", 3),
            (
                "object.metadata.name in object.spec.containers.map(c, c.name)",
                37,
            ),
            ("object.spec.containers.map(c, c.name)", 32),
            ("object.spec.containers.filter(c, c.name == 'c1')", 23),
            ("object.spec.containers.all(c, c.image != '')", 14),
            ("object.spec.containers.exists(c, c.name == 'c9')", 18),
            ("object.spec.containers.exists_one(c, c.name == 'c0')", 13),
            ("object.spec.containers.map(c, c.name).join(',')", 33),
            // A variable in a branch of `?:` is read by the conditional.
            ("true ? object.metadata.name : 'x'", 2),
            ("string(object.spec.containers.size()) + 'x'", 6),
            ("string(1)", 0),
            ("lists.range(10).map(x, x * 2).sum()", 172),
            ("lists.range(700).distinct().size()", 980_723),
            ("[[1], [2, 3]].flatten(2)", 15),
            ("sets.contains([1, 2, 3], [2])", 4),
            ("'%s-%d'.format(['a', 1])", 1),
            ("object.spec.containers.all(i, c, c.name.size() > i)", 20),
            ("{'a': 1, 'b': 2}.transformMap(k, v, v * 10)", 11),
            ("[1, 2].transformList(i, v, v + i)", 31),
            ("lists.range(71000).map(x, x).size()", 994_013),
            // Once an operand fails, kube-apiserver's cel-go still
            // evaluates the other of two, and charges the call over both.
            ("(object.missing == [1, 2].map(x, x).size()) || true", 31),
            ("(object.missing in [1, 2].map(x, x)) || true", 31),
            (
                "sets.contains(object.missing, [1, 2].map(x, x)) || true",
                32,
            ),
            // A method's receiver is evaluated first there.
            (
                "[1, 2].map(x, string(x)).join('').contains(object.missing) || true",
                33,
            ),
            (
                "object.metadata.labels[[1, 2].map(x, string(x)).join('')] == object.missing || true",
                37,
            ),
            // Over `dyn` operands cel-go's check leaves the overload open:
            // the call is made by name and charged 1.
            ("string([dyn(b'')].min())", 1),
            ("(object.missing in object.spec.containers) || true", 6),
            (
                "object.metadata.name + object.metadata.name + object.metadata.name",
                11,
            ),
            // A call of more is charged when its last operand is the one that
            // failed (each was evaluated), over the others' sizes.
            (
                "'abcdefghijklmnopqrstuvwxyz'.replace('b', object.missing) == 'x' || true",
                9,
            ),
            (
                "object.metadata.name.replace([1, 2].map(x, string(x)).join(''), object.missing) == 'x' || true",
                37,
            ),
            // A constant pattern is compiled with the program, and the call
            // it makes is not charged when its string failed (CEL judge,
            // seed 4700); beside an empty literal, `==` costs nothing.
            ("''.charAt(-1).matches('b+') || true", 1),
            ("matches(''.charAt(-1), 'b+') || true", 1),
            ("''.charAt(-1).findAll('b+', 2).size() == 0 || true", 3),
            ("''.charAt(-1).find('b+') == '' || true", 1),
            ("'' != ''.charAt(-1) || true", 1),
            ("object.metadata.name == ''", 3),
        ];
        for (source, expected) in cases {
            assert_eq!(cost(source, &pod), Ok(expected), "{source}");
        }
    }

    /// Each level of a chain is rewritten at most once (the rewrite copies
    /// its operands): a hundred `+` and thirty `replace` stay linear.
    #[test]
    fn deep_chains_are_metered_in_linear_size() {
        let pod = json!({"metadata": {"name": "web-1"}});
        let additions = format!("{} == 100", vec!["1"; 100].join(" + "));
        let replaces = format!(
            "object.metadata.name{}.size() > 0",
            ".replace('a', 'b')".repeat(30)
        );
        // The crate's parser and evaluator recurse: a thread with the stack
        // the module has.
        let run = move || {
            for source in [additions, replaces] {
                assert!(cost(&source, &pod).is_ok(), "{source}");
            }
        };
        let joined = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(run)
            .map(|thread| thread.join());
        assert!(matches!(joined, Ok(Ok(()))));
    }

    /// Past the nesting the rewrite copies, an operand that fails fails the
    /// whole expression, so that what is not counted never lets through an
    /// expression cel-go stops: kube-apiserver v0.37.2 gives `true` (cost 3)
    /// for the first, whose `||` absorbs the failure. With no failure, the
    /// count is cel-go's (11 there for the last).
    #[test]
    fn a_failure_past_the_copied_nesting_fails_whole() {
        let pod = json!({"metadata": {"name": "web-1"}});
        let chain = |receiver: &str| format!("{receiver}{}", ".replace('a', 'b')".repeat(6));
        let failed = cost(
            &format!("{}.size() == 0 || true", chain("''.charAt(-1)")),
            &pod,
        );
        assert!(
            failed
                .as_ref()
                .is_err_and(|why| why.contains("the expression fails whole")),
            "{failed:?}"
        );
        let shallow = format!(
            "''.charAt(-1){}.size() == 0 || true",
            ".replace('a', 'b')".repeat(3)
        );
        assert!(cost(&shallow, &pod).is_ok(), "{shallow}");
        let evaluated = format!("{}.size() > 0", chain("object.metadata.name"));
        assert_eq!(cost(&evaluated, &pod), Ok(11), "{evaluated}");
    }

    #[test]
    fn an_expression_past_the_limit_fails_whole() {
        let pod = json!({"metadata": {"name": "web-1"}});
        for source in [
            "lists.range(71500).map(x, x).size()",
            // cel-go cancels the evaluation: `||` does not absorb it.
            "lists.range(71500).map(x, x).size() > 0 || true",
            "[[1], [2]].flatten(600000).size()",
            "lists.range(710).distinct().size()",
            // The right operand is evaluated though the left failed.
            "(object.missing == lists.range(80000).map(x, x).size()) || true",
        ] {
            let outcome = cost(source, &pod);
            assert!(
                outcome
                    .as_ref()
                    .is_err_and(|why| why.contains("actual cost limit exceeded")),
                "{source}: {outcome:?}"
            );
        }
    }

    /// cel-go evaluates an `orValue` or `or` alternative only when the
    /// receiver is empty (kube-apiserver v0.37.2 gives these values).
    #[test]
    fn an_alternative_runs_only_when_the_receiver_is_empty() {
        use ::cel::Value;

        use crate::testing::cel_libraries::eval;
        let text = |s: &str| Value::String(s.to_string().into());
        for (source, expected) in [
            // Left unmetered.
            ("optional.of('a').orValue(string(1 / 0))", text("a")),
            (
                "optional.of(1).or(optional.of(1 / 0)).value()",
                Value::Int(1),
            ),
            (
                "optional.none().orValue(string(1 / 0)) == 'x' || true",
                Value::Bool(true),
            ),
            // Metered.
            (
                "optional.of('a').orValue([1, 2].map(x, string(x / 0)).join(''))",
                text("a"),
            ),
            (
                "optional.none().orValue([1, 2].map(x, string(x)).join(''))",
                text("12"),
            ),
        ] {
            assert_eq!(eval(source), Ok(expected), "{source}");
        }
        let pod = json!({"metadata": {"name": "web-1"}});
        for (source, expected) in [
            (
                "object.?metadata.?name.orValue([1, 2].map(x, string(x / 0)).join('')).size()",
                4,
            ),
            (
                "optional.none().or(optional.of([1, 2].map(x, x).size())).value()",
                31,
            ),
        ] {
            assert_eq!(cost(source, &pod), Ok(expected), "{source}");
        }
    }

    #[test]
    fn an_expression_that_cannot_come_near_the_limit_is_left_as_it_is() {
        for (source, metered) in [
            ("object.metadata.name == 'web-1' && has(object.spec)", false),
            (
                "Object{metadata: Object.metadata{labels: {'a': object.metadata.name}}}",
                false,
            ),
            ("object.spec.containers.map(c, c.name)", true),
            ("object.metadata.name == object.spec.nodeName", true),
            ("object.metadata.name.matches('^a')", true),
        ] {
            let parsed = crate::cel::program::compile(source, "e").map(|c| c.expression);
            let mut rewritten = parsed.clone();
            if let Ok(expression) = rewritten.as_mut() {
                super::meter(
                    expression,
                    false,
                    super::Interpreter::Kubernetes,
                    &std::collections::BTreeSet::new(),
                );
            }
            assert_eq!(parsed != rewritten, metered, "{source}");
        }
    }
}
