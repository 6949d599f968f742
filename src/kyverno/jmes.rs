//! JMESPath with Kyverno's extra functions, over serde_json values.

use std::rc::Rc;

use base64::Engine;
use jmespath::functions::{ArgumentType as T, CustomFunction, Signature};
use jmespath::{Context, ErrorReason, JmespathError, Rcvar, Runtime, Variable};
use serde_json::Value;

use super::field_paths;
use crate::glob::wildcard;

/// Longest expression accepted, far beyond what real policies write (one of
/// Kyverno's own tests passes 1024).
pub const MAX_EXPRESSION_LEN: usize = 8192;
/// Deepest bracket nesting accepted: the parser and interpreter recurse, and
/// a trap in wasm must not be reachable from settings.
pub const MAX_EXPRESSION_NESTING: usize = 32;
/// Most operators (`.`, `|`, `[`, `||`, `&&`, `!`, comparisons) outside
/// literals: a chain of them parses into a tree as deep as it is long, so
/// this bounds the recursion where length alone does not.
pub const MAX_EXPRESSION_OPERATORS: usize = 256;

/// The Kyverno functions this policy provides beside JMESPath's own.
pub const KYVERNO_FUNCTIONS: &[&str] = &[
    "add",
    "base64_decode",
    "base64_encode",
    "compare",
    "divide",
    "equal_fold",
    "items",
    "label_match",
    "lookup",
    "modulo",
    "multiply",
    "object_from_lists",
    "parse_json",
    "parse_yaml",
    "pattern_match",
    "regex_match",
    "regex_replace_all",
    "regex_replace_all_literal",
    "replace",
    "replace_all",
    "round",
    "semver_compare",
    "split",
    "subtract",
    "sum",
    "time_add",
    "time_after",
    "time_before",
    "time_between",
    "time_diff",
    "time_parse",
    "time_since",
    "time_to_cron",
    "time_truncate",
    "time_utc",
    "to_lower",
    "to_upper",
    "trim",
    "trim_prefix",
    "truncate",
];

/// A Kyverno function's body.
pub(super) type Body =
    Box<dyn Fn(&[Rcvar], &mut Context<'_>) -> Result<Rcvar, JmespathError> + Sync + Send>;

/// The runtime for one instance, with only the functions `text` (the rules'
/// settings) may call: building the whole function table costs more than
/// evaluating a typical rule, and policy-server starts a fresh instance for
/// every request. Kept for the next evaluation while the settings stay the
/// same (a warm instance; tests and the fuzzer change them).
pub fn shared_runtime(text: &str) -> Rc<Runtime> {
    thread_local! {
        static RUNTIME: std::cell::RefCell<Option<(String, Rc<Runtime>)>> =
            const { std::cell::RefCell::new(None) };
    }
    RUNTIME.with_borrow_mut(|cached| match cached {
        Some((for_text, rt)) if for_text == text => rt.clone(),
        _ => {
            let called = called_names(text);
            let rt = Rc::new(runtime_with(&|name| called.contains(&name)));
            *cached = Some((text.to_string(), rt.clone()));
            rt
        }
    })
}

/// Every `name(` in `text` (spaces allowed before the parenthesis), in one
/// pass.
fn called_names(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut names = Vec::new();
    for (at, _) in text.match_indices('(') {
        let head = bytes.get(..at).unwrap_or_default();
        let end = head.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
        let start = head
            .get(..end)
            .and_then(|h| {
                h.iter()
                    .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
            })
            .map_or(0, |i| i + 1);
        if let Some(name) = text.get(start..end).filter(|n| !n.is_empty())
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    names
}

/// The function table for one set of rule settings, built the first time an
/// expression needs more than [`field_paths`] reads: the Kyverno sample and
/// most rules like it never pay for it.
pub struct Functions<'s> {
    settings: &'s str,
    built: std::cell::OnceCell<Rc<Runtime>>,
}

impl<'s> Functions<'s> {
    /// The functions `settings` (the rules' settings text) may call.
    pub fn for_settings(settings: &'s str) -> Functions<'s> {
        Functions {
            settings,
            built: std::cell::OnceCell::new(),
        }
    }

    pub fn runtime(&self) -> &Runtime {
        self.built.get_or_init(|| shared_runtime(self.settings))
    }
}

impl Functions<'static> {
    /// Every function, ready: for tests.
    pub fn all() -> Functions<'static> {
        Functions {
            settings: "",
            built: std::cell::OnceCell::from(Rc::new(runtime())),
        }
    }
}

