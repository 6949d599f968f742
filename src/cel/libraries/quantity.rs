//! Kubernetes' quantity library: `quantity(s)`, `isQuantity(s)`, and on a
//! quantity `sign()`, `isInteger()`, `asInteger()`, `asApproximateFloat()`,
//! `add(q|int)`, `sub(q|int)`, `isLessThan(q)`, `isGreaterThan(q)`,
//! `compareTo(q)`; `==` compares values (`quantity('200M') ==
//! quantity('0.2G')`). Parsing is the ClusterPolicy's
//! ([`crate::shared::units`]): exact to the nano-unit, up to about 10^29
//! units (Kubernetes goes further with arbitrary precision; a larger
//! quantity is an error here), one with a binary suffix parsed as a decimal
//! capped at the largest int64, as Kubernetes caps it. `isInteger` and `asInteger` answer as
//! Kubernetes does, by how apimachinery holds the value ([`Held`]): `1.0`,
//! `1000m` and `1.5Gi` are no integers there.

use ::cel::common::types::{CelDouble, Type};
use ::cel::common::value::CowVal;
use ::cel::objects::Opaque;
use ::cel::{Env, ExecutionError};

use super::{
    Function, Ordered, boolean, error, global, int, int_arg, int_type, member, opaque, opaque_arg,
    register_ordering, string_arg, string_type,
};
use crate::shared::units::{BINARY, DECIMAL, Quantity as Parsed, QuantityFormat};

const TYPE_NAME: &str = "kubernetes.Quantity";
const NANO: i128 = 1_000_000_000;

fn quantity_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

/// A quantity; equal to another of the same value, however written. With
/// its value, how Kubernetes holds it, which `isInteger()` and
/// `asInteger()` answer by.
#[derive(Debug, Clone, Copy)]
pub struct Quantity(Parsed, Held);

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.0.nanos == other.0.nanos
    }
}

/// How apimachinery's `resource.Quantity` holds a value: a 64-bit integer
/// times a power of ten (`int64Amount`, `value * 10^scale`), or, where
/// parsing or arithmetic leaves that form, an arbitrary-precision decimal,
/// which is never an integer to `AsInt64`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Held {
    Int64 { value: i64, scale: i32 },
    Decimal,
}

impl Held {
    /// How `ParseQuantity` holds `text` (a valid quantity): its fast path
    /// takes at most 18 digits (a binary suffix: fewer, and no fraction) at
    /// a scale of at least -9.
    fn parsed(text: &str) -> Held {
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, text.get(1..).unwrap_or_default()),
            Some(b'+') => (false, text.get(1..).unwrap_or_default()),
            _ => (false, text),
        };
        let unsigned = unsigned.trim_start_matches('0');
        let digits_end = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, rest) = unsigned.split_at(digits_end(unsigned));
        let num = if num.is_empty() { "0" } else { num };
        let (denom, suffix) = match rest.strip_prefix('.') {
            Some(after) => after.split_at(digits_end(after)),
            None => ("", rest),
        };
        let digits = (num.len() + denom.len()) as i32;
        let (mut scale, precision, mantissa) = match binary_exponent(suffix) {
            Some(exponent) if denom.is_empty() => {
                let precision = 15 - num.len() as i32 - exponent * 3 / 10 - 1;
                (0, precision, 1i64 << exponent)
            }
            Some(_) => return Held::Decimal,
            None => match decimal_exponent(suffix) {
                Some(exponent) => (exponent, 18 - digits, 1),
                None => return Held::Decimal,
            },
        };
        scale -= denom.len() as i32;
        if precision < 0 || scale < -9 {
            return Held::Decimal;
        }
        let value = format!("{num}{denom}")
            .parse::<i64>()
            .ok()
            .and_then(|v| v.checked_mul(mantissa));
        match value {
            Some(value) if negative => Held::Int64 {
                value: -value,
                scale,
            },
            Some(value) => Held::Int64 { value, scale },
            None => Held::Decimal,
        }
    }

    /// `Quantity.Add`: `int64Amount.Add`, or a decimal where it overflows.
    fn add(self, other: Held) -> Held {
        let (
            Held::Int64 {
                value: a,
                scale: sa,
            },
            Held::Int64 {
                value: b,
                scale: sb,
            },
        ) = (self, other)
        else {
            return Held::Decimal;
        };
        let sum = match () {
            _ if b == 0 => Some((a, sa)),
            _ if a == 0 => Some((b, sb)),
            _ if sa == sb => a.checked_add(b).map(|v| (v, sa)),
            _ if sa > sb => scaled(a, sa - sb)
                .and_then(|a| a.checked_add(b))
                .map(|v| (v, sb)),
            _ => scaled(b, sb - sa)
                .and_then(|b| a.checked_add(b))
                .map(|v| (v, sa)),
        };
        sum.map_or(Held::Decimal, |(value, scale)| Held::Int64 { value, scale })
    }

    /// `Quantity.AsInt64`.
    fn as_i64(self) -> Option<i64> {
        match self {
            Held::Int64 { value, scale } if scale >= 0 => scaled(value, scale),
            _ => None,
        }
    }
}

