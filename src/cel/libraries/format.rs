//! Kubernetes' format library: `format.named(name)` (an optional format),
//! `format.dns1123Label()` and the other named formats, and
//! `<format>.validate(s)`: `optional.none()` when `s` is valid, else the
//! list of what is wrong, in Kubernetes' words. Name formats use the
//! project's Kubernetes name rules ([`crate::shared::k8s_names`]); `uri` is Go's
//! `url.ParseRequestURI` (the URL library's parser); `uuid`, `byte`, `date`
//! and `datetime` are kube-openapi's checks.

use std::sync::Arc;

use ::cel::common::types::{CelOptional, Type};
use ::cel::common::value::{CowVal, Val};
use ::cel::objects::Opaque;
use ::cel::{Env, ExecutionError, Value};

use super::{Function, error, global, member, opaque, opaque_arg, string_arg, string_type};
use crate::shared::k8s_names::{matches_dns_label, matches_dns_subdomain, matches_name_part};

const TYPE_NAME: &str = "kubernetes.NamedFormat";

fn format_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

/// A named format, by its index in [`FORMATS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format(usize);

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

type Check = fn(&str) -> Vec<String>;

/// The formats by their names in CEL, with their checks and their
/// `format.NAME()` functions (`constant::<index>`: a function here is a
/// plain pointer, so each carries its format in its type).
const FORMATS: &[(&str, Check, Function)] = &[
    ("dns1123Label", dns1123_label, constant::<0>),
    ("dns1123Subdomain", dns1123_subdomain, constant::<1>),
    ("dns1035Label", dns1035_label, constant::<2>),
    ("qualifiedName", qualified_name, constant::<3>),
    (
        "dns1123LabelPrefix",
        |s| dns1123_label(&mask_trailing_dash(s)),
        constant::<4>,
    ),
    (
        "dns1123SubdomainPrefix",
        |s| dns1123_subdomain(&mask_trailing_dash(s)),
        constant::<5>,
    ),
    (
        "dns1035LabelPrefix",
        |s| dns1035_label(&mask_trailing_dash(s)),
        constant::<6>,
    ),
    ("labelValue", label_value, constant::<7>),
    ("uri", uri, constant::<8>),
    ("uuid", uuid, constant::<9>),
    ("byte", byte, constant::<10>),
    ("date", date, constant::<11>),
    ("datetime", date_time, constant::<12>),
];

fn fails(valid: bool, why: &str) -> Vec<String> {
    if valid { vec![] } else { vec![why.to_string()] }
}

fn uri(s: &str) -> Vec<String> {
    super::url::parse_request_uri(s).err().into_iter().collect()
}
fn uuid(s: &str) -> Vec<String> {
    fails(is_uuid(s), "does not match the UUID format")
}
fn byte(s: &str) -> Vec<String> {
    fails(is_base64(s), "invalid base64")
}
fn date(s: &str) -> Vec<String> {
    fails(is_date(s), "invalid date")
}
fn date_time(s: &str) -> Vec<String> {
    fails(is_date_time(s), "invalid datetime")
}

const DNS1123_LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const NAME_PART: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const NAME_PART_WHY: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// apimachinery's `RegexError`.
fn regex_error(why: &str, pattern: &str, examples: &[&str]) -> String {
    let examples: String = examples
        .iter()
        .map(|e| format!("'{e}', "))
        .collect::<Vec<_>>()
        .join(" or ");
    format!("{why} (e.g. {examples}regex used for validation is '{pattern}')")
}

/// apimachinery's length error: in "characters" in its older validators,
/// "bytes" in the newer ones label keys and values use.
fn too_long(value: &str, max: usize, unit: &str) -> Option<String> {
    (value.len() > max).then(|| format!("must be no more than {max} {unit}"))
}

/// apimachinery's `maskTrailingDash`: a name that is a prefix may end in
/// `-` (a suffix follows); its last two bytes become `a`, as apimachinery
/// does it.
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(head) if name.len() > 1 => {
            let cut = head.len().saturating_sub(1);
            format!("{}a", head.get(..cut).unwrap_or(head))
        }
        _ => name.to_string(),
    }
}

fn dns1123_label(value: &str) -> Vec<String> {
    let mut errors: Vec<String> = too_long(value, 63, "characters").into_iter().collect();
    if !matches_dns_label(value.as_bytes()) {
        errors.push(if matches_dns_subdomain(value.as_bytes()) {
            "must not contain dots".into()
        } else {
            regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL,
                &["my-name", "123-abc"],
            )
        });
    }
    errors
}

