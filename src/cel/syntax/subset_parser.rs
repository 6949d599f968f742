//! A parser for the everyday subset of CEL that policies are mostly written
//! in, giving the same tree as the `cel` crate's Pratt parser.
//!
//! Why it exists: policy-server starts every evaluation afresh, so every
//! expression is parsed on every request. On the load test's MutatingPolicy
//! row the crate's parser was a sixth of the guest's time (its lexer keeps
//! source offsets for every node, a member call clones its receiver to try
//! the macros, a struct name is built with `format!`, which alone faults in a
//! page of the formatting machinery's static data per request:
//! docs/cel.md, "The subset parser").
//!
//! It reads identifiers, field selection (`a.b`, `a.?b`), indexing (`a[b]`,
//! `a[?b]`), calls and member calls, `has()`, plain string literals, decimal
//! integers, `true`/`false`/`null`, list, map and struct literals, `!`, the
//! binary operators but `in`, and `?:`. Anything else (escapes, other
//! literals, unary minus, macros, comments, reserved words, any error) makes
//! it give up, and the crate parses the expression as before, with its own
//! messages: so it can only ever differ from the crate on an expression both
//! parse, and the tests compare those trees.

use ::cel::IdedExpr;
use ::cel::common::ast::{
    CallExpr, EntryExpr, Expr, IdedEntryExpr, ListExpr, LiteralValue, MapEntryExpr, MapExpr,
    SelectExpr, StructExpr, StructFieldExpr, operators,
};

use crate::cel::syntax::ast::MAX_NODES;

/// Deepest recursion before giving up (the crate then decides): operator
/// chains and `?:` nest without brackets.
const MAX_RECURSION: usize = 64;

/// Names the crate's parser expands as macros (standard library): left to it.
/// (Matches, not tables: a table of `&str` is static data, and every byte of
/// it moves the heap's first page; docs/performance.md, "Layout".)
fn is_macro(name: &str) -> bool {
    matches!(
        name,
        "all" | "exists" | "exists_one" | "existsOne" | "map" | "filter"
    )
}

/// Words the crate's lexer reads as keywords or reserved words.
fn is_reserved(word: &str) -> bool {
    matches!(
        word,
        "in" | "as"
            | "break"
            | "const"
            | "continue"
            | "else"
            | "for"
            | "function"
            | "if"
            | "import"
            | "let"
            | "loop"
            | "package"
            | "namespace"
            | "return"
            | "var"
            | "void"
            | "while"
    )
}

