//! Kyverno's string functions: case, trimming, splitting, replacing,
//! truncating, base64, comparison and wildcard matching.

use std::rc::Rc;

use base64::Engine;
use jmespath::Variable;
use jmespath::functions::ArgumentType as T;

use crate::kyverno::jmes_values::{Body, fail, num_arg, number, str_arg, string};
use crate::shared::glob::wildcard;

/// Registers the functions through `add(name, argument types, body)`.
pub(super) fn register(add: &mut dyn FnMut(&str, Vec<T>, Body)) {
    let s = || T::String;
    let n = || T::Number;
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
}

#[cfg(test)]
mod tests {
    use crate::testing::jmes_functions::eval_on;
    use serde_json::json;

    #[test]
    fn kyverno_string_functions() {
        assert_eq!(eval_on("to_upper('abc')", json!({})), json!("ABC"));
        assert_eq!(eval_on("to_lower('AbC')", json!({})), json!("abc"));
        assert_eq!(eval_on("trim('--a--', '-')", json!({})), json!("a"));
        assert_eq!(
            eval_on("trim_prefix('node-1', 'node-')", json!({})),
            json!("1")
        );
        assert_eq!(eval_on("split('a,b', ',')", json!({})), json!(["a", "b"]));
        assert_eq!(
            eval_on("replace('aaa', 'a', 'b', `2`)", json!({})),
            json!("bba")
        );
        assert_eq!(
            eval_on("replace_all('aaa', 'a', 'b')", json!({})),
            json!("bbb")
        );
        assert_eq!(eval_on("truncate('abcdef', `3`)", json!({})), json!("abc"));
        assert_eq!(
            eval_on("base64_encode('zone')", json!({})),
            json!("em9uZQ==")
        );
        assert_eq!(
            eval_on("base64_decode('em9uZQ==')", json!({})),
            json!("zone")
        );
        assert_eq!(
            eval_on("equal_fold('Zone', 'zONE')", json!({})),
            json!(true)
        );
        assert_eq!(
            eval_on("pattern_match('us-*', 'us-east-2')", json!({})),
            json!(true)
        );
        assert_eq!(
            eval_on("pattern_match('eu-*', 'us-east-2')", json!({})),
            json!(false)
        );
    }
}