fn dns1123_subdomain_in(value: &str, unit: &str) -> Vec<String> {
    let mut errors: Vec<String> = too_long(value, 253, unit).into_iter().collect();
    if !matches_dns_subdomain(value.as_bytes()) {
        errors.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            &format!("{DNS1123_LABEL}(\\.{DNS1123_LABEL})*"),
            &["example.com"],
        ));
    }
    errors
}

fn dns1123_subdomain(value: &str) -> Vec<String> {
    dns1123_subdomain_in(value, "characters")
}

fn dns1035_label(value: &str) -> Vec<String> {
    let mut errors: Vec<String> = too_long(value, 63, "characters").into_iter().collect();
    if !(matches_dns_label(value.as_bytes()) && value.starts_with(|c: char| c.is_ascii_lowercase()))
    {
        errors.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errors
}

/// apimachinery's `IsLabelKey` (which `IsQualifiedName` is).
fn qualified_name(value: &str) -> Vec<String> {
    let name_error = || regex_error(NAME_PART_WHY, NAME_PART, &["MyName", "my.name", "123-abc"]);
    let parts: Vec<&str> = value.split('/').collect();
    let mut errors = vec![];
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                let prefixed = dns1123_subdomain_in(prefix, "bytes");
                errors.extend(prefixed.into_iter().map(|e| format!("prefix part {e}")));
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                name_error()
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".into());
    } else if let Some(why) = too_long(name, 63, "bytes") {
        errors.push(format!("name part {why}"));
    }
    if !matches_name_part(name.as_bytes()) {
        errors.push(format!("name part {}", name_error()));
    }
    errors
}

/// apimachinery's `IsLabelValue`.
fn label_value(value: &str) -> Vec<String> {
    let mut errors: Vec<String> = too_long(value, 63, "bytes").into_iter().collect();
    if !(value.is_empty() || matches_name_part(value.as_bytes())) {
        errors.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({NAME_PART})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// kube-openapi's UUID pattern: 8-4-4-4-12 hex digits, any case, each
/// hyphen optional.
fn is_uuid(value: &str) -> bool {
    let mut rest = value;
    for (i, length) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix('-').unwrap_or(rest);
        }
        let Some(group) = rest.get(..length) else {
            return false;
        };
        if !group.bytes().all(|b| b.is_ascii_hexdigit()) {
            return false;
        }
        rest = rest.get(length..).unwrap_or("");
    }
    rest.is_empty()
}

/// govalidator's base64 pattern: groups of four, the last padded with `=`.
fn is_base64(value: &str) -> bool {
    let body = value
        .strip_suffix("==")
        .or_else(|| value.strip_suffix('='))
        .unwrap_or(value);
    value.len() >= 4
        && value.len().is_multiple_of(4)
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// Go's `time.Parse("2006-01-02", s)`: a real day of the proleptic
/// Gregorian calendar.
fn is_date(value: &str) -> bool {
    let number = |range: std::ops::Range<usize>| {
        value
            .get(range)
            .filter(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<u32>().ok())
    };
    let dashes = value.get(4..5) == Some("-") && value.get(7..8) == Some("-");
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    dashes && value.len() == 10 && (1..=days).contains(&day)
}

/// kube-openapi's `IsDateTime`: a date, `t`, and
/// `hh:mm:ss(.fraction)?(z|±hh:mm)` (case-insensitive; what follows a
/// second `t` is not read, as there).
fn is_date_time(value: &str) -> bool {
    let lower = value.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    let two = |at: usize, max: u32| {
        time.get(at..at + 2)
            .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse::<u32>().ok())
            .is_some_and(|n| n <= max)
    };
    let clock = two(0, 23)
        && time.get(2..3) == Some(":")
        && two(3, 59)
        && time.get(5..6) == Some(":")
        && two(6, 59);
    value.len() >= 4 && is_date(date) && clock && time.get(8..).is_some_and(fraction_and_zone)
}

/// `(.[0-9]+)?(z|[+-][0-9]{2}:[0-9]{2})` to the end, the `.` any character.
fn fraction_and_zone(rest: &str) -> bool {
    let zone = |z: &str| {
        z == "z"
            || (z.len() == 6
                && z.starts_with(['+', '-'])
                && z.get(3..4) == Some(":")
                && z.bytes()
                    .enumerate()
                    .all(|(i, b)| matches!(i, 0 | 3) || b.is_ascii_digit()))
    };
    if zone(rest) {
        return true;
    }
    let mut chars = rest.chars();
    if chars.next().is_none_or(|c| c == '\n') {
        return false;
    }
    let after = chars.as_str();
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    (1..=digits).any(|n| after.get(n..).is_some_and(zone))
}

