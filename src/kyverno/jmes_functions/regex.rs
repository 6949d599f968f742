//! Kyverno's regular expression functions: `regex_match`,
//! `regex_replace_all` and `regex_replace_all_literal`.

use std::rc::Rc;

use jmespath::functions::ArgumentType as T;
use jmespath::{Context, JmespathError, Rcvar, Variable};

use crate::kyverno::jmes_values::{Body, MAX_EXPRESSION_LEN, fail, str_arg, string};

/// Registers the functions through `add(name, argument types, body)`.
pub(super) fn register(add: &mut dyn FnMut(&str, Vec<T>, Body)) {
    let s = || T::String;
    let text = || T::Union(vec![T::String, T::Number]);
    add(
        "regex_match",
        vec![s(), text()],
        Box::new(|a, c| {
            let re = regex(a, c)?;
            Ok(Rc::new(Variable::Bool(re.is_match(&text_arg(a, 1)))))
        }),
    );
    add(
        "regex_replace_all",
        vec![s(), text(), text()],
        Box::new(|a, c| {
            let re = regex(a, c)?;
            string(
                re.replace_all(&text_arg(a, 1), text_arg(a, 2).as_str())
                    .into_owned(),
            )
        }),
    );
    add(
        "regex_replace_all_literal",
        vec![s(), text(), text()],
        Box::new(|a, c| {
            let re = regex(a, c)?;
            let replacement = text_arg(a, 2);
            string(
                re.replace_all(&text_arg(a, 1), regex_lite::NoExpand(&replacement))
                    .into_owned(),
            )
        }),
    );
}

/// A string or number argument as text (Kyverno accepts both).
fn text_arg(args: &[Rcvar], i: usize) -> String {
    match args.get(i).map(|v| &**v) {
        Some(Variable::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn regex(args: &[Rcvar], ctx: &Context<'_>) -> Result<regex_lite::Regex, JmespathError> {
    let pattern = str_arg(args, 0, ctx)?;
    if pattern.len() > MAX_EXPRESSION_LEN {
        return Err(fail(ctx, "regular expression is too long".into()));
    }
    regex_lite::Regex::new(pattern)
        .map_err(|e| fail(ctx, format!("invalid regular expression {pattern:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use crate::testing::jmes_functions::{eval, fails};

    #[test]
    fn regular_expressions() {
        assert_eq!(eval("regex_match('^[0-9]+$', '123')"), true);
        assert_eq!(eval("regex_match('^[0-9]+$', `123`)"), true);
        assert_eq!(eval("regex_match('^[0-9]+$', 'a1')"), false);
        assert_eq!(
            eval(
                "regex_replace_all('^([^/]+\\.[^/]+/)?(.*)$', 'docker.io/nginx:1', 'registry.example.com/$2')"
            ),
            "registry.example.com/nginx:1"
        );
        assert_eq!(
            eval("regex_replace_all_literal('a+', 'caaat', '$1')"),
            "c$1t"
        );
        assert!(fails("regex_match('(', 'x')").contains("invalid regular expression"));
    }
}
