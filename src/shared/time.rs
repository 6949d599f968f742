//! Points in time for Kyverno's `time_*` functions and CEL's timestamps:
//! RFC 3339 in and out, as Go's `time.RFC3339` prints them (whole seconds,
//! the offset kept), and the common elements of Go's reference-time layouts
//! for `time_parse`.

use super::units::Duration;

const NANOS_PER_SECOND: i128 = 1_000_000_000;
/// Seconds from Go's zero time (year 1) to the Unix epoch: `Truncate` counts
/// from year 1.
const YEAR_ONE_TO_EPOCH: i128 = 62_135_596_800;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instant {
    /// Nanoseconds since the Unix epoch.
    pub nanos: i128,
    /// The offset the time was written with, kept for printing.
    pub offset_seconds: i32,
}

/// A time's calendar fields: `month` and `day` from 1, `weekday` from
/// Sunday (0), `year_day` from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calendar {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub weekday: u32,
    pub year_day: u32,
}

/// A civil date and time of day.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl Instant {
    /// The clock the host gives the module (WASI's realtime clock in
    /// policy-server and kwctl), in UTC; `None` before 1970.
    pub fn now() -> Option<Instant> {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some(Instant {
            nanos: i128::try_from(since_epoch.as_nanos()).ok()?,
            offset_seconds: 0,
        })
    }

    pub fn parse_rfc3339(text: &str) -> Option<Instant> {
        Instant::parse_layout("2006-01-02T15:04:05Z07:00", text).ok()
    }

    pub fn plus(self, duration: Duration) -> Instant {
        Instant {
            nanos: self.nanos.saturating_add(duration.nanos),
            ..self
        }
    }

    pub fn utc(self) -> Instant {
        Instant {
            offset_seconds: 0,
            ..self
        }
    }

    /// Go's `Time.Truncate`: down to a multiple of `step` since year 1.
    pub fn truncate(self, step: Duration) -> Instant {
        if step.nanos <= 0 {
            return self;
        }
        let since_year_one = self
            .nanos
            .saturating_add(YEAR_ONE_TO_EPOCH * NANOS_PER_SECOND);
        Instant {
            nanos: self
                .nanos
                .saturating_sub(since_year_one.rem_euclid(step.nanos)),
            ..self
        }
    }

    fn local_seconds(self) -> i128 {
        self.nanos
            .div_euclid(NANOS_PER_SECOND)
            .saturating_add(i128::from(self.offset_seconds))
    }

    fn civil(self) -> Civil {
        let local = self.local_seconds();
        // Far beyond any real date only after saturating arithmetic; keep
        // the calendar maths in range.
        let days = i64::try_from(local.div_euclid(86_400))
            .unwrap_or(0)
            .clamp(-(1 << 40), 1 << 40);
        let in_day = local.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: in_day / 3600,
            minute: in_day / 60 % 60,
            second: in_day % 60,
        }
    }

    pub fn to_rfc3339(self) -> String {
        self.rfc3339("")
    }

    /// Go's `time.RFC3339Nano`: [`Instant::to_rfc3339`] with the fraction of
    /// a second, trailing zeros dropped (none when whole).
    pub fn to_rfc3339_nano(self) -> String {
        let fraction = self.nanos.rem_euclid(NANOS_PER_SECOND);
        if fraction == 0 {
            return self.to_rfc3339();
        }
        let digits = format!(".{fraction:09}");
        self.rfc3339(digits.trim_end_matches('0'))
    }

    /// RFC 3339 with `fraction` (`""` or `.5`) after the seconds.
    fn rfc3339(self, fraction: &str) -> String {
        let c = self.civil();
        let offset = match self.offset_seconds {
            0 => "Z".to_string(),
            o => format!(
                "{}{:02}:{:02}",
                if o < 0 { '-' } else { '+' },
                o.unsigned_abs() / 3600,
                o.unsigned_abs() / 60 % 60
            ),
        };
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{fraction}{offset}",
            c.year, c.month, c.day, c.hour, c.minute, c.second
        )
    }

    /// The calendar fields of the time at `offset_seconds` from UTC.
    pub fn calendar_at(self, offset_seconds: i32) -> Calendar {
        let at = Instant {
            offset_seconds,
            ..self
        };
        let c = at.civil();
        let days = at.local_seconds().div_euclid(86_400);
        let days = i64::try_from(days).unwrap_or(0);
        Calendar {
            year: c.year,
            month: c.month,
            day: c.day,
            hour: c.hour,
            minute: c.minute,
            second: c.second,
            // 1970-01-01 was a Thursday (4).
            weekday: days.saturating_add(4).rem_euclid(7) as u32,
            year_day: (days - days_from_civil(c.year, 1, 1)) as u32,
        }
    }

    /// `minute hour day month weekday`, in the time's own offset.
    pub fn to_cron(self) -> String {
        let c = self.calendar_at(self.offset_seconds);
        format!(
            "{} {} {} {} {}",
            c.minute, c.hour, c.day, c.month, c.weekday
        )
    }

    /// Parses `value` by a Go layout, which spells the reference time
    /// `Mon Jan 2 15:04:05 MST 2006` in the wanted format.
    pub fn parse_layout(layout: &str, value: &str) -> Result<Instant, String> {
        let mut fields = Fields::default();
        let mut rest_layout = layout;
        let mut rest = value;
        while !rest_layout.is_empty() {
            let Some((element, after)) = next_element(rest_layout) else {
                // A literal character must match itself.
                let mut chars = rest_layout.chars();
                let want = chars.next().unwrap_or_default();
                rest_layout = chars.as_str();
                rest = rest.strip_prefix(want).ok_or_else(|| {
                    format!("{value:?} does not match layout {layout:?} (expected {want:?})")
                })?;
                continue;
            };
            rest_layout = after;
            rest = element
                .read(rest, &mut fields)
                .ok_or_else(|| format!("{value:?} does not match layout {layout:?}"))?;
        }
        if !rest.is_empty() {
            return Err(format!(
                "{value:?} has extra text {rest:?} after layout {layout:?}"
            ));
        }
        fields
            .instant()
            .ok_or_else(|| format!("{value:?} is not a valid date"))
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month, day) → days since 1970-01-01.
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[derive(Default)]
struct Fields {
    year: Option<i64>,
    month: Option<u32>,
    day: Option<u32>,
    hour: u32,
    minute: u32,
    second: u32,
    nanos: u32,
    /// A fraction was read with the seconds.
    fraction_read: bool,
    pm: Option<bool>,
    offset_seconds: i32,
}

