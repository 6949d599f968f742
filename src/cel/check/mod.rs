//! Load-time checks and the compiler: undeclared names (`declarations`),
//! the type check with its types, signatures and type parameters, what an expression gives
//! (`result_types`), metadata keys written as literals
//! (`metadata_literals`), what Kubernetes works out when it makes a program
//! (`constants`), the calls whose meaning the types decide (`typed_calls`),
//! and `compiler`, which checks a document and gives the compiled policy.

pub(crate) mod compiler;
pub(crate) mod constants;
pub(crate) mod declarations;
pub(crate) mod function_names;
pub(crate) mod homogeneous_literals;
pub(crate) mod library_signatures;
pub(crate) mod metadata_literals;
pub(crate) mod planner;
pub(crate) mod request_types;
pub(crate) mod result_types;
pub(crate) mod signatures;
pub(crate) mod type_check;
pub(crate) mod type_parameters;
pub(crate) mod typed_calls;
pub(crate) mod types;
