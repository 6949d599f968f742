//! cel-go's two-variable comprehensions (`ext.TwoVarComprehensions`, which
//! Kubernetes enables): `all`, `exists`, `existsOne` (and `exists_one`) with
//! an index or key and a value, and `transformList`, `transformMap`,
//! `transformMapEntry` with an optional filter; and `cel.bind` (cel-go's
//! bindings extension, also enabled by Kubernetes), which they are built on.
//!
//! The `cel` crate's Pratt parser takes no macros beyond the standard ones
//! (its `Macro` extension point reaches only the ANTLR parser, which costs
//! 1.4 MB), and its interpreter ignores a comprehension's second variable.
//! So the three- and four-argument calls the parser leaves as they are
//! written are rewritten here, after parsing, into one-variable
//! comprehensions over `@entries(range)`: the `[index, value]` (list) or
//! `[key, value]` (map) pairs, each bound to the two names with `cel.bind`'s
//! expansion around each argument the user wrote. The loop steps keep the
//! shapes cel-go's macros give them, so the crate's handling of errors in
//! `all`/`exists` (an error a later `false`/`true` overrides) and its
//! fast path for building lists apply unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use ::cel::common::ast::operators;
use ::cel::common::ast::{CallExpr, Expr, IdedExpr, MapExpr};
use ::cel::common::value::CowVal;
use ::cel::objects::{Key, Map};
use ::cel::{Env, ExecutionError, Value};

use crate::cel::libraries::{self, dyn_type};
use crate::cel::syntax::macro_builder::{Builder, ENTRY};

const ENTRIES: &str = "@entries";
const MAP_INSERT: &str = "@mapInsert";
/// What `optMap` and `optFlatMap` bind their target to (no CEL name starts
/// with `@`).
const OPTIONAL: &str = "@optional";

/// The functions the rewritten comprehensions call.
pub fn register(env: &mut Env) {
    libraries::global(env, ENTRIES, "@entries_dyn", vec![dyn_type()], entries);
    libraries::global(
        env,
        MAP_INSERT,
        "@mapInsert_map_map",
        vec![dyn_type(), dyn_type()],
        map_insert,
    );
    libraries::global(
        env,
        MAP_INSERT,
        "@mapInsert_map_key_value",
        vec![dyn_type(), dyn_type(), dyn_type()],
        map_insert,
    );
}

/// Whether an expression's words may hold a two-variable comprehension.
pub fn named(word: &str) -> bool {
    matches!(
        word,
        "all"
            | "bind"
            | "exists"
            | "existsOne"
            | "exists_one"
            | "transformList"
            | "transformMap"
            | "transformMapEntry"
            | "optMap"
            | "optFlatMap"
    )
}

/// Rewrites every two-variable comprehension in `expr`; `Err` names a call
/// whose variables are not two distinct simple names.
pub fn expand(expr: &mut IdedExpr) -> Result<(), String> {
    let mut next_id = max_id(expr) + 1;
    expand_in(expr, &mut next_id)
}

/// The largest node id in `expr`: a rewrite's new nodes are numbered after it.
pub(in crate::cel) fn max_id(expr: &IdedExpr) -> u64 {
    let mut max = expr.id;
    crate::cel::syntax::ast::children(expr, &mut |child| max = max.max(max_id(child)));
    max
}

fn expand_in(expr: &mut IdedExpr, next_id: &mut u64) -> Result<(), String> {
    let mut inner = Ok(());
    crate::cel::syntax::ast::children_mut(expr, &mut |child| {
        if inner.is_ok() {
            inner = expand_in(child, next_id);
        }
    });
    inner?;
    if let Expr::Call(call) = &mut expr.expr
        && let Some(expanded) = match crate::cel::syntax::extension_macros::named(&call.func_name) {
            true => crate::cel::syntax::extension_macros::rewrite(call, &mut Builder { next_id })?,
            false => rewrite(call, next_id)?,
        }
    {
        expr.expr = expanded;
    }
    Ok(())
}

