//! Kyverno's value patterns, as a conditional or equality anchor in a
//! `patchStrategicMerge` compares a resource's scalar with them: a string
//! pattern is alternatives split at `|`, each a conjunction split at `&`, each
//! an operator (`>=`, `<=`, `>`, `<`, `!`, a range `1-10` or `1!-10`, or none)
//! and an operand compared as a duration, else a quantity, else (`=` and `!`
//! only) as a wildcard over the value's text. Booleans, numbers and `null`
//! compare by value.

use serde_json::Value;

use crate::shared::glob::wildcard;
use crate::shared::units::{Duration, Quantity};

/// Whether the resource's `value` matches the pattern's scalar `pattern`.
pub fn matches(value: &Value, pattern: &Value) -> bool {
    match pattern {
        Value::Bool(expected) => value.as_bool() == Some(*expected),
        Value::Number(expected) => number_matches(value, expected),
        Value::Null => match value {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => s.is_empty(),
            Value::Array(_) | Value::Object(_) => false,
        },
        Value::Object(_) => value.is_object(),
        Value::Array(_) => false,
        Value::String(pattern) => {
            value.as_str() == Some(pattern.as_str())
                || pattern.split('|').any(|alternative| {
                    alternative
                        .trim_matches(' ')
                        .split('&')
                        .all(|condition| condition_matches(value, condition.trim_matches(' ')))
                })
        }
    }
}

/// A number pattern: the same number, a whole float equal to an integer, or
/// a string that parses to it.
fn number_matches(value: &Value, expected: &serde_json::Number) -> bool {
    match (expected.as_i64(), value) {
        (Some(want), Value::Number(n)) => match n.as_i64() {
            Some(got) => got == want,
            None => n
                .as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f == want as f64),
        },
        (Some(want), Value::String(s)) => s.parse::<i64>() == Ok(want),
        (None, Value::Number(n)) => match (n.as_i64(), expected.as_f64()) {
            (Some(got), Some(want)) => want.fract() == 0.0 && got as f64 == want,
            (_, want) => n.as_f64() == want,
        },
        (None, Value::String(s)) => s.parse::<f64>().ok() == expected.as_f64(),
        _ => false,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Operator {
    Equal,
    NotEqual,
    More,
    MoreEqual,
    Less,
    LessEqual,
}

/// One condition: an operator and its operand, or a range.
fn condition_matches(value: &Value, condition: &str) -> bool {
    // Kyverno reads the operator first (a pattern under two characters has
    // none), then the ranges.
    let prefixed = [
        (">=", Operator::MoreEqual),
        ("<=", Operator::LessEqual),
        (">", Operator::More),
        ("<", Operator::Less),
        ("!", Operator::NotEqual),
    ];
    if condition.len() >= 2 {
        for (prefix, operator) in prefixed {
            if let Some(operand) = condition.strip_prefix(prefix) {
                return compare(value, operand.trim(), operator);
            }
        }
        if let Some((low, high)) = range(condition, "!-") {
            return compare(value, low, Operator::Less) || compare(value, high, Operator::More);
        }
        if let Some((low, high)) = range(condition, "-") {
            return compare(value, low, Operator::MoreEqual)
                && compare(value, high, Operator::LessEqual);
        }
    }
    compare(value, condition.trim(), Operator::Equal)
}

/// `low<separator>high` where both are a number with an optional sign,
/// fraction and unit letters (`1-10`, `-5Mi!-5Mi`).
fn range<'p>(condition: &'p str, separator: &str) -> Option<(&'p str, &'p str)> {
    let low_end = bound_end(condition)?;
    let (low, rest) = condition.split_at(low_end);
    let high = rest.strip_prefix(separator)?;
    (bound_end(high)? == high.len()).then_some((low, high))
}

/// Where a range bound at the start of `text` ends.
fn bound_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = usize::from(matches!(bytes.first(), Some(b'-' | b'+' | b'|')));
    let digits = |from: usize| {
        bytes.get(from..).map_or(0, |rest| {
            rest.iter().take_while(|b| b.is_ascii_digit()).count()
        })
    };
    let whole = digits(at);
    if whole == 0 {
        return None;
    }
    at += whole;
    if bytes.get(at) == Some(&b'.') && digits(at + 1) > 0 {
        at += 1 + digits(at + 1);
    }
    let letters = bytes.get(at..).map_or(0, |rest| {
        rest.iter().take_while(|b| b.is_ascii_alphabetic()).count()
    });
    Some(at + letters)
}

