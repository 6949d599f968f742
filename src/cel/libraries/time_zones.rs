//! The IANA time zones a timestamp getter can name (`getHours('Europe/Berlin')`),
//! as Go's `time.LoadLocation` finds them for cel-go.
//!
//! The database is generated (`tools/time-zones.py`, from PyPI's `tzdata`)
//! into a deflated table of every zone's UTC offsets since 1970: its
//! transitions as the TZif file lists them, then the file's own rule (a
//! POSIX TZ string) for the years after. Before 1970 a zone keeps the offset
//! it had at 1970-01-01T00:00Z. The first getter that names a zone inflates
//! the table's index and the chunk of records that holds the zone, once per
//! instance; no other evaluation reads the table.

use std::sync::OnceLock;

use super::super::tables::TIME_ZONES;
use crate::shared::time::{civil_from_days, days_from_civil};

/// The table's index, inflated once per instance by the first getter that
/// names a zone; `None` if it does not read, which the tests rule out.
fn database() -> Option<&'static Database> {
    static DATABASE: OnceLock<Option<Database>> = OnceLock::new();
    DATABASE.get_or_init(Database::read).as_ref()
}

struct Database {
    /// The table as the module holds it: the deflate streams.
    table: Vec<u8>,
    /// Where each stream lies in `table`: the index, then the chunks of
    /// zone records.
    streams: Vec<(usize, usize)>,
    /// Each chunk, inflated when a zone in it is first named.
    chunks: Vec<OnceLock<Option<Vec<u8>>>>,
    version: String,
    rules: Vec<Rule>,
    /// Every name, with the chunk and offset of its zone's record.
    names: Vec<(String, usize, usize)>,
}

impl Database {
    fn read() -> Option<Database> {
        let table = TIME_ZONES.to_vec();
        // A varint count of streams, their lengths, then the streams.
        let mut header = Reader(&table);
        let lengths = (0..header.varint()?)
            .map(|_| usize::try_from(header.varint()?).ok())
            .collect::<Option<Vec<_>>>()?;
        let mut at = table.len().saturating_sub(header.0.len());
        let mut streams = Vec::with_capacity(lengths.len());
        for length in lengths {
            streams.push((at, length));
            at = at.saturating_add(length);
        }
        let (start, length) = *streams.first()?;
        let index = inflate(table.get(start..start.saturating_add(length))?)?;
        let mut reader = Reader(&index);
        let version = reader.text()?.to_owned();
        let rules = (0..reader.varint()?)
            .map(|_| Rule::read(&mut reader))
            .collect::<Option<Vec<_>>>()?;
        let mut names = Vec::new();
        for _ in 0..reader.varint()? {
            let named = (0..reader.varint()?)
                .map(|_| reader.text())
                .collect::<Option<Vec<_>>>()?;
            let stream = usize::try_from(reader.varint()?).ok()?;
            let at = usize::try_from(reader.varint()?).ok()?;
            names.extend(named.into_iter().map(|name| (name.to_owned(), stream, at)));
        }
        Some(Database {
            chunks: streams.iter().map(|_| OnceLock::new()).collect(),
            table,
            streams,
            version,
            rules,
            names,
        })
    }

    fn chunk(&self, stream: usize) -> Option<&[u8]> {
        self.chunks
            .get(stream)?
            .get_or_init(|| {
                let (start, length) = *self.streams.get(stream)?;
                inflate(self.table.get(start..start.saturating_add(length))?)
            })
            .as_deref()
    }
}

fn inflate(stream: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    super::gzip::inflate(stream, &mut out, 1 << 20).ok()?;
    Some(out)
}

/// The IANA version of the database (`2026f`).
pub fn version() -> Option<&'static str> {
    Some(database()?.version.as_str())
}

/// The UTC offset, in seconds east, of zone `name` at `unix_seconds`; `None`
/// if the database has no such zone.
pub fn offset_at(name: &str, unix_seconds: i64) -> Option<i32> {
    let database = database()?;
    // A scan of 600 names, a few microseconds: a sort would cost the module
    // more code than it saves a request.
    let (_, stream, at) = database.names.iter().find(|(known, ..)| known == name)?;
    let chunk = database.chunk(*stream)?;
    Zone::read(Reader(chunk.get(*at..)?), &database.rules)?.offset_at(unix_seconds)
}

/// One zone's record; its transitions are read as a lookup walks them.
struct Zone<'t> {
    rule: Rule,
    offsets: Vec<i32>,
    at_epoch: i32,
    rule_from: i64,
    transitions: Reader<'t>,
    transition_count: u64,
}

