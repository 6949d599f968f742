//! The CEL policy language: Kyverno's `MutatingPolicy` and
//! `NamespacedMutatingPolicy`, and Kubernetes' `MutatingAdmissionPolicy`.
//! [`compile`] checks a document at load (every expression parsed,
//! every unsupported feature named); [`engine`] runs it over a request as one
//! step of the pipeline.

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

pub use compiler::{check_api_version, compile};
pub use policy::CelPolicy;
pub use spec::{CelKind, Place};
