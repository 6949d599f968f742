//! Compiling one CEL expression: bounded before the parser sees it, parsed
//! by the `cel` crate's Pratt parser, and read for what it needs at run time
//! (the struct types it constructs, the variables and context it reads).
//!
//! The Pratt parser, not the crate's default (ANTLR) one: it bounds its own
//! recursion and node count, and with only it referenced the module is
//! about 1.4 MB smaller (docs/performance.md).

pub(crate) mod comprehensions;
pub mod library_use;
pub mod metering;
pub mod names;
pub mod optimizer;

use std::collections::{BTreeMap, BTreeSet};

use ::cel::IdedExpr;
use ::cel::common::ast::Expr;
use ::cel::parser::PrattParser;

use crate::cel::program::names::Names;
use crate::cel::syntax::ast::{MAX_DEPTH, MAX_NODES, children, selection};
use crate::cel::syntax::source_text::Quoted;

/// Longest expression accepted, in bytes. Kubernetes bounds expressions by
/// an estimated cost instead; a length bound keeps parsing (repeated in every
/// evaluation, as policy-server starts each one afresh) bounded too.
pub const MAX_EXPRESSION_BYTES: usize = 10_000;

/// Deepest nesting of brackets accepted. The parser descends recursively;
/// this keeps its stack use far below what the module has (measured: see
/// `deep_nesting_is_refused_before_parsing`).
pub const MAX_NESTING: usize = 32;

/// The depth of an expression tree, counted up to just past [`MAX_DEPTH`].
fn depth(expr: &IdedExpr, at: usize) -> usize {
    if at > MAX_DEPTH {
        return at;
    }
    let mut deepest = at;
    children(expr, &mut |child| {
        deepest = deepest.max(depth(child, at + 1))
    });
    deepest
}

/// Most loop iterations an expression's comprehensions (`map`, `filter`,
/// `all`, `exists`...) may be estimated to make, nested ones multiplied:
/// policy-server gives an evaluation 2 s, and a runaway comprehension is
/// refused at load rather than cut off then.
pub const MAX_ITERATIONS: u64 = 10_000_000;

/// What a comprehension over a list that is not a literal (a field of the
/// object, a read) is assumed to iterate: Kubernetes' own estimates assume
/// lists bounded by their schema; a Pod's lists are far shorter. With this
/// and [`MAX_ITERATIONS`], three loops nested over such lists pass (Kyverno's
/// samples nest containers, volumes and mounts so) and four are refused.
const ASSUMED_LIST_SIZE: u64 = 100;

/// A parsed expression and what it reads.
#[derive(Debug)]
pub struct Compiled {
    pub expression: IdedExpr,
    /// `variables.NAME` it reads.
    pub variables: BTreeSet<String>,
    /// Top-level identifiers it reads (`object`, `namespaceObject`, ...).
    pub identifiers: BTreeSet<String>,
    /// How it uses what `resource.Get` reads, for the host's field masks.
    pub uses: ReadUses,
    /// What it names as written, before macros are expanded.
    pub names: Names,
    /// Most it can cost in cel-go's runtime cost model, when it cannot come
    /// near the limit and its cost is not counted as it runs
    /// ([`metering`]); set when it is readied to run.
    pub cost_bound: Option<u64>,
    /// The calls (by node id) whose overload cel-go's check leaves open, its
    /// operands being `dyn`: cel-go charges them 1, whatever their values
    /// ([`metering`]); set by the load-time check's layer.
    pub open_overloads: BTreeSet<u64>,
}

/// How an expression uses the objects `resource.Get` reads: through which
/// field paths, directly or through variables.
#[derive(Debug, Default)]
pub struct ReadUses {
    /// Paths read from `resource.Get(...)` results directly.
    pub get_paths: Vec<Vec<String>>,
    /// Paths read from each `variables.NAME`; an empty path is the value
    /// used whole.
    pub variable_paths: BTreeMap<String, Vec<Vec<String>>>,
    /// The expression is one `resource.Get(...)` call (a variable so defined
    /// is read through `variable_paths`).
    pub is_get: bool,
    /// A `resource.Get` result, or `variables` itself, used otherwise than
    /// through field paths: only whole objects are safe.
    pub whole: bool,
}

