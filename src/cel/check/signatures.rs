//! The signature table of the load-time type check ([`crate::cel::check::type_check`]):
//! what the operators and the typed library functions take and give, as
//! cel-go and Kubernetes' libraries declare them.

use crate::cel::check::types::{Ty, fits, join};

/// What the overloads that fit `args` give: their common type, `dyn` when
/// they differ; `None` when none fits.
pub(in crate::cel) fn resolve(overloads: &[(Vec<Ty>, Ty)], args: &[Ty]) -> Option<Ty> {
    overloads
        .iter()
        .filter(|(params, _)| {
            params.len() == args.len() && params.iter().zip(args).all(|(p, a)| fits(a, p))
        })
        .map(|(_, result)| result.clone())
        .reduce(|a, b| if a == b { a } else { Ty::Dyn })
}

/// The type an operator gives, `Err` when no overload takes `args`; `None`
/// when `name` is no operator.
pub(in crate::cel) fn operator(name: &str, args: &[Ty]) -> Option<Result<Ty, ()>> {
    use Ty::*;
    let found = |overloads: Vec<(Vec<Ty>, Ty)>| resolve(&overloads, args).ok_or(());
    let same = |types: &[Ty], result: Option<Ty>| -> Vec<(Vec<Ty>, Ty)> {
        types
            .iter()
            .map(|t| {
                (
                    vec![t.clone(), t.clone()],
                    result.clone().unwrap_or(t.clone()),
                )
            })
            .collect()
    };
    Some(match (name, args) {
        ("_+_", [List(a), List(b)]) => Ok(Ty::list(join(*a.clone(), *b.clone()))),
        ("_+_", _) => {
            let mut o = same(
                &[Int, Uint, Double, String, Bytes, Duration, Ty::list(Dyn)],
                None,
            );
            o.push((vec![Timestamp, Duration], Timestamp));
            o.push((vec![Duration, Timestamp], Timestamp));
            found(o)
        }
        ("_-_", _) => {
            let mut o = same(&[Int, Uint, Double, Duration], None);
            o.push((vec![Timestamp, Timestamp], Duration));
            o.push((vec![Timestamp, Duration], Timestamp));
            found(o)
        }
        ("_*_" | "_/_", _) => found(same(&[Int, Uint, Double], None)),
        ("_%_", _) => found(same(&[Int, Uint], None)),
        ("-_", _) => found(vec![
            (vec![Int], Int),
            (vec![Double], Double),
            (vec![Duration], Duration),
        ]),
        ("!_", _) => found(vec![(vec![Bool], Bool)]),
        ("_&&_" | "_||_", _) => found(vec![(vec![Bool, Bool], Bool)]),
        ("_<_" | "_<=_" | "_>_" | "_>=_", [a, b]) => {
            let comparable = fits(a, b)
                && !matches!(a, List(_) | Map(..) | Null | Type | Object | JsonPatch)
                || a.is_numeric() && b.is_numeric();
            if comparable { Ok(Bool) } else { Err(()) }
        }
        // Equality is refused only between values that can never be equal:
        // `1 == 'a'`, not `1 == 1.0` nor anything compared with null.
        ("_==_" | "_!=_", [a, b]) => {
            let unknown = |t: &Ty| matches!(t, Dyn | Null | Object | JsonPatch | Declared(_));
            if unknown(a) || unknown(b) || fits(a, b) || a.is_numeric() && b.is_numeric() {
                Ok(Bool)
            } else {
                Err(())
            }
        }
        ("@in", [element, container]) => match container {
            Dyn | Any | Object | Declared(_) => Ok(Bool),
            List(item) | Map(item, _) if fits(element, item) => Ok(Bool),
            _ => Err(()),
        },
        ("_[_]", [container, index]) => match container {
            Dyn | Any | Object | Declared(_) => Ok(Dyn),
            List(item) if fits(index, &Int) || matches!(index, Uint) => Ok(*item.clone()),
            Map(key, value) if fits(index, key) => Ok(*value.clone()),
            _ => Err(()),
        },
        ("_?_:_", [condition, a, b]) => {
            // Both branches give one type, as cel-go's `(bool, A, A) -> A`.
            let unknown = |t: &Ty| matches!(t, Dyn | Null);
            let objects = matches!((a, b), (Object, Map(..)) | (Map(..), Object));
            let same = unknown(a) || unknown(b) || fits(a, b) || objects;
            if fits(condition, &Bool) && same {
                Ok(join(a.clone(), b.clone()))
            } else {
                Err(())
            }
        }
        _ => return None,
    })
}