/// `value * 10^scale`, if it fits.
fn scaled(value: i64, scale: i32) -> Option<i64> {
    (0..scale).try_fold(value, |v, _| v.checked_mul(10))
}

fn binary_exponent(suffix: &str) -> Option<i32> {
    let (_, power) = BINARY.iter().find(|(s, _)| *s == suffix)?;
    i32::try_from(*power).ok().map(|power| 10 * power)
}

fn decimal_exponent(suffix: &str) -> Option<i32> {
    if suffix.is_empty() {
        return Some(0);
    }
    if let Some((_, exponent)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
        return Some(*exponent);
    }
    suffix
        .strip_prefix(['e', 'E'])
        .and_then(|e| e.parse::<i32>().ok())
}

impl Eq for Quantity {}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

impl Ordered for Quantity {
    fn order(&self, other: &Self) -> std::cmp::Ordering {
        self.0.nanos.cmp(&other.0.nanos)
    }
}

/// Kubernetes' syntax, with nothing around it.
fn parse(text: &str) -> Option<Quantity> {
    if text.trim() != text {
        return None;
    }
    let held = Held::parsed(text);
    Parsed::parse(text).map(|mut parsed| {
        if held == Held::Decimal && parsed.format == QuantityFormat::BinarySI {
            // `ParseQuantity` caps what it parses with a binary suffix as a
            // decimal at the largest int64 (its fast path and decimal
            // suffixes keep larger values).
            parsed.nanos = parsed.nanos.clamp(-LARGEST_BINARY, LARGEST_BINARY);
        }
        Quantity(parsed, held)
    })
}

/// `ParseQuantity`'s cap, in nano-units.
const LARGEST_BINARY: i128 = i64::MAX as i128 * NANO;

/// Declares the library.
pub fn register(env: &mut Env) {
    let q = quantity_type;
    global(
        env,
        "quantity",
        "string_to_quantity",
        vec![string_type()],
        to_quantity,
    );
    global(
        env,
        "isQuantity",
        "is_quantity_string",
        vec![string_type()],
        is_quantity,
    );
    // Global only, as Kubernetes declares it (its documentation writes a
    // member call, which kube-apiserver refuses).
    global(env, "sign", "quantity_sign", vec![q()], sign);
    let unary: [(&str, Function); 3] = [
        ("isInteger", is_integer),
        ("asInteger", as_integer),
        ("asApproximateFloat", as_float),
    ];
    for (name, op) in unary {
        member(env, name, &format!("quantity_{name}"), q(), vec![], op);
    }
    register_ordering::<Quantity>(env, "quantity", q);
    let binary: [(&str, Function); 2] = [("add", add), ("sub", sub)];
    for (name, op) in binary {
        member(env, name, &format!("quantity_{name}"), q(), vec![q()], op);
    }
    member(env, "add", "quantity_add_int", q(), vec![int_type()], add);
    member(env, "sub", "quantity_sub_int", q(), vec![int_type()], sub);
}

fn to_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "quantity")?;
    match parse(text) {
        Some(q) => opaque(q),
        None => Err(error(
            "quantity",
            format!(
                "{text:?}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            ),
        )),
    }
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(parse(string_arg(&args, 0, "isQuantity")?).is_some())
}

