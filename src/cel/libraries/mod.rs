//! CEL libraries run in the guest beyond the `cel` crate's own: Kyverno's
//! `image`, `json`, `yaml` and `user`, the `regex` extension Kyverno's
//! environment carries (`regex.replace`, `regex.extract`, ...), and
//! Kubernetes' quantity, semver and list functions. Each is declared only in
//! an environment whose expressions name it (see
//! [`Libraries`](crate::cel::program::library_use::Libraries)).
//!
//! Values of the libraries' own types (an image reference, a quantity, a
//! version) are the crate's opaque values, so they keep their type through
//! variables.

use std::sync::Arc;

use ::cel::common::types::{CelBool, CelInt, CelString, Type};
use ::cel::common::value::{CowVal, Val};
use ::cel::objects::Opaque;
use ::cel::{Env, ExecutionError, Value};

pub mod authorizer;
pub mod cost_tracker;
pub mod data;
pub mod double_text;
pub mod format;
pub mod go_quote;
pub mod gzip;
pub mod hash;
pub mod host_reads;
pub mod image;
pub mod ip;
pub mod lists;
pub mod math;
pub mod quantity;
pub mod regex;
pub mod runtime_cost;
pub mod semver;
pub mod string_format;
pub mod time;
pub mod time_zones;
pub mod url;
pub mod values;

/// The crate's string, int, bool and dyn types, for declarations.
pub(crate) fn string_type() -> Type {
    ::cel::common::types::STRING_TYPE.to_owned()
}
pub(crate) fn int_type() -> Type {
    ::cel::common::types::INT_TYPE.to_owned()
}
pub(crate) fn dyn_type() -> Type {
    ::cel::common::types::DYN_TYPE.to_owned()
}
pub(crate) fn list_type() -> Type {
    ::cel::common::types::LIST_TYPE.to_owned()
}

/// A function over the crate's values, as `add_overload` takes it.
pub(crate) type Function =
    for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// Declares a global function; each is declared once, in an environment
/// that starts without it, so a clash is a bug the first test finds.
pub(crate) fn global(env: &mut Env, name: &str, id: &str, args: Vec<Type>, op: Function) {
    let _ = env.add_overload(name, id, args, op);
}

/// Declares a member function on `target`.
pub(crate) fn member(
    env: &mut Env,
    name: &str,
    id: &str,
    target: Type,
    args: Vec<Type>,
    op: Function,
) {
    let _ = env.add_member_overload(name, id, target, args, op);
}

pub(crate) fn error(function: &str, message: impl Into<String>) -> ExecutionError {
    ExecutionError::function_error(function, message.into())
}

pub(crate) fn string_arg<'a>(
    args: &'a [CowVal<'_, '_>],
    index: usize,
    function: &str,
) -> Result<&'a str, ExecutionError> {
    args.get(index)
        .and_then(|arg| arg.downcast_ref::<CelString>())
        .map(|s| s.inner())
        .ok_or_else(|| error(function, format!("argument {index} must be a string")))
}

pub(crate) fn int_arg(
    args: &[CowVal<'_, '_>],
    index: usize,
    function: &str,
) -> Result<i64, ExecutionError> {
    args.get(index)
        .and_then(|arg| arg.downcast_ref::<CelInt>())
        .map(|i| *i.inner())
        .ok_or_else(|| error(function, format!("argument {index} must be an int")))
}

/// The opaque value of type `T` at `index`.
pub(crate) fn opaque_arg<T: Opaque + Clone>(
    args: &[CowVal<'_, '_>],
    index: usize,
    function: &str,
) -> Result<T, ExecutionError> {
    let wrong = || error(function, format!("argument {index} has the wrong type"));
    let arg = args.get(index).ok_or_else(wrong)?;
    match Value::try_from(arg.as_ref()) {
        Ok(Value::Opaque(value)) => value.downcast_ref::<T>().cloned().ok_or_else(wrong),
        _ => Err(wrong()),
    }
}

/// An opaque value Kubernetes' libraries compare with `isLessThan`,
/// `isGreaterThan` and `compareTo` (quantities by value, versions by
/// precedence).
pub(crate) trait Ordered: Opaque + Clone {
    fn order(&self, other: &Self) -> std::cmp::Ordering;
}

/// Declares `isLessThan`, `isGreaterThan` and `compareTo` on `target`, with
/// the overload ids `{prefix}_{name}`.
pub(crate) fn register_ordering<T: Ordered>(env: &mut Env, prefix: &str, target: fn() -> Type) {
    let ops: [(&str, Function); 3] = [
        ("isLessThan", is_less_than::<T>),
        ("isGreaterThan", is_greater_than::<T>),
        ("compareTo", compare_to::<T>),
    ];
    for (name, op) in ops {
        member(
            env,
            name,
            &format!("{prefix}_{name}"),
            target(),
            vec![target()],
            op,
        );
    }
}

