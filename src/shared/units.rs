//! Kubernetes quantities (`500m`, `1Gi`) and Go durations (`1h30m`), exact:
//! compared by preconditions and added, multiplied, ... by Kyverno's
//! arithmetic functions, which print them back the way Kubernetes and Go do;
//! CEL's `quantity` and duration values are read with them too.

use std::cmp::Ordering;

/// Nano-units per unit: quantities are kept as integer nano-units (the
/// finest a Kubernetes quantity keeps), durations as integer nanoseconds.
const NANO: i128 = 1_000_000_000;

/// How a quantity was written, which decides how a result is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityFormat {
    BinarySI,
    DecimalSI,
    DecimalExponent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    pub nanos: i128,
    pub format: QuantityFormat,
}

/// The binary suffixes and their powers of 1024.
pub(crate) const BINARY: [(&str, u32); 6] = [
    ("Ki", 1),
    ("Mi", 2),
    ("Gi", 3),
    ("Ti", 4),
    ("Pi", 5),
    ("Ei", 6),
];
/// The decimal suffixes and their powers of ten.
pub(crate) const DECIMAL: [(&str, i32); 9] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

impl Quantity {
    /// Parses Kubernetes' quantity syntax: a signed decimal number and an
    /// optional binary (`Ki`..`Ei`), decimal (`n`..`E`) or exponent suffix.
    pub fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let end = text
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
            .unwrap_or(text.len());
        let (number, suffix) = (text.get(..end)?, text.get(end..)?);
        let (format, nanos_per_unit): (QuantityFormat, i128) = if let Some((_, power)) =
            BINARY.iter().find(|(s, _)| *s == suffix)
        {
            (QuantityFormat::BinarySI, 1024i128.pow(*power) * NANO)
        } else if let Some((_, exp)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
            (QuantityFormat::DecimalSI, pow10(exp + 9)?)
        } else if suffix.is_empty() {
            (QuantityFormat::DecimalSI, NANO)
        } else if let Some(exp) = suffix
            .strip_prefix(['e', 'E'])
            .and_then(|e| e.parse::<i32>().ok())
        {
            if exp < -9 {
                // Finer than a nano-unit: the number's point moves left,
                // and what falls below a nano-unit rounds up.
                let nanos = scaled_decimal(&point_moved_left(number, exp.unsigned_abs() - 9)?, 1)?;
                return Some(Quantity {
                    nanos,
                    format: QuantityFormat::DecimalExponent,
                });
            }
            (QuantityFormat::DecimalExponent, pow10(exp + 9)?)
        } else {
            return None;
        };
        let nanos = scaled_decimal(number, nanos_per_unit)?;
        Some(Quantity { nanos, format })
    }

    /// Kubernetes' canonical form: the largest suffix that keeps an integer.
    pub fn to_canonical(self) -> String {
        let n = self.nanos;
        if self.format == QuantityFormat::BinarySI
            && n % NANO == 0
            && n.unsigned_abs() >= 1024 * NANO as u128
        {
            let units = n / NANO;
            for (suffix, power) in BINARY.iter().rev() {
                let scale = 1024i128.pow(*power);
                if units % scale == 0 {
                    return format!("{}{suffix}", units / scale);
                }
            }
        }
        if n == 0 {
            return "0".to_string();
        }
        // Decimal: the largest multiple-of-three exponent with an integer mantissa.
        let mut exp = -9;
        let mut mantissa = n;
        while exp < 18 && mantissa % 1000 == 0 {
            mantissa /= 1000;
            exp += 3;
        }
        if self.format == QuantityFormat::DecimalExponent {
            return if exp == 0 {
                mantissa.to_string()
            } else {
                format!("{mantissa}e{exp}")
            };
        }
        let suffix = DECIMAL
            .iter()
            .find(|(_, e)| *e == exp)
            .map_or("", |(s, _)| s);
        format!("{mantissa}{suffix}")
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Quantity) -> Option<Ordering> {
        Some(self.nanos.cmp(&other.nanos))
    }
}

/// `number` (sign, digits, optional fraction) divided by `10^places`.
fn point_moved_left(number: &str, places: u32) -> Option<String> {
    let (sign, digits) = match number.strip_prefix(['-', '+']) {
        Some(rest) => (number.get(..1)?, rest),
        None => ("", number),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    // Ten places past the digits leave nothing above a nano-unit: more
    // would only add zeros.
    let places = usize::try_from(places).ok()?.min(whole.len() + 10);
    Some(match whole.len().checked_sub(places) {
        Some(split) => format!(
            "{sign}{}.{}{fraction}",
            whole.get(..split)?,
            whole.get(split..)?
        ),
        None => format!(
            "{sign}0.{}{whole}{fraction}",
            "0".repeat(places - whole.len())
        ),
    })
}

fn pow10(exp: i32) -> Option<i128> {
    10i128.checked_pow(u32::try_from(exp).ok()?)
}

/// `number` (sign, digits, optional fraction) times `scale`, rounded up to
/// an integer the way Kubernetes rounds sub-nano quantities.
fn scaled_decimal(number: &str, scale: i128) -> Option<i128> {
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if (whole.is_empty() && fraction.is_empty())
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
        || whole.len() > 30
    {
        return None;
    }
    let mut value: i128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    value = value.checked_mul(scale)?;
    let mut place = scale;
    for digit in fraction.bytes() {
        let d = i128::from(digit - b'0');
        if place >= 10 {
            place /= 10;
            value = value.checked_add(d.checked_mul(place)?)?;
        } else if d > 0 {
            // Below one nano-unit: round up, as Kubernetes does.
            value = value.checked_add(1)?;
            break;
        }
    }
    Some(if negative { -value } else { value })
}

/// A Go duration (`1h30m`, `300ms`, `-1.5s`), in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration {
    pub nanos: i128,
}