thread_local! {
    /// One parser for every expression of an evaluation: making one is a
    /// sixth of what parsing a short expression costs.
    static PARSER: PrattParser = PrattParser::new()
        .enable_optional_syntax(true)
        // Backquoted field names (`` m.`content-type` ``, cel-go 0.22+).
        .enable_ident_escape_syntax(true)
        .max_recursion_depth(MAX_NESTING as u16 * 2)
        .max_expression_node_count(MAX_NODES);
}

/// Where the nodes of an expression's tree stand in its text, by node id, as
/// the crate's parser records them while it builds the tree. For messages at
/// load, never per request.
pub struct Positions<'s> {
    source: &'s str,
    /// The crate parser's tree of the expression, rewritten as [`compile`]
    /// rewrites it (the subset parser numbers its nodes otherwise): look the
    /// node up here, then its position by its id.
    pub tree: IdedExpr,
    /// The same tree before the macros are rewritten.
    pub parsed: IdedExpr,
    info: std::sync::Arc<::cel::common::ast::SourceInfo>,
}

/// The positions of `source`'s nodes, for a `source` that compiles. The
/// crate hands its record of offsets out only with a parse error, so the text
/// is parsed twice: once as it is, for the tree, and once with one token past
/// its end, which builds the same tree node for node and id for id up to that
/// token, and then fails with the record.
pub fn positions(source: &str) -> Option<Positions<'_>> {
    let parsed = PARSER.with(|parser| parser.clone().parse(source)).ok()?;
    let mut tree = parsed.clone();
    crate::cel::program::comprehensions::expand(&mut tree).ok()?;
    let extended = format!("{source}\n)");
    let errors = PARSER
        .with(|parser| parser.clone().parse(&extended))
        .err()?;
    let info = errors.errors.into_iter().find_map(|e| e.source_info)?;
    Some(Positions {
        source,
        tree,
        parsed,
        info,
    })
}

impl Positions<'_> {
    /// `line L, column C: {message}` where the node `id` starts (line and
    /// column from 1, in characters), when the parser recorded it and the
    /// text there is as `expected` says (a check that the record and the
    /// tree agree); else the message alone.
    pub fn locate(&self, id: u64, expected: &dyn Fn(&str) -> bool, message: &str) -> String {
        let start = self
            .info
            .offset_for(id)
            .and_then(|(start, _)| usize::try_from(start).ok());
        let before = start.and_then(|start| {
            let before = self.source.get(..start)?;
            expected(self.source.get(start..)?).then_some(before)
        });
        let Some(before) = before else {
            return message.to_string();
        };
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |nl| nl + 1);
        let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        format!("line {line}, column {column}: {message}")
    }
}

/// Which of the two parsers and the two evaluators run an expression. The
/// shipped module uses [`Evaluators::SHIPPED`]; tests compare it with the
/// `cel` crate's own parser and interpreter, which give the same answers
/// where the faster paths answer at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evaluators {
    /// The subset parser first (`false`: the crate's parser only).
    pub subset_parser: bool,
    /// The direct evaluator over JSON first (`false`: the crate's
    /// interpreter only).
    pub direct: bool,
    /// Every expression counts its cost in cel-go's runtime cost model
    /// (`false`: those that can come near the limit).
    pub count_every_cost: bool,
}

impl Evaluators {
    pub const SHIPPED: Evaluators = Evaluators {
        subset_parser: true,
        direct: true,
        count_every_cost: false,
    };
}

/// Why an expression was refused; `at` is its path in the settings.
///
/// At load, also what CEL's grammar refuses and the parsers here read (a
/// prefix chain mixing `!` and `-`): the request-time path, [`compile_at`],
/// sees only expressions that passed this.
pub fn compile(source: &str, at: &str) -> Result<Compiled, String> {
    let compiled = compile_at(source, &at, Evaluators::SHIPPED)?;
    if let Some((line, column)) = uppercase_hex_prefix(source) {
        return Err(format!(
            "{at}: line {line}, column {column}: Syntax error: `0X` is no number prefix in CEL's grammar; write `0x`"
        ));
    }
    if let Some((line, column)) = mixed_unary_chain(source) {
        return Err(format!(
            "{at}: line {line}, column {column}: Syntax error: `!` and `-` in one chain of prefix operators, which CEL's grammar does not allow; write `!(-x)`"
        ));
    }
    Ok(compiled)
}

