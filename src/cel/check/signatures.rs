//! The signature table of the load-time type check ([`crate::cel::check::type_check`]):
//! what the operators and the typed library functions take and give, as
//! cel-go and Kubernetes' libraries declare them.

use crate::cel::check::library_signatures;
use crate::cel::check::types::{CIDR, IP, Ty, fits, join};

/// What the overloads that fit `args` give: their common type; where they
/// differ, `dyn` as cel-go says, unless an argument's type is not known here
/// (cel-go, knowing it, may pick one overload).
pub(in crate::cel) fn resolve(overloads: &[(Vec<Ty>, Ty)], args: &[Ty]) -> Option<Ty> {
    let unknown = args
        .iter()
        .any(|a| matches!(a, Ty::Unknown | Ty::Free | Ty::Var(_) | Ty::Pair(..)));
    overloads
        .iter()
        .filter(|(params, _)| {
            params.len() == args.len() && params.iter().zip(args).all(|(p, a)| fits(a, p))
        })
        .map(|(_, result)| result.clone())
        .reduce(|a, b| match () {
            _ if a == b => a,
            _ if unknown => Ty::Unknown,
            _ => Ty::Dyn,
        })
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
        // cel-go's `list(A) + list(A)`: the items' types must fit each other.
        ("_+_", [List(a), List(b)]) if fits(a, b) => Ok(Ty::list(join(*a.clone(), *b.clone()))),
        ("_+_", [List(_), List(_)]) => Err(()),
        // cel-go: only `list(A) + list(A)` takes a list, so a `dyn` beside
        // one is a list of its items.
        ("_+_", [List(item), Dyn] | [Dyn, List(item)]) => Ok(Ty::list(*item.clone())),
        ("_+_", [List(_), other] | [other, List(_)]) if other.is_open() => Ok(Ty::list(Unknown)),
        ("_+_", _) => {
            let mut o = same(
                &[
                    Int,
                    Uint,
                    Double,
                    String,
                    Bytes,
                    Duration,
                    Ty::list(Unknown),
                ],
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
                && !matches!(
                    a,
                    List(_)
                        | Map(..)
                        | Optional(_)
                        | Null
                        | Type(_)
                        | Object
                        | JsonPatch
                        | Opaque(_)
                )
                || a.is_numeric() && b.is_numeric();
            if comparable { Ok(Bool) } else { Err(()) }
        }
        // cel-go's `(A, A) -> bool`: `1 == 1.0` and `1 == null` are refused;
        // null is compared with messages (objects, timestamps, durations).
        ("_==_" | "_!=_", [a, b]) => {
            let nullable = |t: &Ty| {
                matches!(
                    t,
                    Null | Object
                        | JsonPatch
                        | Declared(_)
                        | Timestamp
                        | Duration
                        | Optional(_)
                        | Opaque(_)
                ) || t.is_open()
            };
            let opaque = |t: &Ty| matches!(t, Object | JsonPatch | Declared(_));
            let equal = match (a, b) {
                (Null, other) | (other, Null) => nullable(other),
                _ => fits(a, b) || opaque(a) || opaque(b),
            };
            if equal { Ok(Bool) } else { Err(()) }
        }
        ("@in", [element, container]) => match container {
            Object | Declared(_) => Ok(Bool),
            _ if container.is_open() => Ok(Bool),
            List(item) | Map(item, _) if fits(element, item) => Ok(Bool),
            _ => Err(()),
        },
        ("_[_]", [container, index]) => match container {
            Dyn => Ok(Dyn),
            // `x.?a['b']`: an optional of the item, as `x.?a[?'b']`.
            Optional(_) => return operator("_[?_]", args),
            Object | Declared(_) => Ok(Unknown),
            _ if container.is_open() => Ok(Unknown),
            List(item) if fits(index, &Int) => Ok(*item.clone()),
            Map(key, value) if fits(index, key) => Ok(*value.clone()),
            _ => Err(()),
        },
        // `map[?key]`, `list[?index]`: an optional of the item. Of a `dyn`,
        // cel-go's optional of a free type parameter, which what the
        // optional is later given binds (`dyn[?'a'].orValue('-')` is a
        // string).
        ("_[?_]", [container, index]) => match container {
            Dyn => Ok(Ty::Optional(Box::new(Free))),
            List(item) if fits(index, &Int) => Ok(Ty::Optional(item.clone())),
            Map(key, value) if fits(index, key) => Ok(Ty::Optional(value.clone())),
            Optional(inner) => match operator("_[?_]", &[*inner.clone(), index.clone()]) {
                Some(Ok(found)) => Ok(found),
                _ => Ok(Ty::Optional(Box::new(Unknown))),
            },
            List(_) | Map(..) => Err(()),
            _ => Ok(Ty::Optional(Box::new(Unknown))),
        },
        ("_?_:_", [condition, a, b]) => {
            // Both branches give one type, as cel-go's `(bool, A, A) -> A`.
            let unknown = |t: &Ty| matches!(t, Null) || t.is_open();
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
        "_[_]" | "_[?_]" => "[",
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
            &[
                String, Bool, Int, Uint, Double, Bytes, Timestamp, Duration, IP, CIDR,
            ],
            String,
        ),
        ("bytes", false) => each(&[String, Bytes], Bytes),
        ("bool", false) => each(&[Bool, String], Bool),
        ("duration", false) => each(&[String, Duration], Duration),
        ("timestamp", false) => each(&[String, Int, Timestamp], Timestamp),
        ("type", false) => each(&[Dyn], Type(Box::new(Dyn))),
        ("dyn", false) => each(&[Dyn], Dyn),
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
        ("strings.quote", false) => vec![(vec![String], String)],
        _ => return library_signatures::signatures(name, member),
    })
}

