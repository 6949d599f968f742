//! `'<format>'.format(list)` as Kubernetes 1.37 and Kyverno 1.19 run it.
//!
//! Both declare cel-go's strings extension at version 2
//! (`ext.Strings(ext.StringsVersion(2))`), and below version 4 cel-go formats
//! with its first formatter, `ext/formatting.go`, where the `cel` crate
//! follows the later `ext/formatting_v2.go`. What that means here:
//! - `%s` writes a value as `string()` does (a double as Go's `%g`: `1e+06`,
//!   `+Inf`; bytes only when they are UTF-8); a list or a map is written with
//!   its members as CEL literals: strings and bytes quoted (`["a", b"x"]`),
//!   doubles as `%.6f` (`2.500000`, `"NaN"`), times as calls
//!   (`timestamp("2026-11-26T09:30:00Z")`, `duration("5400s")`), a map's
//!   entries as `key:value`, ordered by the written key;
//! - `%d`, `%b`, `%x`, `%X` and `%o` take integers (`%b` bools too, `%x`
//!   strings and bytes); a negative number is a sign and its magnitude;
//! - `%f` and `%e` take doubles, and the strings `NaN`, `Infinity` and
//!   `-Infinity`, written by golang.org/x/text's printer for `en_US`: digits
//!   grouped (`1,000,000.50`), `∞`, `-0` without its sign, `%e` as
//!   `1.234500×10⁰³` with a precision that cel-go hands the printer as a
//!   width (`%.20e` pads to 20 characters, six digits always);
//! - a precision has no maximum (the printer keeps its low 8 bits as the
//!   fraction digits always written, its low 16 bits, signed, as those it
//!   rounds to, and gives `%!(NOVERB)` past ten million);
//! - an argument left over is ignored (cel-go refuses it when it checks a
//!   literal call, which the load-time check here does not do).
//!
//! Error messages are cel-go's.

use ::cel::common::types::{
    CelBool, CelBytes, CelDouble, CelInt, CelString, CelType, CelUInt, Kind,
};
use ::cel::common::value::{CowVal, Val};
use ::cel::{Env, ExecutionError, Value};

use super::go_quote::go_quote;
use super::{double_text::go_text, dyn_type, error, member, string, string_arg, string_type};

const NAME: &str = "format";

/// What the printer writes for a precision too long for it to read.
const NO_VERB: &str = "%!(NOVERB)";

/// The precision of `%f` and `%e` without one.
const DEFAULT_PRECISION: u64 = 6;

/// `format` calls are renamed to a name only this function answers: the
/// crate's strings extension declares a `format` of its own (cel-go's newer
/// formatter), and which of two overloads of one name a call finds is the
/// crate's choice, not ours.
pub const RENAME: super::MemberRename = super::MemberRename {
    name: NAME,
    arity: 1,
    to: "@format",
};

/// Declares `string.format(list)` under [`RENAME`]'s name.
pub fn register(env: &mut Env) {
    member(
        env,
        RENAME.to,
        "string.@format(dyn)",
        string_type(),
        vec![dyn_type()],
        format,
    );
}

fn format<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, NAME)?;
    let list = args
        .get(1)
        .filter(|list| list.get_type().kind() == Kind::List)
        .and_then(|list| list.as_iterable());
    let Some(list) = list else {
        return Err(ExecutionError::no_such_member_overload(
            NAME,
            args.iter()
                .map(|a| a.get_type().name().to_string())
                .collect(),
        ));
    };
    let mut items = list.iter();
    let mut values: Vec<&dyn Val> = Vec::new();
    while let Some(item) = items.next() {
        values.push(item);
    }
    match interpolate(text, &values) {
        Ok(formatted) => string(formatted),
        Err(message) => Err(error(NAME, message)),
    }
}

/// `format` with each clause replaced by the next argument, read byte by
/// byte as cel-go reads it.
fn interpolate(format: &str, args: &[&dyn Val]) -> Result<String, String> {
    let bytes = format.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut at = 0;
    let mut next = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte != b'%' {
            out.push(byte);
            at += 1;
            continue;
        }
        if bytes.get(at + 1) == Some(&b'%') {
            out.push(b'%');
            at += 2;
            continue;
        }
        // The argument is looked for before the clause is read.
        let arg = args
            .get(next)
            .ok_or_else(|| format!("index {next} out of range"))?;
        let rest = bytes.get(at + 1..).unwrap_or_default();
        if rest.is_empty() {
            return Err("unexpected end of string".to_owned());
        }
        let (read, clause) =
            Clause::parse(rest).map_err(|e| format!("could not parse formatting clause: {e}"))?;
        let written = clause
            .write(*arg)
            .map_err(|e| format!("error during formatting: {e}"))?;
        out.extend_from_slice(written.as_bytes());
        at += 1 + read;
        next += 1;
    }
    // A clause is ASCII, so what is copied around it stays UTF-8.
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// A clause's conversion, with the precision written for `%f` and `%e`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Clause {
    String,
    Decimal,
    Fixed(Option<u64>),
    Scientific(Option<u64>),
    Binary,
    Hex { upper: bool },
    Octal,
}

impl Clause {
    /// The clause at the start of `clause` (after its `%`), and how many
    /// bytes it takes. A precision is read before any conversion, and
    /// ignored by those that do not use it.
    fn parse(clause: &[u8]) -> Result<(usize, Clause), String> {
        let (read, precision) =
            precision(clause).map_err(|e| format!("error while parsing precision: {e}"))?;
        let conversion = clause
            .get(read)
            .copied()
            .ok_or("could not find end of precision specifier")?;
        let parsed = match conversion {
            b's' => Clause::String,
            b'd' => Clause::Decimal,
            b'f' => Clause::Fixed(precision),
            b'e' => Clause::Scientific(precision),
            b'b' => Clause::Binary,
            b'x' => Clause::Hex { upper: false },
            b'X' => Clause::Hex { upper: true },
            b'o' => Clause::Octal,
            // cel-go names the byte as a character: `é` is `Ã`.
            other => {
                return Err(format!(
                    "unrecognized formatting clause \"{}\"",
                    char::from(other)
                ));
            }
        };
        Ok((read + 1, parsed))
    }