/// Every function: for load-time checks and tests.
pub fn runtime() -> Runtime {
    runtime_with(&|_| true)
}

/// A JMESPath built-in function, boxed for the runtime's table.
type Builtin = Box<dyn jmespath::functions::Function>;
type BuiltinEntry = (&'static str, fn() -> Builtin);

fn builtins(rt: &mut Runtime, wanted: &dyn Fn(&str) -> bool) {
    use jmespath::functions::*;
    let all: [BuiltinEntry; 26] = [
        ("abs", || Box::new(AbsFn::new())),
        ("avg", || Box::new(AvgFn::new())),
        ("ceil", || Box::new(CeilFn::new())),
        ("contains", || Box::new(ContainsFn::new())),
        ("ends_with", || Box::new(EndsWithFn::new())),
        ("floor", || Box::new(FloorFn::new())),
        ("join", || Box::new(JoinFn::new())),
        ("keys", || Box::new(KeysFn::new())),
        ("length", || Box::new(LengthFn::new())),
        ("map", || Box::new(MapFn::new())),
        ("min", || Box::new(MinFn::new())),
        ("max", || Box::new(MaxFn::new())),
        ("max_by", || Box::new(MaxByFn::new())),
        ("min_by", || Box::new(MinByFn::new())),
        ("merge", || Box::new(MergeFn::new())),
        ("not_null", || Box::new(NotNullFn::new())),
        ("reverse", || Box::new(ReverseFn::new())),
        ("sort", || Box::new(SortFn::new())),
        ("sort_by", || Box::new(SortByFn::new())),
        ("starts_with", || Box::new(StartsWithFn::new())),
        ("sum", || Box::new(SumFn::new())),
        ("to_array", || Box::new(ToArrayFn::new())),
        ("to_number", || Box::new(ToNumberFn::new())),
        ("to_string", || Box::new(ToStringFn::new())),
        ("type", || Box::new(TypeFn::new())),
        ("values", || Box::new(ValuesFn::new())),
    ];
    for (name, make) in all {
        if wanted(name) {
            rt.register_function(name, make());
        }
    }
}

fn runtime_with(wanted: &dyn Fn(&str) -> bool) -> Runtime {
    let mut rt = Runtime::new();
    builtins(&mut rt, wanted);
    let s = || T::String;
    let n = || T::Number;
    let sig = |inputs: Vec<T>| Signature::new(inputs, None);
    let mut add = |name: &str, inputs: Vec<T>, f: Body| {
        if wanted(name) {
            rt.register_function(name, Box::new(CustomFunction::new(sig(inputs), f)));
        }
    };
    add(
        "to_upper",
        vec![s()],
        Box::new(|a, c| string(str_arg(a, 0, c)?.to_uppercase())),
    );
    add(
        "to_lower",
        vec![s()],
        Box::new(|a, c| string(str_arg(a, 0, c)?.to_lowercase())),
    );
    add(
        "trim",
        vec![s(), s()],
        Box::new(|a, c| {
            let cut: Vec<char> = str_arg(a, 1, c)?.chars().collect();
            string(
                str_arg(a, 0, c)?
                    .trim_matches(|ch| cut.contains(&ch))
                    .to_string(),
            )
        }),
    );
    add(
        "trim_prefix",
        vec![s(), s()],
        Box::new(|a, c| {
            let text = str_arg(a, 0, c)?;
            string(
                text.strip_prefix(str_arg(a, 1, c)?)
                    .unwrap_or(text)
                    .to_string(),
            )
        }),
    );
    add(
        "split",
        vec![s(), s()],
        Box::new(|a, c| {
            let parts = str_arg(a, 0, c)?
                .split(str_arg(a, 1, c)?)
                .map(|p| Rc::new(Variable::String(p.to_string())));
            Ok(Rc::new(Variable::Array(parts.collect())))
        }),
    );
    add(
        "replace",
        vec![s(), s(), s(), n()],
        Box::new(|a, c| {
            let (text, old, new) = (str_arg(a, 0, c)?, str_arg(a, 1, c)?, str_arg(a, 2, c)?);
            let count = num_arg(a, 3, c)?;
            if count < 0.0 {
                return string(text.replace(old, new));
            }
            string(text.replacen(old, new, count as usize))
        }),
    );
    add(
        "replace_all",
        vec![s(), s(), s()],
        Box::new(|a, c| string(str_arg(a, 0, c)?.replace(str_arg(a, 1, c)?, str_arg(a, 2, c)?))),
    );
    add(
        "truncate",
        vec![s(), n()],
        Box::new(|a, c| {
            let length = num_arg(a, 1, c)?.max(0.0) as usize;
            string(str_arg(a, 0, c)?.chars().take(length).collect())
        }),
    );
    add(
        "base64_encode",
        vec![s()],
        Box::new(|a, c| {
            string(base64::engine::general_purpose::STANDARD.encode(str_arg(a, 0, c)?))
        }),
    );
    add(
        "base64_decode",
        vec![s()],
        Box::new(|a, c| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(str_arg(a, 0, c)?)
                .map_err(|e| fail(c, format!("base64_decode: {e}")))?;
            string(String::from_utf8(bytes).map_err(|e| fail(c, format!("base64_decode: {e}")))?)
        }),
    );
    add(
        "parse_json",
        vec![s()],
        Box::new(|a, c| {
            let value: Value = serde_json::from_str(str_arg(a, 0, c)?)
                .map_err(|e| fail(c, format!("parse_json: {e}")))?;
            Ok(to_var(&value))
        }),
    );
    add(
        "equal_fold",
        vec![s(), s()],
        Box::new(|a, c| {
            let (x, y) = (str_arg(a, 0, c)?, str_arg(a, 1, c)?);
            Ok(Rc::new(Variable::Bool(
                x.to_lowercase() == y.to_lowercase(),
            )))
        }),
    );
    add(
        "compare",
        vec![s(), s()],
        Box::new(|a, c| {
            let order = str_arg(a, 0, c)?.cmp(str_arg(a, 1, c)?) as i8;
            number(f64::from(order))
        }),
    );
    add(
        "pattern_match",
        vec![s(), T::Union(vec![s(), n()])],
        Box::new(|a, c| {
            let pattern = str_arg(a, 0, c)?;
            let text = match a.get(1).map(|v| &**v) {
                Some(Variable::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            Ok(Rc::new(Variable::Bool(wildcard(pattern, &text))))
        }),
    );
    add(
        "label_match",
        vec![T::Object, T::Object],
        Box::new(|a, c| {
            let (Some(selector), Some(labels)) = (
                a.first().and_then(|v| v.as_object()),
                a.get(1).and_then(|v| v.as_object()),
            ) else {
                return Err(fail(c, "label_match needs two objects".into()));
            };
            let all = selector
                .iter()
                .all(|(k, v)| labels.get(k).is_some_and(|l| l == v));
            Ok(Rc::new(Variable::Bool(all)))
        }),
    );
    add(
        "lookup",
        vec![
            T::Union(vec![T::Object, T::Array]),
            T::Union(vec![s(), n()]),
        ],
        Box::new(|a, c| {
            let found = match (a.first().map(|v| &**v), a.get(1).map(|v| &**v)) {
                (Some(Variable::Object(map)), Some(Variable::String(key))) => map.get(key).cloned(),
                (Some(Variable::Array(items)), Some(Variable::Number(index))) => index
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| items.get(i).cloned()),
                _ => {
                    return Err(fail(
                        c,
                        "lookup needs (object, string) or (array, number)".into(),
                    ));
                }
            };
            Ok(found.unwrap_or_else(|| Rc::new(Variable::Null)))
        }),
    );
    add(
        "items",
        vec![T::Union(vec![T::Object, T::Array]), s(), s()],
        Box::new(|a, c| {
            let (key_name, value_name) = (str_arg(a, 1, c)?, str_arg(a, 2, c)?);
            let pair = |k: Variable, v: Rcvar| {
                let mut entry = std::collections::BTreeMap::new();
                entry.insert(key_name.to_string(), Rc::new(k));
                entry.insert(value_name.to_string(), v);
                Rc::new(Variable::Object(entry))
            };
            let items: Vec<Rcvar> = match a.first().map(|v| &**v) {
                Some(Variable::Object(map)) => map
                    .iter()
                    .map(|(k, v)| pair(Variable::String(k.clone()), v.clone()))
                    .collect(),
                Some(Variable::Array(list)) => list
                    .iter()
                    .enumerate()
                    .map(|(i, v)| pair(Variable::Number(serde_json::Number::from(i)), v.clone()))
                    .collect(),
                _ => Vec::new(),
            };
            Ok(Rc::new(Variable::Array(items)))
        }),
    );
    add(
        "object_from_lists",
        vec![T::Array, T::Array],
        Box::new(|a, c| {
            let (Some(keys), Some(values)) = (
                a.first().and_then(|v| v.as_array()),
                a.get(1).and_then(|v| v.as_array()),
            ) else {
                return Err(fail(c, "object_from_lists needs two arrays".into()));
            };
            let mut object = std::collections::BTreeMap::new();
            for (i, key) in keys.iter().enumerate() {
                let Some(key) = key.as_string() else {
                    return Err(fail(c, "object_from_lists: keys must be strings".into()));
                };
                object.insert(
                    key.clone(),
                    values
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| Rc::new(Variable::Null)),
                );
            }
            Ok(Rc::new(Variable::Object(object)))
        }),
    );
    super::kyverno_functions::register(&mut add);
    add(
        "sum",
        vec![T::TypedArray(Box::new(n()))],
        Box::new(|a, c| {
            let items = a
                .first()
                .and_then(|v| v.as_array())
                .ok_or_else(|| fail(c, "sum needs an array".into()))?;
            number(items.iter().filter_map(|v| v.as_number()).sum())
        }),
    );
    add(
        "round",
        vec![n(), n()],
        Box::new(|a, c| {
            let (x, digits) = (num_arg(a, 0, c)?, num_arg(a, 1, c)?);
            let scale = 10f64.powi(digits.clamp(0.0, 15.0) as i32);
            number((x * scale).round() / scale)
        }),
    );
    rt
}

