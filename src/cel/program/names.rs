//! What an expression names, read from its parsed tree as the user wrote it
//! (before macros are expanded): the libraries it calls into, the context
//! it reads, the struct types it constructs, and whether it holds a macro
//! the crate's parser leaves. A word in a string literal or a comment is
//! not a name. Read per request, so nothing is kept that is not needed:
//! flags, and the few struct type names.

use std::collections::BTreeSet;

use ::cel::IdedExpr;
use ::cel::common::ast::Expr;

use crate::cel::program::library_use::{Libraries, Role};
use crate::cel::syntax::ast::{MAX_DEPTH, children};
use crate::cel::{program::comprehensions, syntax::extension_macros};

/// The context identifiers an evaluation binds only when an expression
/// names them.
pub const CONTEXT: [&str; 5] = [
    "request",
    "oldObject",
    "params",
    "namespaceObject",
    "exceptions",
];

#[derive(Debug, Default, Clone)]
pub struct Names {
    /// The libraries it calls into.
    pub libraries: Libraries,
    /// Which of [`CONTEXT`] it names.
    pub context: [bool; CONTEXT.len()],
    /// The struct types an environment must know to construct them: the
    /// object's (`Object`, `Object.metadata`...) and `JSONPatch`.
    pub structs: BTreeSet<String>,
    /// A call the crate's parser leaves for [`comprehensions::expand`] (a
    /// two-variable comprehension, `cel.bind`, an extension macro).
    pub macros: bool,
    /// The namespaces such a macro is called on (`cel` of `cel.bind`, `math`
    /// of `math.greatest`): the rewrite leaves no trace of them in the tree.
    pub macro_namespaces: BTreeSet<String>,
    /// A call of `isSorted()`, `min()`, `max()` or `sum()`, whose overload
    /// may be decided by the type check, or of `sort()`, `distinct()`,
    /// `sortBy()` or `flatten()`, whose failed arguments cost tracking may
    /// fail the expression on ([`crate::cel::check::typed_calls`]).
    pub typed_list_calls: bool,
}

impl Names {
    /// The names in `expr`.
    pub fn of(expr: &IdedExpr) -> Names {
        let mut names = Names::default();
        names.walk(expr, 0);
        names
    }

    /// Adds `other`'s names.
    pub fn extend(&mut self, other: &Names) {
        self.libraries = self.libraries.union(other.libraries);
        for (mine, theirs) in self.context.iter_mut().zip(other.context) {
            *mine |= theirs;
        }
        self.structs.extend(other.structs.iter().cloned());
        self.macros |= other.macros;
        self.typed_list_calls |= other.typed_list_calls;
        self.macro_namespaces
            .extend(other.macro_namespaces.iter().cloned());
    }

    /// Whether it names the context identifier `name` (one of [`CONTEXT`]).
    pub fn reads(&self, name: &str) -> bool {
        CONTEXT
            .iter()
            .zip(self.context)
            .any(|(context, named)| *context == name && named)
    }

    fn walk(&mut self, expr: &IdedExpr, depth: usize) {
        // The compiler bounds depth before this runs; this guards the walk.
        if depth > MAX_DEPTH + 1 {
            return;
        }
        match &expr.expr {
            Expr::Ident(name) => {
                self.libraries.note(name, Role::Identifier);
                for (context, named) in CONTEXT.iter().zip(self.context.iter_mut()) {
                    *named |= context == name;
                }
            }
            // Operators (`_==_`) and the rewrites' own functions (`@in`)
            // belong to no library.
            Expr::Call(call) if !call.func_name.starts_with(['_', '@']) => {
                let function = call.func_name.as_str();
                let role = if call.target.is_some() {
                    Role::Member
                } else {
                    Role::Global
                };
                self.libraries.note(function, role);
                self.typed_list_calls |= role == Role::Member
                    && match function {
                        "isSorted" | "min" | "max" | "sum" => call.args.is_empty(),
                        // What cost tracking fails on when given a failed value.
                        "sort" | "distinct" | "sortBy" | "flatten" => true,
                        _ => false,
                    };
                let expanded = comprehensions::named(function) || extension_macros::named(function);
                self.macros |= expanded;
                if expanded
                    && let Some(Expr::Ident(namespace)) = call.target.as_deref().map(|t| &t.expr)
                    && !self.macro_namespaces.contains(namespace)
                {
                    self.macro_namespaces.insert(namespace.clone());
                }
            }
            Expr::Struct(construction) => {
                let name = construction.type_name.as_str();
                let object = name == "JSONPatch" || name == "Object" || name.starts_with("Object.");
                if object && !self.structs.contains(name) {
                    self.structs.insert(name.to_string());
                }
            }
            _ => {}
        }
        children(expr, &mut |child| self.walk(child, depth + 1));
    }
}

#[cfg(test)]
mod tests {
    use crate::cel::program::compile;

    #[test]
    fn names_come_from_the_tree() {
        let compiled = compile(
            "Object{metadata: Object.metadata // a comment\n {labels: {'a': ['b'].map(x, x)[0]}}, spec: Object . spec {}} + [JSONPatch{op: 'add'}] + MyObject{} + image('x') + c.image + 'math.abs(1)'.size() + request.name",
            "e",
        )
        .unwrap();
        let names = &compiled.names;
        assert_eq!(
            names.structs.iter().collect::<Vec<_>>(),
            ["JSONPatch", "Object", "Object.metadata", "Object.spec"]
        );
        assert!(names.libraries.image, "a global image() call");
        assert!(!names.libraries.math, "a name in a string is not one");
        assert!(names.reads("request") && !names.reads("oldObject"));
        assert!(!names.macros);
    }
}