/// What the functions with a type parameter give, cel-go's `list(A)` and
/// `optional(A)` functions: the lists extension's and Kubernetes' lists
/// library (the item's type is kept), the sets library (both lists hold one
/// type), the optional library. `Err` where no overload takes the types;
/// `None` for the other functions, and where the receiver is not a list or
/// optional (Kubernetes' and Kyverno's strings extension, version 2, has no
/// `reverse`, so a string's is refused).
pub(in crate::cel) fn parametric(
    name: &str,
    receiver: Option<&Ty>,
    args: &[Ty],
) -> Option<Result<Ty, ()>> {
    use Ty::*;
    let open = |t: &Ty| t.is_open();
    let optional = |t: Ty| Optional(Box::new(t));
    Some(match (name, receiver, args) {
        // Declared for lists of the types that order (`sum`: that add) only:
        // `[[1]].isSorted()` is no overload in cel-go's check.
        ("sort" | "isSorted" | "min" | "max", Some(List(item)), [])
            if !open(item) && !ordered(item) =>
        {
            Err(())
        }
        ("sum", Some(List(item)), []) if !open(item) && !summable(item) => Err(()),
        // One overload for each type of item that can be ordered or added:
        // over a list whose items' type is open, several fit and cel-go's
        // result is `dyn` or a type it binds on the way.
        ("sort" | "sum" | "min" | "max", Some(Dyn), []) => Ok(Dyn),
        ("sort" | "sum" | "min" | "max", Some(List(item)), []) if **item == Dyn => Ok(Dyn),
        // `sortBy` keeps its list's type whatever its keys (cel-go's
        // `list(T).@sortByAssociatedKeys(list(U))`, one overload for each
        // type `U` that orders): over a `dyn` list, a `list(dyn)`; over a
        // list of a parameter, a list of it. Over a `dyn`, `T` stays free:
        // keys of one type fit one overload, whose result is a list of a
        // new parameter (`[dyn(x).sortBy(e, 10 / e), [[1]]]` binds it);
        // keys that fit several give the first's and another's: `dyn`.
        ("@sortByAssociatedKeys", Some(List(item)), _) if **item == Dyn => Ok(Ty::list(Dyn)),
        ("@sortByAssociatedKeys", Some(List(item)), _) if matches!(**item, Var(_)) => {
            Ok(Ty::list(*item.clone()))
        }
        ("@sortByAssociatedKeys", Some(Dyn), [List(key)]) if !open(key) => Ok(Ty::list(Free)),
        ("@sortByAssociatedKeys", Some(Dyn), _) => Ok(Dyn),
        ("@sortByAssociatedKeys", Some(List(item)), _) if open(item) => Ok(Unknown),
        ("@sortByAssociatedKeys", Some(List(item)), _) => Ok(Ty::list(*item.clone())),
        ("sort" | "sum" | "min" | "max", Some(List(item)), []) if open(item) => Ok(Unknown),
        ("reverse" | "sort" | "distinct", Some(List(item)), []) => Ok(Ty::list(*item.clone())),
        ("slice", Some(List(item)), [from, to]) if fits(from, &Int) && fits(to, &Int) => {
            Ok(Ty::list(*item.clone()))
        }
        // `list(list(A))`: a list of another type is no overload
        // (`[1].flatten()`); with a depth, any list, giving `list(dyn)`.
        ("flatten", Some(List(item)), []) => match item.as_ref() {
            List(inner) => Ok(Ty::list(*inner.clone())),
            // A `dyn` item is a `list(A)` whose `A` is free: what the result
            // meets binds it (`[dyn([])].flatten().map(x, -x)` is `list(double)`).
            Dyn => Ok(Ty::list(Free)),
            item if open(item) => Ok(Unknown),
            _ => Err(()),
        },
        ("flatten", Some(List(_) | Dyn), [depth]) if fits(depth, &Int) => Ok(Ty::list(Dyn)),
        ("first" | "last", Some(List(item)), []) => Ok(optional(*item.clone())),
        ("sum" | "min" | "max", Some(List(item)), []) => Ok(*item.clone()),
        ("isSorted", Some(List(_)), []) => Ok(Bool),
        // Over a `dyn`, Kubernetes' lists library's `list(A).indexOf(A)`
        // fits whatever it is given (`dyn(x).indexOf([1])`), beside the
        // strings'.
        ("indexOf" | "lastIndexOf", Some(Dyn), [_]) => Ok(Int),
        ("indexOf" | "lastIndexOf", Some(List(item)), [value]) => {
            if fits(value, item) {
                Ok(Int)
            } else {
                Err(())
            }
        }
        ("reverse", Some(String), []) => Err(()),
        // Only the lists extension declares `reverse`: a list of a free type
        // parameter.
        ("reverse", Some(Dyn), []) => Ok(Ty::list(Free)),
        // The lists extension's and the optional library's other `list(A)`
        // functions: over a `dyn`, `A` is free, and what the result meets
        // binds it (`dyn(x).distinct().isSorted()` runs `int`'s overload).
        ("distinct" | "flatten", Some(Dyn), []) => Ok(Ty::list(Free)),
        ("slice", Some(Dyn), [from, to]) if fits(from, &Int) && fits(to, &Int) => {
            Ok(Ty::list(Free))
        }
        ("first" | "last", Some(Dyn), []) => Ok(optional(Free)),
        ("lists.range", None, [n]) if fits(n, &Int) => Ok(Ty::list(Int)),
        // `math.greatest`, `math.least`: one number or a list of one type of
        // number gives that type; two numbers of two types, `dyn`.
        ("math.@max" | "math.@min", None, [one]) => match one {
            List(item) if item.is_numeric() || open(item) => Ok(*item.clone()),
            number if number.is_numeric() || open(number) => Ok(number.clone()),
            _ => Err(()),
        },
        ("math.@max" | "math.@min", None, [a, b]) => match (a, b) {
            _ if a == b && a.is_numeric() => Ok(a.clone()),
            _ if (a.is_numeric() || open(a)) && (b.is_numeric() || open(b)) => Ok(Dyn),
            _ => Err(()),
        },
        // cel-go's `type(A) -> type(A)`.
        ("type", None, [value]) => Ok(Type(Box::new(value.clone()))),
        ("sets.contains" | "sets.equivalent" | "sets.intersects", None, [a, b]) => {
            let list = |t: &Ty| matches!(t, List(_)) || open(t);
            match (a, b) {
                (List(a), List(b)) if !fits(a, b) => Err(()),
                _ if list(a) && list(b) => Ok(Bool),
                _ => Err(()),
            }
        }
        ("optional.of" | "optional.ofNonZeroValue", None, [value]) => Ok(optional(value.clone())),
        ("optional.none", None, []) => Ok(optional(Free)),
        ("orValue", Some(Optional(value)), [other]) => {
            if fits(other, value) {
                Ok(join(*value.clone(), other.clone()))
            } else {
                Err(())
            }
        }
        // On a `dyn`, cel-go's `optional(A)` takes anything and the argument
        // binds `A`.
        ("orValue", Some(Dyn), [other]) => Ok(other.clone()),
        ("or", Some(Dyn), [Optional(other)]) => Ok(Optional(other.clone())),
        ("value", Some(Optional(value)), []) => Ok(*value.clone()),
        ("hasValue", Some(Optional(_)), []) => Ok(Bool),
        ("or", Some(Optional(value)), [Optional(other)]) => {
            if fits(other, value) {
                Ok(optional(join(*value.clone(), *other.clone())))
            } else {
                Err(())
            }
        }
        // Every overload gives a bool.
        ("isSorted", Some(receiver), []) if open(receiver) => Ok(Bool),
        (
            "reverse" | "sort" | "distinct" | "slice" | "flatten" | "first" | "last" | "sum"
            | "min" | "max" | "isSorted" | "orValue" | "value" | "hasValue" | "or",
            Some(receiver),
            _,
        ) if open(receiver) => Ok(Unknown),
        // Declared on lists only (`'abc'.first()`).
        (
            "sort" | "distinct" | "slice" | "flatten" | "first" | "last" | "sum" | "min" | "max"
            | "isSorted",
            Some(_),
            _,
        ) => Err(()),
        _ => return None,
    })
}