/// The comprehension a two-variable call stands for, or `None` for any
/// other call.
fn rewrite(call: &mut CallExpr, next_id: &mut u64) -> Result<Option<Expr>, String> {
    let function = call.func_name.as_str();
    if function == "bind" {
        return cel_bind(call, next_id);
    }
    if function == "optMap" || function == "optFlatMap" {
        return opt_map(call, next_id);
    }
    let arity_ok = match function {
        "all" | "exists" | "existsOne" | "exists_one" => call.args.len() == 3,
        "transformList" | "transformMap" | "transformMapEntry" => {
            matches!(call.args.len(), 3 | 4)
        }
        _ => false,
    };
    if !arity_ok || call.target.is_none() {
        return Ok(None);
    }
    let names = iteration_names(function, &call.args)?;
    let Some(target) = call.target.take() else {
        return Ok(None);
    };
    let function = function.to_string();
    let mut args = std::mem::take(&mut call.args).into_iter().skip(2);
    let mut b = Builder { next_id };
    let (Some(first), second) = (args.next(), args.next()) else {
        return Ok(None);
    };
    let (filter, last) = match second {
        Some(transform) => (Some(first), transform),
        None => (None, first),
    };
    let last = b.bind_both(&names, last);
    let filter = filter.map(|f| b.bind_both(&names, f));
    let guarded = |b: &mut Builder, step: IdedExpr, filter: Option<IdedExpr>| match filter {
        Some(filter) => {
            let accu = b.accu();
            b.call(operators::CONDITIONAL, vec![filter, step, accu])
        }
        None => step,
    };
    let (init, cond, step, result) = match function.as_str() {
        "all" | "exists" => {
            let all = function == "all";
            let accu = b.accu();
            let accu = if all {
                accu
            } else {
                b.call(operators::LOGICAL_NOT, vec![accu])
            };
            let cond = b.call(operators::NOT_STRICTLY_FALSE, vec![accu]);
            let accu = b.accu();
            let op = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let step = b.call(op, vec![accu, last]);
            (b.bool(all), cond, step, b.accu())
        }
        "existsOne" | "exists_one" => {
            let accu = b.accu();
            let one = b.int(1);
            let plus = b.call(operators::ADD, vec![accu, one]);
            let accu = b.accu();
            let step = b.call(operators::CONDITIONAL, vec![last, plus, accu]);
            let accu = b.accu();
            let one = b.int(1);
            let result = b.call(operators::EQUALS, vec![accu, one]);
            (b.int(0), b.bool(true), step, result)
        }
        "transformList" => {
            let accu = b.accu();
            let item = b.list(vec![last]);
            let step = b.call(operators::ADD, vec![accu, item]);
            let step = guarded(&mut b, step, filter);
            (b.list(Vec::new()), b.bool(true), step, b.accu())
        }
        _ => {
            let accu = b.accu();
            let insert = if function == "transformMap" {
                // The key stays the entry's own.
                let entry = b.ident(ENTRY);
                let zero = b.int(0);
                let key = b.call(operators::INDEX, vec![entry, zero]);
                b.call(MAP_INSERT, vec![accu, key, last])
            } else {
                b.call(MAP_INSERT, vec![accu, last])
            };
            let step = guarded(&mut b, insert, filter);
            let init = b.node(Expr::Map(MapExpr {
                entries: Vec::new(),
            }));
            (init, b.bool(true), step, b.accu())
        }
    };
    let range = b.call(ENTRIES, vec![*target]);
    Ok(Some(b.fold(range, ENTRY, [init, cond, step, result])))
}

