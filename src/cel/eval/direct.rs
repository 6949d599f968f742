//! The CEL this policy's job is mostly written in, evaluated straight over
//! the JSON it reads: field selection (plain and optional), indexing,
//! `orValue`/`hasValue`/`value`, `has()`, string and bool comparisons,
//! `&&`, `||`, `!`, `?:`, literals, `Object{...}` and `JSONPatch{...}`
//! construction, map and list literals, `variables.NAME` and Kyverno's
//! `resource.Get`/`resource.List`.
//!
//! Why it exists: policy-server starts every evaluation afresh, and with the
//! `cel` crate each one first builds the crate's whole standard library
//! (~200 overloads) and converts every JSON value it reads into the crate's
//! values. Measured on the load test's MutatingPolicy row, that was most of
//! the policy's own time, and it kept the row at 0.57x the floor policy
//! (docs/performance.md). The crate offers no smaller environment.
//!
//! It only ever answers with a value: anything it does not cover, and every
//! error (a missing field, a failed read, a value of another type), is
//! [`Unsupported`], and the crate evaluates the expression instead, giving
//! the same error it always gave. So it can only differ from the crate on
//! an expression both evaluate successfully, which the tests compare.

use std::borrow::Cow;

use ::cel::IdedExpr;
use ::cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};
use serde_json::{Map, Value};

use crate::cel::libraries::host_reads::ResourceCall;

/// A value as the direct evaluator holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Direct<'v> {
    Json(Cow<'v, Value>),
    /// A CEL optional (`a.?b`, `m[?k]`).
    Optional(Option<Cow<'v, Value>>),
}

impl Direct<'_> {
    pub fn into_owned(self) -> Direct<'static> {
        match self {
            Direct::Json(v) => Direct::Json(Cow::Owned(v.into_owned())),
            Direct::Optional(v) => Direct::Optional(v.map(|v| Cow::Owned(v.into_owned()))),
        }
    }
}

/// Not evaluated here: the `cel` crate evaluates the expression instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsupported;

type Outcome<'v> = Result<Direct<'v>, Unsupported>;

/// What an expression's names stand for, beside `object`.
pub trait Names {
    /// `oldObject`, `params`, `namespaceObject`: `None` for any other name,
    /// or one that cannot be given.
    fn identifier(&mut self, name: &str) -> Option<Value>;
    /// `variables.NAME`, evaluated (once) the same way.
    fn variable(&mut self, name: &str) -> Option<Direct<'static>>;
    /// The host's answer to a `resource.Get`/`resource.List`; `None` when
    /// the read failed.
    fn read(&mut self, call: ResourceCall) -> Option<Value>;
    /// Struct types the policy's mutations construct.
    fn is_struct(&self, name: &str) -> bool;
}

/// Evaluates `expr` with `object` as `object`.
pub fn evaluate<'v>(expr: &IdedExpr, object: &'v Value, names: &mut dyn Names) -> Outcome<'v> {
    Evaluator { object, names }.eval(expr)
}

struct Evaluator<'v, 'n> {
    object: &'v Value,
    names: &'n mut dyn Names,
}

fn json(value: Value) -> Direct<'static> {
    Direct::Json(Cow::Owned(value))
}

fn boolean(b: bool) -> Direct<'static> {
    json(Value::Bool(b))
}

/// A field of a JSON object, keeping a borrow a borrow.
fn field<'v>(value: Cow<'v, Value>, name: &str) -> Option<Cow<'v, Value>> {
    match value {
        Cow::Borrowed(Value::Object(map)) => map.get(name).map(Cow::Borrowed),
        Cow::Owned(Value::Object(mut map)) => map.remove(name).map(Cow::Owned),
        _ => None,
    }
}