/// Whether lists of `item` have Kubernetes' lists library's and the lists
/// extension's ordering functions (their `comparableTypes`; a `null` fits a
/// timestamp or a duration there).
pub(in crate::cel) fn ordered(item: &Ty) -> bool {
    use Ty::*;
    *item == Null
        || [Int, Uint, Double, Bool, Duration, Timestamp, String, Bytes]
            .iter()
            .any(|t| fits(item, t))
}

/// Whether lists of `item` have Kubernetes' `sum()` (its `summableTypes`).
fn summable(item: &Ty) -> bool {
    use Ty::*;
    *item == Null || [Int, Uint, Double, Duration].iter().any(|t| fits(item, t))
}

/// The parameters of cel-go's overloads of `name` in the order cel-go
/// declares them (a member's receiver first), for binding free type
/// parameters: cel-go binds them through every overload that fits, the
/// first deciding (`x % 2` makes `x` an `int`, `x + x` a `bytes`). An
/// overload's type parameters (`list(A)`) are new ones from `fresh`.
/// `None` for the functions not listed, whose free arguments the check
/// leaves open.
pub(in crate::cel) fn declared_overloads(
    name: &str,
    member: bool,
    fresh: &mut dyn FnMut() -> Ty,
) -> Option<Vec<Vec<Ty>>> {
    use Param::*;
    const ORDERED: &[&[Param]] = &[
        &[Bool, Bool],
        &[Int, Int],
        &[Int, Double],
        &[Int, Uint],
        &[Uint, Uint],
        &[Uint, Double],
        &[Uint, Int],
        &[Double, Double],
        &[Double, Int],
        &[Double, Uint],
        &[String, String],
        &[Bytes, Bytes],
        &[Timestamp, Timestamp],
        &[Duration, Duration],
    ];
    // Kubernetes' lists library and cel-go's lists extension: the types a
    // list's items may be ordered by, in their order.
    const SORTABLE: &[&[Param]] = &[
        &[ListOf(&Int)],
        &[ListOf(&Uint)],
        &[ListOf(&Double)],
        &[ListOf(&Bool)],
        &[ListOf(&Duration)],
        &[ListOf(&Timestamp)],
        &[ListOf(&String)],
        &[ListOf(&Bytes)],
    ];
    let table: &[&[Param]] = match (name, member) {
        ("_?_:_", false) => &[&[Bool, A, A]],
        ("_==_" | "_!=_", false) => &[&[A, A]],
        ("_+_", false) => &[
            &[Bytes, Bytes],
            &[Double, Double],
            &[Duration, Duration],
            &[Duration, Timestamp],
            &[Timestamp, Duration],
            &[Int, Int],
            &[ListOf(&A), ListOf(&A)],
            &[String, String],
            &[Uint, Uint],
        ],
        ("_/_" | "_*_", false) => &[&[Double, Double], &[Int, Int], &[Uint, Uint]],
        ("_%_", false) => &[&[Int, Int], &[Uint, Uint]],
        ("-_", false) => &[&[Double], &[Int]],
        ("_-_", false) => &[
            &[Double, Double],
            &[Duration, Duration],
            &[Int, Int],
            &[Timestamp, Duration],
            &[Timestamp, Timestamp],
            &[Uint, Uint],
        ],
        ("_<_" | "_<=_" | "_>_" | "_>=_", false) => ORDERED,
        ("_[_]" | "_[?_]", false) => &[&[ListOf(&A), Int], &[MapOf(&B, &C), B]],
        ("@in", false) => &[&[A, ListOf(&A)], &[B, MapOf(&B, &C)]],
        ("size", _) => &[&[Bytes], &[ListOf(&A)], &[MapOf(&B, &C)], &[String]],
        ("type" | "dyn", false) => &[&[A]],
        ("int", false) => &[
            &[Int],
            &[Double],
            &[Duration],
            &[String],
            &[Timestamp],
            &[Uint],
        ],
        ("uint", false) => &[&[Uint], &[Double], &[Int], &[String]],
        ("double", false) => &[&[Double], &[Int], &[String], &[Uint]],
        ("string", false) => &[
            &[String],
            &[Bool],
            &[Bytes],
            &[Double],
            &[Duration],
            &[Int],
            &[Timestamp],
            &[Uint],
        ],
        ("bool", false) => &[&[Bool], &[String]],
        ("bytes", false) => &[&[Bytes], &[String]],
        ("sort" | "isSorted" | "min" | "max", true) => SORTABLE,
        ("@sortByAssociatedKeys", true) => &[
            &[ListOf(&A), ListOf(&Int)],
            &[ListOf(&A), ListOf(&Uint)],
            &[ListOf(&A), ListOf(&Double)],
            &[ListOf(&A), ListOf(&Bool)],
            &[ListOf(&A), ListOf(&Duration)],
            &[ListOf(&A), ListOf(&Timestamp)],
            &[ListOf(&A), ListOf(&String)],
            &[ListOf(&A), ListOf(&Bytes)],
        ],
        ("sum", true) => &[
            &[ListOf(&Int)],
            &[ListOf(&Uint)],
            &[ListOf(&Double)],
            &[ListOf(&Duration)],
        ],
        ("reverse" | "distinct" | "first" | "last", true) => &[&[ListOf(&A)]],
        ("slice", true) => &[&[ListOf(&A), Int, Int]],
        ("flatten", true) => &[&[ListOf(&ListOf(&A))], &[ListOf(&Dyn), Int]],
        ("join", true) => &[&[ListOf(&String)], &[ListOf(&String), String]],
        ("lists.range", false) => &[&[Int]],
        ("sets.contains" | "sets.equivalent" | "sets.intersects", false) => {
            &[&[ListOf(&A), ListOf(&A)]]
        }
        ("optional.of" | "optional.ofNonZeroValue", false) => &[&[A]],
        ("value" | "hasValue", true) => &[&[OptionalOf(&A)]],
        ("orValue", true) => &[&[OptionalOf(&A), A]],
        ("or", true) => &[&[OptionalOf(&A), OptionalOf(&A)]],
        // The pairs a two-variable comprehension ranges over (this policy's
        // rewrite): the items keep their type.
        ("@entries", false) => &[&[ListOf(&A)], &[MapOf(&B, &C)]],
        // The accumulator of `transformMap` (cel-go's own helper).
        ("@mapInsert", false) => &[&[MapOf(&A, &B), A, B], &[MapOf(&A, &B), MapOf(&A, &B)]],
        // The standard library's and the strings extension's string
        // functions: their overloads agree on the receiver.
        (
            "contains" | "startsWith" | "endsWith" | "matches" | "charAt" | "lowerAscii"
            | "upperAscii" | "trim" | "replace" | "split" | "substring",
            true,
        ) => {
            return Some(
                signatures(name, true)?
                    .into_iter()
                    .map(|(params, _)| params)
                    .collect(),
            );
        }
        _ => return None,
    };
    Some(
        table
            .iter()
            .map(|params| {
                // New parameters for each overload that has them.
                let vars = if params.iter().any(|p| p.generic()) {
                    [fresh(), fresh(), fresh()]
                } else {
                    [Ty::Dyn, Ty::Dyn, Ty::Dyn]
                };
                params.iter().map(|p| p.ty(&vars)).collect()
            })
            .collect(),
    )
}