fn ordering<T: Ordered>(
    args: &[CowVal<'_, '_>],
    function: &str,
) -> Result<std::cmp::Ordering, ExecutionError> {
    let a = opaque_arg::<T>(args, 0, function)?;
    let b = opaque_arg::<T>(args, 1, function)?;
    Ok(a.order(&b))
}

fn is_less_than<'b, 'v, T: Ordered>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(ordering::<T>(&args, "isLessThan")?.is_lt())
}

fn is_greater_than<'b, 'v, T: Ordered>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(ordering::<T>(&args, "isGreaterThan")?.is_gt())
}

fn compare_to<'b, 'v, T: Ordered>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int(ordering::<T>(&args, "compareTo")? as i64)
}

/// A value of the crate's `Value` form, as a function result.
pub(crate) fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Box::<dyn Val>::try_from(value).map(CowVal::Owned)
}

pub(crate) fn opaque<'b, 'v, T: Opaque>(value: T) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Opaque(Arc::new(value)))
}

pub(crate) fn string<'b, 'v>(value: impl Into<String>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelString::from(value.into())))
}

pub(crate) fn boolean<'b, 'v>(value: bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelBool::from(value)))
}

pub(crate) fn int<'b, 'v>(value: i64) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::owned(CelInt::from(value)))
}

/// A member call the project answers in place of the crate's extension of
/// the same name: `x.<name>(...)` with `arity` arguments becomes a call of
/// `to`, which only the project's function is declared under.
pub struct MemberRename {
    pub name: &'static str,
    pub arity: usize,
    pub to: &'static str,
}

/// Applies `renames` to every member call in `expr`, in one walk (a
/// compile-time rewrite).
pub fn rename_member_calls(expr: &mut ::cel::common::ast::IdedExpr, renames: &[&MemberRename]) {
    if renames.is_empty() {
        return;
    }
    crate::cel::syntax::ast::children_mut(expr, &mut |child| rename_member_calls(child, renames));
    if let ::cel::common::ast::Expr::Call(call) = &mut expr.expr
        && call.target.is_some()
        && let Some(rename) = renames
            .iter()
            .find(|r| call.func_name == r.name && call.args.len() == r.arity)
    {
        call.func_name = rename.to.to_string();
    }
}

/// Puts `argument` inside a call of `function` (a compile-time rewrite).
pub(crate) fn wrap_in_call(argument: &mut ::cel::common::ast::IdedExpr, function: &str) {
    wrap_in_call_with(argument, function, Vec::new());
}

/// [`wrap_in_call`], with `more` arguments after it.
pub(crate) fn wrap_in_call_with(
    argument: &mut ::cel::common::ast::IdedExpr,
    function: &str,
    more: Vec<::cel::common::ast::IdedExpr>,
) {
    use ::cel::common::ast::{CallExpr, Expr, IdedExpr};
    // The interpreter reads no ids: the wrapper takes its argument's.
    let inner = std::mem::take(argument);
    let id = inner.id;
    let mut args = vec![inner];
    args.extend(more);
    *argument = IdedExpr {
        id,
        expr: Expr::Call(CallExpr {
            func_name: function.to_string(),
            target: None,
            args,
        }),
    };
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::libraries_for_source;

    #[test]
    fn a_library_is_added_only_when_an_expression_names_it() {
        assert!(libraries_for_source("image('nginx')").image);
        assert!(libraries_for_source("x + image ('nginx')").image);
        assert!(!libraries_for_source("c.image").image);
        assert!(!libraries_for_source("c.image('x')").image);
        // A library named in a string or a comment is not called.
        assert!(!libraries_for_source("'json.unmarshal(x)' // yaml.parse(y)\n + 'a'").json);
        let libraries = libraries_for_source("object.spec.containers.map(c, c.image)");
        assert!(!libraries.image && !libraries.json && !libraries.regex_namespace);
        let libraries = libraries_for_source("isImage(c.image) && json.unmarshal(x) != null");
        assert!(libraries.image && libraries.json && !libraries.yaml);
        // A field named `url` or `sha256`, and the strings library's
        // `format`, are not the URL, hash or format libraries.
        let libraries =
            libraries_for_source("'%s'.format([object.spec.url, object.status.sha256])");
        assert!(!libraries.url && !libraries.hash && !libraries.format);
        let libraries = libraries_for_source(
            "url(x).getHost() + sha256(y) + format.uuid().validate(z).orValue([]).join('')",
        );
        assert!(libraries.url && libraries.hash && libraries.format && !libraries.gzip);
    }
}
