//! Load-time checks and the compiler: undeclared names (`declarations`),
//! the type check with its types and signatures, what an expression gives
//! (`result_types`), metadata keys written as literals
//! (`metadata_literals`), what Kubernetes works out when it makes a program
//! (`constants`), and `compiler`, which checks a document and gives the
//! compiled policy.

pub(crate) mod compiler;
pub(crate) mod constants;
pub(crate) mod declarations;
pub(crate) mod metadata_literals;
pub(crate) mod request_types;
pub(crate) mod result_types;
pub(crate) mod signatures;
pub(crate) mod type_check;
pub(crate) mod types;