impl Fields {
    fn instant(&self) -> Option<Instant> {
        let (year, month, day) = (
            self.year.unwrap_or(0),
            self.month.unwrap_or(1),
            self.day.unwrap_or(1),
        );
        let month_days = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let longest = match month {
            2 if leap => 29,
            m => *month_days.get(usize::try_from(m).ok()?.checked_sub(1)?)?,
        };
        let hour = match self.pm {
            Some(pm) if (1..=12).contains(&self.hour) => self.hour % 12 + if pm { 12 } else { 0 },
            Some(_) => return None,
            None => self.hour,
        };
        if day == 0 || day > longest || hour > 23 || self.minute > 59 || self.second > 59 {
            return None;
        }
        let local = i128::from(days_from_civil(year, month, day)) * 86_400
            + i128::from(hour * 3600 + self.minute * 60 + self.second);
        Some(Instant {
            nanos: (local - i128::from(self.offset_seconds)) * NANOS_PER_SECOND
                + i128::from(self.nanos),
            offset_seconds: self.offset_seconds,
        })
    }
}

#[derive(Clone, Copy)]
enum Element {
    LongMonth,
    Month,
    ZeroMonth,
    NumMonth,
    LongWeekday,
    Weekday,
    ZeroDay,
    SpaceDay,
    NumDay,
    Hour,
    ZeroHour12,
    Hour12,
    ZeroMinute,
    Minute,
    ZeroSecond,
    Second,
    LongYear,
    Year,
    PmUpper,
    PmLower,
    /// `Z07:00` and friends: `Z` allowed for UTC when `z_for_utc`.
    Offset {
        z_for_utc: bool,
        colon: bool,
        minutes: bool,
    },
    /// `.000` / `.999` (or `,`): fractional seconds.
    Fraction {
        digits: usize,
        optional: bool,
    },
    ZoneName,
}

