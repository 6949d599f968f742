//! The names an expression may refer to, checked at load as cel-go's checker
//! checks them: a top-level name that is neither declared by the policy's
//! environment nor bound by an enclosing comprehension is refused
//! (`undeclared reference to 'objct'`), where the evaluator would only fail
//! on the requests that reach it.
//!
//! Names only: functions and types are checked by
//! [`type_check`](super::type_check).

use ::cel::common::ast::{Expr, IdedExpr};

use super::program::children;

/// What Kubernetes binds for admission CEL (`params` is checked apart, with
/// `paramKind`), then what Kyverno's own kinds add: the policy exceptions
/// that apply. One string, not a table of them: static data moves the heap
/// (docs/performance.md, "Layout").
const CONTEXT: &str = "object oldObject request params namespaceObject variables authorizer";
const KYVERNO_CONTEXT: &str = "exceptions";

/// Type names, values in CEL (`type(x) == string`).
pub(super) fn is_type(name: &str) -> bool {
    matches!(
        name,
        "bool"
            | "int"
            | "uint"
            | "double"
            | "string"
            | "bytes"
            | "list"
            | "map"
            | "null_type"
            | "type"
            | "dyn"
            | "optional_type"
    )
}

/// The namespaces of the libraries' functions (`math.greatest(...)`,
/// `resource.Get(...)`): a name only when it is what a function is called on.
/// The ones this version does not run are refused apart, by library.
pub(super) fn is_namespace(name: &str) -> bool {
    matches!(
        name,
        "base64"
            | "cel"
            | "format"
            | "globalContext"
            | "gzip"
            | "hash"
            | "http"
            | "image"
            | "json"
            | "jsonpatch"
            | "lists"
            | "math"
            | "optional"
            | "regex"
            | "resource"
            | "sets"
            | "strings"
            | "time"
            | "user"
            | "x509"
            | "yaml"
    )
}

/// The context names of a policy's kind.
fn context(kyverno: bool) -> impl Iterator<Item = &'static str> {
    let extra = if kyverno { KYVERNO_CONTEXT } else { "" };
    CONTEXT.split(' ').chain(extra.split_whitespace())
}

/// The first name in `expr` that nothing declares, with a message; `kyverno`
/// for Kyverno's own kinds.
pub fn undeclared(source: &str, expr: &IdedExpr, kyverno: bool) -> Option<String> {
    let mut bound = Vec::new();
    let name = first_undeclared(expr, kyverno, &mut bound, false)?;
    let mut message = format!("undeclared reference to '{name}'");
    if let Some(close) = closest(&name, kyverno) {
        message.push_str(&format!(" (did you mean '{close}'?)"));
    }
    Some(match position(source, &name) {
        Some((line, column)) => format!("line {line}, column {column}: {message}"),
        None => message,
    })
}

fn declared(name: &str, kyverno: bool) -> bool {
    context(kyverno).any(|c| c == name)
        || is_type(name)
        // The names the macro rewrites bind (`@result`, `#unused`...).
        || name.starts_with(['@', '#'])
}

/// Walks `expr` with the comprehension variables in scope in `bound`;
/// `call_target` when `expr` is what a function is called on.
fn first_undeclared(
    expr: &IdedExpr,
    kyverno: bool,
    bound: &mut Vec<String>,
    call_target: bool,
) -> Option<String> {
    match &expr.expr {
        Expr::Ident(name) => {
            let known = declared(name, kyverno)
                || bound.iter().any(|b| b == name)
                || (call_target && is_namespace(name));
            (!known).then(|| name.clone())
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target
                && let Some(name) = first_undeclared(target, kyverno, bound, true)
            {
                return Some(name);
            }
            call.args
                .iter()
                .find_map(|arg| first_undeclared(arg, kyverno, bound, false))
        }
        Expr::Comprehension(c) => {
            // The range and the initial value see the outer scope; the
            // condition and the step the accumulator and the iteration
            // variables; the result the accumulator.
            let outer = [&c.iter_range, &c.accu_init]
                .into_iter()
                .find_map(|e| first_undeclared(e, kyverno, bound, false));
            if outer.is_some() {
                return outer;
            }
            let depth = bound.len();
            bound.push(c.accu_var.clone());
            let result = first_undeclared(&c.result, kyverno, bound, false);
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            let inner = result.or_else(|| {
                [&c.loop_cond, &c.loop_step]
                    .into_iter()
                    .find_map(|e| first_undeclared(e, kyverno, bound, false))
            });
            bound.truncate(depth);
            inner
        }
        _ => {
            let mut found = None;
            children(expr, &mut |child| {
                if found.is_none() {
                    found = first_undeclared(child, kyverno, bound, false);
                }
            });
            found
        }
    }
}