/// [`compile`], with the expression's path made only for a message (at
/// request time the path is never needed: the settings were checked at load).
pub fn compile_at(
    source: &str,
    at: &dyn std::fmt::Display,
    evaluators: Evaluators,
) -> Result<Compiled, String> {
    if source.trim().is_empty() {
        return Err(format!("{at}: empty expression"));
    }
    if source.len() > MAX_EXPRESSION_BYTES {
        return Err(format!(
            "{at}: {} bytes; an expression may have at most {MAX_EXPRESSION_BYTES}",
            source.len()
        ));
    }
    if let Some((line, column)) = too_deep(source) {
        return Err(format!(
            "{at}: line {line}, column {column}: brackets nested more than {MAX_NESTING} deep"
        ));
    }
    // Most expressions are in the subset read without the crate's parser
    // (the same tree, a sixth of the cost): the crate parses the rest.
    let parsed = match evaluators
        .subset_parser
        .then(|| crate::cel::syntax::subset_parser::parse(source))
        .flatten()
    {
        Some(expression) => Ok(expression),
        None => PARSER.with(|parser| parser.clone().parse(source)),
    };
    let mut expression = parsed.map_err(|errors| {
        let first = errors.errors.first();
        match first {
            Some(error) => format!(
                "{at}: line {}, column {}: {}",
                error.pos.0, error.pos.1, error.msg
            ),
            None => format!("{at}: does not parse"),
        }
    })?;
    if depth(&expression, 0) > MAX_DEPTH {
        return Err(format!(
            "{at}: operations nested more than {MAX_DEPTH} deep; the evaluator recurses once per level"
        ));
    }
    let names = Names::of(&expression);
    // Two-variable comprehensions and extension macros, found in the tree
    // (a name in a string or a comment is not a call): the rewrite walks
    // only expressions that hold one.
    if names.macros {
        crate::cel::program::comprehensions::expand(&mut expression)
            .map_err(|e| format!("{at}: {e}"))?;
    }
    let iterations = iterations(&expression, 0);
    if iterations > MAX_ITERATIONS {
        return Err(format!(
            "{at}: its comprehensions may loop {iterations} times (a list that is not a literal counts as {ASSUMED_LIST_SIZE} items); at most {MAX_ITERATIONS} are allowed"
        ));
    }
    let mut compiled = Compiled {
        expression,
        variables: BTreeSet::new(),
        identifiers: BTreeSet::new(),
        uses: ReadUses::default(),
        names,
        cost_bound: None,
        open_overloads: BTreeSet::new(),
    };
    let mut reads = Reads {
        variables: &mut compiled.variables,
        identifiers: &mut compiled.identifiers,
        uses: &mut compiled.uses,
    };
    reads.walk(&compiled.expression, 0);
    Ok(compiled)
}

