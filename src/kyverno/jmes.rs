//! The JMESPath runtime: bounds checked before parsing, the function table
//! (JMESPath's built-ins and Kyverno's, [`super::jmes_functions`]) built per
//! rule settings, load-time checks and evaluation over converted data.

use std::rc::Rc;

use jmespath::functions::{ArgumentType as T, CustomFunction, Signature};
use jmespath::{Context, Rcvar, Runtime, Variable};

use super::jmes_values::{Body, MAX_EXPRESSION_LEN};
use super::{field_paths, jmes_functions};

/// Deepest bracket nesting accepted: the parser and interpreter recurse, and
/// a trap in wasm must not be reachable from settings.
pub const MAX_EXPRESSION_NESTING: usize = 32;
/// Most operators (`.`, `|`, `[`, `||`, `&&`, `!`, comparisons) outside
/// literals: a chain of them parses into a tree as deep as it is long, so
/// this bounds the recursion where length alone does not.
pub const MAX_EXPRESSION_OPERATORS: usize = 256;

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
    let sig = |inputs: Vec<T>| Signature::new(inputs, None);
    let mut add = |name: &str, inputs: Vec<T>, f: Body| {
        if wanted(name) {
            rt.register_function(name, Box::new(CustomFunction::new(sig(inputs), f)));
        }
    };
    // After the built-ins: Kyverno's `sum` replaces JMESPath's.
    jmes_functions::register(&mut add);
    rt
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
    match jmes_functions::REFUSED
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

/// Evaluates `expression` over data already converted with
/// [`to_var`](super::jmes_values::to_var): the
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kyverno::jmes_values::{to_value, to_var};
    use serde_json::{Value, json};

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
