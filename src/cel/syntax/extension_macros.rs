//! The macros of cel-go's math and lists extensions, which Kubernetes and
//! Kyverno enable (`ext.Math()`, `ext.Lists(ext.ListsVersion(3))`):
//! `math.greatest(...)`, `math.least(...)` and `list.sortBy(e, key)`.
//!
//! The `cel` crate's math and lists extensions declare these macros and the
//! overloads they expand to (`math.@max`, `math.@min`,
//! `@sortByAssociatedKeys`), but its macros reach only its ANTLR parser
//! (see [`comprehensions`](crate::cel::program::comprehensions)). So the calls the Pratt
//! parser leaves as written are rewritten here, after parsing, into the
//! very trees the crate's macros build, and run on the crate's overloads.

use ::cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};

use crate::cel::syntax::macro_builder::{ACCU, Builder};

/// The name `sortBy` binds its target to, so that it is evaluated once;
/// the crate's own, which no CEL name can be.
pub(in crate::cel) const SORT_BY_INPUT: &str = "@__sortBy_input__";
pub(in crate::cel) const SORT_BY_KEYS: &str = "@sortByAssociatedKeys";

/// Whether an expression's word may be one of these macros.
pub fn named(word: &str) -> bool {
    matches!(word, "greatest" | "least" | "sortBy")
}

/// The expansion of `call` if it is one of these macros, `Ok(None)` if it is
/// another call, `Err` as cel-go's macro refuses it.
pub(in crate::cel) fn rewrite(
    call: &mut CallExpr,
    b: &mut Builder,
) -> Result<Option<Expr>, String> {
    match call.func_name.as_str() {
        "greatest" => extreme(call, b, "greatest", "math.@max"),
        "least" => extreme(call, b, "least", "math.@min"),
        "sortBy" if call.args.len() == 2 && call.target.is_some() => sort_by(call, b),
        _ => Ok(None),
    }
}

/// `math.greatest(..)` / `math.least(..)`: `function` called on the one
/// argument, the two arguments, or a list of them when there are more; a
/// call on anything but `math` is left alone.
fn extreme(
    call: &mut CallExpr,
    b: &mut Builder,
    name: &str,
    function: &str,
) -> Result<Option<Expr>, String> {
    if !matches!(call.target.as_deref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "math") {
        return Ok(None);
    }
    let invalid = match call.args.as_slice() {
        [] => Some("requires at least one argument"),
        [arg] if !is_numeric_list(arg) && !may_be_numeric(arg) => {
            Some("invalid single argument value")
        }
        [_] => None,
        args if args.iter().all(may_be_numeric) => None,
        _ => Some("simple literal arguments must be numeric"),
    };
    if let Some(message) = invalid {
        return Err(format!("math.{name}() {message}"));
    }
    let mut args = std::mem::take(&mut call.args);
    if args.len() > 2 {
        args = vec![b.list(args)];
    }
    Ok(Some(b.call(function, args).expr))
}

/// Whether `arg` can be a number: a numeric literal, or anything but another
/// literal, a list, a map or a message (cel-go's test).
fn may_be_numeric(arg: &IdedExpr) -> bool {
    match &arg.expr {
        Expr::Literal(literal) => matches!(
            literal,
            LiteralValue::Int(_) | LiteralValue::UInt(_) | LiteralValue::Double(_)
        ),
        Expr::List(_) | Expr::Map(_) | Expr::Struct(_) => false,
        _ => true,
    }
}

/// A list literal, not empty, of things that can be numbers.
fn is_numeric_list(arg: &IdedExpr) -> bool {
    matches!(&arg.expr, Expr::List(list)
        if !list.elements.is_empty() && list.elements.iter().all(may_be_numeric))
}

