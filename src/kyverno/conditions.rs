//! `preconditions` operators with Kyverno's comparisons: wildcards in values,
//! number/string coercion, Kubernetes quantities (`1Gi` = `1024Mi`), Go
//! durations (`1h` = `60m`) and numeric ranges (`1-10`, `1!-10`).

use std::cmp::Ordering;

use serde_json::Value;

use super::units::{Duration, Quantity};
use crate::glob::wildcard;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Equals,
    NotEquals,
    AnyIn,
    AllIn,
    AnyNotIn,
    AllNotIn,
    GreaterThan,
    GreaterThanOrEquals,
    LessThan,
    LessThanOrEquals,
}

impl Operator {
    /// Operator names are case-insensitive, as in Kyverno.
    pub fn parse(name: &str) -> Result<Operator, String> {
        use Operator::*;
        let all = [
            ("equals", Equals),
            ("notequals", NotEquals),
            ("anyin", AnyIn),
            ("allin", AllIn),
            ("anynotin", AnyNotIn),
            ("allnotin", AllNotIn),
            ("greaterthan", GreaterThan),
            ("greaterthanorequals", GreaterThanOrEquals),
            ("lessthan", LessThan),
            ("lessthanorequals", LessThanOrEquals),
        ];
        let lower = name.to_ascii_lowercase();
        if matches!(lower.as_str(), "in" | "notin") {
            return Err(format!(
                "operator {name:?} was removed from Kyverno; use AnyIn/AllIn or AnyNotIn/AllNotIn"
            ));
        }
        all.iter().find(|(n, _)| *n == lower).map(|(_, op)| *op).ok_or_else(|| {
            format!(
                "unknown operator {name:?}: expected Equals, NotEquals, AnyIn, AllIn, AnyNotIn, AllNotIn, GreaterThan, GreaterThanOrEquals, LessThan or LessThanOrEquals"
            )
        })
    }
}

/// Evaluates `key <operator> value` (both already substituted).
pub fn evaluate(key: &Value, op: Operator, value: &Value) -> bool {
    use Operator::*;
    match op {
        Equals => equals(key, value),
        NotEquals => !equals(key, value),
        AnyIn => items(key).iter().any(|k| in_value(k, value)),
        AllIn => items(key).iter().all(|k| in_value(k, value)),
        AnyNotIn => items(key).iter().any(|k| !in_value(k, value)),
        AllNotIn => items(key).iter().all(|k| !in_value(k, value)),
        GreaterThan => compare(key, value) == Some(Ordering::Greater),
        GreaterThanOrEquals => matches!(
            compare(key, value),
            Some(Ordering::Greater | Ordering::Equal)
        ),
        LessThan => compare(key, value) == Some(Ordering::Less),
        LessThanOrEquals => matches!(compare(key, value), Some(Ordering::Less | Ordering::Equal)),
    }
}

fn items(value: &Value) -> Vec<&Value> {
    match value {
        Value::Array(list) => list.iter().collect(),
        other => vec![other],
    }
}

fn in_value(item: &Value, value: &Value) -> bool {
    match value {
        Value::Array(list) => list.iter().any(|v| equals(item, v) || in_range(item, v)),
        // A string value may be a JSON list, a range, or one item.
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(list)) => list.iter().any(|v| equals(item, v)),
            _ => equals(item, value) || in_range(item, value),
        },
        other => equals(item, other),
    }
}

/// `a-b` (inclusive) or `a!-b` (outside), for numbers.
fn in_range(item: &Value, range: &Value) -> bool {
    let (Some(text), Some(x)) = (range.as_str(), number(item)) else {
        return false;
    };
    let (negated, bounds) = match text.split_once("!-") {
        Some(bounds) => (true, Some(bounds)),
        None => (false, split_range(text)),
    };
    let Some((low, high)) = bounds else {
        return false;
    };
    let (Some(low), Some(high)) = (
        low.trim().parse::<f64>().ok(),
        high.trim().parse::<f64>().ok(),
    ) else {
        return false;
    };
    (low <= x && x <= high) != negated
}

/// Splits `a-b` at the dash between the numbers (a leading minus belongs to `a`).
fn split_range(text: &str) -> Option<(&str, &str)> {
    let start = usize::from(text.starts_with('-'));
    let at = text.get(start..)?.find('-')? + start;
    Some((text.get(..at)?, text.get(at + 1..)?))
}

