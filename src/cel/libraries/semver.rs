//! Kubernetes' semver library: `semver(s)`, `semver(s, normalize)`,
//! `isSemver(s)`, `isSemver(s, normalize)`, and on a version `major()`,
//! `minor()`, `patch()`, `isLessThan(v)`, `isGreaterThan(v)`,
//! `compareTo(v)`; `==` compares versions. Versions are Semantic Versioning
//! 2.0 (the `semver` crate); as in Kubernetes, build metadata does not take
//! part in comparisons. Normalizing drops a leading `v` and leading zeros,
//! and fills a missing minor or patch with 0.

use ::cel::common::types::Type;
use ::cel::common::value::CowVal;
use ::cel::objects::Opaque;
use ::cel::{Env, ExecutionError};

use super::{
    Function, Ordered, boolean, error, global, int, member, opaque, opaque_arg, register_ordering,
    string_arg, string_type,
};

const TYPE_NAME: &str = "kubernetes.Semver";

fn semver_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

fn bool_type() -> Type {
    ::cel::common::types::BOOL_TYPE.to_owned()
}

/// A version; equal to another that differs only in build metadata.
#[derive(Debug, Clone)]
pub struct Semver(semver::Version);

impl Semver {
    fn key(&self) -> (u64, u64, u64, &semver::Prerelease) {
        (self.0.major, self.0.minor, self.0.patch, &self.0.pre)
    }
}

impl PartialEq for Semver {
    fn eq(&self, other: &Semver) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Semver {}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

impl Ordered for Semver {
    fn order(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// Kubernetes' normalization: no `v`, no leading zeros, three numbers.
fn normalize(text: &str) -> Result<String, String> {
    let text = text.strip_prefix('v').unwrap_or(text);
    let mut parts: Vec<String> = text
        .splitn(3, '.')
        .map(|part| {
            if part.len() > 1 {
                let trimmed = part.trim_start_matches('0');
                if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                    trimmed.to_string()
                } else {
                    format!("0{trimmed}")
                }
            } else {
                part.to_string()
            }
        })
        .collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err("short version cannot contain PreRelease/Build meta data".into());
        }
        parts.resize(3, "0".to_string());
    }
    Ok(parts.join("."))
}

fn parse(text: &str, normalized: bool) -> Result<Semver, String> {
    let text = if normalized {
        normalize(text)?
    } else {
        text.to_string()
    };
    semver::Version::parse(&text)
        .map(Semver)
        .map_err(|e| format!("{text:?} is not a semantic version: {e}"))
}

fn normalize_arg(args: &[CowVal<'_, '_>]) -> bool {
    args.get(1)
        .and_then(|arg| arg.downcast_ref::<::cel::common::types::CelBool>())
        .is_some_and(|b| *b.inner())
}

/// Declares the library.
pub fn register(env: &mut Env) {
    let v = semver_type;
    global(
        env,
        "semver",
        "string_to_semver",
        vec![string_type()],
        to_semver,
    );
    global(
        env,
        "semver",
        "string_bool_to_semver",
        vec![string_type(), bool_type()],
        to_semver,
    );
    global(
        env,
        "isSemver",
        "is_semver_string",
        vec![string_type()],
        is_semver,
    );
    global(
        env,
        "isSemver",
        "is_semver_string_bool",
        vec![string_type(), bool_type()],
        is_semver,
    );
    let unary: [(&str, Function); 3] = [("major", major), ("minor", minor), ("patch", patch)];
    for (name, op) in unary {
        member(env, name, &format!("semver_{name}"), v(), vec![], op);
    }
    register_ordering::<Semver>(env, "semver", v);
}

fn to_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "semver")?;
    parse(text, normalize_arg(&args))
        .map_err(|e| error("semver", e))
        .and_then(opaque)
}

fn is_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "isSemver")?;
    boolean(parse(text, normalize_arg(&args)).is_ok())
}

fn this(args: &[CowVal<'_, '_>], function: &str) -> Result<Semver, ExecutionError> {
    opaque_arg::<Semver>(args, 0, function)
}

fn number<'b, 'v>(value: u64, function: &str) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int(i64::try_from(value).map_err(|_| error(function, "the number is out of range"))?)
}

fn major<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    number(this(&args, "major")?.0.major, "major")
}

fn minor<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    number(this(&args, "minor")?.0.minor, "minor")
}

fn patch<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    number(this(&args, "patch")?.0.patch, "patch")
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{b, i, table};

    #[test]
    fn versions_work_as_in_kubernetes() {
        table(&[
            ("semver('1.2.3') == semver('1.2.3')", b(true)),
            ("semver('v1.0')", None),
            ("isSemver('1.2.3-beta.1+build.1')", b(true)),
            ("isSemver('')", b(false)),
            ("isSemver('v1.0.0')", b(false)),
            ("isSemver(' 1.0.0')", b(false)),
            ("isSemver('1. 0.0')", b(false)),
            ("isSemver('1.0.0 ')", b(false)),
            ("isSemver('01.01.01')", b(false)),
            ("isSemver('1')", b(false)),
            ("isSemver('1.1')", b(false)),
            ("isSemver('', true)", b(false)),
            ("isSemver(' 1.0.0', true)", b(false)),
            ("isSemver('1. 0.0', true)", b(false)),
            ("isSemver('1.0.0 ', true)", b(false)),
            ("isSemver('v1.0.0', true)", b(true)),
            ("isSemver('01.01.01', true)", b(true)),
            ("isSemver('1', true)", b(true)),
            ("isSemver('1.1', true)", b(true)),
            ("isSemver('1.1-rc', true)", b(false)),
            ("semver('v01.01', true) == semver('1.1.0')", b(true)),
            ("semver('1.2.3') == semver('1.0.0')", b(false)),
            ("semver('1.2.3+a') == semver('1.2.3+b')", b(true)),
            ("semver('1.0.0').isLessThan(semver('1.2.3'))", b(true)),
            ("semver('1.0.0').isLessThan(semver('1.0.0'))", b(false)),
            ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", b(true)),
            ("semver('1.2.3').isGreaterThan(semver('1.0.0'))", b(true)),
            ("semver('1.0.0').isGreaterThan(semver('1.0.0'))", b(false)),
            ("semver('1.2.3').compareTo(semver('1.2.3'))", i(0)),
            ("semver('1.0.0').compareTo(semver('1.2.3'))", i(-1)),
            ("semver('1.2.3').compareTo(semver('1.0.0'))", i(1)),
            ("semver('1.2.3').major()", i(1)),
            ("semver('1.2.3').minor()", i(2)),
            ("semver('1.2.3').patch()", i(3)),
        ]);
    }
}