/// `list.sortBy(e, key)`: `cel.bind(@__sortBy_input__, list,
/// @__sortBy_input__.@sortByAssociatedKeys(@__sortBy_input__.map(e, key)))`.
fn sort_by(call: &mut CallExpr, b: &mut Builder) -> Result<Option<Expr>, String> {
    let Some(list) = call.target.take() else {
        return Ok(None);
    };
    if matches!(list.expr, Expr::Literal(_) | Expr::Map(_) | Expr::Struct(_)) {
        return Err(
            "sortBy can only be applied to a list, identifier, comprehension, call or select expression"
                .to_string(),
        );
    }
    let mut args = std::mem::take(&mut call.args).into_iter();
    let (Some(variable), Some(key)) = (args.next(), args.next()) else {
        return Ok(None);
    };
    let Expr::Ident(variable) = variable.expr else {
        return Err("sortBy: argument must be a simple name".to_string());
    };
    // The keys, as the crate's `map` macro builds them.
    let keys = {
        let range = b.ident(SORT_BY_INPUT);
        let init = b.list(Vec::new());
        let cond = b.bool(true);
        let accu = b.ident(ACCU);
        let item = b.list(vec![key]);
        let step = b.call(::cel::common::ast::operators::ADD, vec![accu, item]);
        let result = b.ident(ACCU);
        let keys = b.fold(range, &variable, [init, cond, step, result]);
        b.node(keys)
    };
    let input = b.ident(SORT_BY_INPUT);
    let sorted = b.member(input, SORT_BY_KEYS, vec![keys]);
    Ok(Some(b.bind(SORT_BY_INPUT, *list, sorted).expr))
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_comprehensions::eval;
    use ::cel::Value;

    fn ok(source: &str, expected: &str) {
        assert_eq!(eval(source), eval(expected), "{source}");
        assert!(eval(source).is_ok(), "{source}: {:?}", eval(source));
    }

    /// cel-go's `ext/math_test.go` cases for the two macros, a sample.
    #[test]
    fn greatest_and_least_as_cel_go_computes_them() {
        ok("math.greatest(-5)", "-5");
        ok("math.greatest(1, 1u)", "1");
        ok("math.greatest(-42.0, -21.5, -100.0)", "-21.5");
        ok("math.greatest([dyn(1), dyn(2u), dyn(3.5)])", "3.5");
        ok(
            "math.least(dyn(5.4), dyn(10), dyn(3u), dyn(-5.0), dyn(9223372036854775807))",
            "-5.0",
        );
        ok("math.least([dyn(-1.0), dyn(2u)])", "-1.0");
        ok("math.greatest(dyn([1, 2, 3]))", "3");
        ok(
            "[3, 1, 2].map(x, x * 2).exists(x, x == math.greatest(1, 6))",
            "true",
        );
        assert_eq!(eval("math.greatest(1, 2) == 2"), Ok(Value::Bool(true)));
    }

    #[test]
    fn greatest_and_least_are_refused_as_cel_go_refuses_them() {
        for (source, message) in [
            (
                "math.greatest()",
                "math.greatest() requires at least one argument",
            ),
            (
                "math.least('a')",
                "math.least() invalid single argument value",
            ),
            (
                "math.least([])",
                "math.least() invalid single argument value",
            ),
            (
                "math.greatest(1, 'b')",
                "math.greatest() simple literal arguments must be numeric",
            ),
        ] {
            let error = eval(source).err().unwrap_or_default();
            assert!(error.contains(message), "{source}: {error}");
        }
        // At run time, a list that turns out empty.
        assert!(eval("math.greatest(dyn([]))").is_err());
        // Another target is another function.
        assert!(eval("[1].greatest(1)").is_err());
    }

    /// cel-go's `ext/lists_test.go` cases for `sortBy`, a sample.
    #[test]
    fn sort_by_orders_by_the_keys() {
        ok(
            "[{'n': dyn('b'), 'v': dyn(2)}, {'n': dyn('a'), 'v': dyn(1)}].sortBy(e, e.v).map(e, e.n)",
            "['a', 'b']",
        );
        ok(
            "['aaa', 'b', 'cc'].sortBy(s, size(s))",
            "['b', 'cc', 'aaa']",
        );
        ok("[3, 1, 2].sortBy(x, -x)", "[3, 2, 1]");
        ok("[].sortBy(x, x)", "[]");
        ok(
            "cel.bind(l, [2, 1], l.sortBy(x, x) == [1, 2] && l == [2, 1])",
            "true",
        );
        // Stable: equal keys keep their order.
        ok(
            "[[dyn(1), dyn('a')], [dyn(0), dyn('b')], [dyn(1), dyn('c')]].sortBy(p, p[0]).map(p, p[1])",
            "['b', 'a', 'c']",
        );
        assert!(eval("[1, 'a'].sortBy(x, x)").is_err(), "mixed keys");
        let error = eval("'abc'.sortBy(x, x)").err().unwrap_or_default();
        assert!(error.contains("sortBy can only be applied"), "{error}");
        let error = eval("[1].sortBy(x.y, x)").err().unwrap_or_default();
        assert!(error.contains("simple name"), "{error}");
    }
}