/// `value[index]` where both are JSON: a map by a string key, a list by a
/// non-negative integer in range. `Err` for any other shape (the crate
/// decides those).
fn index<'v>(value: Cow<'v, Value>, index: &Value) -> Result<Option<Cow<'v, Value>>, Unsupported> {
    match (&*value, index) {
        (Value::Object(_), Value::String(key)) => Ok(field(value, key)),
        (Value::Array(items), Value::Number(n)) => {
            let Some(i) = n.as_u64().and_then(|i| usize::try_from(i).ok()) else {
                return Err(Unsupported);
            };
            if i >= items.len() {
                return Err(Unsupported);
            }
            Ok(match value {
                Cow::Borrowed(Value::Array(items)) => items.get(i).map(Cow::Borrowed),
                Cow::Owned(Value::Array(mut items)) => Some(Cow::Owned(items.swap_remove(i))),
                _ => None,
            })
        }
        _ => Err(Unsupported),
    }
}

fn literal(value: &LiteralValue) -> Result<Value, Unsupported> {
    Ok(match value {
        LiteralValue::Boolean(b) => Value::Bool(*b.inner()),
        LiteralValue::Int(i) => Value::from(*i.inner()),
        LiteralValue::UInt(u) => Value::from(*u.inner()),
        LiteralValue::Double(d) => {
            serde_json::Number::from_f64(*d.inner()).map_or(Err(Unsupported), |n| Ok(n.into()))?
        }
        LiteralValue::String(s) => Value::String(s.inner().to_string()),
        LiteralValue::Null => Value::Null,
        LiteralValue::Bytes(_) => return Err(Unsupported),
    })
}