const DURATION_UNITS: [(&str, i128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", NANO),
    ("m", 60 * NANO),
    ("h", 3600 * NANO),
];

impl Duration {
    pub fn parse(text: &str) -> Option<Duration> {
        let text = text.trim();
        let (negative, mut rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        if rest == "0" {
            return Some(Duration { nanos: 0 });
        }
        if rest.is_empty() {
            return None;
        }
        let mut total: i128 = 0;
        while !rest.is_empty() {
            let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
            let number = rest.get(..number_len)?;
            rest = rest.get(number_len..)?;
            let (unit, scale) = DURATION_UNITS
                .iter()
                .filter(|(unit, _)| rest.starts_with(unit))
                .max_by_key(|(unit, _)| unit.len())?;
            total = total.checked_add(scaled_decimal(number, *scale)?)?;
            rest = rest.get(unit.len()..)?;
        }
        Some(Duration {
            nanos: if negative { -total } else { total },
        })
    }

    /// Go's `Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
    pub fn to_go_string(self) -> String {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let n = self.nanos.unsigned_abs();
        if n == 0 {
            return "0s".to_string();
        }
        if n < 1_000_000_000 {
            let (scale, unit) = if n < 1_000 {
                (1, "ns")
            } else if n < 1_000_000 {
                (1_000, "µs")
            } else {
                (1_000_000, "ms")
            };
            return format!("{sign}{}{unit}", fixed(n, scale));
        }
        let hours = n / (3600 * 1_000_000_000);
        let minutes = n / (60 * 1_000_000_000) % 60;
        let seconds = fixed(n % (60 * 1_000_000_000), 1_000_000_000);
        match (hours, minutes) {
            (0, 0) => format!("{sign}{seconds}s"),
            (0, m) => format!("{sign}{m}m{seconds}s"),
            (h, m) => format!("{sign}{h}h{m}m{seconds}s"),
        }
    }
}

/// `n / scale` with the fraction's trailing zeros dropped.
fn fixed(n: u128, scale: u128) -> String {
    let (whole, fraction) = (n / scale, n % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = scale.to_string().len() - 1;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> String {
        Quantity::parse(text).unwrap().to_canonical()
    }

    #[test]
    fn quantities_parse_exactly_and_print_like_kubernetes() {
        assert_eq!(Quantity::parse("500m").unwrap().nanos, 500_000_000);
        assert_eq!(Quantity::parse("2Ki").unwrap().nanos, 2048 * NANO);
        assert_eq!(
            Quantity::parse("1.5Gi").unwrap().nanos,
            1_610_612_736 * NANO
        );
        assert_eq!(Quantity::parse("2e3").unwrap().nanos, 2000 * NANO);
        assert!(Quantity::parse("zone").is_none());
        assert!(Quantity::parse("1h").is_none());
        assert!(Quantity::parse("").is_none());
        assert_eq!(canonical("1024Mi"), "1Gi");
        assert_eq!(canonical("1536Mi"), "1536Mi");
        assert_eq!(canonical("0.5Gi"), "512Mi");
        assert_eq!(canonical("1000"), "1k");
        assert_eq!(canonical("1500"), "1500");
        assert_eq!(canonical("0.1"), "100m");
        assert_eq!(canonical("100Ki").len(), 5);
        assert_eq!(canonical("-2Gi"), "-2Gi");
        assert_eq!(canonical("0Mi"), "0");
    }

    #[test]
    fn durations_parse_and_print_like_go() {
        assert_eq!(Duration::parse("1h30m").unwrap().nanos, 5400 * NANO);
        assert_eq!(Duration::parse("300ms").unwrap().nanos, 300_000_000);
        assert_eq!(Duration::parse("-1.5s").unwrap().nanos, -1_500_000_000);
        assert!(Duration::parse("1x").is_none());
        assert!(Duration::parse("").is_none());
        assert!(Duration::parse("10").is_none());
        let go = |t: &str| Duration::parse(t).unwrap().to_go_string();
        assert_eq!(go("3h"), "3h0m0s");
        assert_eq!(go("90s"), "1m30s");
        assert_eq!(go("1.5s"), "1.5s");
        assert_eq!(go("1500us"), "1.5ms");
        assert_eq!(go("0"), "0s");
        assert_eq!(go("-61m"), "-1h1m0s");
        assert_eq!(go("24h"), "24h0m0s");
    }
}
