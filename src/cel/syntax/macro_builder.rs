//! Building expression nodes with fresh ids, for the macros the crate's
//! parser leaves unexpanded ([`crate::cel::program::comprehensions`],
//! [`crate::cel::syntax::extension_macros`]): both rewrite calls into comprehensions.

use ::cel::common::ast::operators;
use ::cel::common::ast::{CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};

/// The accumulator of the rewritten comprehensions (cel-go's name for it).
pub(in crate::cel) const ACCU: &str = "@result";
/// The `[key, value]` pair a two-variable comprehension's loop is over.
pub(in crate::cel) const ENTRY: &str = "@entry";

/// Makes nodes with fresh ids.
pub(in crate::cel) struct Builder<'n> {
    pub(in crate::cel) next_id: &'n mut u64,
}

impl Builder<'_> {
    pub(in crate::cel) fn node(&mut self, expr: Expr) -> IdedExpr {
        let id = *self.next_id;
        *self.next_id += 1;
        IdedExpr { id, expr }
    }
    pub(in crate::cel) fn ident(&mut self, name: &str) -> IdedExpr {
        self.node(Expr::Ident(name.to_string()))
    }
    pub(in crate::cel) fn call(&mut self, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
        self.node(Expr::Call(CallExpr {
            func_name: function.to_string(),
            target: None,
            args,
        }))
    }
    pub(in crate::cel) fn bool(&mut self, value: bool) -> IdedExpr {
        self.node(Expr::Literal(LiteralValue::Boolean(value.into())))
    }
    pub(in crate::cel) fn int(&mut self, value: i64) -> IdedExpr {
        self.node(Expr::Literal(LiteralValue::Int(value.into())))
    }
    pub(in crate::cel) fn list(&mut self, elements: Vec<IdedExpr>) -> IdedExpr {
        self.node(Expr::List(ListExpr::new(elements)))
    }
    pub(in crate::cel) fn accu(&mut self) -> IdedExpr {
        self.ident(ACCU)
    }
    pub(in crate::cel) fn member(
        &mut self,
        target: IdedExpr,
        function: &str,
        args: Vec<IdedExpr>,
    ) -> IdedExpr {
        self.node(Expr::Call(CallExpr {
            func_name: function.to_string(),
            target: Some(Box::new(target)),
            args,
        }))
    }

    /// A loop over `range` with `variable` bound to each item and `@result`
    /// to the accumulator: `[init, condition, step, result]`.
    pub(in crate::cel) fn fold(
        &mut self,
        range: IdedExpr,
        variable: &str,
        parts: [IdedExpr; 4],
    ) -> Expr {
        let [accu_init, loop_cond, loop_step, result] = parts;
        Expr::Comprehension(Box::new(ComprehensionExpr {
            iter_range: range,
            iter_var: variable.to_string(),
            iter_var2: None,
            accu_var: ACCU.to_string(),
            accu_init,
            loop_cond,
            loop_step,
            result,
        }))
    }

    /// `cel.bind(name, value, body)` as the crate expands it.
    pub(in crate::cel) fn bind(&mut self, name: &str, value: IdedExpr, body: IdedExpr) -> IdedExpr {
        let range = self.list(Vec::new());
        let cond = self.bool(false);
        let step = self.ident(name);
        self.node(Expr::Comprehension(Box::new(ComprehensionExpr {
            iter_range: range,
            iter_var: "#unused".to_string(),
            iter_var2: None,
            accu_var: name.to_string(),
            accu_init: value,
            loop_cond: cond,
            loop_step: step,
            result: body,
        })))
    }

    /// `body` with the two names bound to the current entry's parts.
    pub(in crate::cel) fn bind_both(
        &mut self,
        names: &(String, String),
        body: IdedExpr,
    ) -> IdedExpr {
        let part = |b: &mut Self, index| {
            let entry = b.ident(ENTRY);
            let index = b.int(index);
            b.call(operators::INDEX, vec![entry, index])
        };
        let second = part(self, 1);
        let inner = self.bind(&names.1, second, body);
        let first = part(self, 0);
        self.bind(&names.0, first, inner)
    }
}