fn this(args: &[CowVal<'_, '_>], function: &str) -> Result<Quantity, ExecutionError> {
    opaque_arg::<Quantity>(args, 0, function)
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int(this(&args, "sign")?.0.nanos.signum() as i64)
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(this(&args, "isInteger")?.1.as_i64().is_some())
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match this(&args, "asInteger")?.1.as_i64() {
        Some(value) => int(value),
        None => Err(error("asInteger", "cannot convert value to integer")),
    }
}

fn as_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    // `AsApproximateFloat64`: the held integer times `math.Pow10` of its
    // exponent, which rounds differently from a division.
    let approximate = match this(&args, "asApproximateFloat")? {
        Quantity(_, Held::Int64 { value, scale }) => value as f64 * go_pow10(scale),
        Quantity(parsed, Held::Decimal) => parsed.nanos as f64 * go_pow10(-9),
    };
    Ok(CowVal::owned(CelDouble::from(approximate)))
}

/// Go's `math.Pow10` for the exponents a quantity holds: the double nearest
/// `10^n`, and for a negative `n` one divided by it.
fn go_pow10(n: i32) -> f64 {
    let nearest = |n: u32| format!("1e{n}").parse::<f64>().unwrap_or(f64::INFINITY);
    if n >= 0 {
        nearest(n.unsigned_abs())
    } else {
        1.0 / nearest(n.unsigned_abs())
    }
}

/// The operand of `add` and `sub`: a quantity, or an int of units
/// (Kubernetes' `NewQuantity(n, DecimalExponent)`).
fn operand(args: &[CowVal<'_, '_>], function: &str) -> Result<Quantity, ExecutionError> {
    match int_arg(args, 1, function) {
        Ok(units) => Ok(Quantity(
            Parsed {
                nanos: i128::from(units) * NANO,
                format: QuantityFormat::DecimalSI,
            },
            Held::Int64 {
                value: units,
                scale: 0,
            },
        )),
        Err(_) => opaque_arg::<Quantity>(args, 1, function),
    }
}

