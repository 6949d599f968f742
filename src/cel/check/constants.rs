//! What Kubernetes' CEL environment (and Kyverno's, which extends it) works
//! out when it makes a program, before any request, and refuses the policy
//! for when it fails:
//!
//! - cel-go's optimizer (`cel.OptOptimize`, set by kube-apiserver's base
//!   environment) evaluates a type conversion (`int`, `uint`, `double`,
//!   `string`, `bytes`, `bool`, `duration`, `timestamp`, `dyn`, `type`) of a
//!   constant: a literal, a list or map literal of constants, a conversion of
//!   a constant. `int(1e308)` and `duration('1d')` refuse the policy even
//!   where no request would reach them (an untaken branch, a variable nothing
//!   reads);
//! - its validators compile a literal regular expression given to `matches`,
//!   `find` or `findAll`.

use std::sync::Arc;

use ::cel::common::ast::{EntryExpr, Expr, IdedExpr};

use crate::cel::eval::environment::runtime_env;
use crate::cel::program::library_use::Libraries;
use crate::cel::program::metering::CONVERSIONS;
use crate::cel::program::positions;
use crate::cel::syntax::ast::children;

/// The first constant conversion or literal pattern in `expr` that fails,
/// as a message with the line and column where it stands in `source`.
pub fn refused(source: &str, expr: &IdedExpr, libraries: Libraries) -> Option<String> {
    let mut folder = Folder {
        libraries,
        context: None,
        failed: None,
    };
    folder.constant(expr);
    let (id, message) = folder.failed?;
    let located = positions(source).map(|positions| positions.locate(id, &|_| true, &message));
    Some(located.unwrap_or(message))
}

struct Folder {
    libraries: Libraries,
    /// Made when the first conversion of a constant is found: most
    /// expressions have none.
    context: Option<::cel::Context<'static, 'static>>,
    failed: Option<(u64, String)>,
}

impl Folder {
    /// Whether `expr` is a constant as cel-go's optimizer sees one; its
    /// subexpressions are visited first, as the optimizer plans them.
    fn constant(&mut self, expr: &IdedExpr) -> bool {
        let mut all = true;
        children(expr, &mut |child| {
            if self.failed.is_none() {
                all &= self.constant(child);
            }
        });
        if self.failed.is_some() {
            return false;
        }
        match &expr.expr {
            Expr::Literal(_) => true,
            Expr::List(_) => all,
            Expr::Map(map) => {
                all && map
                    .entries
                    .iter()
                    .all(|entry| matches!(entry.expr, EntryExpr::MapEntry(_)))
            }
            Expr::Call(call) => {
                // Kubernetes' `find` and `findAll` are compiled so too (its
                // regex library's optimizations).
                if matches!(call.func_name.as_str(), "matches" | "find" | "findAll") {
                    self.pattern(&call.func_name, call.args.first());
                    return false;
                }
                let conversion = call.target.is_none()
                    && call.args.len() == 1
                    && CONVERSIONS.contains(&call.func_name.as_str());
                if !(conversion && all) {
                    return false;
                }
                match self.evaluate(expr) {
                    Ok(()) => true,
                    Err(why) => {
                        self.failed = Some((
                            expr.id,
                            format!(
                                "`{}()` of a constant fails ({why}); cel-go's optimizer evaluates it when the policy is created and Kubernetes and Kyverno refuse the policy",
                                call.func_name
                            ),
                        ));
                        false
                    }
                }
            }
            _ => false,
        }
    }

    /// A literal pattern `function` is given, compiled as cel-go's validator
    /// compiles it.
    fn pattern(&mut self, function: &str, argument: Option<&IdedExpr>) {
        let Some(argument) = argument else { return };
        let Expr::Literal(::cel::common::ast::LiteralValue::String(pattern)) = &argument.expr
        else {
            return;
        };
        if let Err(why) = regex_lite::Regex::new(pattern) {
            self.failed = Some((
                argument.id,
                format!(
                    "invalid {function} argument: {why}; Kubernetes and Kyverno compile a literal pattern when the policy is created"
                ),
            ));
        }
    }

    fn evaluate(&mut self, expr: &IdedExpr) -> Result<(), String> {
        let libraries = self.libraries;
        let context = self.context.get_or_insert_with(|| {
            let env = Arc::new(runtime_env(&Default::default(), libraries));
            ::cel::Context::with_env(env)
        });
        let mut expression = expr.clone();
        libraries.prepare(&mut expression);
        context
            .resolve(&expression)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::policy_loads as loads;

    #[test]
    fn failing_conversions_of_constants_refuse_the_policy_when_it_is_created() {
        // kube-apiserver v0.37.2's compiler (the Kubernetes judge) and
        // Kyverno v1.19.1's: each is a compile error, "program instantiation
        // failed" or a validator's "invalid ... argument", reached or not.
        for expression in [
            "int(1e308)",
            "true ? 1 : int(1e308)",
            "duration('1d')",
            "timestamp('2024-01-01')",
            "string(b'\\xff')",
            "uint(-1)",
            "int('x')",
            "[int('x')].size()",
            "{'a': int('x')}.size()",
            "double('1e400')",
            "dyn([1, 2]).size() > 5 ? int(uint(-1)) : 0",
            "bool('maybe')",
            "int(-9223372036854775808.0)",
            "'abc'.matches('[')",
            "matches('[', 'a')",
            "'abc'.find('[')",
            "'abc'.findAll('(', 1)",
        ] {
            for kind in ["MutatingAdmissionPolicy", "MutatingPolicy"] {
                let refused = loads(kind, expression).unwrap_err();
                assert!(
                    refused.contains("cel-go's optimizer evaluates it when the policy is created")
                        || refused.contains("compile a literal pattern"),
                    "{kind}: {expression}: {refused}"
                );
            }
        }
        for expression in [
            "string(dyn(1.5))",
            "int(string(int('7')))",
            "'x'.matches('(?P<n>a)')",
            "type(1) == int",
            "bytes('a') == b'a'",
            "[1][int('2')]",
        ] {
            assert_eq!(
                loads("MutatingAdmissionPolicy", expression),
                Ok(()),
                "{expression}"
            );
        }
        assert_eq!(
            loads("MutatingAdmissionPolicy", "1 + int('x')"),
            Err("settings.spec.variables[0].expression: line 1, column 5: `int()` of a constant fails (Error executing function 'int': string parse error: invalid digit found in string); cel-go's optimizer evaluates it when the policy is created and Kubernetes and Kyverno refuse the policy".into())
        );
    }
}
