//! Kyverno's arithmetic: `add`, `subtract`, `multiply`, `divide` and
//! `modulo` over numbers, quantities (`1Gi`) and durations (`1h`), as
//! Kyverno combines them; `sum` and `round` over numbers.

use std::rc::Rc;

use jmespath::functions::ArgumentType as T;
use jmespath::{Rcvar, Variable};

use crate::kyverno::jmes_values::{Body, fail, num_arg, number};
use crate::shared::units::{Duration, Quantity};

/// Registers the functions through `add(name, argument types, body)`.
pub(super) fn register(add: &mut dyn FnMut(&str, Vec<T>, Body)) {
    let any = || T::Any;
    let n = || T::Number;
    for (name, op) in [
        ("add", Op::Add),
        ("subtract", Op::Subtract),
        ("multiply", Op::Multiply),
        ("divide", Op::Divide),
        ("modulo", Op::Modulo),
    ] {
        add(
            name,
            vec![any(), any()],
            Box::new(move |a, c| {
                let (x, y) = (operand(a, 0), operand(a, 1));
                arithmetic(op, x, y).map_err(|e| fail(c, format!("{name}: {e}")))
            }),
        );
    }
    add(
        "sum",
        vec![T::TypedArray(Box::new(n()))],
        Box::new(|a, c| {
            let items = a
                .first()
                .and_then(|v| v.as_array())
                .ok_or_else(|| fail(c, "sum needs an array".into()))?;
            number(items.iter().filter_map(|v| v.as_number()).sum())
        }),
    );
    add(
        "round",
        vec![n(), n()],
        Box::new(|a, c| {
            let (x, digits) = (num_arg(a, 0, c)?, num_arg(a, 1, c)?);
            let scale = 10f64.powi(digits.clamp(0.0, 15.0) as i32);
            number((x * scale).round() / scale)
        }),
    );
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
}

/// An argument of the arithmetic functions, as Kyverno reads it.
#[derive(Debug, Clone, Copy)]
enum Operand {
    Number(f64),
    Quantity(Quantity),
    Duration(Duration),
    Other,
}

fn operand(args: &[Rcvar], i: usize) -> Operand {
    match args.get(i).map(|v| &**v) {
        Some(Variable::Number(n)) => n.as_f64().map_or(Operand::Other, Operand::Number),
        Some(Variable::String(s)) => {
            // Kyverno tries a quantity first: `30m` is 30 milli-units.
            if let Some(q) = Quantity::parse(s) {
                Operand::Quantity(q)
            } else if let Some(d) = Duration::parse(s) {
                Operand::Duration(d)
            } else {
                Operand::Other
            }
        }
        _ => Operand::Other,
    }
}

/// Kyverno's table: numbers with numbers; quantities and durations with
/// their own kind (`+ - %`), scaled by numbers (`* /`), divided by their own
/// kind into a number.
fn arithmetic(op: Op, x: Operand, y: Operand) -> Result<Rcvar, String> {
    use Operand as O;
    let quantity = |nanos: i128, like: Quantity| {
        string_var(
            Quantity {
                nanos,
                format: like.format,
            }
            .to_canonical(),
        )
    };
    let duration = |nanos: i128| string_var(Duration { nanos }.to_go_string());
    let scale = |nanos: i128, factor: f64, divide: bool| -> Result<i128, String> {
        if divide && factor == 0.0 {
            return Err("division by zero".into());
        }
        let result = if divide {
            nanos as f64 / factor
        } else {
            nanos as f64 * factor
        };
        // Beyond 10^36 nano-units (10^27 units, or ~3·10^19 years) is no
        // real quantity or duration.
        if result.is_finite() && result.abs() < 1e36 {
            Ok(result.round() as i128)
        } else {
            Err("result out of range".into())
        }
    };
    let exact = |a: i128, b: i128| -> Result<i128, String> {
        let result = match op {
            Op::Add => a.checked_add(b),
            Op::Subtract => a.checked_sub(b),
            Op::Modulo => a.checked_rem(b),
            _ => None,
        };
        result.ok_or_else(|| {
            if b == 0 {
                "division by zero".to_string()
            } else {
                "result out of range".to_string()
            }
        })
    };
    match (op, x, y) {
        (_, O::Number(a), O::Number(b)) => number_result(op, a, b),
        (Op::Add | Op::Subtract | Op::Modulo, O::Quantity(a), O::Quantity(b)) => {
            Ok(quantity(exact(a.nanos, b.nanos)?, a))
        }
        (Op::Add | Op::Subtract | Op::Modulo, O::Duration(a), O::Duration(b)) => {
            Ok(duration(exact(a.nanos, b.nanos)?))
        }
        (Op::Multiply, O::Quantity(q), O::Number(n))
        | (Op::Multiply, O::Number(n), O::Quantity(q)) => {
            Ok(quantity(scale(q.nanos, n, false)?, q))
        }
        (Op::Multiply, O::Duration(d), O::Number(n))
        | (Op::Multiply, O::Number(n), O::Duration(d)) => Ok(duration(scale(d.nanos, n, false)?)),
        (Op::Divide, O::Quantity(q), O::Number(n)) => Ok(quantity(scale(q.nanos, n, true)?, q)),
        (Op::Divide, O::Duration(d), O::Number(n)) => Ok(duration(scale(d.nanos, n, true)?)),
        (Op::Divide, O::Quantity(a), O::Quantity(b)) => {
            number_result(Op::Divide, a.nanos as f64, b.nanos as f64)
        }
        (Op::Divide, O::Duration(a), O::Duration(b)) => {
            number_result(Op::Divide, a.nanos as f64, b.nanos as f64)
        }
        _ => Err(format!(
            "arguments {x:?} and {y:?} do not combine (numbers, quantities such as 1Gi, durations such as 1h)"
        )),
    }
}

