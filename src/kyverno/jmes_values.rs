//! JMESPath values as both the runtime ([`super::jmes`]) and Kyverno's
//! functions ([`super::jmes_functions`]) handle them: JSON converted to and
//! from them, what a function's body is, its arguments read and its answers
//! made. Below both, so that the runtime can register the functions and the
//! functions need nothing of the runtime.

use std::rc::Rc;

use jmespath::{Context, ErrorReason, JmespathError, Rcvar, Variable};
use serde_json::Value;

/// Longest expression accepted, far beyond what real policies write (one of
/// Kyverno's own tests passes 1024), and longest regular expression a
/// function compiles.
pub const MAX_EXPRESSION_LEN: usize = 8192;

/// A JSON number as Kyverno writes it into text: an integer as it is, others
/// as [`float_text`] writes them.
pub fn number_text(number: &serde_json::Number, pad_exponent: bool) -> String {
    match number.as_f64() {
        Some(float) if !number.is_i64() && !number.is_u64() => float_text(float, pad_exponent),
        _ => number.to_string(),
    }
}

/// A non-integral JSON number as Kyverno writes it into text: Go's
/// `json.Marshal` text ([`crate::shared::go_json::float`]: the shortest
/// decimal, or below 1e-6 and from 1e21 on the exponent form with its sign,
/// `1e+25`, `3.3333333333333334e-8`). `pad_exponent`: at least two exponent
/// digits (`e-08`), as a number substituted inside a longer string is written.
pub fn float_text(float: f64, pad_exponent: bool) -> String {
    let text = crate::shared::go_json::float(float);
    match text.split_once('e') {
        Some((mantissa, exponent)) if pad_exponent && exponent.len() == 2 => {
            let (sign, digit) = exponent.split_at(1);
            format!("{mantissa}e{sign}0{digit}")
        }
        _ => text,
    }
}

/// A Kyverno function's body.
pub type Body =
    Box<dyn Fn(&[Rcvar], &mut Context<'_>) -> Result<Rcvar, JmespathError> + Sync + Send>;

/// An evaluation error with `message`, where the expression failed.
pub fn fail(ctx: &Context<'_>, message: String) -> JmespathError {
    JmespathError::from_ctx(ctx, ErrorReason::Parse(message))
}

/// Argument `i` as a string.
pub fn str_arg<'a>(
    args: &'a [Rcvar],
    i: usize,
    ctx: &Context<'_>,
) -> Result<&'a str, JmespathError> {
    args.get(i)
        .and_then(|v| v.as_string())
        .map(String::as_str)
        .ok_or_else(|| fail(ctx, format!("argument {} must be a string", i + 1)))
}

/// Argument `i` as a number.
pub fn num_arg(args: &[Rcvar], i: usize, ctx: &Context<'_>) -> Result<f64, JmespathError> {
    args.get(i)
        .and_then(|v| v.as_number())
        .ok_or_else(|| fail(ctx, format!("argument {} must be a number", i + 1)))
}

/// A string answer.
pub fn string(s: String) -> Result<Rcvar, JmespathError> {
    Ok(Rc::new(Variable::String(s)))
}

/// A number answer: whole numbers as integers, as Kyverno prints them.
pub fn number(x: f64) -> Result<Rcvar, JmespathError> {
    let n = if x.fract() == 0.0 && x.abs() < 9.0e15 {
        serde_json::Number::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).unwrap_or_else(|| serde_json::Number::from(0))
    };
    Ok(Rc::new(Variable::Number(n)))
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
