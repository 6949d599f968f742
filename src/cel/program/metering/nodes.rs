//! What the nodes of a tree are to cel-go's cost model (a namespace, a
//! constant, an attribute, a call charged by values), and the few nodes the
//! rewrite builds.

use ::cel::IdedExpr;
use ::cel::common::ast::{CallExpr, EntryExpr, Expr, LiteralValue, operators};

use crate::cel::libraries::cost_tracker::{
    TRACKED, TRACKED_FAILED, TRACKED_VALUE, UNCOUNTED_FAILURE,
};
use crate::cel::libraries::runtime_cost::{
    ARGUMENT, CALL, CHARGED, EVALUATED, FAILED_CALL, Formula, IF_NONE, PRESENT, RESULT, UNMEASURED,
};
pub(super) use crate::cel::libraries::wrap_in_call_with as wrap;
use crate::cel::syntax::macro_builder::ENTRY;

/// Names a call's target spells when it is a namespace, not a value: cel-go
/// and the crate resolve `lists.range(3)` as one function, and never
/// evaluate `lists`.
const NAMESPACES: &[&str] = &[
    "lists",
    "sets",
    "strings",
    "math",
    "optional",
    "base64",
    "regex",
    "json",
    "yaml",
    "http",
    "random",
    "x509",
    "time",
    "hash",
    "gzip",
    "jsonpatch",
    "format",
    "ip",
];

/// Functions cel-go folds when their argument is a constant: conversions.
pub(crate) const CONVERSIONS: &[&str] = &[
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "duration",
    "timestamp",
    "type",
    "dyn",
];

/// Type names, which cel-go reads as constants.
pub(super) const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
];

pub(super) fn walk(expr: &IdedExpr, f: &mut dyn FnMut(&IdedExpr)) {
    f(expr);
    crate::cel::syntax::ast::children(expr, &mut |child| walk(child, f));
}

/// The size of a string literal one side of a comparison is.
pub(super) fn literal_size(call: &CallExpr) -> Option<u64> {
    call.args.iter().find_map(|arg| match &arg.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner().chars().count() as u64),
        Expr::Literal(LiteralValue::Bytes(b)) => Some(b.len() as u64),
        Expr::Literal(_) => Some(1),
        _ => None,
    })
}

/// How a call's cost depends on its values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Dynamic {
    /// On its arguments' (the receiver first).
    Sizes(Formula),
    /// On its result.
    Result(Formula),
}

pub(super) fn is_accumulator(expr: &IdedExpr) -> bool {
    matches!(&expr.expr, Expr::Ident(name) if name.starts_with('@') && name != ENTRY)
}

/// Whether `expr` is a value kept by the cost-tracking rewrite of
/// [`crate::cel::check::typed_calls`]: the check typed the list, and cel-go
/// tracks the call's cost.
fn is_tracked(expr: &IdedExpr) -> bool {
    let Expr::Call(conditional) = &expr.expr else {
        return false;
    };
    let Some(Expr::Call(or)) = conditional.args.first().map(|c| &c.expr) else {
        return false;
    };
    matches!(or.args.first().map(|a| &a.expr), Some(Expr::Call(kept)) if kept.func_name == TRACKED)
}

pub(super) fn formula(call: &CallExpr) -> Option<Dynamic> {
    use Formula::*;
    let sizes = |f| Some(Dynamic::Sizes(f));
    // A namespaced function is known to cel-go by its whole name.
    if let Some(Expr::Ident(namespace)) = call.target.as_deref().map(|t| &t.expr)
        && NAMESPACES.contains(&namespace.as_str())
    {
        return match (namespace.as_str(), call.func_name.as_str()) {
            ("sets", "contains" | "intersects") => sizes(Sets),
            ("sets", "equivalent") => sizes(SetsTwice),
            ("strings", "quote") | ("jsonpatch", "escapeKey") => sizes(Scan),
            ("ip", "isCanonical") => sizes(ScanTwice),
            ("lists", "range") => Some(Dynamic::Result(ListResult)),
            _ => None,
        };
    }
    let name = call.func_name.as_str();
    let member = call.target.as_deref();
    match name {
        operators::EQUALS | operators::NOT_EQUALS => {
            if call.args.iter().any(is_accumulator) {
                return None;
            }
            sizes(Equality)
        }
        operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
        | "@t<"
        | "@t<="
        | "@t>"
        | "@t>=" => sizes(Ordering),
        // `accu + [x]`, the step of `map` and `filter`: lists, 1.
        operators::ADD | "@t+" if call.args.first().is_some_and(is_accumulator) => None,
        operators::ADD | "@t+" => sizes(Addition),
        operators::IN => sizes(InList),
        "startsWith" | "endsWith" => sizes(Affix),
        "lowerAscii" | "upperAscii" | "substring" | "trim" | "url" | "cidr" | "isIP" | "isCIDR"
        | "quantity" | "isQuantity" | "semver" | "isSemver" | "@format" => sizes(Scan),
        "replace" | "split" => sizes(ScanTwice),
        "ip" => sizes(Ip),
        "string" => sizes(StringOfBytes),
        "bytes" => sizes(BytesOfString),
        "matches" | "find" | "findAll" => sizes(Regex),
        "contains" if member.is_some() => sizes(Contains),
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" | "includes" => {
            sizes(Traversal)
        }
        _ if ["@isSorted_", "@sum_", "@min_", "@max_"]
            .iter()
            .any(|prefix| name.starts_with(prefix)) =>
        {
            sizes(Traversal)
        }
        "distinct" => sizes(SelfCompare),
        "sort" if member.is_some_and(is_tracked) => sizes(SelfCompare),
        "@sortByAssociatedKeys" if call.args.first().is_some_and(is_tracked) => {
            sizes(SelfCompareKeys)
        }
        "flatten" | "@flatten_depth" => sizes(Flatten),
        "containsIP" => sizes(ContainsIp),
        "containsCIDR" => sizes(ContainsCidr),
        "fieldSelector" | "labelSelector" => sizes(Selector),
        "validate" if member.is_some() => sizes(Validate),
        "join" => Some(Dynamic::Result(JoinResult)),
        "range" | "slice" | "reverse" | "@reverse" => Some(Dynamic::Result(ListResult)),
        _ => None,
    }
}

