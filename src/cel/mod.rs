//! The CEL policy language: Kyverno's `MutatingPolicy` and
//! `NamespacedMutatingPolicy`, and Kubernetes' `MutatingAdmissionPolicy`.
//! [`compile`] checks a document at load (every expression parsed, every
//! unsupported feature named) and gives a [`CelPolicy`] with one patcher per
//! mutation; [`engine`] runs it over a request as one step of the pipeline.
//!
//! The layers run one way, each using only those before it: the document
//! (`spec`), the trees (`ast`, `program`, `names`, the macro rewrites), the
//! load-time checks (`declarations`, `type_check`, ...), the compiler and the
//! compiled policy, the environment and host reads, one evaluation, the
//! dispatcher and patchers, and the engine (docs/development.md, "The flow of
//! a request"; `src/layering_tests.rs` fails on a cycle).

pub mod apply;
mod apply_schema;
pub mod ast;
mod autogen;
mod bound_pod;
mod compiler;
mod comprehensions;
#[cfg(test)]
mod conformance;
#[cfg(test)]
mod conformance_authorizer;
mod declarations;
#[cfg(test)]
mod differential;
mod direct;
mod dispatcher;
pub mod engine;
pub mod environment;
pub(crate) mod evaluation;
pub mod exception;
mod extension_macros;
pub mod host_reads;
mod json_patch_mutation;
pub mod libraries;
pub mod library_use;
mod macro_builder;
pub mod matching;
mod metadata_literals;
pub mod names;
#[cfg(test)]
mod patch_conformance;
pub mod patchers;
mod policy;
pub mod program;
pub mod request;
mod request_types;
mod result_types;
mod signatures;
mod source_text;
pub mod spec;
#[cfg(test)]
mod spec_conformance;
mod subset_parser;
mod tables;
pub mod targets;
pub(crate) mod type_check;
mod types;
pub mod values;

pub use compiler::{autogen_warning, check_api_version, compile};
pub use policy::CelPolicy;
pub use spec::{CelKind, Place};
