//! What an expression names, read from its parsed tree as the user wrote it
//! (before macros are expanded): the identifiers, the functions it calls,
//! the functions it calls globally, and the struct types it constructs. The
//! environment is chosen from these ([`super::environment::Libraries`]); a
//! word in a string literal or a comment is not a name.

use std::collections::BTreeSet;

use ::cel::IdedExpr;
use ::cel::common::ast::Expr;

use super::ast::{MAX_DEPTH, children};

#[derive(Debug, Default, Clone)]
pub struct Names {
    /// Identifiers (`object`, `math`, `namespaceObject`).
    pub identifiers: BTreeSet<String>,
    /// Every function called, global or member (`lowerAscii`, `image`).
    pub functions: BTreeSet<String>,
    /// Functions called without a receiver (`image(...)`, not `c.image`).
    pub global_calls: BTreeSet<String>,
    /// Struct types constructed (`Object`, `Object.metadata`, `JSONPatch`).
    pub structs: BTreeSet<String>,
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
        self.identifiers.extend(other.identifiers.iter().cloned());
        self.functions.extend(other.functions.iter().cloned());
        self.global_calls.extend(other.global_calls.iter().cloned());
        self.structs.extend(other.structs.iter().cloned());
    }

    /// The struct types an environment must know: the object's
    /// (`Object...`) and `JSONPatch`, the only ones a mutation constructs.
    pub fn object_types(&self) -> impl Iterator<Item = &String> {
        self.structs
            .iter()
            .filter(|name| *name == "JSONPatch" || *name == "Object" || name.starts_with("Object."))
    }

    fn walk(&mut self, expr: &IdedExpr, depth: usize) {
        // The compiler bounds depth before this runs; this guards the walk.
        if depth > MAX_DEPTH + 1 {
            return;
        }
        match &expr.expr {
            Expr::Ident(name) => {
                self.identifiers.insert(name.clone());
            }
            Expr::Call(call) => {
                self.functions.insert(call.func_name.clone());
                if call.target.is_none() {
                    self.global_calls.insert(call.func_name.clone());
                }
            }
            Expr::Struct(construction) => {
                self.structs.insert(construction.type_name.clone());
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
            "Object{metadata: Object.metadata // a comment\n {labels: {'a': ['b'].map(x, x)[0]}}, spec: Object . spec {}} + [JSONPatch{op: 'add'}] + MyObject{} + image('x') + c.image + 'math.abs(1)'.size()",
            "e",
        )
        .unwrap();
        let names = &compiled.names;
        assert_eq!(
            names.object_types().collect::<Vec<_>>(),
            ["JSONPatch", "Object", "Object.metadata", "Object.spec"]
        );
        assert!(names.global_calls.contains("image"));
        assert!(names.functions.contains("size") && !names.global_calls.contains("size"));
        assert!(
            !names.identifiers.contains("math"),
            "a name in a string is not one"
        );
    }
}
