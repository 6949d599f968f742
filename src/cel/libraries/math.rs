//! What Kyverno's `math` library adds to cel-go's (the `cel` crate's math
//! extension has the rest): `math.round(x, digits)`, `x` rounded to
//! `digits` decimal places (to tens, hundreds... with negative `digits`),
//! halves away from zero, computed as Kyverno does: `round(x * 10^d) / 10^d`
//! in doubles.

use ::cel::common::types::{CelDouble, DOUBLE_TYPE};
use ::cel::common::value::CowVal;
use ::cel::{Env, ExecutionError};

use super::{error, global, int_arg, int_type};

/// Declares `math.round(double, int)` beside the extension's
/// `math.round(double)`.
pub fn register(env: &mut Env) {
    global(
        env,
        "math.round",
        "math_round_float_int",
        vec![DOUBLE_TYPE.to_owned(), int_type()],
        round,
    );
}

fn round<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "math.round";
    let value = args
        .first()
        .and_then(|arg| arg.downcast_ref::<CelDouble>())
        .map(|x| *x.inner())
        .ok_or_else(|| error(F, "argument 0 must be a double"))?;
    // Go's math.Pow takes any int64; past ±400 the shift is 0 or infinite
    // either way.
    let digits = int_arg(&args, 1, F)?.clamp(-400, 400);
    let shift = 10f64.powi(digits as i32);
    Ok(CowVal::owned(CelDouble::from(
        (value * shift).round() / shift,
    )))
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{annotated, b, table};
    use ::cel::Value;
    use serde_json::json;

    fn d(value: f64) -> Option<Value> {
        Some(Value::Float(value))
    }

    /// Kyverno's `math` tests (kyverno/sdk `extensions/cel/libs/math`), and
    /// the extension's one-argument form beside it.
    #[test]
    fn rounds_to_digits_as_kyverno_does() {
        table(&[
            ("math.round(10.125, 2)", d(10.13)),
            ("math.round(10.125, 0)", d(10.0)),
            ("math.round(12345.6789, -2)", d(12300.0)),
            ("math.round(-2.5, 0)", d(-3.0)),
            ("math.round(2.5)", d(3.0)),
            ("math.round(1.0, 1000) == 1.0", b(false)),
            ("math.round(1, 2)", None),
        ]);
    }

    #[test]
    fn a_mutating_policy_annotates_with_a_rounded_number() {
        assert_eq!(
            annotated("string(math.round(2.0 / 3.0, 3))"),
            json!({"result": "0.667"})
        );
    }
}