/// The tree of `source`, or `None` where the crate's parser must decide.
pub(crate) fn parse(source: &str) -> Option<IdedExpr> {
    let mut parser = Parser {
        bytes: source.as_bytes(),
        source,
        token: Token::End,
        end: 0,
        next_id: 0,
        depth: 0,
    };
    parser.bump();
    let expr = parser.expr()?;
    (parser.token == Token::End).then_some(expr)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'s> {
    Ident(&'s str),
    Int(i64),
    /// A string literal's text, between its quotes (no escapes in it).
    Str(&'s str),
    True,
    False,
    Null,
    /// Punctuation and operators, as written.
    Sym(&'static str),
    End,
    /// Text outside the subset.
    Other,
}

struct Parser<'s> {
    source: &'s str,
    bytes: &'s [u8],
    /// The next token, and where it ends.
    token: Token<'s>,
    end: usize,
    next_id: u64,
    depth: usize,
}

/// Binary operators: precedence and the function they call.
fn binary(symbol: &str) -> Option<(u8, &'static str)> {
    Some(match symbol {
        "||" => (1, operators::LOGICAL_OR),
        "&&" => (2, operators::LOGICAL_AND),
        "<" => (3, operators::LESS),
        "<=" => (3, operators::LESS_EQUALS),
        ">" => (3, operators::GREATER),
        ">=" => (3, operators::GREATER_EQUALS),
        "==" => (3, operators::EQUALS),
        "!=" => (3, operators::NOT_EQUALS),
        "+" => (4, operators::ADD),
        "-" => (4, operators::SUBSTRACT),
        "*" => (5, operators::MULTIPLY),
        "/" => (5, operators::DIVIDE),
        "%" => (5, operators::MODULO),
        _ => return None,
    })
}

impl<'s> Parser<'s> {
    fn byte(&self, at: usize) -> Option<u8> {
        self.bytes.get(at).copied()
    }

    /// The token starting at `self.end` and where it ends; `None` for text
    /// outside the subset.
    fn lex(&self) -> Option<(Token<'s>, usize)> {
        let mut start = self.end;
        while matches!(
            self.byte(start),
            Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0B' | b'\x0C')
        ) {
            start += 1;
        }
        let rest = self.source.get(start..)?;
        let Some(first) = self.byte(start) else {
            return Some((Token::End, start));
        };
        let word_end = |from: usize| {
            let mut end = from;
            while self
                .byte(end)
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                end += 1;
            }
            end
        };
        if first.is_ascii_alphabetic() || first == b'_' {
            let end = word_end(start);
            // `r"..."`, `b'...'`: prefixed literals are the crate's.
            if matches!(self.byte(end), Some(b'"' | b'\'')) {
                return None;
            }
            let word = self.source.get(start..end)?;
            let token = match word {
                "true" => Token::True,
                "false" => Token::False,
                "null" => Token::Null,
                _ if is_reserved(word) => return None,
                _ => Token::Ident(word),
            };
            return Some((token, end));
        }
        if first.is_ascii_digit() {
            let end = word_end(start);
            let digits = self.source.get(start..end)?;
            // Only plain decimal integers: no `0x`, `u`, `1.5`, `1e3`, `012`.
            if !digits.bytes().all(|b| b.is_ascii_digit())
                || (digits.len() > 1 && first == b'0')
                || self.byte(end) == Some(b'.')
            {
                return None;
            }
            return Some((Token::Int(digits.parse().ok()?), end));
        }
        if first == b'"' || first == b'\'' {
            let body = start + 1;
            // Triple quotes are the crate's.
            if self.byte(body) == Some(first) && self.byte(body + 1) == Some(first) {
                return None;
            }
            let mut end = body;
            loop {
                match self.byte(end)? {
                    b'\\' | b'\n' | b'\r' => return None,
                    b if b == first => break,
                    _ => end += 1,
                }
            }
            return Some((Token::Str(self.source.get(body..end)?), end + 1));
        }
        // `.5` is a number, `//` a comment: the crate's.
        if rest.starts_with("//") || (first == b'.' && self.byte(start + 1)?.is_ascii_digit()) {
            return None;
        }
        let two = |second: u8, both: &'static str, one: &'static str| {
            if self.byte(start + 1) == Some(second) {
                both
            } else {
                one
            }
        };
        let symbol = match first {
            b'=' if self.byte(start + 1) == Some(b'=') => "==",
            b'&' if self.byte(start + 1) == Some(b'&') => "&&",
            b'|' if self.byte(start + 1) == Some(b'|') => "||",
            b'!' => two(b'=', "!=", "!"),
            b'<' => two(b'=', "<=", "<"),
            b'>' => two(b'=', ">=", ">"),
            b'.' => ".",
            b',' => ",",
            b'?' => "?",
            b'(' => "(",
            b')' => ")",
            b'[' => "[",
            b']' => "]",
            b'{' => "{",
            b'}' => "}",
            b':' => ":",
            b'+' => "+",
            b'-' => "-",
            b'*' => "*",
            b'/' => "/",
            b'%' => "%",
            _ => return None,
        };
        Some((Token::Sym(symbol), start + symbol.len()))
    }

    /// Moves to the next token; returns the one it was at.
    fn bump(&mut self) -> Token<'s> {
        let (next, end) = self.lex().unwrap_or((Token::Other, self.end));
        self.end = end;
        std::mem::replace(&mut self.token, next)
    }

    fn at(&self, symbol: &str) -> bool {
        matches!(self.token, Token::Sym(s) if s == symbol)
    }

    fn expect(&mut self, symbol: &str) -> Option<()> {
        if !self.at(symbol) {
            return None;
        }
        self.bump();
        Some(())
    }

    fn node(&mut self, expr: Expr) -> Option<IdedExpr> {
        self.next_id += 1;
        // The crate refuses more nodes than this; so does it here.
        (self.next_id as usize <= MAX_NODES).then_some(IdedExpr {
            id: self.next_id,
            expr,
        })
    }

    fn call(&mut self, function: &str, args: Vec<IdedExpr>) -> Option<IdedExpr> {
        self.node(Expr::Call(CallExpr {
            func_name: function.to_string(),
            target: None,
            args,
        }))
    }

    fn expr(&mut self) -> Option<IdedExpr> {
        self.binary(0)
    }

    /// Binary operators of precedence `min` and above, and `?:` at 0.
    fn binary(&mut self, min: u8) -> Option<IdedExpr> {
        self.depth += 1;
        if self.depth > MAX_RECURSION {
            return None;
        }
        let mut lhs = self.selector_chain()?;
        while let Token::Sym(symbol) = self.token {
            if symbol == "?" && min == 0 {
                self.bump();
                let then = self.binary(1)?;
                self.expect(":")?;
                let otherwise = self.binary(0)?;
                lhs = self.call(operators::CONDITIONAL, vec![lhs, then, otherwise])?;
                continue;
            }
            let Some((precedence, function)) = binary(symbol) else {
                break;
            };
            if precedence < min {
                break;
            }
            if symbol == "||" || symbol == "&&" {
                lhs = self.logical_chain(lhs, symbol, precedence, function)?;
                continue;
            }
            self.bump();
            let rhs = self.binary(precedence + 1)?;
            lhs = self.call(function, vec![lhs, rhs])?;
        }
        self.depth -= 1;
        Some(lhs)
    }

    /// `a && b && c`: the crate balances a chain into a tree.
    fn logical_chain(
        &mut self,
        first: IdedExpr,
        symbol: &str,
        precedence: u8,
        function: &str,
    ) -> Option<IdedExpr> {
        let mut terms = vec![Some(first)];
        let mut ops: usize = 0;
        while self.at(symbol) {
            self.bump();
            terms.push(Some(self.binary(precedence + 1)?));
            ops += 1;
        }
        self.balanced(&mut terms, function, 0, ops.saturating_sub(1))
    }

    fn balanced(
        &mut self,
        terms: &mut [Option<IdedExpr>],
        function: &str,
        lo: usize,
        hi: usize,
    ) -> Option<IdedExpr> {
        let mid = (lo + hi).div_ceil(2);
        let left = if mid == lo {
            terms.get_mut(mid)?.take()?
        } else {
            self.balanced(terms, function, lo, mid - 1)?
        };
        let right = if mid == hi {
            terms.get_mut(mid + 1)?.take()?
        } else {
            self.balanced(terms, function, mid + 1, hi)?
        };
        self.call(function, vec![left, right])
    }

    fn selector_chain(&mut self) -> Option<IdedExpr> {
        let lhs = if self.at("!") {
            self.bump();
            // `!!a` and `-a` fold in the crate: its decision.
            if self.at("!") || self.at("-") {
                return None;
            }
            let operand = self.selector_chain()?;
            self.call(operators::LOGICAL_NOT, vec![operand])?
        } else {
            self.primary()?
        };
        self.selector_tail(lhs)
    }

    fn selector_tail(&mut self, mut lhs: IdedExpr) -> Option<IdedExpr> {
        loop {
            if self.at(".") {
                self.bump();
                let optional = self.at("?");
                if optional {
                    self.bump();
                }
                let Token::Ident(field) = self.bump() else {
                    return None;
                };
                if optional {
                    let name = self.node(Expr::Literal(LiteralValue::String(
                        field.to_string().into(),
                    )))?;
                    lhs = self.call(operators::OPT_SELECT, vec![lhs, name])?;
                } else if self.at("(") {
                    if is_macro(field) {
                        return None;
                    }
                    self.bump();
                    let args = self.arguments()?;
                    lhs = self.node(Expr::Call(CallExpr {
                        func_name: field.to_string(),
                        target: Some(Box::new(lhs)),
                        args,
                    }))?;
                } else {
                    lhs = self.node(Expr::Select(SelectExpr {
                        operand: Box::new(lhs),
                        field: field.to_string(),
                        test: false,
                    }))?;
                }
            } else if self.at("[") {
                self.bump();
                let optional = self.at("?");
                if optional {
                    self.bump();
                }
                let index = self.expr()?;
                self.expect("]")?;
                let function = if optional {
                    operators::OPT_INDEX
                } else {
                    operators::INDEX
                };
                lhs = self.call(function, vec![lhs, index])?;
            } else if self.at("{") {
                let name = struct_name(&lhs)?;
                lhs = self.struct_literal(name)?;
            } else {
                return Some(lhs);
            }
        }
    }

    fn struct_literal(&mut self, type_name: String) -> Option<IdedExpr> {
        self.expect("{")?;
        let entries = self.braced_entries(|parser, optional| {
            let Token::Ident(field) = parser.bump() else {
                return None;
            };
            parser.expect(":")?;
            Some(EntryExpr::StructField(StructFieldExpr {
                field: field.to_string(),
                value: parser.expr()?,
                optional,
            }))
        })?;
        self.node(Expr::Struct(StructExpr { type_name, entries }))
    }

    /// The entries of a map or struct literal, after `{` through `}`: `read`
    /// reads one, after its `?` if it has one.
    fn braced_entries(
        &mut self,
        read: fn(&mut Self, bool) -> Option<EntryExpr>,
    ) -> Option<Vec<IdedEntryExpr>> {
        let mut entries = Vec::new();
        while !self.at("}") {
            let optional = self.at("?");
            if optional {
                self.bump();
            }
            let entry = read(self, optional)?;
            entries.push(self.entry(entry)?);
            if !self.at(",") {
                break;
            }
            self.bump();
        }
        self.expect("}")?;
        Some(entries)
    }

    fn entry(&mut self, expr: EntryExpr) -> Option<IdedEntryExpr> {
        self.next_id += 1;
        Some(IdedEntryExpr {
            id: self.next_id,
            expr,
        })
    }

    fn primary(&mut self) -> Option<IdedExpr> {
        let literal = match self.bump() {
            Token::Sym("(") => {
                let inner = self.expr()?;
                self.expect(")")?;
                return Some(inner);
            }
            Token::Sym("[") => return self.list(),
            Token::Sym("{") => return self.map(),
            Token::Ident(name) => return self.ident_or_call(name),
            Token::Null => LiteralValue::Null,
            Token::True => LiteralValue::Boolean(true.into()),
            Token::False => LiteralValue::Boolean(false.into()),
            Token::Int(i) => LiteralValue::Int(i.into()),
            Token::Str(s) => LiteralValue::String(s.to_string().into()),
            Token::Sym(_) | Token::End | Token::Other => return None,
        };
        self.node(Expr::Literal(literal))
    }

    fn ident_or_call(&mut self, name: &str) -> Option<IdedExpr> {
        if !self.at("(") {
            return self.node(Expr::Ident(name.to_string()));
        }
        if is_macro(name) {
            return None;
        }
        self.bump();
        let mut args = self.arguments()?;
        if name == operators::HAS {
            // The one macro read here: `has(a.b)` is a presence test.
            return match (args.pop(), args.is_empty()) {
                (
                    Some(IdedExpr {
                        expr: Expr::Select(select),
                        ..
                    }),
                    true,
                ) if !select.test => self.node(Expr::Select(SelectExpr {
                    test: true,
                    ..select
                })),
                _ => None,
            };
        }
        self.node(Expr::Call(CallExpr {
            func_name: name.to_string(),
            target: None,
            args,
        }))
    }

    /// Call arguments after `(`, through `)`.
    fn arguments(&mut self) -> Option<Vec<IdedExpr>> {
        let mut args = Vec::new();
        if !self.at(")") {
            loop {
                args.push(self.expr()?);
                if !self.at(",") {
                    break;
                }
                self.bump();
                // `f(a,)` is an error in the crate.
                if self.at(")") {
                    return None;
                }
            }
        }
        self.expect(")")?;
        Some(args)
    }

    /// A list literal after `[`.
    fn list(&mut self) -> Option<IdedExpr> {
        let mut elements = Vec::new();
        let mut optional_indices = Vec::new();
        while !self.at("]") {
            if self.at("?") {
                self.bump();
                optional_indices.push(elements.len());
            }
            elements.push(self.expr()?);
            if !self.at(",") {
                break;
            }
            self.bump();
        }
        self.expect("]")?;
        self.node(Expr::List(ListExpr {
            elements,
            optional_indices,
        }))
    }

    /// A map literal after `{`.
    fn map(&mut self) -> Option<IdedExpr> {
        let entries = self.braced_entries(|parser, optional| {
            let key = parser.expr()?;
            parser.expect(":")?;
            Some(EntryExpr::MapEntry(MapEntryExpr {
                key,
                value: parser.expr()?,
                optional,
            }))
        })?;
        self.node(Expr::Map(MapExpr { entries }))
    }
}