fn number_result(op: Op, a: f64, b: f64) -> Result<Rcvar, String> {
    let result = match op {
        Op::Add => a + b,
        Op::Subtract => a - b,
        Op::Multiply => a * b,
        Op::Divide | Op::Modulo if b == 0.0 => return Err("division by zero".into()),
        Op::Divide => a / b,
        Op::Modulo => a % b,
    };
    number(result).map_err(|e| e.to_string())
}

fn string_var(s: String) -> Rcvar {
    Rc::new(Variable::String(s))
}

#[cfg(test)]
mod tests {
    use crate::testing::jmes_functions::{eval, eval_on, fails};
    use serde_json::json;

    #[test]
    fn arithmetic_over_numbers_quantities_and_durations() {
        assert_eq!(eval("add(`1`, `2`)"), 3);
        assert_eq!(eval("add('1Gi', '512Mi')"), "1536Mi");
        assert_eq!(eval("add('1Mi', '1Mi')"), "2Mi");
        assert_eq!(eval("subtract('1', '500m')"), "500m");
        assert_eq!(eval("add('1h', '30s')"), "1h0m30s");
        assert_eq!(eval("add('1h', '1h30m0s')"), "2h30m0s");
        assert_eq!(eval("subtract('1h', '5400s')"), "-30m0s");
        // Like Kyverno, a string that reads as a quantity is one: `30m` is
        // 30 milli-units, not 30 minutes.
        assert!(fails("add('1h', '30m')").contains("do not combine"));
        assert_eq!(eval("multiply('250m', `4`)"), "1");
        assert_eq!(eval("multiply(`2`, '1h')"), "2h0m0s");
        assert_eq!(eval("divide('1Gi', '256Mi')"), 4);
        assert_eq!(eval("divide('1h', `4`)"), "15m0s");
        assert_eq!(eval("divide('1h', '900s')"), 4);
        assert_eq!(eval("modulo('4200s', '1h')"), "10m0s");
        assert_eq!(eval("modulo(`7`, `4`)"), 3);
        assert!(fails("add('1Gi', '1h')").contains("do not combine"));
        assert!(fails("divide(`1`, `0`)").contains("division by zero"));
        assert!(fails("modulo('1Gi', '0')").contains("division by zero"));
        assert_eq!(eval_on("add(`1`, `2`)", json!({})), json!(3));
        assert_eq!(eval_on("divide(`7`, `2`)", json!({})), json!(3.5));
        assert_eq!(eval_on("modulo(`7`, `2`)", json!({})), json!(1));
        assert_eq!(eval_on("sum(`[1,2,3]`)", json!({})), json!(6));
        assert_eq!(eval_on("round(`2.71828`, `2`)", json!({})), json!(2.72));
    }
}