pub fn equals(key: &Value, value: &Value) -> bool {
    match (key, value) {
        (Value::String(k), Value::String(v)) => {
            wildcard(v, k)
                || matches!((quantity(k), quantity(v)), (Some(a), Some(b)) if a == b)
                || matches!((duration(k), duration(v)), (Some(a), Some(b)) if a == b)
        }
        (Value::Number(_), _) | (_, Value::Number(_)) => match (number(key), number(value)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        },
        (Value::Bool(k), Value::String(v)) | (Value::String(v), Value::Bool(k)) => {
            v == &k.to_string()
        }
        _ => key == value,
    }
}

fn compare(key: &Value, value: &Value) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (number(key), number(value)) {
        return a.partial_cmp(&b);
    }
    let (Some(k), Some(v)) = (key.as_str(), value.as_str()) else {
        return None;
    };
    if let (Some(a), Some(b)) = (quantity(k), quantity(v)) {
        return a.partial_cmp(&b);
    }
    if let (Some(a), Some(b)) = (duration(k), duration(v)) {
        return a.partial_cmp(&b);
    }
    None
}

fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|x| x.is_finite()),
        _ => None,
    }
}

/// A Kubernetes quantity (`500m`, `1Gi`, `2e3`), in nano-units.
fn quantity(text: &str) -> Option<i128> {
    Quantity::parse(text).map(|q| q.nanos)
}

/// A Go duration (`1h30m`, `300ms`), in nanoseconds.
fn duration(text: &str) -> Option<i128> {
    Duration::parse(text).map(|d| d.nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(key: Value, op: &str, value: Value) -> bool {
        evaluate(&key, Operator::parse(op).unwrap(), &value)
    }

    #[test]
    fn operator_names() {
        assert_eq!(Operator::parse("anyin").unwrap(), Operator::AnyIn);
        assert_eq!(
            Operator::parse("GreaterThanOrEquals").unwrap(),
            Operator::GreaterThanOrEquals
        );
        assert!(Operator::parse("In").unwrap_err().contains("removed"));
        assert!(
            Operator::parse("Matches")
                .unwrap_err()
                .contains("unknown operator")
        );
    }

    #[test]
    fn equals_with_wildcards_coercion_quantities_durations() {
        assert!(check(json!("us-east-2a"), "Equals", json!("us-east-*")));
        assert!(!check(json!("eu-west-1"), "Equals", json!("us-*")));
        assert!(check(json!(1), "Equals", json!("1")));
        assert!(check(json!("1Gi"), "Equals", json!("1024Mi")));
        assert!(check(json!("1h"), "Equals", json!("60m")));
        assert!(check(json!(true), "Equals", json!("true")));
        assert!(check(json!({"a": 1}), "Equals", json!({"a": 1})));
        assert!(check(json!("a"), "NotEquals", json!("b")));
    }

    #[test]
    fn membership() {
        assert!(check(json!("CREATE"), "AnyIn", json!(["CREATE", "UPDATE"])));
        assert!(check(json!(["a", "b"]), "AllIn", json!(["a", "b", "c"])));
        assert!(!check(json!(["a", "z"]), "AllIn", json!(["a", "b"])));
        assert!(check(json!(["a", "z"]), "AnyNotIn", json!(["a", "b"])));
        assert!(check(json!(["x", "z"]), "AllNotIn", json!(["a", "b"])));
        assert!(check(json!("kube-system"), "AnyIn", json!(["kube-*"])));
        assert!(check(json!(5), "AnyIn", json!(["1-10"])));
        assert!(!check(json!(15), "AnyIn", json!("1-10")));
        assert!(check(json!(15), "AnyIn", json!("1!-10")));
        assert!(check(json!(-3), "AnyIn", json!("-5-0")));
    }

    #[test]
    fn ordering() {
        assert!(check(json!(3), "GreaterThan", json!(2)));
        assert!(check(json!("3"), "GreaterThanOrEquals", json!(3)));
        assert!(check(json!("512Mi"), "LessThan", json!("1Gi")));
        assert!(check(json!("90s"), "GreaterThan", json!("1m")));
        assert!(check(json!("1m"), "LessThanOrEquals", json!("60s")));
        assert!(!check(json!("abc"), "GreaterThan", json!("abd")));
    }

    #[test]
    fn parsers() {
        assert_eq!(quantity("500m"), Some(500_000_000));
        assert_eq!(quantity("2Ki"), Some(2_048_000_000_000));
        assert_eq!(quantity("zone"), None);
        assert_eq!(duration("1h30m"), Some(5_400_000_000_000));
        assert_eq!(duration("300ms"), Some(300_000_000));
        assert_eq!(duration("1x"), None);
        assert_eq!(duration(""), None);
    }
}