/// The layout elements Go recognises, longest spellings first.
const ELEMENTS: &[(&str, Element)] = &[
    ("January", Element::LongMonth),
    ("Jan", Element::Month),
    ("Monday", Element::LongWeekday),
    ("Mon", Element::Weekday),
    ("MST", Element::ZoneName),
    ("2006", Element::LongYear),
    (
        "Z07:00",
        Element::Offset {
            z_for_utc: true,
            colon: true,
            minutes: true,
        },
    ),
    (
        "Z0700",
        Element::Offset {
            z_for_utc: true,
            colon: false,
            minutes: true,
        },
    ),
    (
        "Z07",
        Element::Offset {
            z_for_utc: true,
            colon: false,
            minutes: false,
        },
    ),
    (
        "-07:00",
        Element::Offset {
            z_for_utc: false,
            colon: true,
            minutes: true,
        },
    ),
    (
        "-0700",
        Element::Offset {
            z_for_utc: false,
            colon: false,
            minutes: true,
        },
    ),
    (
        "-07",
        Element::Offset {
            z_for_utc: false,
            colon: false,
            minutes: false,
        },
    ),
    ("01", Element::ZeroMonth),
    ("02", Element::ZeroDay),
    ("03", Element::ZeroHour12),
    ("04", Element::ZeroMinute),
    ("05", Element::ZeroSecond),
    ("06", Element::Year),
    ("15", Element::Hour),
    ("_2", Element::SpaceDay),
    ("1", Element::NumMonth),
    ("2", Element::NumDay),
    ("3", Element::Hour12),
    ("4", Element::Minute),
    ("5", Element::Second),
    ("PM", Element::PmUpper),
    ("pm", Element::PmLower),
];

fn next_element(layout: &str) -> Option<(Element, &str)> {
    // Fractional seconds: `.` or `,` followed by a run of 0s or 9s.
    if let Some(run) = layout.strip_prefix(['.', ',']) {
        for digit in ['0', '9'] {
            let digits = run.len() - run.trim_start_matches(digit).len();
            let next_is_digit = run
                .get(digits..)
                .and_then(|r| r.chars().next())
                .is_some_and(|c| c.is_ascii_digit());
            if digits > 0 && !next_is_digit {
                let element = Element::Fraction {
                    digits,
                    optional: digit == '9',
                };
                return Some((element, run.get(digits..)?));
            }
        }
    }
    ELEMENTS
        .iter()
        .find(|(spelling, _)| layout.starts_with(spelling))
        .and_then(|(spelling, element)| Some((*element, layout.get(spelling.len()..)?)))
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Up to `max` digits (at least `min`), as a number, and the rest.
fn digits(text: &str, min: usize, max: usize) -> Option<(u32, &str)> {
    let len = text
        .bytes()
        .take(max)
        .take_while(u8::is_ascii_digit)
        .count();
    if len < min {
        return None;
    }
    Some((text.get(..len)?.parse().ok()?, text.get(len..)?))
}

fn name_of<'t>(text: &'t str, names: &[&str], short: bool) -> Option<(u32, &'t str)> {
    names.iter().enumerate().find_map(|(i, name)| {
        let spelling = if short { name.get(..3)? } else { name };
        let head = text.get(..spelling.len())?;
        head.eq_ignore_ascii_case(spelling)
            .then(|| Some((u32::try_from(i).ok()?, text.get(spelling.len()..)?)))
            .flatten()
    })
}