    fn write(self, val: &dyn Val) -> Result<String, String> {
        let arg = Arg::of(val);
        let written = match self {
            Clause::String => return string_clause(val),
            Clause::Decimal => match arg {
                Arg::Int(i) => Some(i.to_string()),
                Arg::UInt(u) => Some(u.to_string()),
                _ => None,
            },
            Clause::Fixed(precision) => {
                double_of(&arg).map(|d| fixed(d, precision.unwrap_or(DEFAULT_PRECISION)))
            }
            Clause::Scientific(precision) => {
                double_of(&arg).map(|d| scientific(d, precision.unwrap_or(DEFAULT_PRECISION)))
            }
            Clause::Binary => match arg {
                Arg::Int(i) => Some(format!("{}{:b}", sign(i), i.unsigned_abs())),
                Arg::UInt(u) => Some(format!("{u:b}")),
                Arg::Bool(b) => Some(if b { "1" } else { "0" }.to_owned()),
                _ => None,
            },
            Clause::Hex { upper } => match arg {
                Arg::Int(i) if upper => Some(format!("{}{:X}", sign(i), i.unsigned_abs())),
                Arg::Int(i) => Some(format!("{}{:x}", sign(i), i.unsigned_abs())),
                Arg::UInt(u) if upper => Some(format!("{u:X}")),
                Arg::UInt(u) => Some(format!("{u:x}")),
                Arg::Str(s) => Some(hex(s.as_bytes(), upper)),
                Arg::Bytes(b) => Some(hex(b, upper)),
                _ => None,
            },
            Clause::Octal => match arg {
                Arg::Int(i) => Some(format!("{}{:o}", sign(i), i.unsigned_abs())),
                Arg::UInt(u) => Some(format!("{u:o}")),
                _ => None,
            },
        };
        written.ok_or_else(|| format!("{}, was given {}", self.accepted(), type_name(val)))
    }

    /// What the clause takes, as cel-go's errors say it.
    fn accepted(self) -> &'static str {
        match self {
            Clause::String => {
                "string clause can only be used on strings, bools, bytes, ints, \
                               doubles, maps, lists, types, durations, and timestamps"
            }
            Clause::Decimal => "decimal clause can only be used on integers",
            Clause::Fixed(_) => "fixed-point clause can only be used on doubles",
            Clause::Scientific(_) => "scientific clause can only be used on doubles",
            Clause::Binary => "only integers and bools can be formatted as binary",
            Clause::Hex { .. } => {
                "only integers, byte buffers, and strings can be formatted as hex"
            }
            Clause::Octal => "octal clause can only be used on integers",
        }
    }

    /// Whether the clause takes a value of the type cel-go names so; a `%s`
    /// also looks into a literal's items ([`StaticArg`]).
    fn takes(self, type_name: &str) -> bool {
        let names: &[&str] = match self {
            Clause::String => &[
                "list",
                "map",
                "int",
                "uint",
                "double",
                "bool",
                "string",
                "google.protobuf.Timestamp",
                "bytes",
                "google.protobuf.Duration",
                "type",
                "null_type",
            ],
            Clause::Decimal | Clause::Octal => &["int", "uint"],
            Clause::Fixed(_) | Clause::Scientific(_) => &["double", "string"],
            Clause::Binary => &["int", "uint", "bool"],
            Clause::Hex { .. } => &["int", "uint", "string", "bytes"],
        };
        names.contains(&type_name)
    }
}

/// What the load-time check knows of one item of the list literal a
/// `format` call is given: its type's name as cel-go writes it (`None`
/// where it may be of any type) and, for a list or map literal, its items
/// (a map's keys and values).
pub struct StaticArg {
    pub type_name: Option<String>,
    pub items: Vec<StaticArg>,
}

/// cel-go's check of a `format` call whose text is a literal and whose
/// argument is a list literal, which Kubernetes and Kyverno make when they
/// compile the expression: the text's clauses, each against the type of its
/// argument, and as many arguments as clauses.
pub fn check_literal_call(format: &str, args: &[StaticArg]) -> Result<(), String> {
    let bytes = format.as_bytes();
    let mut at = 0;
    let mut next = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte != b'%' {
            at += 1;
            continue;
        }
        if bytes.get(at + 1) == Some(&b'%') {
            at += 2;
            continue;
        }
        let rest = bytes.get(at + 1..).unwrap_or_default();
        if rest.is_empty() {
            return Err("unexpected end of string".to_owned());
        }
        let arg = args
            .get(next)
            .ok_or_else(|| format!("index {next} out of range"))?;
        let (read, clause) =
            Clause::parse(rest).map_err(|e| format!("could not parse formatting clause: {e}"))?;
        let refused = match clause {
            Clause::String => refused_by_string_clause(arg),
            _ => arg.type_name.as_deref().filter(|name| !clause.takes(name)),
        };
        if let Some(name) = refused {
            return Err(format!(
                "error during formatting: {}, was given {name}",
                clause.accepted()
            ));
        }
        at += 1 + read;
        next += 1;
    }
    if args.len() > next {
        return Err(format!(
            "too many arguments supplied to string.format (expected {next}, got {})",
            args.len()
        ));
    }
    Ok(())
}

/// The first type in `arg`, or in the items of its literal, that `%s`
/// does not take.
fn refused_by_string_clause(arg: &StaticArg) -> Option<&str> {
    if let Some(name) = arg
        .type_name
        .as_deref()
        .filter(|name| !Clause::String.takes(name))
    {
        return Some(name);
    }
    arg.items.iter().find_map(refused_by_string_clause)
}

/// The precision at the start of `clause`, if it has one (`.2`), and how
/// many bytes it takes; read as Go's `strconv.Atoi` reads it.
fn precision(clause: &[u8]) -> Result<(usize, Option<u64>), String> {
    if clause.first() != Some(&b'.') {
        return Ok((0, None));
    }
    let mut end = 1;
    loop {
        match clause.get(end) {
            None => return Err("could not find end of precision specifier".to_owned()),
            Some(byte) if byte.is_ascii_digit() => end += 1,
            Some(_) => break,
        }
    }
    let digits = clause
        .get(1..end)
        .and_then(|digits| std::str::from_utf8(digits).ok())
        .unwrap_or_default();
    let parsed = if digits.is_empty() {
        Err("invalid syntax")
    } else {
        digits.parse::<i64>().map_err(|_| "value out of range")
    };
    match parsed {
        Ok(precision) => Ok((end, Some(precision.unsigned_abs()))),
        Err(why) => Err(format!(
            "error while converting precision to integer: strconv.Atoi: parsing \"{digits}\": {why}"
        )),
    }
}