/// Declares the library.
pub fn register(env: &mut Env) {
    global(
        env,
        "format.named",
        "format-named",
        vec![string_type()],
        named,
    );
    for (name, _, op) in FORMATS {
        global(
            env,
            &format!("format.{name}"),
            &format!("format.{name}"),
            vec![],
            *op,
        );
    }
    member(
        env,
        "validate",
        "format-validate",
        format_type(),
        vec![string_type()],
        validate,
    );
}

fn optional<'b, 'v>(value: Option<Value>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let optional = match value {
        Some(value) => CelOptional::of(Box::<dyn Val>::try_from(value)?),
        None => CelOptional::none(),
    };
    Ok(CowVal::owned(optional))
}

fn named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let name = string_arg(&args, 0, "format.named")?;
    let found = FORMATS.iter().position(|(known, _, _)| *known == name);
    optional(found.map(|index| Value::Opaque(Arc::new(Format(index)))))
}

/// Each format's `MaxRegexSize` in Kubernetes' library, in [`FORMATS`]'
/// order: `validate` is charged as a regular expression that long.
const MAX_REGEX_SIZES: [u64; 13] = [30, 60, 30, 60, 30, 60, 30, 40, 1103, 70, 84, 71, 71];

/// The `MaxRegexSize` of `value`, when it is a format.
pub(crate) fn max_regex_size(value: &dyn Val) -> Option<u64> {
    match Value::try_from(value) {
        Ok(Value::Opaque(opaque)) => {
            let Format(index) = opaque.downcast_ref::<Format>()?;
            MAX_REGEX_SIZES.get(*index).copied()
        }
        _ => None,
    }
}

/// `format.NAME()`, the format at `INDEX`.
fn constant<'b, 'v, const INDEX: usize>(
    _: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    opaque(Format(INDEX))
}

fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Format(index) = opaque_arg::<Format>(&args, 0, "validate")?;
    let text = string_arg(&args, 1, "validate")?;
    let (_, check, _) = FORMATS
        .get(index)
        .ok_or_else(|| error("validate", "not a format"))?;
    let errors = check(text);
    optional(
        (!errors.is_empty())
            .then(|| Value::List(Arc::new(errors.into_iter().map(Value::from).collect()))),
    )
}

#[cfg(test)]
mod tests {
    use super::FORMATS;
    use crate::testing::cel_libraries::{annotated, b, eval, table};
    use ::cel::Value;
    use serde_json::json;

    const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN: &str = r"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    const NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    /// `validate`'s errors, or `None` for `optional.none()`.
    fn errors(source: &str) -> Option<Vec<String>> {
        let valid = eval(&format!("{source}.hasValue()"));
        assert!(valid.is_ok(), "{source}: {valid:?}");
        if valid == Ok(Value::Bool(false)) {
            return None;
        }
        match eval(&format!("{source}.value()")) {
            Ok(Value::List(items)) => Some(
                items
                    .iter()
                    .map(|item| match item {
                        Value::String(s) => s.to_string(),
                        other => format!("{other:?}"),
                    })
                    .collect(),
            ),
            other => panic!("{source}: {other:?}"),
        }
    }

