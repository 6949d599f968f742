//! Kyverno's `semver_compare`: a semantic version against a range of
//! comparisons.

use std::rc::Rc;

use jmespath::Variable;
use jmespath::functions::ArgumentType as T;

use crate::kyverno::jmes_values::{Body, fail, str_arg};

/// Registers the function through `add(name, argument types, body)`.
pub(super) fn register(add: &mut dyn FnMut(&str, Vec<T>, Body)) {
    let s = || T::String;
    add(
        "semver_compare",
        vec![s(), s()],
        Box::new(|a, c| {
            let version = semver::Version::parse(str_arg(a, 0, c)?.trim_start_matches('v'))
                .map_err(|e| fail(c, format!("semver_compare: version: {e}")))?;
            let holds = range_holds(str_arg(a, 1, c)?, &version)
                .map_err(|e| fail(c, format!("semver_compare: range: {e}")))?;
            Ok(Rc::new(Variable::Bool(holds)))
        }),
    );
}

/// A version range the way Kyverno writes them: comparisons separated by
/// spaces (all must hold), alternatives separated by `||`:
/// `>=1.2.0 <2.0.0 || 3.0.0`. A bare version means `=`.
fn range_holds(range: &str, version: &semver::Version) -> Result<bool, String> {
    let mut any = false;
    for alternative in range.split("||") {
        let mut all = true;
        let mut seen = false;
        for comparison in alternative.split_whitespace() {
            seen = true;
            let op_len = comparison
                .find(|c: char| c.is_ascii_alphanumeric())
                .unwrap_or(comparison.len());
            let (op, wanted) = comparison.split_at(op_len);
            let wanted = semver::Version::parse(wanted.trim_start_matches('v'))
                .map_err(|e| format!("{comparison:?}: {e}"))?;
            let order = version.cmp_precedence(&wanted);
            all &= match op {
                "" | "=" | "==" => order.is_eq(),
                "!=" | "!" => order.is_ne(),
                ">" => order.is_gt(),
                ">=" => order.is_ge(),
                "<" => order.is_lt(),
                "<=" => order.is_le(),
                other => return Err(format!("unknown comparison {other:?}")),
            };
        }
        if !seen {
            return Err("empty range".into());
        }
        any |= all;
    }
    Ok(any)
}

#[cfg(test)]
mod tests {
    use crate::testing::jmes_functions::{eval, fails};

    #[test]
    fn semver_ranges() {
        assert_eq!(eval("semver_compare('1.2.3', '>=1.0.0 <2.0.0')"), true);
        assert_eq!(eval("semver_compare('2.1.0', '>=1.0.0 <2.0.0')"), false);
        assert_eq!(eval("semver_compare('2.1.0', '<2.0.0 || >=2.1.0')"), true);
        assert_eq!(eval("semver_compare('1.0.0', '1.0.0')"), true);
        assert_eq!(eval("semver_compare('1.0.0-rc.1', '<1.0.0')"), true);
        assert!(fails("semver_compare('1.0', '1.0.0')").contains("version"));
        assert!(fails("semver_compare('1.0.0', '~>1.0.0')").contains("unknown comparison"));
    }
}