/// A declared context name one or two edits away from `name`.
fn closest(name: &str, kyverno: bool) -> Option<&'static str> {
    context(kyverno)
        .map(|candidate| (edits(name, candidate), candidate))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance, case differences counting half (rounded down), so
/// that `oldobject` is one edit from `oldObject`.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).map(|j| j * 2).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row.first().copied().unwrap_or_default();
        if let Some(first) = row.first_mut() {
            *first = (i + 1) * 2;
        }
        for (j, cb) in b.iter().enumerate() {
            let cost = match (ca == *cb, ca.eq_ignore_ascii_case(cb)) {
                (true, _) => 0,
                (false, true) => 1,
                (false, false) => 2,
            };
            let diagonal = previous + cost;
            let up = row
                .get(j + 1)
                .copied()
                .unwrap_or(usize::MAX)
                .saturating_add(2);
            let left = row.get(j).copied().unwrap_or(usize::MAX).saturating_add(2);
            previous = row.get(j + 1).copied().unwrap_or_default();
            if let Some(cell) = row.get_mut(j + 1) {
                *cell = diagonal.min(up).min(left);
            }
        }
    }
    row.last().copied().unwrap_or_default() / 2
}

/// Where `name` first stands in `source` as a name nothing binds: outside
/// string literals, not a field (after `.`) nor a struct's field name, not a
/// macro's variable nor inside the call that binds it. The parser keeps no
/// positions, so this reads the text again, with the brackets as scopes.
/// Line and column from 1.
fn position(source: &str, name: &str) -> Option<(usize, usize)> {
    // Per open bracket: the names it binds, and whether it is a struct's.
    let mut scopes: Vec<(Vec<&str>, bool)> = Vec::new();
    let mut quoted = super::program::Quoted::default();
    let mut previous = ' ';
    let mut last_word = "";
    let mut at = 0;
    while let Some(c) = source.get(at..).and_then(|rest| rest.chars().next()) {
        let next = at + c.len_utf8();
        if quoted.next(c) {
            at = next;
            continue;
        }
        match c {
            '(' => {
                let binds = if is_macro(last_word) {
                    variables(source.get(next..).unwrap_or_default())
                } else {
                    Vec::new()
                };
                scopes.push((binds, false));
            }
            '[' => scopes.push((Vec::new(), false)),
            '{' => scopes.push((Vec::new(), previous == 'a')),
            ')' | ']' | '}' => {
                scopes.pop();
            }
            _ if c.is_ascii_alphabetic() || c == '_' => {
                let end = source
                    .get(at..)?
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(source.len(), |len| at + len);
                let word = source.get(at..end)?;
                let after = source.get(end..).unwrap_or_default().trim_start();
                let struct_field = after.starts_with(':')
                    && matches!(previous, '{' | ',')
                    && scopes.last().is_some_and(|(_, is_struct)| *is_struct);
                let bound = scopes.iter().any(|(names, _)| names.contains(&word));
                if word == name && previous != '.' && !struct_field && !bound {
                    let before = source.get(..at)?;
                    let line = before.matches('\n').count() + 1;
                    let line_start = before.rfind('\n').map_or(0, |nl| nl + 1);
                    let column = before.get(line_start..)?.chars().count() + 1;
                    return Some((line, column));
                }
                last_word = word;
                previous = 'a';
                at = end;
                continue;
            }
            _ => {}
        }
        if !c.is_whitespace() {
            previous = c;
            last_word = "";
        }
        at = next;
    }
    None
}