impl Element {
    fn read<'t>(self, text: &'t str, f: &mut Fields) -> Option<&'t str> {
        use Element as E;
        let rest = match self {
            E::LongMonth | E::Month => {
                let (m, rest) = name_of(text, &MONTHS, matches!(self, E::Month))?;
                f.month = Some(m + 1);
                rest
            }
            E::LongWeekday | E::Weekday => name_of(text, &WEEKDAYS, matches!(self, E::Weekday))?.1,
            E::ZeroMonth | E::NumMonth => {
                let (m, rest) = digits(text, if matches!(self, E::ZeroMonth) { 2 } else { 1 }, 2)?;
                f.month = Some(m);
                rest
            }
            E::ZeroDay | E::NumDay | E::SpaceDay => {
                let text = if matches!(self, E::SpaceDay) {
                    text.strip_prefix(' ').unwrap_or(text)
                } else {
                    text
                };
                let (d, rest) = digits(text, if matches!(self, E::ZeroDay) { 2 } else { 1 }, 2)?;
                f.day = Some(d);
                rest
            }
            E::Hour | E::ZeroHour12 | E::Hour12 => {
                let min = if matches!(self, E::Hour12) { 1 } else { 2 };
                let (h, rest) = digits(text, min, 2)?;
                f.hour = h;
                rest
            }
            E::ZeroMinute | E::Minute => {
                let (m, rest) = digits(text, if matches!(self, E::ZeroMinute) { 2 } else { 1 }, 2)?;
                f.minute = m;
                rest
            }
            E::ZeroSecond | E::Second => {
                let (s, mut rest) =
                    digits(text, if matches!(self, E::ZeroSecond) { 2 } else { 1 }, 2)?;
                f.second = s;
                // Go accepts a fraction after the seconds even when the layout has none.
                if let Some(after) = rest.strip_prefix(['.', ','])
                    && after.starts_with(|c: char| c.is_ascii_digit())
                    && let Some((nanos, after)) = fraction(after)
                {
                    f.nanos = nanos;
                    f.fraction_read = true;
                    rest = after;
                }
                rest
            }
            E::LongYear => {
                let (negative, body) = match text.strip_prefix('-') {
                    Some(body) => (true, body),
                    None => (false, text),
                };
                let (y, rest) = digits(body, 4, 4)?;
                f.year = Some(if negative {
                    -i64::from(y)
                } else {
                    i64::from(y)
                });
                rest
            }
            E::Year => {
                let (y, rest) = digits(text, 2, 2)?;
                // Go: 69-99 are 1900s, 00-68 are 2000s.
                f.year = Some(i64::from(y) + if y >= 69 { 1900 } else { 2000 });
                rest
            }
            E::PmUpper | E::PmLower => {
                let head = text.get(..2)?;
                f.pm = Some(match head.to_ascii_uppercase().as_str() {
                    "PM" => true,
                    "AM" => false,
                    _ => return None,
                });
                text.get(2..)?
            }
            E::Offset {
                z_for_utc,
                colon,
                minutes,
            } => {
                if z_for_utc && let Some(rest) = text.strip_prefix('Z') {
                    f.offset_seconds = 0;
                    return Some(rest);
                }
                let sign = match text.chars().next()? {
                    '+' => 1,
                    '-' => -1,
                    _ => return None,
                };
                let (h, mut rest) = digits(text.get(1..)?, 2, 2)?;
                let mut m = 0;
                if minutes {
                    if colon {
                        rest = rest.strip_prefix(':')?;
                    }
                    let (mm, after) = digits(rest, 2, 2)?;
                    m = mm;
                    rest = after;
                }
                if h > 23 || m > 59 {
                    return None;
                }
                f.offset_seconds = sign * i32::try_from(h * 3600 + m * 60).ok()?;
                rest
            }
            E::Fraction {
                digits: wanted,
                optional,
            } => {
                let Some(after) = text.strip_prefix(['.', ',']) else {
                    return (optional || f.fraction_read).then_some(text);
                };
                let (nanos, rest) = fraction(after)?;
                let read = after.len() - rest.len();
                if !optional && read != wanted {
                    return None;
                }
                f.nanos = nanos;
                rest
            }
            // Zone abbreviations are ambiguous; Go records them with a zero
            // offset unless it knows the zone, which a policy cannot.
            E::ZoneName => {
                let len = text.bytes().take_while(|b| b.is_ascii_uppercase()).count();
                if !(3..=5).contains(&len) {
                    return None;
                }
                text.get(len..)?
            }
        };
        Some(rest)
    }
}

