//! Evaluations for the tests of Kyverno's JMESPath functions, with every
//! function.
use std::rc::Rc;

use jmespath::Variable;
use serde_json::Value;

use crate::kyverno::jmes::{Functions, search_var};
use crate::kyverno::jmes_values::{to_value, to_var};

/// `expression` over `data`.
pub fn eval_on(expression: &str, data: Value) -> Value {
    search_var(&Functions::all(), expression, &to_var(&data))
        .map(|v| to_value(&v))
        .unwrap()
}

/// `expression` over null.
pub fn eval(expression: &str) -> Value {
    let rt = Functions::all();
    let var = search_var(&rt, expression, &Rc::new(Variable::Null)).unwrap();
    serde_json::to_value(&*var).unwrap()
}

/// The error of `expression` over null.
pub fn fails(expression: &str) -> String {
    let rt = Functions::all();
    search_var(&rt, expression, &Rc::new(Variable::Null)).unwrap_err()
}
