//! Kyverno's `time` library, over the `cel` crate's timestamps and
//! durations: `time.now()`, `time.truncate(t, d)` (rounded down to a multiple
//! of `d` since Go's zero time, as Go's `Time.Truncate`), and
//! `time.toCron(t)` (`"minute hour day month weekday"`, in the timestamp's
//! own offset, Sunday 0).

use ::cel::common::types::{CelDuration, CelTimestamp, DURATION_TYPE, TIMESTAMP_TYPE, Type};
use ::cel::common::value::CowVal;
use ::cel::{Env, ExecutionError, Value};
use chrono::{DateTime, Datelike, FixedOffset, TimeDelta, Timelike, Utc};

use super::{error, global, owned, string};

/// Seconds from Go's zero time (January 1, year 1, UTC) to the Unix epoch:
/// Go truncates relative to the former.
const ZERO_TO_UNIX: i128 = 62_135_596_800;
const NANOS: i128 = 1_000_000_000;

fn timestamp_type() -> Type {
    TIMESTAMP_TYPE.to_owned()
}

fn duration_type() -> Type {
    DURATION_TYPE.to_owned()
}

/// Declares the library.
pub fn register(env: &mut Env) {
    global(env, "time.now", "time_now", vec![], now);
    global(
        env,
        "time.truncate",
        "time_truncate",
        vec![timestamp_type(), duration_type()],
        truncate,
    );
    global(
        env,
        "time.toCron",
        "time_to_cron",
        vec![timestamp_type()],
        to_cron,
    );
}

fn timestamp_arg(
    args: &[CowVal<'_, '_>],
    index: usize,
    function: &str,
) -> Result<DateTime<FixedOffset>, ExecutionError> {
    args.get(index)
        .and_then(|arg| arg.downcast_ref::<CelTimestamp>())
        .map(|t| *t.inner())
        .ok_or_else(|| error(function, format!("argument {index} must be a timestamp")))
}

fn now<'b, 'v>(_: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Timestamp(Utc::now().fixed_offset()))
}

fn truncate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "time.truncate";
    let timestamp = timestamp_arg(&args, 0, F)?;
    let duration = args
        .get(1)
        .and_then(|arg| arg.downcast_ref::<CelDuration>())
        .map(|d| *d.inner())
        .ok_or_else(|| error(F, "argument 1 must be a duration"))?;
    owned(Value::Timestamp(
        truncated(timestamp, duration)
            .ok_or_else(|| error(F, "the result is out of the timestamp range"))?,
    ))
}

/// `timestamp` rounded down to a multiple of `step` since Go's zero time;
/// unchanged for a step that is not positive, as in Go.
fn truncated(timestamp: DateTime<FixedOffset>, step: TimeDelta) -> Option<DateTime<FixedOffset>> {
    let step = i128::from(step.num_seconds()) * NANOS + i128::from(step.subsec_nanos());
    if step <= 0 {
        return Some(timestamp);
    }
    let since_zero = (i128::from(timestamp.timestamp()) + ZERO_TO_UNIX) * NANOS
        + i128::from(timestamp.timestamp_subsec_nanos());
    let excess = since_zero.rem_euclid(step);
    let seconds = i64::try_from(excess / NANOS).ok()?;
    let nanos = i64::try_from(excess % NANOS).ok()?;
    timestamp
        .checked_sub_signed(TimeDelta::try_seconds(seconds)?)?
        .checked_sub_signed(TimeDelta::nanoseconds(nanos))
}

fn to_cron<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let t = timestamp_arg(&args, 0, "time.toCron")?;
    string(format!(
        "{} {} {} {} {}",
        t.minute(),
        t.hour(),
        t.day(),
        t.month(),
        t.weekday().num_days_from_sunday()
    ))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{annotated, b, s, table};
    use serde_json::json;

    /// Kyverno's `time` tests (kyverno/sdk `extensions/cel/libs/time`), and
    /// Go's `Time.Truncate` where a step does not divide a day.
    #[test]
    fn kyverno_time_library() {
        table(&[
            (
                "string(time.truncate(timestamp('2025-01-02T03:45:27Z'), duration('1h')))",
                s("2025-01-02T03:00:00Z"),
            ),
            (
                "time.toCron(timestamp('2025-01-02T15:30:00Z'))",
                s("30 15 2 1 4"),
            ),
            ("time.now() - duration('3h') < time.now()", b(true)),
            ("time.now() > timestamp('2026-01-01T00:00:00Z')", b(true)),
            // Go counts from January 1, year 1: 7h steps do not line up
            // with the Unix epoch (time.Date(2025,1,2,3,45,27,0,UTC).Truncate(7*time.Hour)).
            (
                "string(time.truncate(timestamp('2025-01-02T03:45:27Z'), duration('7h')))",
                s("2025-01-01T22:00:00Z"),
            ),
            (
                "string(time.truncate(timestamp('2025-01-02T03:45:27.5Z'), duration('0s')))",
                s("2025-01-02T03:45:27.5Z"),
            ),
            // The weekday and hour in the timestamp's own offset, as Go
            // reads a parsed time.
            (
                "time.toCron(timestamp('2025-01-05T00:10:00+02:00'))",
                s("10 0 5 1 0"),
            ),
            (
                "timestamp('2025-01-02T03:45:27Z').getHours() == 3 && duration('90m') == duration('1h30m')",
                b(true),
            ),
            // Zones: UTC and offsets; other names are not in the module.
            (
                "timestamp('2025-01-02T03:45:27Z').getHours('UTC') == 3 && timestamp('2025-01-02T03:45:27Z').getHours('-08:00') == 19",
                b(true),
            ),
            (
                "timestamp('2025-01-02T03:45:27Z').getHours('America/New_York')",
                None,
            ),
        ]);
    }

    #[test]
    fn timestamps_and_durations_in_a_mutation_are_written_as_json_writes_them() {
        // As protobuf's JSON mapping, which cel-go's conversion follows:
        // RFC 3339 in UTC, and seconds with an `s`.
        for (expression, written) in [
            // Truncation counts absolute time, whatever the offset (01:45Z).
            (
                "time.truncate(timestamp('2025-01-02T03:45:27+02:00'), duration('24h'))",
                "2025-01-02T00:00:00Z",
            ),
            (
                "timestamp('2025-01-02T03:45:27.25Z')",
                "2025-01-02T03:45:27.250Z",
            ),
            ("duration('1h30m')", "5400s"),
            ("duration('1.5s')", "1.500s"),
        ] {
            assert_eq!(
                annotated(expression),
                json!({"result": written}),
                "{expression}"
            );
        }
    }
}