/// Fraction digits (up to nine count) as nanoseconds, and the rest.
fn fraction(text: &str) -> Option<(u32, &str)> {
    let len = text.bytes().take_while(u8::is_ascii_digit).count();
    if len == 0 {
        return None;
    }
    let kept = text.get(..len.min(9))?;
    let nanos: u32 = kept.parse().ok()?;
    let scale = 10u32.pow(u32::try_from(9 - kept.len()).ok()?);
    Some((nanos * scale, text.get(len..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_in_its_own_offset() {
        for text in [
            "2023-01-12T12:37:56-05:00",
            "1999-12-31T23:59:59Z",
            "2024-02-29T00:00:00+05:30",
        ] {
            assert_eq!(Instant::parse_rfc3339(text).unwrap().to_rfc3339(), text);
        }
        let t = Instant::parse_rfc3339("2023-01-12T12:37:56.123456Z").unwrap();
        assert_eq!(t.nanos % NANOS_PER_SECOND, 123_456_000);
        assert_eq!(t.to_rfc3339(), "2023-01-12T12:37:56Z");
        assert!(Instant::parse_rfc3339("2023-02-29T00:00:00Z").is_none());
        assert!(Instant::parse_rfc3339("2023-01-12 12:37:56Z").is_none());
        assert!(Instant::parse_rfc3339("2023-01-12T25:00:00Z").is_none());
    }

    #[test]
    fn go_layouts() {
        let parse = |layout: &str, value: &str| {
            Instant::parse_layout(layout, value).map(|t| t.to_rfc3339())
        };
        let cases = [
            ("2006-01-02", "2022-06-22", "2022-06-22T00:00:00Z"),
            (
                "Jan _2 15:04:05 2006",
                "Jun  2 07:45:00 2022",
                "2022-06-02T07:45:00Z",
            ),
            (
                "January 2, 2006 3:04 PM",
                "March 7, 2021 11:30 PM",
                "2021-03-07T23:30:00Z",
            ),
            (
                "02/01/06 15:04 -07:00",
                "31/12/99 08:00 +02:00",
                "1999-12-31T08:00:00+02:00",
            ),
            (
                "2006-01-02T15:04:05.000Z0700",
                "2022-06-22T17:45:00.250+0100",
                "2022-06-22T17:45:00+01:00",
            ),
        ];
        for (layout, value, want) in cases {
            assert_eq!(parse(layout, value).unwrap(), want, "{layout}");
        }
        assert!(parse("2006-01-02", "22-06-22").is_err());
        assert!(
            parse("2006-01-02", "2022-06-22x")
                .unwrap_err()
                .contains("extra text")
        );
    }

    #[test]
    fn truncation_counts_from_year_one_like_go() {
        let t = Instant::parse_rfc3339("2023-01-12T17:37:00Z").unwrap();
        let hour = Duration::parse("1h").unwrap();
        assert_eq!(t.truncate(hour).to_rfc3339(), "2023-01-12T17:00:00Z");
        let day = Duration::parse("24h").unwrap();
        assert_eq!(t.truncate(day).to_rfc3339(), "2023-01-12T00:00:00Z");
    }
}
