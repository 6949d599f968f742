//! Whether a function is declared, asked of the `cel` crate's environment
//! with every library (so the load-time check cannot fall behind the
//! libraries).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::cel::{eval::environment::runtime_env, program::library_use::Libraries};

/// Asks an environment with every library whether a function is declared.
pub(crate) struct FunctionNames {
    context: ::cel::Context<'static, 'static>,
}

impl FunctionNames {
    pub(crate) fn new() -> Self {
        let env = runtime_env(&BTreeSet::new(), Libraries::every());
        FunctionNames {
            context: ::cel::Context::with_env(Arc::new(env)),
        }
    }

    /// The crate refuses a context function named as a declared overload,
    /// which is the one public way to ask whether `name` is declared; the
    /// probe it adds on success lives in this context only.
    pub(in crate::cel) fn declared(&mut self, name: &str) -> bool {
        self.context.add_function(name, |x: i64| x).is_err()
    }
}
