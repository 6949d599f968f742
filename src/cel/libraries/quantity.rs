//! Kubernetes' quantity library: `quantity(s)`, `isQuantity(s)`, and on a
//! quantity `sign()`, `isInteger()`, `asInteger()`, `asApproximateFloat()`,
//! `add(q|int)`, `sub(q|int)`, `isLessThan(q)`, `isGreaterThan(q)`,
//! `compareTo(q)`; `==` compares values (`quantity('200M') ==
//! quantity('0.2G')`). Parsing is the ClusterPolicy's
//! ([`crate::shared::units`]): exact to the nano-unit, up to about 10^29
//! units (Kubernetes goes further with arbitrary precision; a larger
//! quantity is an error here). `isInteger` answers by value, where
//! Kubernetes also says false for an integer written with a fraction or a
//! smaller unit (`1.0`, `1000m`).

use ::cel::common::types::{CelDouble, Type};
use ::cel::common::value::CowVal;
use ::cel::objects::Opaque;
use ::cel::{Env, ExecutionError};

use super::{
    Function, Ordered, boolean, error, global, int, int_arg, int_type, member, opaque, opaque_arg,
    register_ordering, string_arg, string_type,
};
use crate::shared::units::{Quantity as Parsed, QuantityFormat};

const TYPE_NAME: &str = "kubernetes.Quantity";
const NANO: i128 = 1_000_000_000;

fn quantity_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

/// A quantity; equal to another of the same value, however written.
#[derive(Debug, Clone, Copy)]
pub struct Quantity(Parsed);

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.0.nanos == other.0.nanos
    }
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
    Parsed::parse(text).map(Quantity)
}

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
    // Declared global in Kubernetes, documented as a member: both.
    global(env, "sign", "quantity_sign", vec![q()], sign);
    member(env, "sign", "quantity_sign_member", q(), vec![], sign);
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

fn this(args: &[CowVal<'_, '_>], function: &str) -> Result<Parsed, ExecutionError> {
    opaque_arg::<Quantity>(args, 0, function).map(|q| q.0)
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int(this(&args, "sign")?.nanos.signum() as i64)
}

fn as_i64(q: Parsed) -> Option<i64> {
    if q.nanos % NANO != 0 {
        return None;
    }
    i64::try_from(q.nanos / NANO).ok()
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(as_i64(this(&args, "isInteger")?).is_some())
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match as_i64(this(&args, "asInteger")?) {
        Some(value) => int(value),
        None => Err(error("asInteger", "cannot convert value to integer")),
    }
}

fn as_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = this(&args, "asApproximateFloat")?;
    Ok(CowVal::owned(CelDouble::from(q.nanos as f64 / NANO as f64)))
}

/// The operand of `add` and `sub`: a quantity, or an int of units.
fn operand(args: &[CowVal<'_, '_>], function: &str) -> Result<Parsed, ExecutionError> {
    match int_arg(args, 1, function) {
        Ok(units) => Ok(Parsed {
            nanos: i128::from(units) * NANO,
            format: QuantityFormat::DecimalSI,
        }),
        Err(_) => opaque_arg::<Quantity>(args, 1, function).map(|q| q.0),
    }
}

fn combine<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    negate: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let a = this(&args, function)?;
    let b = operand(&args, function)?;
    let b = if negate {
        b.nanos.checked_neg()
    } else {
        Some(b.nanos)
    };
    let nanos = b
        .and_then(|b| a.nanos.checked_add(b))
        .ok_or_else(|| error(function, "the result is out of range"))?;
    opaque(Quantity(Parsed {
        nanos,
        // Kubernetes keeps the receiver's format, unless it is zero.
        format: if a.nanos == 0 {
            QuantityFormat::DecimalSI
        } else {
            a.format
        },
    }))
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
            ("quantity('-1Ki').sign()", i(-1)),
            ("sign(quantity('0'))", i(0)),
            ("quantity('2').sign()", i(1)),
            (
                "[quantity('1'), quantity('2')].all(x, x.add(quantity('1')).compareTo(x.add(quantity('2'))) == -1)",
                b(true),
            ),
        ]);
    }
}