// Each arm below is a function of its own, never inlined: the evaluator
// recurses once per level of the expression, and a `resource.Get` is read at
// the bottom of that recursion. Inlined, every level's frame held the locals
// of every arm (576 bytes for a call), and the row's deepest read reached a
// third 4 KiB page of stack: a fresh instance pays a page fault for each
// (docs/performance.md, "Stack depth and small maps").
impl<'v> Evaluator<'v, '_> {
    fn eval(&mut self, expr: &IdedExpr) -> Outcome<'v> {
        match &expr.expr {
            Expr::Literal(value) => Ok(json(literal(value)?)),
            Expr::Ident(name) => match name.as_str() {
                "object" => Ok(Direct::Json(Cow::Borrowed(self.object))),
                "oldObject" | "params" | "namespaceObject" | "exceptions" => {
                    self.names.identifier(name).map(json).ok_or(Unsupported)
                }
                _ => Err(Unsupported),
            },
            Expr::Select(select) => self.select(select),
            Expr::Call(call) => self.call(call),
            Expr::Struct(structure) => self.structure(structure),
            Expr::Map(map) => self.map(map),
            Expr::List(list) => self.list(list),
            Expr::Comprehension(_) | Expr::Unspecified => Err(Unsupported),
        }
    }

    #[inline(never)]
    fn select(&mut self, select: &::cel::common::ast::SelectExpr) -> Outcome<'v> {
        if let Expr::Ident(root) = &select.operand.expr
            && root == "variables"
        {
            return match select.test {
                false => self.names.variable(&select.field).ok_or(Unsupported),
                true => Err(Unsupported),
            };
        }
        let operand = self.eval(&select.operand)?;
        match (operand, select.test) {
            (Direct::Json(value), false) => field(value, &select.field)
                .map(Direct::Json)
                .ok_or(Unsupported),
            (Direct::Json(value), true) => match &*value {
                Value::Object(map) => Ok(boolean(map.contains_key(&select.field))),
                _ => Err(Unsupported),
            },
            // A plain select on an optional stays optional.
            (Direct::Optional(None), false) => Ok(Direct::Optional(None)),
            (Direct::Optional(Some(value)), false) if value.is_object() => {
                Ok(Direct::Optional(field(value, &select.field)))
            }
            _ => Err(Unsupported),
        }
    }

    #[inline(never)]
    fn structure(&mut self, structure: &::cel::common::ast::StructExpr) -> Outcome<'v> {
        if !self.names.is_struct(&structure.type_name) {
            return Err(Unsupported);
        }
        let mut fields = Map::new();
        for entry in &structure.entries {
            let EntryExpr::StructField(f) = &entry.expr else {
                return Err(Unsupported);
            };
            if fields.contains_key(&f.field) {
                return Err(Unsupported);
            }
            match (self.eval(&f.value)?, f.optional) {
                (Direct::Json(value), false) => {
                    fields.insert(f.field.clone(), value.into_owned());
                }
                (Direct::Optional(value), true) => {
                    if let Some(value) = value {
                        fields.insert(f.field.clone(), value.into_owned());
                    }
                }
                _ => return Err(Unsupported),
            }
        }
        Ok(json(Value::Object(fields)))
    }

    #[inline(never)]
    fn map(&mut self, map: &::cel::common::ast::MapExpr) -> Outcome<'v> {
        let mut entries = Map::new();
        for entry in &map.entries {
            let EntryExpr::MapEntry(e) = &entry.expr else {
                return Err(Unsupported);
            };
            if e.optional {
                return Err(Unsupported);
            }
            let Direct::Json(key) = self.eval(&e.key)? else {
                return Err(Unsupported);
            };
            let Value::String(key) = key.into_owned() else {
                return Err(Unsupported);
            };
            let Direct::Json(value) = self.eval(&e.value)? else {
                return Err(Unsupported);
            };
            // A repeated key keeps its last value, as in cel-go.
            entries.insert(key, value.into_owned());
        }
        Ok(json(Value::Object(entries)))
    }

    #[inline(never)]
    fn list(&mut self, list: &::cel::common::ast::ListExpr) -> Outcome<'v> {
        if !list.optional_indices.is_empty() {
            return Err(Unsupported);
        }
        let mut items = Vec::with_capacity(list.elements.len());
        for element in &list.elements {
            let Direct::Json(value) = self.eval(element)? else {
                return Err(Unsupported);
            };
            items.push(value.into_owned());
        }
        Ok(json(Value::Array(items)))
    }

    fn bool_of(&mut self, expr: &IdedExpr) -> Result<bool, Unsupported> {
        match self.eval(expr)? {
            Direct::Json(value) => value.as_bool().ok_or(Unsupported),
            Direct::Optional(_) => Err(Unsupported),
        }
    }

    #[inline(never)]
    fn call(&mut self, call: &::cel::common::ast::CallExpr) -> Outcome<'v> {
        let args = &call.args;
        match (call.func_name.as_str(), &call.target, args.as_slice()) {
            (operators::LOGICAL_AND, None, [left, right]) => {
                // `false && x` is false whatever x is, as in the crate.
                Ok(boolean(self.bool_of(left)? && self.bool_of(right)?))
            }
            (operators::LOGICAL_OR, None, [left, right]) => {
                Ok(boolean(self.bool_of(left)? || self.bool_of(right)?))
            }
            (operators::LOGICAL_NOT, None, [operand]) => Ok(boolean(!self.bool_of(operand)?)),
            (operators::CONDITIONAL, None, [condition, then, otherwise]) => {
                if self.bool_of(condition)? {
                    self.eval(then)
                } else {
                    self.eval(otherwise)
                }
            }
            (operators::EQUALS | operators::NOT_EQUALS, None, [left, right]) => {
                self.equality(call.func_name == operators::EQUALS, left, right)
            }
            (operators::ADD, None, [left, right]) => self.concatenation(left, right),
            (operators::INDEX | operators::OPT_INDEX, None, [container, key]) => {
                self.index(call.func_name == operators::OPT_INDEX, container, key)
            }
            (operators::OPT_SELECT, None, [operand, name]) => self.optional_select(operand, name),
            ("orValue", Some(target), [fallback]) => self.or_value(target, fallback),
            ("hasValue", Some(target), []) => match self.eval(target)? {
                Direct::Optional(value) => Ok(boolean(value.is_some())),
                Direct::Json(_) => Err(Unsupported),
            },
            ("value", Some(target), []) => match self.eval(target)? {
                Direct::Optional(Some(value)) => Ok(Direct::Json(value)),
                _ => Err(Unsupported),
            },
            ("Get" | "get" | "List" | "list", Some(target), _) => {
                if !matches!(&target.expr, Expr::Ident(name) if name == "resource") {
                    return Err(Unsupported);
                }
                self.resource(call)
            }
            _ => Err(Unsupported),
        }
    }

    #[inline(never)]
    fn equality(&mut self, equals: bool, left: &IdedExpr, right: &IdedExpr) -> Outcome<'v> {
        let (Direct::Json(left), Direct::Json(right)) = (self.eval(left)?, self.eval(right)?)
        else {
            return Err(Unsupported);
        };
        // Strings, bools and null only: numbers compare across
        // int, uint and double in CEL, which JSON does not tell apart.
        let same = match (&*left, &*right) {
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Null, Value::Null) => true,
            _ => return Err(Unsupported),
        };
        Ok(boolean(same == equals))
    }

    #[inline(never)]
    fn concatenation(&mut self, left: &IdedExpr, right: &IdedExpr) -> Outcome<'v> {
        let (Direct::Json(left), Direct::Json(right)) = (self.eval(left)?, self.eval(right)?)
        else {
            return Err(Unsupported);
        };
        match (&*left, &*right) {
            (Value::String(a), Value::String(b)) => Ok(json(Value::String(format!("{a}{b}")))),
            _ => Err(Unsupported),
        }
    }

    #[inline(never)]
    fn index(&mut self, optional: bool, container: &IdedExpr, key: &IdedExpr) -> Outcome<'v> {
        let container = self.eval(container)?;
        let Direct::Json(key) = self.eval(key)? else {
            return Err(Unsupported);
        };
        match (container, optional) {
            (Direct::Json(value), false) => {
                index(value, &key)?.map(Direct::Json).ok_or(Unsupported)
            }
            (Direct::Json(value), true) | (Direct::Optional(Some(value)), _) => {
                Ok(Direct::Optional(index(value, &key)?))
            }
            (Direct::Optional(None), _) => Ok(Direct::Optional(None)),
        }
    }

    #[inline(never)]
    fn optional_select(&mut self, operand: &IdedExpr, name: &IdedExpr) -> Outcome<'v> {
        let Expr::Literal(LiteralValue::String(name)) = &name.expr else {
            return Err(Unsupported);
        };
        match self.eval(operand)? {
            Direct::Json(value) | Direct::Optional(Some(value)) if value.is_object() => {
                Ok(Direct::Optional(field(value, name.inner())))
            }
            Direct::Optional(None) => Ok(Direct::Optional(None)),
            _ => Err(Unsupported),
        }
    }

    #[inline(never)]
    fn or_value(&mut self, target: &IdedExpr, fallback: &IdedExpr) -> Outcome<'v> {
        let target = self.eval(target)?;
        // The crate evaluates the argument either way; so does this.
        let fallback = self.eval(fallback)?;
        match (target, fallback) {
            (Direct::Optional(Some(value)), _) => Ok(Direct::Json(value)),
            (Direct::Optional(None), fallback @ Direct::Json(_)) => Ok(fallback),
            _ => Err(Unsupported),
        }
    }

    /// `resource.Get(...)`/`List(...)`, read through the host.
    #[inline(never)]
    fn resource(&mut self, call: &::cel::common::ast::CallExpr) -> Outcome<'v> {
        let with_name = matches!(call.func_name.as_str(), "Get" | "get");
        if call.args.len() != if with_name { 4 } else { 3 } {
            return Err(Unsupported);
        }
        let mut strings = Vec::with_capacity(4);
        for arg in &call.args {
            match self.eval(arg)? {
                Direct::Json(value) => match value.into_owned() {
                    Value::String(s) => strings.push(s),
                    _ => return Err(Unsupported),
                },
                Direct::Optional(_) => return Err(Unsupported),
            }
        }
        let mut strings = strings.into_iter();
        let call = ResourceCall {
            api_version: strings.next().ok_or(Unsupported)?,
            resource: strings.next().ok_or(Unsupported)?,
            namespace: strings.next().ok_or(Unsupported)?,
            name: strings.next(),
        };
        self.names.read(call).map(json).ok_or(Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use ::cel::Context;
    use ::cel::common::value::Val;
    use serde_json::json;

    use super::*;
    use crate::cel::eval::environment::runtime_env;
    use crate::cel::libraries::values::{from_json, to_json};
    use crate::cel::program::compile;

    struct Fixed(BTreeSet<String>);

    impl Names for Fixed {
        fn identifier(&mut self, name: &str) -> Option<Value> {
            (name == "params").then(|| json!({"zone": "z1"}))
        }
        fn variable(&mut self, name: &str) -> Option<Direct<'static>> {
            (name == "zone").then(|| json(json!("us-east-2a")))
        }
        fn read(&mut self, _: ResourceCall) -> Option<Value> {
            None
        }
        fn is_struct(&self, name: &str) -> bool {
            self.0.contains(name)
        }
    }

    fn object() -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1", "dotted.key/x": "2"}},
            "spec": {"nodeName": "n", "containers": [{"name": "c"}], "n": 3, "flag": true,
                "nothing": null}})
    }

    /// The direct evaluator's answer and the crate's, for one expression.
    fn both(source: &str) -> (Option<Value>, Result<Value, String>) {
        let compiled = compile(source, "e").unwrap();
        let names: BTreeSet<String> = compiled.names.structs.clone();
        let object = object();
        let direct = match evaluate(&compiled.expression, &object, &mut Fixed(names.clone())) {
            Ok(Direct::Json(value)) => Some(value.into_owned()),
            _ => None,
        };
        let env = runtime_env(&names, compiled.names.libraries);
        let mut context = Context::with_env(Arc::new(env));
        let bind = |value: Value| Box::<dyn Val>::try_from(from_json(&value)).unwrap();
        context.add_variable_as_val("object", bind(object.clone()));
        context.add_variable_as_val("params", bind(json!({"zone": "z1"})));
        context.add_variable_as_val("variables", bind(json!({"zone": "us-east-2a"})));
        let by_crate = context
            .resolve(&compiled.expression)
            .map_err(|e| e.to_string())
            .and_then(|v| to_json(&v));
        (direct, by_crate)
    }

    #[test]
    fn answers_as_the_crate_does() {
        let direct = [
            "object.metadata.name",
            "object.metadata.?labels[?'a'].orValue('none')",
            "object.metadata.?labels[?'zzz'].orValue('none')",
            "object.metadata.?annotations[?'a'].orValue('none')",
            "object.?missing.?deeper.orValue('x')",
            "object.?metadata.labels.orValue({})",
            "object.metadata.labels['dotted.key/x']",
            "has(object.metadata.labels)",
            "has(object.metadata.annotations)",
            "object.metadata.name == 'p'",
            "object.metadata.name != 'p'",
            "object.spec.flag && !false",
            "false && object.spec.missing == 'x'",
            "true || object.spec.missing == 'x'",
            "object.spec.flag ? 'y' : 'n'",
            "'a-' + object.metadata.name",
            "object.spec.containers[0].name",
            "{'k': object.metadata.name}",
            "[object.metadata.name, 'x', 1, 2.5, null, true]",
            "object.spec.nothing == null",
            "object.metadata.?labels.hasValue()",
            "object.?metadata.?labels[?'a'].value()",
            "params.zone",
            "variables.zone",
            "Object{metadata: Object.metadata{labels: {'a': 'b'}}}",
            "Object{spec: Object.spec{?nodeName: object.spec.?nodeName, ?x: object.spec.?x}}",
            "JSONPatch{op: 'add', path: '/a', value: variables.zone}",
            "{'a': 'x', 'a': 'y'}",
        ];
        for source in direct {
            let (direct, by_crate) = both(source);
            assert!(direct.is_some(), "{source}: not evaluated directly");
            assert_eq!(
                direct.as_ref(),
                by_crate.as_ref().ok(),
                "{source}: {by_crate:?}"
            );
        }
        // Left to the crate: numbers, functions, macros, and every error.
        let left = [
            "object.spec.n == 3",
            "size(object.metadata.labels)",
            "object.spec.containers.map(c, c.name)",
            "object.metadata.?labels[?1].orValue('x')",
            "object.metadata.missing",
            "object.spec.nodeName.x",
            "object.spec.containers[5]",
            "object.metadata.?labels[?'a']",
            "Other{a: 1}",
        ];
        for source in left {
            let (direct, _) = both(source);
            assert_eq!(direct, None, "{source}");
        }
    }
}