/// The value against one operand: as durations, else as quantities, else as
/// text with wildcards (equality only).
fn compare(value: &Value, operand: &str, operator: Operator) -> bool {
    let ordered = |ordering: std::cmp::Ordering| match operator {
        Operator::Equal => ordering.is_eq(),
        Operator::NotEqual => ordering.is_ne(),
        Operator::More => ordering.is_gt(),
        Operator::MoreEqual => ordering.is_ge(),
        Operator::Less => ordering.is_lt(),
        Operator::LessEqual => ordering.is_le(),
    };
    let number_text = match value {
        Value::Null => Some("0".to_string()),
        Value::String(s) => Some(s.clone()),
        // Go's `%f`.
        Value::Number(n) => Some(match n.as_i64() {
            Some(i) => i.to_string(),
            None => format!("{:.6}", n.as_f64().unwrap_or_default()),
        }),
        _ => None,
    };
    if let (Some(want), Some(got)) = (
        Duration::parse(operand),
        number_text.as_deref().and_then(Duration::parse),
    ) {
        return ordered(got.nanos.cmp(&want.nanos));
    }
    if let (Some(want), Some(got)) = (
        Quantity::parse(operand),
        number_text.as_deref().and_then(Quantity::parse),
    ) {
        return ordered(got.nanos.cmp(&want.nanos));
    }
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        // Go's `FormatFloat(v, 'E', -1, 64)` for a float, plain for an integer.
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_exponent(n.as_f64().unwrap_or_default()),
        },
        _ => return false,
    };
    match operator {
        Operator::Equal => wildcard(operand, &text),
        Operator::NotEqual => !wildcard(operand, &text),
        _ => false,
    }
}

/// `1.5E+00`: Go's shortest `E` format.
fn go_exponent(x: f64) -> String {
    let text = format!("{x:E}");
    match text.split_once('E') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(digits) => ('-', digits),
                None => ('+', exponent),
            };
            format!("{mantissa}E{sign}{digits:0>2}")
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(value: Value, pattern: Value) -> bool {
        matches(&value, &pattern)
    }

    #[test]
    fn alternatives_and_conjunctions() {
        let image = json!("public.ecr.aws/docker/library/cassandra:latest");
        assert!(m(image.clone(), json!("*cassandra* | *mongo*")));
        assert!(m(json!("mongo:7"), json!("*cassandra* | *mongo*")));
        assert!(!m(json!("redis"), json!("*cassandra* | *mongo*")));
        assert!(m(image.clone(), json!("*cassandra* & !*:v1")));
        assert!(!m(image, json!("*cassandra* & !*:latest")));
    }

    #[test]
    fn operators_ranges_quantities_durations() {
        assert!(m(json!(5), json!(">3")));
        assert!(!m(json!(5), json!("<=4")));
        assert!(m(json!("2Gi"), json!(">=1024Mi")));
        assert!(m(json!("90s"), json!("<2m")));
        assert!(m(json!(7), json!("1-10")));
        assert!(!m(json!(11), json!("1-10")));
        assert!(m(json!(11), json!("1!-10")));
        assert!(m(json!("a"), json!("!b")));
        assert!(!m(json!("abc"), json!(">b")), "no order on text");
        assert!(m(json!(null), json!("<1")), "null reads as 0");
    }

    #[test]
    fn scalars_by_value() {
        assert!(m(json!(true), json!(true)) && !m(json!("true"), json!(true)));
        assert!(m(json!(3), json!(3)) && m(json!(3.0), json!(3)) && m(json!("3"), json!(3)));
        assert!(!m(json!(3.5), json!(3)));
        assert!(
            m(json!(""), json!(null)) && m(json!(0), json!(null)) && !m(json!("x"), json!(null))
        );
        assert!(m(json!({"a": 1}), json!({})) && !m(json!([1]), json!([1])));
        assert!(m(json!(true), json!("true")) && m(json!(1.5), json!("1.5E+00")));
    }
}