/// Where brackets first nest deeper than [`MAX_NESTING`], outside string
/// literals (line and column from 1).
fn too_deep(source: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut quoted = Quoted::default();
    let (mut line, mut column) = (1, 0);
    for c in source.chars() {
        column += 1;
        if c == '\n' {
            line += 1;
            column = 0;
        }
        if quoted.next(c) {
            continue;
        }
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some((line, column));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The characters outside comments and, outside quotes, not spaces, each
/// with whether it is quoted, its line and its column.
fn significant_chars(source: &str) -> Vec<(char, bool, usize, usize)> {
    let mut quoted = Quoted::default();
    let mut significant: Vec<(char, bool, usize, usize)> = Vec::new();
    let (mut line, mut column) = (1, 0);
    let mut in_comment = false;
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        column += 1;
        if c == '\n' {
            line += 1;
            column = 0;
            in_comment = false;
        }
        if in_comment {
            continue;
        }
        let is_quoted = quoted.next(c);
        if !is_quoted && c == '/' && chars.peek() == Some(&'/') {
            in_comment = true;
            continue;
        }
        if is_quoted || !c.is_whitespace() {
            significant.push((c, is_quoted, line, column));
        }
    }
    significant
}

/// Where a number is written with `0X`, which CEL's grammar does not take
/// (its hexadecimal prefix is `0x`; cel-go refuses `0X10`, the `cel`
/// crate's parser reads it).
fn uppercase_hex_prefix(source: &str) -> Option<(usize, usize)> {
    let significant = significant_chars(source);
    let adjacent = |a: &(char, bool, usize, usize), b: &(char, bool, usize, usize)| {
        a.2 == b.2 && a.3 + 1 == b.3
    };
    significant.windows(2).enumerate().find_map(|(i, pair)| {
        let [zero, x] = pair else { return None };
        let in_word = i
            .checked_sub(1)
            .and_then(|p| significant.get(p))
            .is_some_and(|before| {
                adjacent(before, zero)
                    && !before.1
                    && (before.0.is_alphanumeric() || matches!(before.0, '_' | '.'))
            });
        (zero.0 == '0' && x.0 == 'X' && !zero.1 && !x.1 && adjacent(zero, x) && !in_word)
            .then_some((zero.2, zero.3))
    })
}

/// Where a chain of prefix operators mixes `!` and `-` (`!-x`, `- !x`): CEL's
/// grammar has `'!'+ member` and `'-'+ member`, not both in one chain, so
/// cel-go refuses it as a syntax error, where the parsers here read
/// `!(-x)`. A `-` right before a number is the number's sign (`!-1` parses).
/// Read from the text, since the tree of `!-x` is that of the valid
/// `!(-x)`. Line and column (from 1) of the chain's first operator.
fn mixed_unary_chain(source: &str) -> Option<(usize, usize)> {
    let significant = significant_chars(source);
    let mut i = 0;
    while let Some(&(_, quoted_char, at_line, at_column)) = significant.get(i) {
        let previous = i.checked_sub(1).and_then(|p| significant.get(p));
        // An operand ends in a letter, digit, `_`, `.`, a quote or a
        // closing bracket; after one, `-` is subtraction.
        let after_operand = previous.is_some_and(|&(p, quoted_p, ..)| {
            quoted_p || p.is_alphanumeric() || matches!(p, '_' | '.' | ')' | ']' | '}')
        });
        let is_prefix = |at: usize| {
            significant.get(at).is_some_and(|&(c, q, ..)| {
                !q && (c == '-'
                    || (c == '!' && significant.get(at + 1).is_none_or(|&(n, ..)| n != '=')))
            })
        };
        if quoted_char || after_operand || !is_prefix(i) {
            i += 1;
            continue;
        }
        let mut end = i;
        while is_prefix(end) {
            end += 1;
        }
        // The chain is [i, end); a last `-` before a number is its sign.
        // A signed literal is an int or a double (`-1`, `-.5`, `-0x1F`);
        // a uint (`1u`) has no sign.
        let number: String = significant
            .get(end..)
            .unwrap_or_default()
            .iter()
            .take_while(|&&(n, q, ..)| !q && (n.is_ascii_alphanumeric() || n == '.'))
            .map(|&(n, ..)| n)
            .collect();
        let before_number = (number.starts_with(|d: char| d.is_ascii_digit())
            || (number.starts_with('.')
                && number.chars().nth(1).is_some_and(|d| d.is_ascii_digit())))
            && !number.ends_with(['u', 'U']);
        let operators_end =
            if before_number && significant.get(end - 1).is_some_and(|&(c, ..)| c == '-') {
                end - 1
            } else {
                end
            };
        let operators = significant.get(i..operators_end).unwrap_or_default();
        if operators.iter().any(|&(c, ..)| c == '!') && operators.iter().any(|&(c, ..)| c == '-') {
            return Some((at_line, at_column));
        }
        i = end;
    }
    None
}

/// An estimate of how many times the expression's comprehensions loop.
fn iterations(expr: &IdedExpr, depth: usize) -> u64 {
    if depth > 4 * MAX_NESTING + 64 {
        return u64::MAX;
    }
    let depth = depth + 1;
    let sum = |exprs: &mut dyn Iterator<Item = &IdedExpr>| {
        exprs.fold(0u64, |total, e| total.saturating_add(iterations(e, depth)))
    };
    match &expr.expr {
        Expr::Comprehension(c) => {
            let size = match &c.iter_range.expr {
                Expr::List(list) => list.elements.len() as u64,
                Expr::Map(map) => map.entries.len() as u64,
                _ => ASSUMED_LIST_SIZE,
            };
            let body = sum(&mut [&c.loop_cond, &c.loop_step].into_iter());
            size.saturating_mul(body.saturating_add(1))
                .saturating_add(sum(
                    &mut [&c.iter_range, &c.accu_init, &c.result].into_iter()
                ))
        }
        _ => {
            let mut total = 0u64;
            children(expr, &mut |child| {
                total = total.saturating_add(iterations(child, depth));
            });
            total
        }
    }
}

struct Reads<'r> {
    variables: &'r mut BTreeSet<String>,
    identifiers: &'r mut BTreeSet<String>,
    uses: &'r mut ReadUses,
}

