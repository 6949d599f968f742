//! Kyverno's JMESPath functions that need more than a line: arithmetic over
//! numbers, quantities and durations; regular expressions; YAML; semantic
//! version ranges; and the time functions.

use std::rc::Rc;

use jmespath::functions::ArgumentType as T;
use jmespath::{Context, JmespathError, Rcvar, Variable};
use serde_json::Value;

use super::jmes::{Body, fail, number, str_arg, string, to_var};
use crate::shared::time::Instant;
use crate::shared::units::{Duration, Quantity};

/// Kyverno functions left out, with the reason given at load time.
pub const REFUSED: &[(&str, &str)] = &[(
    "random",
    "random values would make the same request mutate differently on each evaluation",
)];

/// Registers the functions through `add(name, argument types, body)`.
pub fn register(add: &mut dyn FnMut(&str, Vec<T>, Body)) {
    let any = || T::Any;
    let s = || T::String;
    let text = || T::Union(vec![T::String, T::Number]);
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
    add(
        "parse_yaml",
        vec![s()],
        Box::new(|a, c| {
            let value: Value = serde_yaml::from_str(str_arg(a, 0, c)?)
                .map_err(|e| fail(c, format!("parse_yaml: {e}")))?;
            Ok(to_var(&value))
        }),
    );
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
    register_time(add);
}

fn register_time(add: &mut dyn FnMut(&str, Vec<T>, Body)) {
    let s = || T::String;
    let time = |a: &[Rcvar], i: usize, c: &Context<'_>| -> Result<Instant, JmespathError> {
        let text = str_arg(a, i, c)?;
        Instant::parse_rfc3339(text)
            .ok_or_else(|| fail(c, format!("{text:?} is not an RFC 3339 time")))
    };
    let span = |a: &[Rcvar], i: usize, c: &Context<'_>| -> Result<Duration, JmespathError> {
        let text = str_arg(a, i, c)?;
        Duration::parse(text).ok_or_else(|| fail(c, format!("{text:?} is not a duration")))
    };
    let boolean = |b: bool| Ok(Rc::new(Variable::Bool(b)));
    add(
        "time_parse",
        vec![s(), s()],
        Box::new(|a, c| {
            let (layout, value) = (str_arg(a, 0, c)?, str_arg(a, 1, c)?);
            let parsed = Instant::parse_layout(layout, value)
                .map_err(|e| fail(c, format!("time_parse: {e}")))?;
            string(parsed.to_rfc3339())
        }),
    );
    add(
        "time_add",
        vec![s(), s()],
        Box::new(move |a, c| string(time(a, 0, c)?.plus(span(a, 1, c)?).to_rfc3339())),
    );
    add(
        "time_after",
        vec![s(), s()],
        Box::new(move |a, c| boolean(time(a, 0, c)?.nanos > time(a, 1, c)?.nanos)),
    );
    add(
        "time_before",
        vec![s(), s()],
        Box::new(move |a, c| boolean(time(a, 0, c)?.nanos < time(a, 1, c)?.nanos)),
    );
    add(
        "time_between",
        vec![s(), s(), s()],
        Box::new(move |a, c| {
            let t = time(a, 0, c)?.nanos;
            boolean(t > time(a, 1, c)?.nanos && t < time(a, 2, c)?.nanos)
        }),
    );
    add(
        "time_diff",
        vec![s(), s()],
        Box::new(move |a, c| {
            let nanos = time(a, 1, c)?.nanos.saturating_sub(time(a, 0, c)?.nanos);
            string(Duration { nanos }.to_go_string())
        }),
    );
    add(
        "time_since",
        vec![s(), s(), s()],
        Box::new(|a, c| {
            let layout = str_arg(a, 0, c)?;
            let parse = |i: usize| -> Result<Instant, JmespathError> {
                let value = str_arg(a, i, c)?;
                if value.is_empty() {
                    // As in Kyverno, an empty end time is now.
                    return now(c, "time_since");
                }
                let parsed = if layout.is_empty() {
                    Instant::parse_rfc3339(value)
                        .ok_or_else(|| format!("{value:?} is not an RFC 3339 time"))
                } else {
                    Instant::parse_layout(layout, value)
                };
                parsed.map_err(|e| fail(c, format!("time_since: {e}")))
            };
            let nanos = parse(2)?.nanos.saturating_sub(parse(1)?.nanos);
            string(Duration { nanos }.to_go_string())
        }),
    );
    // Go's `time.Now().Format(time.RFC3339)`: whole seconds. The module has
    // no local zone, so `time_now` is in UTC too, as Kyverno's own Pods run.
    for name in ["time_now", "time_now_utc"] {
        add(
            name,
            vec![],
            Box::new(move |_, c| string(now(c, name)?.to_rfc3339())),
        );
    }
    add(
        "time_truncate",
        vec![s(), s()],
        Box::new(move |a, c| {
            let step = span(a, 1, c)?;
            string(time(a, 0, c)?.truncate(step).to_rfc3339())
        }),
    );
    add(
        "time_utc",
        vec![s()],
        Box::new(move |a, c| string(time(a, 0, c)?.utc().to_rfc3339())),
    );
    add(
        "time_to_cron",
        vec![s()],
        Box::new(move |a, c| string(time(a, 0, c)?.to_cron())),
    );
}

