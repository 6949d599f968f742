//! Doubles as cel-go converts them. `string(double)` is Go's `%g` (`1e+06`,
//! `1.5e-05`, `123456.5`, `+Inf`): the `cel` crate's own conversion writes
//! the plain decimal and cannot be replaced, so each `string(x)` is
//! rewritten after parsing into `string(@dtxt(x))`: a double becomes its text
//! first, and `string()` of a string is the string. Found by `make
//! differential` against cel-go (seed 2). `double(string)` is Go's
//! `ParseFloat`, which refuses a number out of range (`double('1e400')`) where
//! the crate gives infinity: each `double(x)` becomes `double(@dparse(x))`.

use ::cel::common::ast::{Expr, IdedExpr};
use ::cel::common::value::CowVal;
use ::cel::{Env, ExecutionError, Value};

use super::{dyn_type, error, global, string, wrap_in_call};

const DOUBLE_TEXT: &str = "@dtxt";
const DOUBLE_PARSE: &str = "@dparse";

/// Declares the wrappers the rewrite calls.
pub fn register(env: &mut Env) {
    global(env, DOUBLE_TEXT, "d", vec![dyn_type()], double_text);
    global(env, DOUBLE_PARSE, "dp", vec![dyn_type()], double_parse);
}

/// Wraps the argument of every one-argument global `string(x)` and
/// `double(x)`.
pub fn rewrite(expr: &mut IdedExpr) {
    crate::cel::syntax::ast::children_mut(expr, &mut rewrite);
    if let Expr::Call(call) = &mut expr.expr
        && call.target.is_none()
        && let [argument] = call.args.as_mut_slice()
    {
        match call.func_name.as_str() {
            "string" => wrap_in_call(argument, DOUBLE_TEXT),
            "double" => wrap_in_call(argument, DOUBLE_PARSE),
            _ => {}
        }
    }
}

/// A string Go's `ParseFloat` refuses as out of range is an error; any
/// other argument goes on to `double()` as it is.
fn double_parse<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Some(argument) = args.pop() else {
        return Err(error(DOUBLE_PARSE, "one argument"));
    };
    if let Ok(Value::String(text)) = Value::try_from(argument.as_ref())
        && out_of_range(&text)
    {
        return Err(error(
            "double",
            "type conversion error from 'string' to 'double'",
        ));
    }
    Ok(argument)
}

/// Whether `text` is a finite number too large for a double (`1e400`), not
/// an infinity written as one (`inf`, `-Infinity`).
fn out_of_range(text: &str) -> bool {
    let unsigned = text.trim_start_matches(['+', '-']).to_ascii_lowercase();
    text.parse::<f64>().is_ok_and(f64::is_infinite) && unsigned != "inf" && unsigned != "infinity"
}

fn double_text<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Some(argument) = args.pop() else {
        return Err(error(DOUBLE_TEXT, "one argument"));
    };
    match Value::try_from(argument.as_ref()) {
        Ok(Value::Float(f)) => string(go_text(f)),
        _ => Ok(argument),
    }
}

/// Go's `%g` of a double: the shortest digits that read back as the same
/// double, in exponent form when the exponent is below -4 or at least 6.
pub fn go_text(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    crate::shared::go_float::shortest_g(&format!("{value:e}"))
}

#[cfg(test)]
mod tests {
    use super::go_text;

    /// cel-go: `strconv.ParseFloat`'s range error is a conversion error;
    /// an infinity spelled out, and an underflow (0), are values.
    #[test]
    fn a_number_too_large_for_a_double_is_an_error() {
        use crate::testing::cel_libraries::eval;
        use ::cel::Value;
        for source in [
            "double('1e400')",
            "double('-1e400')",
            "double(dyn('1e309'))",
        ] {
            let message = eval(source).unwrap_err().to_string();
            assert!(
                message.contains("type conversion error from 'string' to 'double'"),
                "{source}: {message}"
            );
        }
        assert_eq!(
            eval("double('-Infinity')"),
            Ok(Value::Float(f64::NEG_INFINITY))
        );
        assert_eq!(eval("double('1e-400')"), Ok(Value::Float(0.0)));
        assert_eq!(eval("double('1e308')"), Ok(Value::Float(1e308)));
        assert_eq!(eval("double(2)"), Ok(Value::Float(2.0)));
    }

    #[test]
    fn doubles_are_written_as_go_writes_them() {
        // cel-go's answers (k8s.io/apiserver v0.37.2's environment).
        for (value, text) in [
            (1_000_000.0, "1e+06"),
            (123_456.5, "123456.5"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (-0.0, "-0"),
            (1e21, "1e+21"),
            (1e20, "1e+20"),
            (-1.5e-7, "-1.5e-07"),
            (f64::INFINITY, "+Inf"),
            (0.1, "0.1"),
            (100.0, "100"),
            (1e308, "1e+308"),
            (1_234_567.0, "1.234567e+06"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(go_text(value), text, "{value}");
        }
    }
}
