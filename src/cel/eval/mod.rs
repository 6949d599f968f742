//! One policy's evaluation over one request: the `cel` crate's environment
//! with only the libraries the expressions name (`environment`), what the
//! request shares (`request`), the evaluation with its lazy variables and
//! host reads (`evaluation`), and the direct evaluator over JSON (`direct`).

pub(crate) mod direct;
pub mod environment;
pub(crate) mod evaluation;
pub mod request;