/// `resource.Get(...)` (or `get`).
fn is_get_call(expr: &IdedExpr) -> bool {
    match &expr.expr {
        Expr::Call(call) => {
            (call.func_name == "Get" || call.func_name == "get")
                && call
                    .target
                    .as_ref()
                    .is_some_and(|t| matches!(&t.expr, Expr::Ident(name) if name == "resource"))
        }
        _ => false,
    }
}

impl Reads<'_> {
    fn walk(&mut self, expr: &IdedExpr, depth: usize) {
        // The parser already bounds nesting; this guards the walk itself.
        if depth > 4 * MAX_NESTING + 64 {
            self.uses.whole = true;
            return;
        }
        let top = depth == 0;
        let depth = depth + 1;
        if selection(expr).is_some() {
            // The whole chain of selections, down to what it starts from.
            let mut path = Vec::new();
            let mut root = expr;
            while let Some((operand, field)) = selection(root) {
                path.push(field.to_string());
                root = operand;
            }
            path.reverse();
            if let Expr::Ident(name) = &root.expr
                && name == "variables"
                && let Some((variable, rest)) = path.split_first()
            {
                self.variables.insert(variable.clone());
                self.uses
                    .variable_paths
                    .entry(variable.clone())
                    .or_default()
                    .push(rest.to_vec());
                return;
            }
            if is_get_call(root) {
                self.uses.get_paths.push(path);
                if let Expr::Call(call) = &root.expr {
                    for arg in &call.args {
                        self.walk(arg, depth);
                    }
                }
                return;
            }
        }
        if is_get_call(expr) {
            if top {
                self.uses.is_get = true;
            } else {
                self.uses.whole = true;
            }
        }
        if let Expr::Ident(name) = &expr.expr {
            if name == "variables" {
                self.uses.whole = true;
            }
            self.identifiers.insert(name.clone());
        }
        children(expr, &mut |child| self.walk(child, depth));
    }
}

#[cfg(test)]
mod tests {
    /// cel-go's grammar: `!!x` and `--x` parse, `!-x` and `-!x` do not, and a
    /// bracket starts a new chain.
    /// kube-apiserver v0.37.2: `0X10` is a syntax error; `0x10`, a name
    /// holding `0X` and a string are not.
    #[test]
    fn an_uppercase_hex_prefix_is_a_syntax_error() {
        for source in ["0X10", "1 + 0X1F", "[\n 0X1]"] {
            assert!(uppercase_hex_prefix(source).is_some(), "{source}");
        }
        assert_eq!(uppercase_hex_prefix("x +\n 0X1"), Some((2, 2)));
        for source in ["0x10", "a0X1 + 1", "'0X1'", "1 // 0X1", "1.0 == 1.0"] {
            assert_eq!(uppercase_hex_prefix(source), None, "{source}");
        }
    }

    #[test]
    fn a_prefix_chain_mixing_not_and_minus_is_a_syntax_error() {
        for source in [
            "!-(lists.range(3).sum()) in [1]",
            "- !true",
            "a && !-x == 2",
            "[1, -!x]",
            "!--1",
            "!-1u",
            "-!1",
            "!- -1",
        ] {
            assert!(mixed_unary_chain(source).is_some(), "{source}");
            let message = compile(source, "e").err().unwrap_or_default();
            assert!(message.contains("Syntax error"), "{source}: {message}");
        }
        for source in [
            "!!true",
            "--1",
            "!(-1 < 0)",
            "-(!true ? 1 : 2)",
            "1 - -1",
            "a != -1",
            "x-!y",
            "'!-' + \"-!\"",
            "1 // !-\n - 2",
            "!-1",
            "!- 1.5 == x",
            "!-.5",
            "a && !- 1 == 2",
            "- - x",
        ] {
            assert_eq!(mixed_unary_chain(source), None, "{source}");
        }
        assert_eq!(mixed_unary_chain("x &&\n  -!y"), Some((2, 3)));
    }

    use super::*;

    #[test]
    fn parse_errors_name_the_path_and_the_position() {
        let err = compile("object.metadata.(", "settings.spec.mutations[0].x")
            .err()
            .unwrap_or_default();
        assert!(
            err.starts_with("settings.spec.mutations[0].x: line 1, column 17: "),
            "{err}"
        );
    }