/// A parameter in [`declared_overloads`]' tables: a type, or one of an
/// overload's type parameters (`A`, `B`, `C`) or a type made of them.
#[derive(Clone, Copy)]
enum Param {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    Dyn,
    A,
    B,
    C,
    ListOf(&'static Param),
    MapOf(&'static Param, &'static Param),
    OptionalOf(&'static Param),
}

impl Param {
    fn generic(self) -> bool {
        match self {
            Param::A | Param::B | Param::C => true,
            Param::ListOf(item) | Param::OptionalOf(item) => item.generic(),
            Param::MapOf(key, value) => key.generic() || value.generic(),
            _ => false,
        }
    }

    fn ty(self, vars: &[Ty; 3]) -> Ty {
        let [a, b, c] = vars;
        match self {
            Param::Bool => Ty::Bool,
            Param::Int => Ty::Int,
            Param::Uint => Ty::Uint,
            Param::Double => Ty::Double,
            Param::String => Ty::String,
            Param::Bytes => Ty::Bytes,
            Param::Timestamp => Ty::Timestamp,
            Param::Duration => Ty::Duration,
            Param::Dyn => Ty::Dyn,
            Param::A => a.clone(),
            Param::B => b.clone(),
            Param::C => c.clone(),
            Param::ListOf(item) => Ty::list(item.ty(vars)),
            Param::MapOf(key, value) => Ty::Map(Box::new(key.ty(vars)), Box::new(value.ty(vars))),
            Param::OptionalOf(item) => Ty::Optional(Box::new(item.ty(vars))),
        }
    }
}