/// `Object.spec` before `{`: the struct type's name, dotted.
fn struct_name(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => {
            let mut name = struct_name(&select.operand)?;
            name.push('.');
            name.push_str(&select.field);
            Some(name)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::cel::parser::PrattParser;

    use crate::cel::program::MAX_NESTING;

    /// The crate's tree, parsed as `program::compile` parses.
    fn by_crate(source: &str) -> Option<IdedExpr> {
        PrattParser::new()
            .enable_optional_syntax(true)
            .max_recursion_depth(MAX_NESTING as u16 * 2)
            .max_expression_node_count(MAX_NODES)
            .parse(source)
            .ok()
    }

    /// Ids number nodes in parse order; nothing reads them but messages.
    fn without_ids(mut expr: IdedExpr) -> IdedExpr {
        fn clear(expr: &mut IdedExpr) {
            expr.id = 0;
            if let Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) =
                &mut expr.expr
            {
                entries.iter_mut().for_each(|entry| entry.id = 0);
            }
            crate::cel::syntax::ast::children_mut(expr, &mut clear);
        }
        clear(&mut expr);
        expr
    }

    /// Whether the subset parser read `source`; panics where it differs
    /// from the crate.
    fn agrees(source: &str) -> bool {
        let Some(ours) = parse(source) else {
            return false;
        };
        let theirs = by_crate(source)
            .unwrap_or_else(|| panic!("{source:?}: read here, refused by the crate"));
        assert_eq!(
            without_ids(ours),
            without_ids(theirs),
            "{source:?}: trees differ"
        );
        true
    }

    #[test]
    fn reads_the_common_subset_as_the_crate_does() {
        for source in [
            r#"resource.Get("v1", "nodes", "", object.target.name).metadata.?labels[?"topology.kubernetes.io/zone"].orValue("empty")"#,
            r#"Object{metadata: Object.metadata{annotations: {"topology.kubernetes.io/zone": variables.zone}}}"#,
            "has(object.metadata.labels) && object.metadata.labels.app == 'web'",
            "a || b || c || d || e",
            "a && b || c && d && e || f",
            "a ? b : c ? d : e",
            "a || b ? c + 1 : d * 2 % 3 - 4 / 5",
            "x == 1 != y < 2 <= z > 3 >= w",
            "!has(object.spec.nodeName)",
            "!a.b.c(d)[e]",
            "[1, 2, ?x, ]",
            "{'a': 1, ?'b': y,}",
            "Object.spec{?nodeName: x, containers: [Object.spec.containers{name: 'c'}],}",
            "JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey(k), value: v}",
            "f()",
            "a.f()",
            "(a + b) * c",
            "((a))",
            "''",
            "\"\"",
            "'it is' + \"x\"",
            "\"ünïcödé ✓\"",
            "null == x && true != false",
            "object.metadata.?labels.orValue({})",
            "x[0][1]",
            "_a1.b_2",
            "  a\n.\tb ",
            "cel.bind(x, 1, x + 1)",
        ] {
            assert!(agrees(source), "{source:?}: not read by the subset parser");
        }
    }

    #[test]
    fn leaves_the_rest_to_the_crate() {
        for source in [
            "a.all(x, x > 0)",
            "a.exists_one(x, x)",
            "a.map(x, y, x)",
            "has(a)",
            "has(a.?b)",
            "-1",
            "a - -1",
            "!!a",
            "!-a",
            "1.5",
            ".5",
            "1e3",
            "1u",
            "0x1F",
            "012",
            "9223372036854775808",
            "'a\\nb'",
            "'''triple'''",
            "r'raw'",
            "b'bytes'",
            "x in [1]",
            "a.b // comment",
            "`quoted`",
            ".leading",
            "a.package",
            "let",
            "a = b",
            "a & b",
            "f(a,)",
            "a.?b(c)",
            "a b",
            "(a",
            "a[?]",
            "f(x){a: 1}",
            "'unterminated",
            "",
            "   ",
        ] {
            assert!(parse(source).is_none(), "{source:?}: should be the crate's");
        }
    }

    /// Random sentences over the subset's grammar and a few tokens outside
    /// it: wherever the subset parser reads one, the crate must read the same
    /// tree.
    #[test]
    fn random_expressions_agree_with_the_crate() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        fn sentence(next: &mut dyn FnMut(usize) -> usize, depth: usize, out: &mut String) {
            const ATOMS: &[&str] = &[
                "a", "b", "object", "1", "0", "'s'", "\"t\"", "true", "null", "x.y", "-1",
            ];
            const BINARY: &[&str] = &[
                " || ", " && ", "==", " != ", "<", "<=", ">", ">=", "+", " - ", "*", "/", "%",
            ];
            let choice = if depth > 3 { 0 } else { next(12) };
            match choice {
                0 | 1 => out.push_str(ATOMS.get(next(ATOMS.len())).copied().unwrap_or("a")),
                2 | 3 => {
                    sentence(next, depth + 1, out);
                    out.push_str(BINARY.get(next(BINARY.len())).copied().unwrap_or("+"));
                    sentence(next, depth + 1, out);
                }
                4 => {
                    sentence(next, depth + 1, out);
                    out.push_str(" ? ");
                    sentence(next, depth + 1, out);
                    out.push_str(" : ");
                    sentence(next, depth + 1, out);
                }
                5 => {
                    out.push('(');
                    sentence(next, depth + 1, out);
                    out.push(')');
                }
                6 => {
                    out.push('!');
                    sentence(next, depth + 1, out);
                }
                7 => {
                    sentence(next, depth + 1, out);
                    out.push_str([".f", ".?g", "[0]", "[?'k']", ".h(1, a)", "{}"][next(6) % 6]);
                }
                8 => {
                    out.push('[');
                    sentence(next, depth + 1, out);
                    out.push_str(", ?");
                    sentence(next, depth + 1, out);
                    out.push(']');
                }
                9 => {
                    out.push_str("{'k': ");
                    sentence(next, depth + 1, out);
                    out.push('}');
                }
                10 => {
                    out.push_str("Object.spec{f: ");
                    sentence(next, depth + 1, out);
                    out.push_str(", ?g: a}");
                }
                _ => {
                    out.push_str("has(");
                    sentence(next, depth + 1, out);
                    out.push(')');
                }
            }
        }
        let mut read = 0;
        for _ in 0..20_000 {
            let mut source = String::new();
            sentence(&mut next, 0, &mut source);
            if agrees(&source) {
                read += 1;
            }
        }
        // Most of them are in the subset: the comparison is not vacuous.
        assert!(read > 5_000, "only {read} of 20,000 read");
    }

    /// Every expression of a corpus (`CEL_PARSE_CORPUS`: one JSON string per
    /// line, e.g. every `expression:` of Kyverno's samples and cel-spec's
    /// tests), compared with the crate:
    /// `CEL_PARSE_CORPUS=exprs.jsonl cargo test --lib subset_parser -- --ignored --nocapture`
    #[test]
    #[ignore = "needs a corpus of expressions (CEL_PARSE_CORPUS)"]
    fn a_corpus_agrees_with_the_crate() {
        let Ok(path) = std::env::var("CEL_PARSE_CORPUS") else {
            return;
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let (mut total, mut read) = (0, 0);
        for line in text.lines() {
            let Ok(source) = serde_json::from_str::<String>(line) else {
                continue;
            };
            total += 1;
            if agrees(&source) {
                read += 1;
            }
        }
        println!(
            "{read} of {total} expressions read by the subset parser, all as the crate reads them"
        );
    }
}