fn combine<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    negate: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Quantity(a, held) = this(&args, function)?;
    let Quantity(b, other) = operand(&args, function)?;
    let (b, other) = match (negate, other) {
        (false, _) => (Some(b.nanos), other),
        // `int64Amount.Sub` adds the negated value (Go's negation wraps).
        (true, Held::Int64 { value, scale }) => (
            b.nanos.checked_neg(),
            Held::Int64 {
                value: value.wrapping_neg(),
                scale,
            },
        ),
        (true, Held::Decimal) => (b.nanos.checked_neg(), Held::Decimal),
    };
    let nanos = b
        .and_then(|b| a.nanos.checked_add(b))
        .ok_or_else(|| error(function, "the result is out of range"))?;
    opaque(Quantity(
        Parsed {
            nanos,
            // Kubernetes keeps the receiver's format, unless it is zero.
            format: if a.nanos == 0 {
                QuantityFormat::DecimalSI
            } else {
                a.format
            },
        },
        held.add(other),
    ))
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    combine(args, "add", false)
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    combine(args, "sub", true)
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{b, i, table};
    use ::cel::Value;

    #[test]
    fn quantities_work_as_in_kubernetes() {
        table(&[
            ("quantity('12Mi') == quantity('12582912')", b(true)),
            ("quantity('10Mo')", None),
            ("quantity('10Mm')", None),
            ("quantity(' 1')", None),
            ("isQuantity('20')", b(true)),
            ("isQuantity('20M')", b(true)),
            ("isQuantity('20Mi')", b(true)),
            ("isQuantity('20Mo')", b(false)),
            ("isQuantity('10Mm')", b(false)),
            ("isQuantity('200K')", b(false)),
            ("isQuantity('1,3G')", b(false)),
            ("isQuantity('Mi')", b(false)),
            (
                "isQuantity('1.3Gi') && isQuantity('10000k') && isQuantity('1e3')",
                b(true),
            ),
            ("quantity('200M') == quantity('200M')", b(true)),
            (
                "quantity('200M') == quantity('0.2G') && quantity('0.2G') == quantity('200M')",
                b(true),
            ),
            (
                "quantity('2M') == quantity('0.002G') && quantity('2000k') == quantity('2M')",
                b(true),
            ),
            ("quantity('200M') == quantity('0.3G')", b(false)),
            ("quantity('50M').isLessThan(quantity('50Mi'))", b(true)),
            ("quantity('50M').isLessThan(quantity('100M'))", b(true)),
            ("quantity('100M').isLessThan(quantity('50M'))", b(false)),
            ("quantity('50Mi').isGreaterThan(quantity('50M'))", b(true)),
            (
                "quantity('150Mi').isGreaterThan(quantity('100Mi'))",
                b(true),
            ),
            ("quantity('50M').isGreaterThan(quantity('100M'))", b(false)),
            ("quantity('200M').compareTo(quantity('0.2G'))", i(0)),
            ("quantity('50M').compareTo(quantity('50Mi'))", i(-1)),
            ("quantity('50Mi').compareTo(quantity('50M'))", i(1)),
            (
                "quantity('50k').add(quantity('20')) == quantity('50.02k')",
                b(true),
            ),
            (
                "quantity('50k').add(20).isLessThan(quantity('50020'))",
                b(false),
            ),
            (
                "quantity('50k').sub(quantity('20')) == quantity('49.98k')",
                b(true),
            ),
            ("quantity('50k').sub(20) == quantity('49980')", b(true)),
            (
                "quantity('50k').add(20).sub(quantity('100k')).asInteger()",
                i(-49980),
            ),
            (
                "quantity('50k').add(20).sub(quantity('100k')).sub(-50000).asInteger()",
                i(20),
            ),
            ("quantity('50k').asInteger()", i(50000)),
            // Binary suffixes parsed as decimals (no fast path) are capped at
            // 2^63 - 1; decimal ones are not.
            (
                "quantity('9223372036854775807').sub(quantity('8Ei')) == quantity('0')",
                b(true),
            ),
            (
                "quantity('-16Ei') == quantity('-9223372036854775807')",
                b(true),
            ),
            // Sub-nano values round up, away from zero.
            (
                "quantity('100000000000000000000') == quantity('9223372036854775807')",
                b(false),
            ),
            // math.Pow10's rounding, not a division's.
            (
                "quantity('100000000000000000000').sub(quantity('1')).asApproximateFloat()",
                Some(Value::Float(1e20)),
            ),
            ("quantity('1e-10') == quantity('1n')", b(true)),
            ("quantity('-15e-10') == quantity('-2n')", b(true)),
            ("quantity('0e-12') == quantity('0')", b(true)),
            ("quantity('1e-1000000') == quantity('1n')", b(true)),
            ("quantity('1e-10').isInteger()", b(false)),
            ("quantity('50').isInteger()", b(true)),
            ("quantity('500m').isInteger()", b(false)),
            ("quantity('500m').asInteger()", None),
            ("quantity('50000000G').isInteger()", b(true)),
            ("quantity('50000000000G').isInteger()", b(false)),
            (
                "quantity('50.703k').asApproximateFloat()",
                Some(Value::Float(50703.0)),
            ),
            (
                "quantity('50k').sub(20000).asApproximateFloat() == 30000.0",
                b(true),
            ),
            // kube-apiserver v0.37.2: an integer only where apimachinery
            // holds it as one.
            ("quantity('1.5Gi').isInteger()", b(false)),
            ("quantity('1Gi').asInteger()", i(1_073_741_824)),
            ("quantity('1.0').isInteger()", b(false)),
            ("quantity('1000m').isInteger()", b(false)),
            ("quantity('1.5k').asInteger()", i(1500)),
            ("quantity('1e3').asInteger()", i(1000)),
            ("quantity('1234567890123456789').isInteger()", b(false)),
            ("quantity('8Ei').isInteger()", b(false)),
            ("quantity('1000m').add(quantity('1')).isInteger()", b(false)),
            ("quantity('1').add(1).asInteger()", i(2)),
            ("quantity('1.5').add(quantity('0.5')).isInteger()", b(false)),
            ("quantity('1k').sub(quantity('1')).asInteger()", i(999)),
            (
                "quantity('9223372036854775807').add(1).isInteger()",
                b(false),
            ),
            ("sign(quantity('-1Ki'))", i(-1)),
            ("sign(quantity('0'))", i(0)),
            ("sign(quantity('2'))", i(1)),
            // A member call is no overload in kube-apiserver v0.37.2.
            ("quantity('2').sign()", None),
            (
                "[quantity('1'), quantity('2')].all(x, x.add(quantity('1')).compareTo(x.add(quantity('2'))) == -1)",
                b(true),
            ),
        ]);
    }
}
