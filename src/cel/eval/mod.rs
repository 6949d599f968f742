//! One policy's evaluation over one request: the `cel` crate's environment
//! with only the libraries the expressions name (`environment`), what the
//! request shares (`request`), the evaluation with its lazy variables
//! (`evaluation`), what it reads of the cluster (`cluster_reads`), and the
//! direct evaluator over JSON (`direct`).

pub(crate) mod cluster_reads;
pub(crate) mod direct;
pub mod environment;
pub(crate) mod evaluation;
pub mod request;