    /// Kubernetes' `TestFormat` table (apiserver `pkg/cel/library`).
    #[test]
    fn formats_validate_as_in_kubernetes() {
        let cases: &[(&str, Option<&str>)] = &[
            ("format.dns1123Label().validate('my-label-name')", None),
            (
                "format.dns1123Subdomain().validate('apiextensions.k8s.io')",
                None,
            ),
            (
                "format.qualifiedName().validate('apiextensions.k8s.io/v1beta1')",
                None,
            ),
            (
                "format.dns1123LabelPrefix().validate('my-label-prefix-')",
                None,
            ),
            (
                "format.dns1123SubdomainPrefix().validate('mysubdomain.prefix.-')",
                None,
            ),
            (
                "format.dns1035LabelPrefix().validate('my-label-prefix-')",
                None,
            ),
            ("format.uri().validate('http://example.com')", None),
            (
                "format.uuid().validate('123e4567-e89b-12d3-a456-426614174000')",
                None,
            ),
            ("format.byte().validate('aGVsbG8=')", None),
            ("format.date().validate('2021-01-01')", None),
            ("format.datetime().validate('2021-01-01T00:00:00Z')", None),
            (
                "format.dns1123Label().validate('contains a space')",
                Some(LABEL),
            ),
            (
                "format.dns1123Subdomain().validate('contains a space')",
                Some(SUBDOMAIN),
            ),
            (
                "format.dns1035Label().validate('contains a space')",
                Some(DNS1035),
            ),
            (
                "format.qualifiedName().validate('contains a space')",
                Some(NAME),
            ),
            (
                "format.dns1123LabelPrefix().validate('contains a space-')",
                Some(LABEL),
            ),
            (
                "format.dns1123SubdomainPrefix().validate('contains a space-')",
                Some(SUBDOMAIN),
            ),
            (
                "format.dns1035LabelPrefix().validate('contains a space-')",
                Some(DNS1035),
            ),
            ("format.dns1123Label().validate('my-label-name')", None),
            ("format.dns1123Subdomain().validate('example.com')", None),
            ("format.dns1035Label().validate('my-label-name')", None),
            ("format.qualifiedName().validate('my.name')", None),
            ("format.byte().validate('aGVsbG8=')", None),
            ("format.byte().validate('aGVsbG8')", Some("invalid base64")),
            ("format.date().validate('2020-01-01')", None),
            ("format.date().validate('2020-01-32')", Some("invalid date")),
            ("format.datetime().validate('2020-01-01T00:00:00Z')", None),
            (
                "format.datetime().validate('2020-01-32T00:00:00Z')",
                Some("invalid datetime"),
            ),
            ("format.labelValue().validate('my-cool-label-Value')", None),
            (
                "format.labelValue().validate('my-cool-label-Value!!\\n\\n!!!')",
                Some(LABEL_VALUE),
            ),
        ];
        for (source, expected) in cases {
            let expected = expected.map(|e| vec![e.to_string()]);
            assert_eq!(errors(source), expected, "{source}");
        }
        table(&[("format.named('unknown').hasValue()", b(false))]);
        // Every name looks up, equals its own function and no other.
        for (name, _, _) in FORMATS {
            table(&[
                (&format!("format.named('{name}').hasValue()"), b(true)),
                (
                    &format!("format.named('{name}').value() == format.{name}()"),
                    b(true),
                ),
            ]);
            for (other, _, _) in FORMATS.iter().filter(|(other, _, _)| other != name) {
                table(&[(&format!("format.{name}() == format.{other}()"), b(false))]);
            }
        }
    }

    /// apimachinery's and kube-openapi's rules beyond Kubernetes' table.
    #[test]
    fn formats_follow_kubernetes_rules() {
        let many = |s: &str| Some(s.split('|').map(str::to_string).collect::<Vec<_>>());
        let long = "a".repeat(64);
        assert_eq!(
            errors(&format!("format.dns1123Label().validate('{long}')")),
            many("must be no more than 63 characters")
        );
        assert_eq!(
            errors("format.dns1123Label().validate('a.b')"),
            many("must not contain dots")
        );
        assert_eq!(
            errors(&format!("format.qualifiedName().validate('{long}')")),
            many("name part must be no more than 63 bytes")
        );
        assert_eq!(
            errors("format.qualifiedName().validate('/a')"),
            many("prefix part must be non-empty")
        );
        assert_eq!(
            errors("format.qualifiedName().validate('A.com/')"),
            Some(vec![
                format!("prefix part {SUBDOMAIN}"),
                "name part must be non-empty".into(),
                NAME.into()
            ])
        );
        assert_eq!(
            errors("format.uri().validate('example.com')"),
            many("parse \"example.com\": invalid URI for request")
        );
        for (source, valid) in [
            ("format.dns1035Label().validate('1abc')", false),
            ("format.dns1123LabelPrefix().validate('-')", false),
            ("format.labelValue().validate('')", true),
            (
                "format.uuid().validate('123E4567E89B12D3A456426614174000')",
                true,
            ),
            (
                "format.uuid().validate('123e4567-e89b-12d3-a456-42661417400')",
                false,
            ),
            ("format.byte().validate('')", false),
            ("format.byte().validate('====')", false),
            ("format.byte().validate('aGk=')", true),
            ("format.date().validate('2020-02-29')", true),
            ("format.date().validate('2021-02-29')", false),
            ("format.date().validate('2021-1-01')", false),
            (
                "format.datetime().validate('2020-01-01t23:59:59.123+05:30')",
                true,
            ),
            ("format.datetime().validate('2020-01-01T24:00:00Z')", false),
            ("format.datetime().validate('2020-01-01T00:00:00')", false),
            (
                "format.datetime().validate('2020-01-01T00:00:00,5-01:00')",
                true,
            ),
        ] {
            assert_eq!(errors(source).is_none(), valid, "{source}");
        }
    }

    #[test]
    fn a_mutating_policy_annotates_with_a_validation() {
        assert_eq!(
            annotated(
                "format.dns1035Label().validate(object.target.name).hasValue() ? 'bad' : 'good'"
            ),
            json!({"result": "good"})
        );
    }
}