/// The macros that bind variables: the crate's `map` and `filter` (its
/// `all`, `exists`, `exists_one` are among the comprehensions'), the
/// rewritten comprehensions and `cel.bind`, and `sortBy`.
fn is_macro(word: &str) -> bool {
    matches!(word, "map" | "filter" | "sortBy") || super::comprehensions::named(word)
}

/// The variables a macro call's arguments, `rest`, start by declaring: one
/// or two names, each followed by a comma.
fn variables(rest: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = rest;
    while names.len() < 2 {
        let trimmed = rest.trim_start();
        let len = trimmed
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(trimmed.len());
        let (word, after) = trimmed.split_at(len);
        match after.trim_start().strip_prefix(',') {
            Some(after) if !word.is_empty() => {
                names.push(word);
                rest = after;
            }
            _ => break,
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::super::program::compile;
    use super::*;

    fn check(source: &str, kyverno: bool) -> Option<String> {
        let compiled = compile(source, "e").ok()?;
        undeclared(source, &compiled.expression, kyverno)
    }

    #[test]
    fn names_the_environment_declares_pass() {
        for source in [
            "object.metadata.name == oldObject.metadata.name",
            "request.operation == 'CREATE' && has(namespaceObject.metadata.labels)",
            "variables.node.metadata.labels['zone']",
            "object.spec.containers.all(c, c.image.startsWith('r/'))",
            "object.spec.containers.map(c, c.name).exists(n, n == 'a')",
            "[1, 2].all(i, v, i < v)",
            "cel.bind(x, 1, x + 1) == 2",
            "math.greatest(1, 2) == 2 && [2, 1].sortBy(x, x) == [1, 2]",
            "type(object) == map && int('1') == 1",
            "optional.of(1).orValue(0) == 1 && object.?spec.orValue({}) != null",
            "resource.Get('v1', 'nodes', '', object.spec.nodeName).metadata.labels",
            "Object{metadata: Object.metadata{labels: {'a': 'b'}}}",
            "authorizer.group('').resource('pods').check('get').allowed()",
            "'object' + \"objct\" == 'x'",
        ] {
            assert_eq!(check(source, false), None, "{source}");
        }
        assert_eq!(check("exceptions.allowedValues == []", true), None);
    }

    #[test]
    fn a_name_nothing_declares_is_refused_where_it_stands() {
        for (source, kyverno, message) in [
            (
                "objct.metadata.name",
                false,
                "line 1, column 1: undeclared reference to 'objct' (did you mean 'object'?)",
            ),
            (
                "object.metadata.name == oldobject.metadata.name",
                false,
                "line 1, column 25: undeclared reference to 'oldobject' (did you mean 'oldObject'?)",
            ),
            (
                "object.spec.containers.all(c,\n  x.name != '')",
                false,
                "line 2, column 3: undeclared reference to 'x'",
            ),
            (
                "object.spec.containers.map(c, c.name) + [c]",
                false,
                "line 1, column 42: undeclared reference to 'c'",
            ),
            (
                "[1].all(i, v, v > 0) && i == 0",
                false,
                "line 1, column 25: undeclared reference to 'i'",
            ),
            (
                "foo.bar()",
                false,
                "line 1, column 1: undeclared reference to 'foo'",
            ),
            (
                "exceptions.allowedValues",
                false,
                "line 1, column 1: undeclared reference to 'exceptions'",
            ),
            (
                "1 + math",
                false,
                "line 1, column 5: undeclared reference to 'math'",
            ),
            (
                "Object{spec: Object.spec{x: spec}}",
                false,
                "line 1, column 29: undeclared reference to 'spec'",
            ),
        ] {
            assert_eq!(check(source, kyverno).as_deref(), Some(message), "{source}");
        }
    }

    #[test]
    fn edit_distance() {
        assert_eq!(edits("objct", "object"), 1);
        assert_eq!(edits("oldobject", "oldObject"), 0);
        assert_eq!(edits("request", "request"), 0);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(closest("zzz", false), None);
    }
}