impl<'t> Zone<'t> {
    /// Reads the record that starts `reader`.
    fn read(mut reader: Reader<'t>, rules: &[Rule]) -> Option<Zone<'t>> {
        let rule = *rules.get(usize::try_from(reader.varint()?).ok()?)?;
        let offsets = (0..reader.varint()?)
            .map(|_| reader.utc_offset())
            .collect::<Option<Vec<_>>>()?;
        let at_epoch = *offsets.get(usize::try_from(reader.varint()?).ok()?)?;
        let rule_from = reader.span()?;
        let transition_count = reader.varint()?;
        Some(Zone {
            rule,
            offsets,
            at_epoch,
            rule_from,
            transitions: reader,
            transition_count,
        })
    }

    fn offset_at(mut self, t: i64) -> Option<i32> {
        if t < 0 {
            return Some(self.at_epoch);
        }
        if t >= self.rule_from {
            return Some(self.rule.offset_at(t));
        }
        let mut offset = self.at_epoch;
        let mut at = 0;
        for _ in 0..self.transition_count {
            at = self.transitions.span()?.saturating_add(at);
            let index = usize::try_from(self.transitions.varint()?).ok()?;
            if at > t {
                break;
            }
            offset = *self.offsets.get(index)?;
        }
        Some(offset)
    }
}

/// A zone's rule after its last transition: a standard offset and,
/// where the zone keeps daylight saving time, when it starts and ends.
#[derive(Debug, Clone, Copy)]
struct Rule {
    standard: i32,
    daylight: Option<Daylight>,
}

#[derive(Debug, Clone, Copy)]
struct Daylight {
    offset: i32,
    start: Date,
    /// Seconds after midnight of `start`, in local standard time; may be
    /// negative or over a day.
    start_time: i32,
    end: Date,
    /// Seconds after midnight of `end`, in local daylight time.
    end_time: i32,
}

/// A day of the year, as POSIX TZ strings write them.
#[derive(Debug, Clone, Copy)]
enum Date {
    /// `Jn`: day 1-365, February 29 never counted.
    Julian(u16),
    /// `n`: day 0-365, February 29 counted in leap years.
    ZeroBased(u16),
    /// `Mm.w.d`: weekday `d` (0 Sunday) of week `w` (5: the last) of month `m`.
    Weekday { month: u8, week: u8, day: u8 },
}

impl Rule {
    fn read(reader: &mut Reader<'_>) -> Option<Rule> {
        let standard = reader.zigzag()?;
        let daylight = match reader.byte()? {
            0 => None,
            _ => Some(Daylight {
                offset: reader.zigzag()?,
                start: Date::read(reader)?,
                start_time: reader.zigzag()?,
                end: Date::read(reader)?,
                end_time: reader.zigzag()?,
            }),
        };
        Some(Rule { standard, daylight })
    }

    fn offset_at(self, t: i64) -> i32 {
        let Some(daylight) = self.daylight else {
            return self.standard;
        };
        // The changes of the years around t, in order; the last one at or
        // before t is in force. Three years always hold one: a rule's dates
        // lie within its year, give or take its times (at most a week).
        let (year, _, _) = civil_from_days((t + i64::from(self.standard)).div_euclid(86_400));
        let mut in_force = (i64::MIN, self.standard);
        for y in year - 1..=year + 1 {
            let starts = daylight.start.day(y) * 86_400 + i64::from(daylight.start_time)
                - i64::from(self.standard);
            let ends = daylight.end.day(y) * 86_400 + i64::from(daylight.end_time)
                - i64::from(daylight.offset);
            for (at, offset) in [(starts, daylight.offset), (ends, self.standard)] {
                if at <= t && at >= in_force.0 {
                    in_force = (at, offset);
                }
            }
        }
        in_force.1
    }
}

impl Date {
    fn read(reader: &mut Reader<'_>) -> Option<Date> {
        Some(match reader.byte()? {
            0 => Date::Julian(u16::try_from(reader.varint()?).ok()?),
            1 => Date::ZeroBased(u16::try_from(reader.varint()?).ok()?),
            _ => Date::Weekday {
                month: reader.byte()?,
                week: reader.byte()?,
                day: reader.byte()?,
            },
        })
    }

    /// The day, counted from 1970-01-01, this date falls on in `year`.
    fn day(self, year: i64) -> i64 {
        let first = days_from_civil(year, 1, 1);
        match self {
            Date::Julian(n) => {
                let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
                first + i64::from(n) - 1 + i64::from(leap && n >= 60)
            }
            Date::ZeroBased(n) => first + i64::from(n),
            Date::Weekday { month, week, day } => {
                let month = u32::from(month.clamp(1, 12));
                let first = days_from_civil(year, month, 1);
                let next = match month {
                    12 => days_from_civil(year + 1, 1, 1),
                    _ => days_from_civil(year, month + 1, 1),
                };
                // 1970-01-01 was a Thursday (4).
                let weekday = (first + 4).rem_euclid(7);
                let mut day = first
                    + (i64::from(day) - weekday).rem_euclid(7)
                    + 7 * (i64::from(week.clamp(1, 5)) - 1);
                while day >= next {
                    day -= 7;
                }
                day
            }
        }
    }
}

/// A cursor over the table; every read is `None` past its end.
#[derive(Clone, Copy)]
struct Reader<'t>(&'t [u8]);