pub(super) fn is_namespace(target: &IdedExpr) -> bool {
    matches!(&target.expr, Expr::Ident(name) if NAMESPACES.contains(&name.as_str()))
}

/// Functions of the rewrites here and in [`crate::cel::check`] that are not
/// cel-go's: free.
pub(super) fn is_internal(name: &str) -> bool {
    matches!(
        name,
        TRACKED
            | TRACKED_FAILED
            | UNCOUNTED_FAILURE
            | TRACKED_VALUE
            | "@entries"
            | "@dtxt"
            | "@dparse"
            | CHARGED
            | ARGUMENT
            | CALL
            | RESULT
            | PRESENT
            | IF_NONE
            | EVALUATED
            | UNMEASURED
            | FAILED_CALL
    )
}

/// A regular expression call whose pattern (and count) are constants:
/// cel-go compiles the pattern with the program (Kubernetes' regex
/// optimizations: `matches`, `find`, `findAll`), and the call it makes is
/// not charged when its string failed.
pub(super) fn is_constant_regex(call: &CallExpr) -> bool {
    let method = call.target.as_deref().is_some_and(|t| !is_namespace(t));
    let rest = if method {
        call.args.as_slice()
    } else {
        call.args.get(1..).unwrap_or_default()
    };
    matches!(call.func_name.as_str(), "matches" | "find" | "findAll")
        && (method || call.func_name == "matches")
        && !rest.is_empty()
        && rest.iter().all(is_constant)
}

pub(super) fn is_constant(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Literal(_) => true,
        Expr::Ident(name) => TYPE_NAMES.contains(&name.as_str()),
        // Conversions of constants, which cel-go folds, and the double
        // rewrites' wrappers ([`crate::cel::libraries::double_text`]).
        Expr::Call(call)
            if call.target.is_none()
                && (CONVERSIONS.contains(&call.func_name.as_str())
                    || matches!(call.func_name.as_str(), "@dtxt" | "@dparse")) =>
        {
            call.args.iter().all(is_constant)
        }
        Expr::List(list) => list.elements.iter().all(is_constant),
        Expr::Map(map) => map.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => is_constant(&entry.key) && is_constant(&entry.value),
            EntryExpr::StructField(_) => false,
        }),
        _ => false,
    }
}

/// A variable read with fields and indexes (cel-go plans it as one
/// attribute: the variable costs 1, each step 1).
fn is_attribute(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Ident(name) => !NAMESPACES.contains(&name.as_str()),
        Expr::Select(select) => !select.test && is_attribute(&select.operand),
        Expr::Call(call)
            if call.target.is_none()
                && matches!(
                    call.func_name.as_str(),
                    operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT
                ) =>
        {
            call.args.first().is_some_and(is_attribute)
        }
        _ => false,
    }
}

/// Whether a field or index read of `expr` is one more step of an
/// attribute: `expr` is a variable or itself such a read. Over any other
/// value (`dyn(x).a.b`), cel-go makes an attribute of it, charged 1 once.
pub(super) fn continues_attribute(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Ident(_) => is_attribute(expr),
        Expr::Select(select) => !select.test,
        Expr::Call(call) => {
            call.target.is_none()
                && matches!(
                    call.func_name.as_str(),
                    operators::INDEX | operators::OPT_INDEX | operators::OPT_SELECT | PRESENT
                )
        }
        _ => false,
    }
}

pub(super) fn int(value: u64) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Literal(LiteralValue::Int(
            i64::try_from(value).unwrap_or(i64::MAX).into(),
        )),
    }
}

pub(super) fn is_namespace_name(name: &str) -> bool {
    NAMESPACES.contains(&name)
}

/// Whether `expr` counts some of its cost as it runs (its nodes' cost is
/// charged with its block whether it runs or not).
pub(super) fn counts_as_it_runs(expr: &IdedExpr) -> bool {
    let mut counts = false;
    walk(expr, &mut |node| {
        if let Expr::Call(call) = &node.expr {
            counts |= matches!(
                call.func_name.as_str(),
                CHARGED | ARGUMENT | CALL | RESULT | PRESENT | IF_NONE | TRACKED | TRACKED_FAILED
            );
        }
    });
    counts
}

pub(super) fn boolean(value: bool) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Literal(LiteralValue::Boolean(value.into())),
    }
}

pub(super) fn call_of(function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr {
            func_name: function.to_string(),
            target: None,
            args,
        }),
    }
}

pub(super) fn method_of(target: IdedExpr, function: &str) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr {
            func_name: function.to_string(),
            target: Some(Box::new(target)),
            args: Vec::new(),
        }),
    }
}

/// `true` once `operands` are evaluated, in order (a list stops at the
/// first that fails).
pub(super) fn evaluated(mut operands: Vec<IdedExpr>) -> IdedExpr {
    let operand = match operands.len() {
        1 => operands.pop().unwrap_or_default(),
        _ => IdedExpr {
            id: 0,
            expr: Expr::List(::cel::common::ast::ListExpr {
                elements: operands,
                optional_indices: Vec::new(),
            }),
        },
    };
    call_of(EVALUATED, vec![operand])
}