/// The time now, or the error that the clock is before 1970.
fn now(c: &Context, function: &str) -> Result<Instant, JmespathError> {
    Instant::now().ok_or_else(|| fail(c, format!("{function}: the clock is before 1970")))
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
    if pattern.len() > super::jmes::MAX_EXPRESSION_LEN {
        return Err(fail(ctx, "regular expression is too long".into()));
    }
    regex_lite::Regex::new(pattern)
        .map_err(|e| fail(ctx, format!("invalid regular expression {pattern:?}: {e}")))
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
    use super::super::jmes::{Functions, search_var};
    use super::*;

    fn eval(expression: &str) -> Value {
        let rt = Functions::all();
        let var = search_var(&rt, expression, &Rc::new(Variable::Null)).unwrap();
        serde_json::to_value(&*var).unwrap()
    }

    fn fails(expression: &str) -> String {
        let rt = Functions::all();
        search_var(&rt, expression, &Rc::new(Variable::Null)).unwrap_err()
    }

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
    }

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

    #[test]
    fn yaml_and_semver() {
        assert_eq!(
            eval("parse_yaml('a: 1\nb: [x, y]')"),
            serde_json::json!({"a": 1, "b": ["x", "y"]})
        );
        assert_eq!(eval("semver_compare('1.2.3', '>=1.0.0 <2.0.0')"), true);
        assert_eq!(eval("semver_compare('2.1.0', '>=1.0.0 <2.0.0')"), false);
        assert_eq!(eval("semver_compare('2.1.0', '<2.0.0 || >=2.1.0')"), true);
        assert_eq!(eval("semver_compare('1.0.0', '1.0.0')"), true);
        assert_eq!(eval("semver_compare('1.0.0-rc.1', '<1.0.0')"), true);
        assert!(fails("semver_compare('1.0', '1.0.0')").contains("version"));
        assert!(fails("semver_compare('1.0.0', '~>1.0.0')").contains("unknown comparison"));
    }

    #[test]
    fn time_functions_without_a_clock() {
        assert_eq!(
            eval("time_add('2023-01-12T12:37:56-05:00', '6h')"),
            "2023-01-12T18:37:56-05:00"
        );
        assert_eq!(
            eval("time_before('2023-01-12T19:05:59Z', '2023-01-13T19:05:59Z')"),
            true
        );
        assert_eq!(
            eval("time_after('2023-01-12T19:05:59Z', '2023-01-13T19:05:59Z')"),
            false
        );
        assert_eq!(
            eval(
                "time_between('2023-01-12T19:05:59Z', '2023-01-01T19:05:59Z', '2023-01-15T19:05:59Z')"
            ),
            true
        );
        assert_eq!(
            eval("time_diff('2023-01-10T00:00:00Z', '2023-01-11T00:00:00Z')"),
            "24h0m0s"
        );
        assert_eq!(
            eval("time_parse('Mon Jan 02 2006 15:04:05 -0700', 'Fri Jun 22 2022 17:45:00 +0100')"),
            "2022-06-22T17:45:00+01:00"
        );
        assert_eq!(
            eval("time_to_cron('2022-04-11T03:14:05-07:00')"),
            "14 3 11 4 1"
        );
        assert_eq!(
            eval("time_truncate('2023-01-12T17:37:00Z', '1h')"),
            "2023-01-12T17:00:00Z"
        );
        assert_eq!(
            eval("time_utc('2023-01-12T17:37:00+02:00')"),
            "2023-01-12T15:37:00Z"
        );
        assert_eq!(
            eval("time_since('', '2023-01-12T17:00:00Z', '2023-01-12T17:30:00Z')"),
            "30m0s"
        );
        // An empty end time is now.
        let since = eval("time_since('', '2023-01-12T17:00:00Z', '')");
        assert!(
            since
                .as_str()
                .is_some_and(|s| s.ends_with('s') && s.contains('h')),
            "{since}"
        );
        assert!(fails("time_add('yesterday', '1h')").contains("RFC 3339"));
        // Extremes stay answers, never overflow traps.
        for expression in [
            "time_add('9999-12-31T23:59:59Z', '9999999999999h')",
            "time_to_cron(time_add('0001-01-01T00:00:00Z', '-9999999999999h'))",
            "time_truncate(time_add('9999-12-31T23:59:59Z', '9999999999999h'), '7h')",
            "time_diff('0001-01-01T00:00:00Z', '9999-12-31T23:59:59Z')",
            "multiply('8Ei', `1e300`)",
            "add('8Ei', '8Ei')",
            "multiply('-1', `1e200`)",
        ] {
            let rt = Functions::all();
            let _ = search_var(&rt, expression, &Rc::new(Variable::Null));
        }
    }

    #[test]
    fn time_now_is_the_clock_in_rfc3339_utc() {
        for function in ["time_now()", "time_now_utc()"] {
            let now = eval(function);
            let text = now.as_str().unwrap_or_default();
            assert!(
                text.ends_with('Z') && !text.contains('.'),
                "{function}: {now}"
            );
            let parsed = Instant::parse_rfc3339(text).unwrap();
            let clock = Instant::now().unwrap();
            assert!(
                (clock.nanos - parsed.nanos).abs() < 60 * 1_000_000_000,
                "{function}: {text}"
            );
        }
    }
}