/// An argument, as the clauses tell them apart.
enum Arg<'a> {
    Int(i64),
    UInt(u64),
    Double(f64),
    Bool(bool),
    Str(&'a str),
    Bytes(&'a [u8]),
    Null,
    /// A type value, by name (`int`, `google.protobuf.Timestamp`).
    Type(&'a str),
    /// A timestamp or a duration: the function that makes one, and its text.
    Time(&'static str, String),
    List,
    Map,
    Other,
}

impl<'a> Arg<'a> {
    fn of(val: &'a dyn Val) -> Arg<'a> {
        let arg = match val.get_type().kind() {
            Kind::Int => val.downcast_ref::<CelInt>().map(|i| Arg::Int(*i.inner())),
            Kind::UInt => val.downcast_ref::<CelUInt>().map(|u| Arg::UInt(*u.inner())),
            Kind::Double => val
                .downcast_ref::<CelDouble>()
                .map(|d| Arg::Double(*d.inner())),
            Kind::Boolean => val.downcast_ref::<CelBool>().map(|b| Arg::Bool(*b.inner())),
            Kind::String => val.downcast_ref::<CelString>().map(|s| Arg::Str(s.inner())),
            Kind::Bytes => val
                .downcast_ref::<CelBytes>()
                .map(|b| Arg::Bytes(b.inner())),
            Kind::NullType => Some(Arg::Null),
            Kind::Type => val.downcast_ref::<CelType>().map(|t| Arg::Type(t.name())),
            Kind::List => Some(Arg::List),
            Kind::Map => Some(Arg::Map),
            // Timestamps and durations are the time library's opaque values.
            Kind::Opaque => Value::try_from(val)
                .ok()
                .and_then(|value| super::time::format_text(&value))
                .map(|(function, text)| Arg::Time(function, text)),
            _ => None,
        };
        arg.unwrap_or(Arg::Other)
    }
}

fn type_name(val: &dyn Val) -> String {
    val.get_type().name().to_owned()
}

/// `%s`: as `string()` writes the value; a list or a map as a literal.
fn string_clause(val: &dyn Val) -> Result<String, String> {
    Ok(match Arg::of(val) {
        Arg::List => list_text(val)?,
        Arg::Map => map_text(val)?,
        Arg::Int(i) => i.to_string(),
        Arg::UInt(u) => u.to_string(),
        Arg::Double(d) => go_text(d),
        Arg::Bool(b) => b.to_string(),
        Arg::Str(s) => s.to_owned(),
        Arg::Bytes(b) => utf8(b)?.to_owned(),
        Arg::Time(_, text) => text,
        Arg::Type(name) => name.to_owned(),
        Arg::Null => "null".to_owned(),
        Arg::Other => {
            return Err(format!(
                "string clause can only be used on strings, bools, bytes, ints, doubles, maps, \
                 lists, types, durations, and timestamps, was given {}",
                type_name(val)
            ));
        }
    })
}

/// Bytes as the string they hold, which must be UTF-8 (as for `string()`).
fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|_| {
        "could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string"
            .to_owned()
    })
}

/// A member of a list, or a map's value, as a CEL literal.
fn member_text(val: &dyn Val) -> Result<String, String> {
    Ok(match Arg::of(val) {
        Arg::Int(i) => i.to_string(),
        Arg::UInt(u) => u.to_string(),
        Arg::Str(s) => go_quote(s),
        Arg::Bytes(b) => format!("b{}", go_quote(utf8(b)?)),
        Arg::Bool(b) => b.to_string(),
        Arg::Null => "null".to_owned(),
        Arg::Type(name) => name.to_owned(),
        Arg::Time(function, text) => format!("{function}({})", go_quote(&text)),
        Arg::List => list_text(val)?,
        Arg::Map => map_text(val)?,
        // Go's `%.6f`, quoted where it is no number.
        Arg::Double(d) if d.is_nan() => "\"NaN\"".to_owned(),
        Arg::Double(d) if d.is_infinite() => {
            if d > 0.0 { "\"+Inf\"" } else { "\"-Inf\"" }.to_owned()
        }
        Arg::Double(d) => format!("{d:.6}"),
        Arg::Other => return Err(format!("no formatting function for {}", type_name(val))),
    })
}

fn list_text(val: &dyn Val) -> Result<String, String> {
    let Some(list) = val.as_iterable() else {
        return Err(format!("no formatting function for {}", type_name(val)));
    };
    let mut members = Vec::new();
    let mut items = list.iter();
    while let Some(item) = items.next() {
        members.push(member_text(item)?);
    }
    Ok(format!("[{}]", members.join(", ")))
}

/// `{key:value, ...}`, ordered by the written keys (`"a"` before `1`,
/// `10` before `9`).
fn map_text(val: &dyn Val) -> Result<String, String> {
    let (Some(keys), Some(values)) = (val.as_iterable(), val.as_indexer()) else {
        return Err(format!("no formatting function for {}", type_name(val)));
    };
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut items = keys.iter();
    while let Some(key) = items.next() {
        let key_text = match Arg::of(key) {
            Arg::Str(s) => go_quote(s),
            Arg::Bool(b) => b.to_string(),
            Arg::Int(i) => i.to_string(),
            Arg::UInt(u) => u.to_string(),
            _ => {
                return Err(format!(
                    "no formatting function for map key of type {}",
                    type_name(key)
                ));
            }
        };
        let value = values.get(key).map_err(|e| e.to_string())?;
        entries.push((key_text, member_text(value.as_ref())?));
    }
    // Stable, by the key alone, as cel-go sorts.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let entries: Vec<String> = entries
        .into_iter()
        .map(|(key, value)| format!("{key}:{value}"))
        .collect();
    Ok(format!("{{{}}}", entries.join(", ")))
}

/// The double `%f` and `%e` take: a double, or the text of one that has no
/// digits.
fn double_of(arg: &Arg) -> Option<f64> {
    match *arg {
        Arg::Double(d) => Some(d),
        Arg::Str("NaN") => Some(f64::NAN),
        Arg::Str("Infinity") => Some(f64::INFINITY),
        Arg::Str("-Infinity") => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// Whether the printer cannot read `number` as a width or a precision: Go's
/// `fmt` stops at a digit that follows more than a million.
fn unreadable(number: u64) -> bool {
    number / 10 > 1_000_000
}

/// The `-` before the digits of a negative `i`, which Go writes with the
/// magnitude where Rust writes the two's complement.
fn sign(i: i64) -> &'static str {
    if i < 0 { "-" } else { "" }
}

/// Each byte as two hex digits.
fn hex(bytes: &[u8], upper: bool) -> String {
    bytes
        .iter()
        .map(|b| {
            if upper {
                format!("{b:02X}")
            } else {
                format!("{b:02x}")
            }
        })
        .collect()
}

/// The significant digits of a decimal text (`0012.3400` is `1234` with the
/// point 2 digits in), as golang.org/x/text's `Decimal` keeps them: no
/// leading or trailing zeros; no digits and the point at 0 for zero.
fn significant(text: &str) -> (Vec<u8>, i64) {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let mut digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).collect();
    let mut point = i64::try_from(whole.len()).unwrap_or(i64::MAX);
    let leading = digits.iter().take_while(|d| **d == b'0').count();
    digits.drain(..leading);
    point = point.saturating_sub(i64::try_from(leading).unwrap_or(i64::MAX));
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    if digits.is_empty() {
        point = 0;
    }
    (digits, point)
}

/// The shortest digits that read back as `value` (Go's `'g'` with precision
/// -1), as [`significant`] gives them.
fn shortest(value: f64) -> (Vec<u8>, i64) {
    let text = format!("{value:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let (digits, point) = significant(mantissa);
    if digits.is_empty() {
        return (digits, 0);
    }
    (digits, point.saturating_add(exponent))
}

/// `%.<precision>f` as golang.org/x/text's printer writes it for `en_US`.
fn fixed(value: f64, precision: u64) -> String {
    if unreadable(precision) {
        return NO_VERB.to_owned();
    }
    // The printer keeps the precision in a `uint8` (the fraction digits
    // always written) and an `int16` (those it rounds to; negative: none).
    let [low, high, ..] = precision.to_le_bytes();
    let min_fraction = i64::from(low);
    let max_fraction = i16::from_le_bytes([low, high]);
    if value.is_nan() {
        return "NaN".to_owned();
    }
    // `-0` has no sign: the printer asks `x < 0`.
    let sign = if value < 0.0 { "-" } else { "" };
    if value.is_infinite() {
        return format!("{sign}∞");
    }
    let magnitude = value.abs();
    let (digits, point) = match usize::try_from(max_fraction) {
        // A double's exact expansion ends within 1074 fraction digits: more
        // asked for are zeros, which are not kept.
        Ok(fraction) => {
            let fraction = fraction.min(1100);
            significant(&format!("{magnitude:.fraction$}"))
        }
        Err(_) => shortest(magnitude),
    };
    let length = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    let end = if digits.is_empty() {
        min_fraction
    } else {
        length.max(point.saturating_add(min_fraction))
    };
    let mut out = String::from(sign);
    // The integer digits, grouped by three, and at least one.
    let whole = usize::try_from(point).unwrap_or(0);
    if whole == 0 {
        out.push('0');
    }
    for index in 0..whole {
        out.push(char::from(digits.get(index).copied().unwrap_or(b'0')));
        let left = whole - index - 1;
        if left > 0 && left % 3 == 0 {
            out.push(',');
        }
    }
    let fraction = usize::try_from(end.saturating_sub(point)).unwrap_or(0);
    if fraction > 0 {
        out.push('.');
        // Zeros up to the first digit, the digits after the point, zeros
        // up to the fraction digits to write.
        let zeros = usize::try_from(point.saturating_neg()).unwrap_or(0);
        let mut written = 0;
        for digit in std::iter::repeat_n(b'0', zeros).chain(digits.iter().skip(whole).copied()) {
            out.push(char::from(digit));
            written += 1;
        }
        for _ in written..fraction {
            out.push('0');
        }
    }
    out
}

/// `%<width>e` as golang.org/x/text's printer writes it for `en_US`:
/// `-1.234568×10⁰³`, always six digits after the point, padded with spaces
/// in front to `width` characters (cel-go writes the precision there).
fn scientific(value: f64, width: u64) -> String {
    if unreadable(width) {
        return NO_VERB.to_owned();
    }
    // `%0e` is the zero flag, not a width; a width is kept in a `uint16`.
    let [low, high, ..] = width.to_le_bytes();
    let width = usize::from(u16::from_le_bytes([low, high]));
    let sign = if value < 0.0 { "-" } else { "" };
    let text = if value.is_nan() {
        "NaN".to_owned()
    } else if value.is_infinite() {
        format!("{sign}∞")
    } else {
        let rust = format!("{:.6e}", value.abs());
        let (mantissa, exponent) = rust.split_once('e').unwrap_or((&rust, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let mut text = format!("{sign}{mantissa}×10");
        if exponent < 0 {
            text.push('⁻');
        }
        let digits = format!("{:02}", exponent.unsigned_abs());
        text.extend(digits.bytes().map(superscript));
        text
    };
    let padding = width.saturating_sub(text.chars().count());
    format!("{}{text}", " ".repeat(padding))
}

fn superscript(digit: u8) -> char {
    match digit {
        b'1' => '¹',
        b'2' => '²',
        b'3' => '³',
        b'4' => '⁴',
        b'5' => '⁵',
        b'6' => '⁶',
        b'7' => '⁷',
        b'8' => '⁸',
        b'9' => '⁹',
        _ => '⁰',
    }
}

#[cfg(test)]
mod tests {
    use ::cel::Value;

    use crate::testing::cel_libraries::eval;

    /// What cel-go v0.29.2 (Kubernetes 1.37's) gives, with
    /// `ext.Strings(ext.StringsVersion(2))`: a string, an int (`.size()` of
    /// a long one), or an error's message.
    enum Expected {
        V(&'static str),
        N(i64),
        E(&'static str),
    }
    use Expected::{E, N, V};

    /// Each row as cel-go's program runs it (where its checker refuses a
    /// literal call, the row says so: here the call is evaluated, as
    /// cel-go's program does with the check left out).
    const CEL_GO: &[(&str, Expected)] = &[
        (r#"'no substitution'.format([])"#, V("no substitution")),
        (r#"'%% and %%'.format([])"#, V("% and %")),
        (r#"'%%%s%%'.format(['text'])"#, V("%text%")),
        // cel-go refuses it when it checks the call.
        (r#"'%s, %d'.format(dyn(['a', 1, 'ignored']))"#, V("a, 1")),
        (r#"'©%sα'.format(['T'])"#, V("©Tα")),
        (r#"'%s'.format([null])"#, V("null")),
        (r#"'%s %s'.format([true, false])"#, V("true false")),
        (r#"'%s %s %s'.format([-1, 2u, 2.5])"#, V("-1 2 2.5")),
        (r#"'%s'.format([1e21])"#, V("1e+21")),
        (
            r#"'%s %s %s'.format([1000000.0, 123456.5, 1e-5])"#,
            V("1e+06 123456.5 1e-05"),
        ),
        (r#"'%s'.format([-0.0])"#, V("-0")),
        (
            r#"'%s %s %s'.format([double('NaN'), double('Infinity'), double('-Infinity')])"#,
            V("NaN +Inf -Inf"),
        ),
        (r#"'%s'.format([b'xyz'])"#, V("xyz")),
        (
            r#"'%s'.format([b'\xff'])"#,
            E(
                "error during formatting: could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string",
            ),
        ),
        (r#"'%s'.format([b'caf\xc3\xa9'])"#, V("café")),
        (
            r#"'%s %s %s'.format([type(''), type(1u), type(null)])"#,
            V("string uint null_type"),
        ),
        (
            r#"'%s %s %s %s'.format([type([]), type({}), type(type(1)), type(b'')])"#,
            V("list map type bytes"),
        ),
        (
            r#"'%s %s'.format([type(timestamp('2023-01-01T00:00:00Z')), type(duration('1s'))])"#,
            V("google.protobuf.Timestamp google.protobuf.Duration"),
        ),
        (
            r#"'%s'.format([timestamp('2023-02-03T23:31:20.5+01:00')])"#,
            V("2023-02-03T23:31:20.5+01:00"),
        ),
        (
            r#"'%s'.format([timestamp('2023-02-03T23:31:20.123456789Z')])"#,
            V("2023-02-03T23:31:20.123456789Z"),
        ),
        (
            r#"'%s %s %s %s'.format([duration('1h45m47.25s'), duration('-1.5s'), duration('1ns'), duration('0s')])"#,
            V("6347.25s -1.5s 0.000000001s 0s"),
        ),
        (
            r#"'%s'.format(['a "quoted" \'x\' \\ \t é 😀'])"#,
            V("a \"quoted\" 'x' \\ \t é 😀"),
        ),
        (r#"'%s'.format([''])"#, V("")),
        (r#"'%s'.format([['c0', 'c1']])"#, V("[\"c0\", \"c1\"]")),
        (
            r#"'%s'.format([[1, 2u, -3, 2.5, true, null]])"#,
            V("[1, 2, -3, 2.500000, true, null]"),
        ),
        (
            r#"'%s'.format([[double('NaN'), double('Infinity'), double('-Infinity'), -0.0, 1e21, 1e-7, 123456789.0]])"#,
            V(
                "[\"NaN\", \"+Inf\", \"-Inf\", -0.000000, 1000000000000000000000.000000, 0.000000, 123456789.000000]",
            ),
        ),
        (
            r#"'%s'.format([[b'ab', b'\xc3\xa9', 'é', 'q"uote', 'back\\slash', 'tab\t', 'nl\n']])"#,
            V("[b\"ab\", b\"é\", \"é\", \"q\\\"uote\", \"back\\\\slash\", \"tab\\t\", \"nl\\n\"]"),
        ),
        (
            r#"'%s'.format([['\u0000', '\u0007\b\f\r\v', '\x7f', '\u0080', '\u00a0', '\u00ad', '\u200b', '\u2028']])"#,
            V(
                "[\"\\x00\", \"\\a\\b\\f\\r\\v\", \"\\x7f\", \"\\u0080\", \"\\u00a0\", \"\\u00ad\", \"\\u200b\", \"\\u2028\"]",
            ),
        ),
        (
            r#"'%s'.format([['e\u0301', '😀', '\U000E0001', '\uFFFD', '\U0010FFFF', ' ', '\u3000', 'ǅ', '\U0001F1FA']])"#,
            V(
                "[\"e\u{301}\", \"😀\", \"\\U000e0001\", \"\u{fffd}\", \"\\U0010ffff\", \" \", \"\\u3000\", \"ǅ\", \"\u{1f1fa}\"]",
            ),
        ),
        (
            r#"'%s'.format([[timestamp('2026-11-26T09:30:00Z'), duration('90m'), duration('1.5s'), timestamp('2023-02-03T23:31:20.5+01:00')]])"#,
            V(
                "[timestamp(\"2026-11-26T09:30:00Z\"), duration(\"5400s\"), duration(\"1.5s\"), timestamp(\"2023-02-03T23:31:20.5+01:00\")]",
            ),
        ),
        (
            r#"'%s'.format([[type(1), type('a'), type([1]), type(null)]])"#,
            V("[int, string, list, null_type]"),
        ),
        (
            r#"'%s'.format([[[1, [2]], [], {}]])"#,
            V("[[1, [2]], [], {}]"),
        ),
        (
            r#"'%s'.format([[b'\xff']])"#,
            E(
                "error during formatting: could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string",
            ),
        ),
        (
            r#"'%s, then %s'.format([timestamp('2026-11-26T09:30:00Z'), [duration('90m')]])"#,
            V("2026-11-26T09:30:00Z, then [duration(\"5400s\")]"),
        ),
        (
            r#"'%s'.format([{'b': 2, 'a': 1}])"#,
            V("{\"a\":1, \"b\":2}"),
        ),
        (
            r#"'%s'.format([{'strKey': 'x', 6: duration('422s'), true: 42}])"#,
            V("{\"strKey\":\"x\", 6:duration(\"422s\"), true:42}"),
        ),
        (
            r#"'%s'.format([{1: 'one', 2u: 'two', -3: [1.5], false: {'k': b'v'}}])"#,
            V("{-3:[1.500000], 1:\"one\", 2:\"two\", false:{\"k\":b\"v\"}}"),
        ),
        (
            r#"'%s'.format([{10: 'a', 9: 'b', 100: 'c'}])"#,
            V("{10:\"a\", 100:\"c\", 9:\"b\"}"),
        ),
        (
            r#"'%s'.format([{'Z': 1, 'a': 2, '"': 3, 'é': 4, '': 5}])"#,
            V("{\"\":5, \"Z\":1, \"\\\"\":3, \"a\":2, \"é\":4}"),
        ),
        (
            r#"'%s'.format([[{'a': 1}, {'b': [true]}]])"#,
            V("[{\"a\":1}, {\"b\":[true]}]"),
        ),
        (
            r#"'%s'.format([{'t': timestamp('2023-01-01T00:00:00Z'), 'n': null, 'd': double('NaN'), 'f': 2.0, 'ty': type(1)}])"#,
            V(
                "{\"d\":\"NaN\", \"f\":2.000000, \"n\":null, \"t\":timestamp(\"2023-01-01T00:00:00Z\"), \"ty\":int}",
            ),
        ),
        (r#"'%s'.format([{}])"#, V("{}")),
        (
            r#"'%s'.format([{'a': b'\xff'}])"#,
            E(
                "error during formatting: could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string",
            ),
        ),
        (r#"'%d %d'.format([-12, 12u])"#, V("-12 12")),
        (
            r#"'%d %d %d'.format([9223372036854775807, -9223372036854775808, 18446744073709551615u])"#,
            V("9223372036854775807 -9223372036854775808 18446744073709551615"),
        ),
        (r#"'%d'.format([1000000])"#, V("1000000")),
        // cel-go refuses it when it checks the call.
        (
            r#"'%d'.format([1.5])"#,
            E(
                "error during formatting: decimal clause can only be used on integers, was given double",
            ),
        ),
        (
            r#"'%d'.format([dyn(1.5)])"#,
            E(
                "error during formatting: decimal clause can only be used on integers, was given double",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%d'.format(['1'])"#,
            E(
                "error during formatting: decimal clause can only be used on integers, was given string",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%d'.format([true])"#,
            E(
                "error during formatting: decimal clause can only be used on integers, was given bool",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%d'.format([duration('30m2s')])"#,
            E(
                "error during formatting: decimal clause can only be used on integers, was given google.protobuf.Duration",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%d'.format([[1]])"#,
            E(
                "error during formatting: decimal clause can only be used on integers, was given list",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%d'.format([null])"#,
            E(
                "error during formatting: decimal clause can only be used on integers, was given null_type",
            ),
        ),
        (r#"'%f'.format([2.5])"#, V("2.500000")),
        (r#"'%.2f'.format([1000000.5])"#, V("1,000,000.50")),
        (
            r#"'%.0f %.0f %.0f %.0f'.format([0.5, 1.5, 2.5, 3.5])"#,
            V("0 2 2 4"),
        ),
        (
            r#"'%.2f %.2f %.2f'.format([-1.005, 0.125, 0.375])"#,
            V("-1.00 0.12 0.38"),
        ),
        (r#"'%.1f'.format([-0.0])"#, V("0.0")),
        (
            r#"'%.1f %.0f %f'.format([-0.01, -0.4, -0.0000001])"#,
            V("-0.0 -0 -0.000000"),
        ),
        (
            r#"'%.3f'.format([1e21])"#,
            V("1,000,000,000,000,000,000,000.000"),
        ),
        (
            r#"'%f %f'.format([double('NaN'), double('Infinity')])"#,
            V("NaN ∞"),
        ),
        (r#"'%.1f'.format([double('-Infinity')])"#, V("-∞")),
        (
            r#"'%f %f %f'.format(['NaN', 'Infinity', '-Infinity'])"#,
            V("NaN ∞ -∞"),
        ),
        (
            r#"'%f'.format(['1.5'])"#,
            E(
                "error during formatting: fixed-point clause can only be used on doubles, was given string",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%f'.format([2])"#,
            E(
                "error during formatting: fixed-point clause can only be used on doubles, was given int",
            ),
        ),
        (
            r#"'%f'.format([dyn(2)])"#,
            E(
                "error during formatting: fixed-point clause can only be used on doubles, was given int",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%f'.format([2u])"#,
            E(
                "error during formatting: fixed-point clause can only be used on doubles, was given uint",
            ),
        ),
        (r#"'%.10f'.format([0.1])"#, V("0.1000000000")),
        (r#"'%f %f'.format([1e-7, 5e-324])"#, V("0.000000 0.000000")),
        (
            r#"'%.300f'.format([1.5])"#,
            V("1.50000000000000000000000000000000000000000000"),
        ),
        (r#"'%.256f %.257f'.format([1.5, 1.5])"#, V("1.5 1.5")),
        (
            r#"'%.20f'.format([123456789.123])"#,
            V("123,456,789.12299999594688415527"),
        ),
        (
            r#"'%.2f %.1f'.format([999.999, -1234567.25])"#,
            V("1,000.00 -1,234,567.2"),
        ),
        (r#"'%.2f'.format([123.0])"#, V("123.00")),
        (r#"'%f'.format([1.7976931348623157e308]).size()"#, N(418)),
        (r#"'%.40000f'.format([1.5]).size()"#, N(66)),
        (r#"'%.40000f'.format([0.1]).size()"#, N(66)),
        (
            r#"'%.65535f %.65536f'.format([0.25, 0.25])"#,
            V(
                "0.250000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000 0",
            ),
        ),
        (r#"'%.1000000f'.format([1.5]).size()"#, N(66)),
        (r#"'%.1000001f'.format([1.5]).size()"#, N(67)),
        (
            r#"'%.10000000f'.format([1.5])"#,
            V(
                "1.50000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
            ),
        ),
        (r#"'%e'.format([1.0])"#, V("1.000000×10⁰⁰")),
        (r#"'%e'.format([-1234.5678])"#, V("-1.234568×10⁰³")),
        (
            r#"'%e %e'.format([0.000123, 1e300])"#,
            V("1.230000×10⁻⁰⁴ 1.000000×10³⁰⁰"),
        ),
        (
            r#"'%e %e'.format([0.0, -0.0])"#,
            V("0.000000×10⁰⁰ 0.000000×10⁰⁰"),
        ),
        (r#"'%e'.format([5e-324])"#, V("4.940656×10⁻³²⁴")),
        (r#"'%e'.format([1.00000005])"#, V("1.000000×10⁰⁰")),
        (r#"'%e'.format([9.9999995])"#, V("9.999999×10⁰⁰")),
        (r#"'%.2e'.format([1234.5])"#, V("1.234500×10⁰³")),
        (r#"'%.0e'.format([1234.5])"#, V("1.234500×10⁰³")),
        (r#"'%.20e'.format([1234.5])"#, V("       1.234500×10⁰³")),
        (r#"'%.20e'.format([-1234.5])"#, V("      -1.234500×10⁰³")),
        (r#"'%e'.format([double('NaN')])"#, V("   NaN")),
        (
            r#"'%e %e'.format([double('Infinity'), double('-Infinity')])"#,
            V("     ∞     -∞"),
        ),
        (
            r#"'%.2e %.1e'.format([double('NaN'), double('-Infinity')])"#,
            V("NaN -∞"),
        ),
        (r#"'%e'.format(['Infinity'])"#, V("     ∞")),
        (
            r#"'%e'.format([dyn(1)])"#,
            E(
                "error during formatting: scientific clause can only be used on doubles, was given int",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%e'.format([1])"#,
            E(
                "error during formatting: scientific clause can only be used on doubles, was given int",
            ),
        ),
        (
            r#"'%e'.format(['x'])"#,
            E(
                "error during formatting: scientific clause can only be used on doubles, was given string",
            ),
        ),
        (r#"'%b %b %b'.format([5, -5, 5u])"#, V("101 -101 101")),
        (r#"'%b %b'.format([true, false])"#, V("1 0")),
        (
            r#"'%b'.format([-9223372036854775808])"#,
            V("-1000000000000000000000000000000000000000000000000000000000000000"),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%b'.format([1.5])"#,
            E(
                "error during formatting: only integers and bools can be formatted as binary, was given double",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%b'.format(['a'])"#,
            E(
                "error during formatting: only integers and bools can be formatted as binary, was given string",
            ),
        ),
        (r#"'%x %X %x'.format([255, -255, 255u])"#, V("ff -FF ff")),
        (r#"'%x'.format(['Hello é'])"#, V("48656c6c6f20c3a9")),
        (r#"'%X %x'.format([b'\x00\xff', ''])"#, V("00FF ")),
        (
            r#"'%x'.format([-9223372036854775808])"#,
            V("-8000000000000000"),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%x'.format([1.5])"#,
            E(
                "error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given double",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%x'.format([[1]])"#,
            E(
                "error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given list",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%X'.format([true])"#,
            E(
                "error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given bool",
            ),
        ),
        (r#"'%o %o %o'.format([8, -8, 8u])"#, V("10 -10 10")),
        // cel-go refuses it when it checks the call.
        (
            r#"'%o'.format([true])"#,
            E("error during formatting: octal clause can only be used on integers, was given bool"),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%o'.format([1.5])"#,
            E(
                "error during formatting: octal clause can only be used on integers, was given double",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (r#"'%s %s'.format(['a'])"#, E("index 1 out of range")),
        // cel-go refuses it when it checks the call.
        (r#"'%d %s'.format([1])"#, E("index 1 out of range")),
        // cel-go refuses it when it checks the call.
        (r#"'%'.format([1])"#, E("unexpected end of string")),
        // cel-go refuses it when it checks the call.
        (r#"'%'.format(dyn([]))"#, E("index 0 out of range")),
        // cel-go refuses it when it checks the call.
        (r#"'abc %'.format(dyn([]))"#, E("index 0 out of range")),
        // cel-go refuses it when it checks the call.
        (
            r#"'%z'.format([1])"#,
            E("could not parse formatting clause: unrecognized formatting clause \"z\""),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%.3'.format([1.5])"#,
            E(
                "could not parse formatting clause: error while parsing precision: could not find end of precision specifier",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%.f'.format([1.5])"#,
            E(
                "could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%.99999999999999999999f'.format([1.5])"#,
            E(
                "could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"99999999999999999999\": value out of range",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%é'.format([1])"#,
            E("could not parse formatting clause: unrecognized formatting clause \"Ã\""),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%.2é'.format([1.5])"#,
            E("could not parse formatting clause: unrecognized formatting clause \"Ã\""),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%S'.format([1])"#,
            E("could not parse formatting clause: unrecognized formatting clause \"S\""),
        ),
        (r#"'%.2s %.2d'.format(['abc', 5])"#, V("abc 5")),
        (r#"'%.2x %.3b %.1o'.format([255, 5, 8])"#, V("ff 101 10")),
        // cel-go refuses it when it checks the call.
        (
            r#"'%s'.format([optional.of(1)])"#,
            E(
                "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given optional_type",
            ),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%s'.format(dyn([[optional.none()]]))"#,
            E("error during formatting: no formatting function for optional_type"),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%s'.format(dyn([{'a': optional.of(1)}]))"#,
            E("error during formatting: no formatting function for optional_type"),
        ),
        // cel-go refuses it when it checks the call.
        (
            r#"'%5s|%-3d'.format(['a', 1])"#,
            E("could not parse formatting clause: unrecognized formatting clause \"5\""),
        ),
        (
            r#"'%s'.format([[[], [[]], {'k': []}]])"#,
            V("[[], [[]], {\"k\":[]}]"),
        ),
        (r#"'%s'.format([dyn([1, 'a'])])"#, V("[1, \"a\"]")),
        (r#"'%s%s%s'.format(['a', 'b', 'c'])"#, V("abc")),
        (r#"'%s'.format(['%d'])"#, V("%d")),
        (r#"'%.100000000f'.format([1.5])"#, V("%!(NOVERB)")),
        (r#"'%.99999999f'.format([1.5])"#, V("%!(NOVERB)")),
        (r#"'%.9223372036854775807f'.format([1.5])"#, V("%!(NOVERB)")),
        (r#"'%.1234567890e'.format([1.5])"#, V("%!(NOVERB)")),
        (r#"'%.100000000e'.format([1.5])"#, V("%!(NOVERB)")),
        (r#"'%.10000000e'.format([double('NaN')]).size()"#, N(38528)),
        (r#"'%.1000000e'.format([double('NaN')]).size()"#, N(16960)),
        (r#"'%.0f'.format([double('NaN')])"#, V("NaN")),
        (r#"'%.2f'.format([0.001])"#, V("0.00")),
        (r#"'%.2f'.format([-0.001])"#, V("-0.00")),
        (r#"'%.0f'.format([-0.5])"#, V("-0")),
        (r#"'%.0f'.format([0.0])"#, V("0")),
        (r#"'%.256f'.format([0.0])"#, V("0")),
        (
            r#"'%.256f'.format([-0.001])"#,
            V("-0.001000000000000000020816681711721685132943093776702880859375"),
        ),
        (r#"'%.257f'.format([123.0])"#, V("123.0")),
        (
            r#"'%.65535f'.format([1e21])"#,
            V(
                "1,000,000,000,000,000,000,000.000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
            ),
        ),
        (r#"'%.65535f'.format([1e-300]).size()"#, N(302)),
        (
            r#"'%.40000f'.format([-0.0])"#,
            V("0.0000000000000000000000000000000000000000000000000000000000000000"),
        ),
        (
            r#"'%.40000f'.format([1e22])"#,
            V(
                "10,000,000,000,000,000,000,000.0000000000000000000000000000000000000000000000000000000000000000",
            ),
        ),
        (r#"'%.32767f'.format([5e-324]).size()"#, N(1076)),
        (r#"'%.14e'.format([1.0])"#, V(" 1.000000×10⁰⁰")),
        (r#"'%.13e'.format([1.0])"#, V("1.000000×10⁰⁰")),
        (r#"'%.13e'.format([-1.0])"#, V("-1.000000×10⁰⁰")),
        (r#"'%.14e'.format([-1.0])"#, V("-1.000000×10⁰⁰")),
        (r#"'%.2f'.format([9.995])"#, V("9.99")),
        (r#"'%.3f'.format([1234.0])"#, V("1,234.000")),
        (r#"'%.0f'.format([999999.5])"#, V("1,000,000")),
        (r#"'%f'.format([123456.0])"#, V("123,456.000000")),
        (
            r#"'%.1f'.format([12345678901234567890.0])"#,
            V("12,345,678,901,234,567,168.0"),
        ),
        (r#"'%e'.format([123456789.0])"#, V("1.234568×10⁰⁸")),
        (r#"'%e'.format([1e-310])"#, V("1.000000×10⁻³¹⁰")),
        (
            r#"'%e'.format([1.7976931348623157e308])"#,
            V("1.797693×10³⁰⁸"),
        ),
        (r#"'%s'.format([[1.7976931348623157e308]]).size()"#, N(318)),
        (r#"'%s'.format([[0.1, 1e-300]])"#, V("[0.100000, 0.000000]")),
        (
            r#"'%s'.format([{true: 1, false: 0, 'true': 2}])"#,
            V("{\"true\":2, false:0, true:1}"),
        ),
        (r#"'%.0e'.format([double('NaN')])"#, V("NaN")),
        (r#"'%.1e'.format([double('NaN')])"#, V("NaN")),
        (r#"'%.3e'.format([double('NaN')])"#, V("NaN")),
        (r#"'%.4e'.format([double('-Infinity')])"#, V("  -∞")),
        (r#"'%x'.format([b''])"#, V("")),
        (r#"'%s'.format([b''])"#, V("")),
        (r#"'%s'.format([[b'']])"#, V("[b\"\"]")),
        (r#"'%s'.format([['']])"#, V("[\"\"]")),
        (
            r#"'%s'.format([['\u088f', '\U0001FAE9', '\u0897', '\u200c', '\U000E0020', '\u0301', '\uFEFF', '\U0001F600\u200D\U0001F600']])"#,
            V(
                "[\"\\u088f\", \"\\U0001fae9\", \"\\u0897\", \"\\u200c\", \"\\U000e0020\", \"\u{301}\", \"\\ufeff\", \"😀\\u200d😀\"]",
            ),
        ),
        (
            r#"'%s'.format([{'\u00a0': '\u2029'}])"#,
            V("{\"\\u00a0\":\"\\u2029\"}"),
        ),
    ];

    /// Rows whose list is a literal that cel-go's compile-time check of
    /// `format` refuses (too many arguments, a clause past the text's end, an
    /// optional item) pass it through `dyn(...)`, so that the formatting
    /// itself is what they test; the check's answers are in
    /// `cel::check::type_check`'s tests.
    #[test]
    fn format_gives_what_cel_go_gives() {
        let mut wrong = Vec::new();
        for (source, expected) in CEL_GO {
            let got = eval(source);
            let same = match (expected, &got) {
                (V(text), Ok(Value::String(s))) => s.as_str() == *text,
                (N(n), Ok(Value::Int(i))) => i == n,
                (E(message), Err(e)) => e.to_string().contains(message),
                _ => false,
            };
            if !same {
                wrong.push(format!(
                    "{source}\n  cel-go: {}\n  here:   {got:?}",
                    match expected {
                        V(text) => format!("{text:?}"),
                        N(n) => n.to_string(),
                        E(message) => format!("error {message:?}"),
                    }
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "{} of {} rows differ:\n{}",
            wrong.len(),
            CEL_GO.len(),
            wrong.join("\n")
        );
    }

    /// The crate's strings extension declares its own `format` (cel-go's
    /// later formatter): the one here must be the one that runs, and the
    /// extension's other functions must still be declared.
    #[test]
    fn replaces_the_crates_format_and_keeps_the_extension() {
        assert_eq!(
            eval("'%s'.format([['c0', 'c1']])"),
            Ok(Value::from("[\"c0\", \"c1\"]"))
        );
        assert_eq!(
            eval("'%.2f'.format([1000000.5])"),
            Ok(Value::from("1,000,000.50"))
        );
        assert!(eval("'%d'.format([dyn(1.5)])").is_err());
        assert_eq!(
            eval("strings.quote('a') + ['x', 'y'].join('-')"),
            Ok(Value::from("\"a\"x-y"))
        );
    }

    /// The e2e case `cel_time_library`'s annotation, through a whole
    /// MutatingPolicy: what Kyverno writes.
    #[test]
    fn a_mutating_policy_writes_times_in_a_list_as_kyverno_does() {
        assert_eq!(
            crate::testing::cel_libraries::annotated(
                "'%s, then %s'.format([timestamp('2026-11-26T09:30:00Z'), [duration('90m')]])"
            ),
            serde_json::json!({"result": "2026-11-26T09:30:00Z, then [duration(\"5400s\")]"})
        );
    }

    /// A time held in a variable is formatted as one written in place.
    #[test]
    fn a_time_from_a_variable_is_formatted_as_a_time() {
        let policy = serde_json::json!({"apiVersion": "policies.kyverno.io/v1",
            "kind": "MutatingPolicy", "metadata": {"name": "times"},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""],
                "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/binding"]}]},
            "variables": [{"name": "at", "expression": "timestamp('2026-11-26T09:30:00Z')"}],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{metadata: Object.metadata{annotations: {'result': '%s, then %s'.format([variables.at, [duration('90m')]])}}}"}}]}});
        let response = crate::testing::fake_cluster::run("binding.json", policy);
        assert!(response.accepted, "{:?}", response.message);
        assert_eq!(
            crate::testing::fake_cluster::annotations(&response),
            serde_json::json!({"result": "2026-11-26T09:30:00Z, then [duration(\"5400s\")]"})
        );
    }

    #[test]
    fn an_argument_that_is_no_list_has_no_overload() {
        assert!(eval("'%s'.format(dyn('a'))").is_err());
        assert!(eval("'%s'.format(dyn({'a': 1}))").is_err());
    }

    #[test]
    fn quoting_follows_go_strconv() {
        for (text, quoted) in [
            ("plain", "\"plain\""),
            ("\u{7f}\u{0}", "\"\\x7f\\x00\""),
            ("\u{85}", "\"\\u0085\""),
            ("\u{1d173}", "\"\\U0001d173\""),
            ("a\u{300}", "\"a\u{300}\""),
            ("\u{1fae9}", "\"\\U0001fae9\""),
        ] {
            assert_eq!(super::super::go_quote::go_quote(text), quoted, "{text:?}");
        }
    }
}