/// Kubernetes' `cel.bind(name, value, body)` (cel-go's bindings extension).
fn cel_bind(call: &mut CallExpr, next_id: &mut u64) -> Result<Option<Expr>, String> {
    let on_cel =
        matches!(call.target.as_deref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel");
    let name = match call.args.first().map(|a| &a.expr) {
        Some(Expr::Ident(name)) if on_cel && call.args.len() == 3 => name.clone(),
        _ if on_cel => return Err("cel.bind: the first argument must be a simple name".into()),
        _ => return Ok(None),
    };
    let mut args = std::mem::take(&mut call.args).into_iter().skip(1);
    let (Some(value), Some(body)) = (args.next(), args.next()) else {
        return Ok(None);
    };
    Ok(Some(Builder { next_id }.bind(&name, value, body).expr))
}

/// cel-go's optional library macros: `o.optMap(x, e)` is `optional.of(e)`
/// with `x` bound to `o`'s value, `o.optFlatMap(x, e)` is `e` (itself an
/// optional) so bound; both are `optional.none()` when `o` has no value,
/// and `o` is evaluated once.
fn opt_map(call: &mut CallExpr, next_id: &mut u64) -> Result<Option<Expr>, String> {
    let function = call.func_name.clone();
    let name = match call.args.first().map(|a| &a.expr) {
        Some(Expr::Ident(name)) if call.args.len() == 2 => name.clone(),
        _ => {
            return Err(format!(
                "{function}: the first argument must be a simple name"
            ));
        }
    };
    let (Some(target), Some(body)) = (call.target.take(), call.args.pop()) else {
        return Ok(None);
    };
    let mut b = Builder { next_id };
    let value = {
        let optional = b.ident(OPTIONAL);
        b.member(optional, "value", Vec::new())
    };
    let mapped = b.bind(&name, value, body);
    let present = if function == "optMap" {
        let namespace = b.ident("optional");
        b.member(namespace, "of", vec![mapped])
    } else {
        mapped
    };
    let has_value = {
        let optional = b.ident(OPTIONAL);
        b.member(optional, "hasValue", Vec::new())
    };
    let none = {
        let namespace = b.ident("optional");
        b.member(namespace, "none", Vec::new())
    };
    let choice = b.call(operators::CONDITIONAL, vec![has_value, present, none]);
    Ok(Some(b.bind(OPTIONAL, *target, choice).expr))
}

/// The two variable names, checked as cel-go checks them.
fn iteration_names(function: &str, args: &[IdedExpr]) -> Result<(String, String), String> {
    let name = |arg: Option<&IdedExpr>| match arg.map(|a| &a.expr) {
        Some(Expr::Ident(name)) if name != "__result__" => Ok(name.clone()),
        Some(Expr::Ident(_)) => Err(format!(
            "{function}: iteration variable overwrites accumulator variable"
        )),
        _ => Err(format!("{function}: argument must be a simple name")),
    };
    let (first, second) = (name(args.first())?, name(args.get(1))?);
    if first == second {
        return Err(format!("{function}: duplicate variable name: {first}"));
    }
    Ok((first, second))
}

/// `@entries(x)`: a list's `[index, value]` pairs, a map's `[key, value]`.
fn entries<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let range = args
        .first()
        .ok_or_else(|| ExecutionError::invalid_argument_count(1, 0))?;
    let pairs: Vec<Value> = match Value::try_from(range.as_ref())? {
        Value::List(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| pair(Value::Int(i as i64), v.clone()))
            .collect(),
        Value::Map(map) => map
            .map
            .iter()
            .map(|(k, v)| pair(Value::from(k), v.clone()))
            .collect(),
        other => {
            return Err(ExecutionError::function_error(
                "comprehension",
                format!("{} cannot be range of a comprehension", other.type_of()),
            ));
        }
    };
    Box::<dyn ::cel::common::value::Val>::try_from(Value::List(Arc::new(pairs))).map(CowVal::Owned)
}

fn pair(first: Value, second: Value) -> Value {
    Value::List(Arc::new(vec![first, second]))
}

/// `@mapInsert(map, key, value)` and `@mapInsert(map, entries)`: the map with
/// the entries added; a key already there (numbers compared across int and
/// uint, as CEL compares keys) is an error.
fn map_insert<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let fail = |message: String| ExecutionError::function_error("transformMap", message);
    let mut values = args
        .iter()
        .map(|arg| Value::try_from(arg.as_ref()))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter();
    let Some(Value::Map(target)) = values.next() else {
        return Err(fail("the accumulator is not a map".to_string()));
    };
    let added: Vec<(Value, Value)> = match (values.next(), values.next()) {
        (Some(Value::Map(update)), None) => update
            .map
            .iter()
            .map(|(k, v)| (Value::from(k), v.clone()))
            .collect(),
        (Some(key), Some(value)) => vec![(key, value)],
        (Some(other), None) => {
            return Err(fail(format!(
                "the entry must be a map, not {}",
                other.type_of()
            )));
        }
        _ => return Err(ExecutionError::invalid_argument_count(3, args.len())),
    };
    let mut map: HashMap<Key, Value> = Arc::unwrap_or_clone(target.map);
    for (key, value) in added {
        let key: Key = key
            .try_into()
            .map_err(|k: Value| fail(format!("{} is not a valid map key", k.type_of())))?;
        let twin = match &key {
            Key::Int(i) => u64::try_from(*i).ok().map(Key::Uint),
            Key::Uint(u) => i64::try_from(*u).ok().map(Key::Int),
            _ => None,
        };
        if map.contains_key(&key) || twin.is_some_and(|t| map.contains_key(&t)) {
            return Err(fail(format!("insert failed: key {key} already exists")));
        }
        map.insert(key, value);
    }
    Box::<dyn ::cel::common::value::Val>::try_from(Value::Map(Map { map: Arc::new(map) }))
        .map(CowVal::Owned)
}