/// The text of an operator, to find it in the expression.
pub(in crate::cel) fn symbol(name: &str) -> Option<&'static str> {
    Some(match name {
        "_+_" => "+",
        "_-_" | "-_" => "-",
        "_*_" => "*",
        "_/_" => "/",
        "_%_" => "%",
        "!_" => "!",
        "_&&_" => "&&",
        "_||_" => "||",
        "_<_" => "<",
        "_<=_" => "<=",
        "_>_" => ">",
        "_>=_" => ">=",
        "_==_" => "==",
        "_!=_" => "!=",
        "@in" => "in",
        "_[_]" => "[",
        "_?_:_" => "?",
        _ => return None,
    })
}

/// The overloads of the functions whose types are known here: the standard
/// library's and its strings extension's (a member's receiver comes first).
/// `None` for the rest, which give `dyn`.
pub(in crate::cel) fn signatures(name: &str, member: bool) -> Option<Vec<(Vec<Ty>, Ty)>> {
    use Ty::*;
    let each = |args: &[Ty], result: Ty| -> Vec<(Vec<Ty>, Ty)> {
        args.iter()
            .map(|a| (vec![a.clone()], result.clone()))
            .collect()
    };
    let list = || Ty::list(Dyn);
    let map = || Map(Box::new(Dyn), Box::new(Dyn));
    Some(match (name, member) {
        ("size", _) => each(&[String, Bytes, list(), map()], Int),
        ("contains" | "startsWith" | "endsWith", true) => vec![(vec![String, String], Bool)],
        ("matches", _) => vec![(vec![String, String], Bool)],
        ("int", false) => each(&[Int, Uint, Double, String, Timestamp, Duration], Int),
        ("uint", false) => each(&[Int, Uint, Double, String], Uint),
        ("double", false) => each(&[Int, Uint, Double, String], Double),
        ("string", false) => each(
            &[String, Bool, Int, Uint, Double, Bytes, Timestamp, Duration],
            String,
        ),
        ("bytes", false) => each(&[String, Bytes], Bytes),
        ("bool", false) => each(&[Bool, String], Bool),
        ("duration", false) => each(&[String, Duration], Duration),
        ("timestamp", false) => each(&[String, Int, Timestamp], Timestamp),
        ("type", false) => each(&[Dyn], Type),
        (
            "getFullYear" | "getMonth" | "getDate" | "getDayOfMonth" | "getDayOfWeek"
            | "getDayOfYear",
            true,
        ) => vec![(vec![Timestamp], Int), (vec![Timestamp, String], Int)],
        ("getHours" | "getMinutes" | "getSeconds" | "getMilliseconds", true) => vec![
            (vec![Timestamp], Int),
            (vec![Timestamp, String], Int),
            (vec![Duration], Int),
        ],
        ("charAt", true) => vec![(vec![String, Int], String)],
        ("indexOf" | "lastIndexOf", true) => vec![
            (vec![String, String], Int),
            (vec![String, String, Int], Int),
            (vec![list(), Dyn], Int),
        ],
        ("lowerAscii" | "upperAscii" | "trim", true) => vec![(vec![String], String)],
        ("replace", true) => vec![
            (vec![String, String, String], String),
            (vec![String, String, String, Int], String),
        ],
        ("split", true) => vec![
            (vec![String, String], Ty::list(String)),
            (vec![String, String, Int], Ty::list(String)),
        ],
        ("substring", true) => vec![
            (vec![String, Int], String),
            (vec![String, Int, Int], String),
        ],
        ("join", true) => vec![
            (vec![Ty::list(String)], String),
            (vec![Ty::list(String), String], String),
        ],
        ("format", true) => vec![(vec![String, list()], String)],
        // The lists extension's; Kubernetes' and Kyverno's strings
        // extension (version 2) has no `reverse`.
        ("reverse", true) => vec![(vec![list()], list())],
        ("strings.quote", false) => vec![(vec![String], String)],
        // Kyverno's reads give `map(string, google.protobuf.Any)`, whatever
        // their arguments (apiVersion, resource, namespace, name; or a GVR).
        (
            "resource.Get" | "resource.get" | "resource.List" | "resource.list" | "resource.Post"
            | "resource.post",
            false,
        ) => (2..=4)
            .map(|n| (vec![Dyn; n], Map(Box::new(String), Box::new(Any))))
            .collect(),
        _ => return None,
    })
}