    /// cel-spec's `fields` tests: a backquoted name selects or builds a field
    /// whose name is no identifier; anywhere else it is a parse error.
    #[test]
    fn backquoted_field_names() {
        use crate::testing::cel_comprehensions::eval;
        use ::cel::Value;
        let yes = |source: &str| assert_eq!(eval(source), Ok(Value::Bool(true)), "{source}");
        yes("{'content-type': 'json'}.`content-type` == 'json'");
        yes("has({'a.b/c': 1}.`a.b/c`) && !has({'x': 1}.`a-b`)");
        yes("{'a b': {'c': 1}}.?`a b`.c.orValue(0) == 1");
        for (source, message) in [
            ("`object` == 1", "unexpected quoted identifier"),
            ("{'a': 1}.`a", "unterminated quoted identifier"),
            ("{'a': 1}.`a+b`", "unexpected quoted identifier"),
        ] {
            let err = compile(source, "e").err().unwrap_or_default();
            assert!(err.contains(message), "{source}: {err}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
        let err = compile(&deep, "e").err().unwrap_or_default();
        assert!(err.contains("nested more than 32 deep"), "{err}");
        // Brackets in strings do not count.
        let quoted = format!("'{}' == ''", "(".repeat(200));
        assert!(compile(&quoted, "e").is_ok());
        // The deepest accepted nesting parses, in a test thread's 2 MiB of
        // stack (unoptimised); the module's 1 MiB (optimised) is checked by
        // the e2e case `cel_deepest_nesting_loads`.
        let fine = format!("{}1{}", "(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
        assert!(compile(&fine, "e").is_ok());
        let list = format!("{}1{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        assert!(compile(&list, "e").is_ok());
    }

    #[test]
    fn long_operator_chains_are_refused() {
        let chain = |n: usize| vec!["1"; n].join("+");
        let err = compile(&chain(500), "e").err().unwrap_or_default();
        assert!(
            err.contains("operations nested more than 100 deep"),
            "{err}"
        );
        assert!(compile(&chain(MAX_DEPTH), "e").is_ok());
        // A wide list is not deep.
        assert!(compile(&format!("[{}]", vec!["1"; 2000].join(",")), "e").is_ok());
    }

    #[test]
    fn runaway_comprehensions_are_refused() {
        // Three nested loops over object lists: 100 x 100 x 100, allowed.
        assert!(
            compile(
                "object.a.all(x, object.b.all(y, object.c.exists(z, x == y && y == z)))",
                "e"
            )
            .is_ok()
        );
        // Four: refused, with the estimate.
        let err = compile(
            "object.a.all(x, object.b.all(y, object.c.all(z, object.d.exists(w, x == w))))",
            "e",
        )
        .err()
        .unwrap_or_default();
        assert!(
            err.contains("may loop") && err.contains("at most 10000000"),
            "{err}"
        );
        // Literal lists count as what they hold.
        assert!(compile("[1, 2, 3].map(x, [4, 5].map(y, x * y))", "e").is_ok());
    }

    #[test]
    fn reads_are_found() {
        let c = compile(
            "variables.zone + namespaceObject.metadata.name + object.x.map(v, variables.other)",
            "e",
        )
        .ok()
        .unwrap_or_else(|| panic!("compiles"));
        assert_eq!(c.variables.iter().collect::<Vec<_>>(), ["other", "zone"]);
        assert!(c.identifiers.contains("namespaceObject"));
        assert!(c.identifiers.contains("object"));
    }

    #[test]
    fn field_paths_read_from_resource_reads_are_found() {
        let c = compile(
            "variables.node.metadata.?labels[?'a'].orValue('') + resource.Get('v1', 'nodes', '', object.x).metadata.annotations.b",
            "e",
        )
        .unwrap();
        assert_eq!(
            c.uses.variable_paths.get("node"),
            Some(&vec![
                ["metadata", "labels", "a"].map(String::from).to_vec()
            ])
        );
        assert_eq!(
            c.uses.get_paths,
            [["metadata", "annotations", "b"].map(String::from).to_vec()]
        );
        assert!(c.identifiers.contains("object") && !c.uses.whole && !c.uses.is_get);
        let c = compile("resource.Get('v1', 'nodes', '', object.target.name)", "e").unwrap();
        assert!(c.uses.is_get && !c.uses.whole);
        let c = compile("[resource.Get('v1', 'nodes', '', 'n')]", "e").unwrap();
        assert!(c.uses.whole);
        let c = compile("size(variables.node) > 0", "e").unwrap();
        assert_eq!(c.uses.variable_paths.get("node"), Some(&vec![vec![]]));
    }
}
