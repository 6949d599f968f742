//! Kyverno's time functions: RFC 3339 times parsed, compared, added to,
//! truncated and printed; `time_now` and `time_now_utc` read the clock.

use std::rc::Rc;

use jmespath::functions::ArgumentType as T;
use jmespath::{Context, JmespathError, Rcvar, Variable};

use crate::kyverno::jmes_values::{Body, fail, str_arg, string};
use crate::shared::time::Instant;
use crate::shared::units::Duration;

/// Registers the functions through `add(name, argument types, body)`.
pub(super) fn register(add: &mut dyn FnMut(&str, Vec<T>, Body)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kyverno::jmes::{Functions, search_var};
    use crate::testing::jmes_functions::{eval, fails};

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