pub(super) fn fail(ctx: &Context<'_>, message: String) -> JmespathError {
    JmespathError::from_ctx(ctx, ErrorReason::Parse(message))
}

pub(super) fn str_arg<'a>(
    args: &'a [Rcvar],
    i: usize,
    ctx: &Context<'_>,
) -> Result<&'a str, JmespathError> {
    args.get(i)
        .and_then(|v| v.as_string())
        .map(String::as_str)
        .ok_or_else(|| fail(ctx, format!("argument {} must be a string", i + 1)))
}

fn num_arg(args: &[Rcvar], i: usize, ctx: &Context<'_>) -> Result<f64, JmespathError> {
    args.get(i)
        .and_then(|v| v.as_number())
        .ok_or_else(|| fail(ctx, format!("argument {} must be a number", i + 1)))
}

pub(super) fn string(s: String) -> Result<Rcvar, JmespathError> {
    Ok(Rc::new(Variable::String(s)))
}

pub(super) fn number(x: f64) -> Result<Rcvar, JmespathError> {
    let n = if x.fract() == 0.0 && x.abs() < 9.0e15 {
        serde_json::Number::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).unwrap_or_else(|| serde_json::Number::from(0))
    };
    Ok(Rc::new(Variable::Number(n)))
}

/// Checks an expression's size and nesting before it reaches the parser.
pub fn check_bounds(expression: &str) -> Result<(), String> {
    if expression.len() > MAX_EXPRESSION_LEN {
        return Err(format!("is longer than {MAX_EXPRESSION_LEN} characters"));
    }
    let mut depth = 0usize;
    let mut operators = 0usize;
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    // Brackets, operators and quotes are ASCII: bytes are enough, and
    // cheaper than chars in wasm.
    for byte in expression.bytes() {
        if let Some(open) = quote {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                _ if byte == open => quote = None,
                _ => {}
            }
            continue;
        }
        if matches!(byte, b'.' | b'|' | b'[' | b'&' | b'!' | b'<' | b'>' | b'=') {
            operators += 1;
            if operators > MAX_EXPRESSION_OPERATORS {
                return Err(format!(
                    "has more than {MAX_EXPRESSION_OPERATORS} operators; split it into context variables"
                ));
            }
        }
        match byte {
            b'\'' | b'`' | b'"' => quote = Some(byte),
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_EXPRESSION_NESTING {
                    return Err(format!(
                        "nests brackets deeper than {MAX_EXPRESSION_NESTING}"
                    ));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Compiles and checks an expression (load time): syntax, and that every
/// function it calls exists here.
pub fn check(rt: &Runtime, expression: &str) -> Result<(), String> {
    check_bounds(expression)?;
    let ast = jmespath::parse(expression).map_err(|e| e.to_string())?;
    let mut unknown = Vec::new();
    unknown_functions(rt, &ast, &mut unknown);
    let Some(name) = unknown.first() else {
        return Ok(());
    };
    match super::kyverno_functions::REFUSED
        .iter()
        .find(|(refused, _)| refused == name)
    {
        Some((_, why)) => Err(format!("function {name}() is not supported: {why}")),
        None => Err(format!(
            "function {name}() is not available in this policy (see docs/kyverno.md for the list)"
        )),
    }
}

fn unknown_functions(rt: &Runtime, ast: &jmespath::ast::Ast, out: &mut Vec<String>) {
    use jmespath::ast::Ast;
    match ast {
        Ast::Function { name, args, .. } => {
            if rt.get_function(name).is_none() {
                out.push(name.clone());
            }
            args.iter().for_each(|a| unknown_functions(rt, a, out));
        }
        Ast::Comparison { lhs, rhs, .. }
        | Ast::Projection { lhs, rhs, .. }
        | Ast::And { lhs, rhs, .. }
        | Ast::Or { lhs, rhs, .. }
        | Ast::Subexpr { lhs, rhs, .. } => {
            unknown_functions(rt, lhs, out);
            unknown_functions(rt, rhs, out);
        }
        Ast::Condition {
            predicate, then, ..
        } => {
            unknown_functions(rt, predicate, out);
            unknown_functions(rt, then, out);
        }
        Ast::Expref { ast, .. } => unknown_functions(rt, ast, out),
        Ast::Flatten { node, .. } | Ast::Not { node, .. } | Ast::ObjectValues { node, .. } => {
            unknown_functions(rt, node, out)
        }
        Ast::MultiList { elements, .. } => {
            elements.iter().for_each(|e| unknown_functions(rt, e, out))
        }
        Ast::MultiHash { elements, .. } => elements
            .iter()
            .for_each(|kv| unknown_functions(rt, &kv.value, out)),
        Ast::Identity { .. }
        | Ast::Field { .. }
        | Ast::Index { .. }
        | Ast::Literal { .. }
        | Ast::Slice { .. } => {}
    }
}

/// Evaluates `expression` over data already converted with [`to_var`]: the
/// rule's context is converted once, not once per variable.
pub fn search_var(rt: &Functions, expression: &str, data: &Rcvar) -> Result<Rcvar, String> {
    check_bounds(expression)?;
    if let Some(found) = field_paths::search(expression, data) {
        return Ok(found);
    }
    let ast = jmespath::parse(expression).map_err(|e| e.to_string())?;
    let mut ctx = Context::new(expression, rt.runtime());
    jmespath::interpret(data, &ast, &mut ctx).map_err(|e| e.to_string())
}

/// Whether `expression`, a path of fields and indexes (`a.b[0].c`), names a
/// key an object on that path does not have: what Kyverno's JMESPath reports
/// as not found. Any other expression, or one that parses not, is not.
pub fn names_missing_key(expression: &str, data: &Rcvar) -> bool {
    use jmespath::ast::Ast;
    fn walk(ast: &Ast, data: &Rcvar) -> Result<Rcvar, bool> {
        match ast {
            Ast::Identity { .. } => Ok(data.clone()),
            Ast::Field { name, .. } => match &**data {
                Variable::Object(map) => map.get(name).cloned().ok_or(true),
                _ => Ok(Rc::new(Variable::Null)),
            },
            Ast::Index { idx, .. } => match &**data {
                Variable::Array(items) => {
                    let at = if *idx < 0 {
                        items.len() as i32 + idx
                    } else {
                        *idx
                    };
                    let found = usize::try_from(at).ok().and_then(|i| items.get(i));
                    Ok(found.cloned().unwrap_or_else(|| Rc::new(Variable::Null)))
                }
                _ => Ok(Rc::new(Variable::Null)),
            },
            Ast::Subexpr { lhs, rhs, .. } => walk(rhs, &walk(lhs, data)?),
            _ => Err(false),
        }
    }
    jmespath::parse(expression).is_ok_and(|ast| walk(&ast, data) == Err(true))
}

/// A JSON value as a JMESPath variable.
pub fn to_var(value: &Value) -> Rcvar {
    Rc::new(match value {
        Value::Null => Variable::Null,
        Value::Bool(b) => Variable::Bool(*b),
        Value::Number(n) => Variable::Number(n.clone()),
        Value::String(s) => Variable::String(s.clone()),
        Value::Array(items) => Variable::Array(items.iter().map(to_var).collect()),
        Value::Object(map) => {
            Variable::Object(map.iter().map(|(k, v)| (k.clone(), to_var(v))).collect())
        }
    })
}

/// A JMESPath variable as JSON (expression references become null).
pub fn to_value(var: &Variable) -> Value {
    match var {
        Variable::Null | Variable::Expref(_) => Value::Null,
        Variable::Bool(b) => Value::Bool(*b),
        Variable::Number(n) => Value::Number(n.clone()),
        Variable::String(s) => Value::String(s.clone()),
        Variable::Array(items) => Value::Array(items.iter().map(|i| to_value(i)).collect()),
        Variable::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), to_value(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn search(rt: &Functions, expression: &str, data: &Value) -> Result<Value, String> {
        search_var(rt, expression, &to_var(data)).map(|v| to_value(&v))
    }

    fn eval(expression: &str, data: Value) -> Value {
        search(&Functions::all(), expression, &data).unwrap()
    }

    #[test]
    fn standard_jmespath_and_quoted_keys() {
        let node = json!({"metadata":{"labels":{"topology.kubernetes.io/zone":"us-east-2a"}}});
        assert_eq!(
            eval(
                r#"metadata.labels."topology.kubernetes.io/zone" || 'empty'"#,
                node.clone()
            ),
            json!("us-east-2a")
        );
        assert_eq!(
            eval(r#"metadata.labels."missing" || 'empty'"#, node),
            json!("empty")
        );
        assert_eq!(eval("length(@)", json!([1, 2, 3])), json!(3));
    }

    #[test]
    fn kyverno_string_functions() {
        assert_eq!(eval("to_upper('abc')", json!({})), json!("ABC"));
        assert_eq!(eval("to_lower('AbC')", json!({})), json!("abc"));
        assert_eq!(eval("trim('--a--', '-')", json!({})), json!("a"));
        assert_eq!(
            eval("trim_prefix('node-1', 'node-')", json!({})),
            json!("1")
        );
        assert_eq!(eval("split('a,b', ',')", json!({})), json!(["a", "b"]));
        assert_eq!(
            eval("replace('aaa', 'a', 'b', `2`)", json!({})),
            json!("bba")
        );
        assert_eq!(
            eval("replace_all('aaa', 'a', 'b')", json!({})),
            json!("bbb")
        );
        assert_eq!(eval("truncate('abcdef', `3`)", json!({})), json!("abc"));
        assert_eq!(eval("base64_encode('zone')", json!({})), json!("em9uZQ=="));
        assert_eq!(eval("base64_decode('em9uZQ==')", json!({})), json!("zone"));
        assert_eq!(eval("equal_fold('Zone', 'zONE')", json!({})), json!(true));
        assert_eq!(
            eval("pattern_match('us-*', 'us-east-2')", json!({})),
            json!(true)
        );
        assert_eq!(
            eval("pattern_match('eu-*', 'us-east-2')", json!({})),
            json!(false)
        );
    }

    #[test]
    fn kyverno_structure_and_arithmetic_functions() {
        assert_eq!(eval("parse_json('{\"a\":[1]}').a[0]", json!({})), json!(1));
        assert_eq!(eval("lookup(@, 'a.b')", json!({"a.b": 5})), json!(5));
        assert_eq!(
            eval("items(@, 'k', 'v')", json!({"x": 1})),
            json!([{"k":"x","v":1}])
        );
        assert_eq!(
            eval("object_from_lists(`[\"a\",\"b\"]`, `[1,2]`)", json!({})),
            json!({"a":1,"b":2})
        );
        assert_eq!(
            eval(
                "label_match(`{\"app\":\"web\"}`, `{\"app\":\"web\",\"x\":\"y\"}`)",
                json!({})
            ),
            json!(true)
        );
        assert_eq!(eval("add(`1`, `2`)", json!({})), json!(3));
        assert_eq!(eval("divide(`7`, `2`)", json!({})), json!(3.5));
        assert_eq!(eval("modulo(`7`, `2`)", json!({})), json!(1));
        assert_eq!(eval("sum(`[1,2,3]`)", json!({})), json!(6));
        assert_eq!(eval("round(`2.71828`, `2`)", json!({})), json!(2.72));
        assert!(
            search(&Functions::all(), "divide(`1`, `0`)", &json!({}))
                .unwrap_err()
                .contains("division by zero")
        );
    }

    #[test]
    fn an_instance_registers_only_the_functions_its_rules_call() {
        let called = called_names("{{ to_upper (x) }} and length(y) and lengthy");
        let rt = runtime_with(&|name| called.contains(&name));
        assert!(rt.get_function("to_upper").is_some());
        assert!(rt.get_function("length").is_some());
        assert!(rt.get_function("to_lower").is_none());
        assert!(rt.get_function("abs").is_none());
        assert_eq!(called, ["to_upper", "length"]);
    }

    #[test]
    fn bounds_are_checked_before_parsing() {
        assert!(
            check(&runtime(), &"(".repeat(40))
                .unwrap_err()
                .contains("deeper than 32")
        );
        assert!(
            check(&runtime(), &"a".repeat(9000))
                .unwrap_err()
                .contains("longer than 8192")
        );
        assert!(
            check(&runtime(), &format!("a{}", ".a".repeat(300)))
                .unwrap_err()
                .contains("more than 256 operators")
        );
        let long_literal = format!("'{}' || a", "x.y|z".repeat(1000));
        assert!(
            check(&runtime(), &long_literal).is_ok(),
            "literals do not count"
        );
        assert!(check(&runtime(), "a.[").is_err());
        let msg = check(&runtime(), "foo[?x509_decode(b)].x").unwrap_err();
        assert_eq!(
            msg,
            "function x509_decode() is not available in this policy (see docs/kyverno.md for the list)"
        );
        let msg = check(&runtime(), "random('[a-z]{4}')").unwrap_err();
        assert!(msg.starts_with("function random() is not supported: random values"));
        assert!(check(&runtime(), "time_since('', time_now_utc(), '')").is_ok());
        assert!(check(&runtime(), "to_upper(join('-', split(a, ',')))").is_ok());
    }
}
