//! The CEL policy language: Kyverno's `MutatingPolicy` and
//! `NamespacedMutatingPolicy`, and Kubernetes' `MutatingAdmissionPolicy`.
//! [`compile`] checks a document at load (every expression parsed, every
//! unsupported feature named) and gives a [`CelPolicy`] with one patcher per
//! mutation; [`engine`] runs it over a request as one step of the pipeline.
//!
//! The layers, each using only those listed before it (the layering test,
//! `src/testing/layering.rs`, fails otherwise): the document (`spec`) and
//! the generated tables (`tables`); the trees (`syntax`); each library's
//! functions and CEL values (`libraries`); one expression compiled
//! (`program`); what a mutation does to the object (`patch`); the compiled
//! policy and its matching (`policy`); one evaluation (`eval`); the load-time
//! checks and the compiler (`check`); then the dispatcher, the bound Pod and
//! the engine.

mod bound_pod;
pub mod check;
mod dispatcher;
pub mod engine;
pub mod eval;
pub mod libraries;
pub mod patch;
pub mod policy;
pub mod program;
pub mod spec;
pub mod syntax;
mod tables;

pub use check::compiler::{autogen_warning, check_api_version, compile};
pub use policy::CelPolicy;
pub use spec::{CelKind, Place};