impl<'t> Reader<'t> {
    fn byte(&mut self) -> Option<u8> {
        let (first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*first)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn zigzag(&mut self) -> Option<i32> {
        i32::try_from(unzigzag(self.varint()?)).ok()
    }

    /// A UTC offset: in quarter hours, or in seconds where the low bit says so.
    fn utc_offset(&mut self) -> Option<i32> {
        let raw = self.varint()?;
        let value = unzigzag(raw >> 1);
        let seconds = if raw & 1 == 0 { value * 900 } else { value };
        i32::try_from(seconds).ok()
    }

    /// A time between transitions: in hours, minutes or seconds (low bits).
    fn span(&mut self) -> Option<i64> {
        let raw = self.varint()?;
        let unit = match raw & 3 {
            0 => 3600,
            1 => 60,
            _ => 1,
        };
        i64::try_from(raw >> 2).ok()?.checked_mul(unit)
    }

    fn text(&mut self) -> Option<&'t str> {
        let length = usize::from(self.byte()?);
        let (text, rest) = self.0.split_at_checked(length)?;
        self.0 = rest;
        std::str::from_utf8(text).ok()
    }
}

fn unzigzag(n: u64) -> i64 {
    let half = i64::try_from(n >> 1).unwrap_or(i64::MAX);
    if n & 1 == 0 { half } else { -half - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> i64 {
        let instant = crate::shared::time::Instant::parse_rfc3339(text).unwrap();
        i64::try_from(instant.nanos.div_euclid(1_000_000_000)).unwrap()
    }

    #[test]
    fn the_table_inflates_and_names_its_version() {
        assert_eq!(version(), Some("2026f"));
    }

    #[test]
    fn offsets_by_the_rule_and_by_the_transitions() {
        let cases = [
            // By the rule: US daylight time since 2007, second Sunday in March, 02:00.
            ("America/New_York", "2026-03-08T06:59:59Z", -5 * 3600),
            ("America/New_York", "2026-03-08T07:00:00Z", -4 * 3600),
            ("America/New_York", "2026-11-01T05:59:59Z", -4 * 3600),
            ("America/New_York", "2026-11-01T06:00:00Z", -5 * 3600),
            // By the transitions: 2006's rule began on the first Sunday in April.
            ("America/New_York", "2006-03-12T12:00:00Z", -5 * 3600),
            ("America/New_York", "2006-04-02T07:00:00Z", -4 * 3600),
            // Southern hemisphere: daylight time over the new year.
            ("Australia/Sydney", "2026-01-15T00:00:00Z", 11 * 3600),
            ("Australia/Sydney", "2026-07-15T00:00:00Z", 10 * 3600),
            // Negative daylight saving time in the rule (IST in summer, GMT in winter).
            ("Europe/Dublin", "2026-07-01T00:00:00Z", 3600),
            ("Europe/Dublin", "2026-01-01T00:00:00Z", 0),
            // Quarter hours, a link name, a zone that dropped DST.
            ("Asia/Kathmandu", "2026-01-01T00:00:00Z", 5 * 3600 + 45 * 60),
            ("US/Pacific", "2026-07-01T00:00:00Z", -7 * 3600),
            ("America/Sao_Paulo", "2026-01-01T00:00:00Z", -3 * 3600),
            ("America/Sao_Paulo", "2018-01-01T00:00:00Z", -2 * 3600),
            // Before 1970: the offset at 1970-01-01.
            ("Europe/London", "1960-07-01T00:00:00Z", 3600),
            // Far ahead, by the rule.
            ("Europe/Berlin", "9999-07-01T00:00:00Z", 2 * 3600),
        ];
        for (zone, time, offset) in cases {
            assert_eq!(offset_at(zone, at(time)), Some(offset), "{zone} at {time}");
        }
        assert_eq!(offset_at("America/New_Yrok", 0), None);
        assert_eq!(offset_at("", 0), None);
    }

    /// Offsets Python's zoneinfo reads from the same tzdata files:
    /// `tools/time-zones.py --cases`, then
    /// `TIME_ZONE_CASES=cases.json cargo test --lib time_zone_conformance -- --ignored --nocapture`.
    #[test]
    #[ignore = "needs a cases file written by tools/time-zones.py --cases"]
    fn time_zone_conformance() {
        let Some(cases) = crate::testing::cel_spec_conformance::cases_from_env::<(String, i64, i32)>(
            "TIME_ZONE_CASES",
        ) else {
            return;
        };
        let mut failures = 0;
        for (zone, t, offset) in &cases {
            let ours = offset_at(zone, *t);
            if ours != Some(*offset) {
                failures += 1;
                if failures <= 20 {
                    println!("{zone} at {t}: zoneinfo {offset}, ours {ours:?}");
                }
            }
        }
        println!("{} cases, {failures} differ", cases.len());
        assert_eq!(failures, 0);
    }
}
