//! Test code, in a room of its own: nothing here is in the shipped module.
//! The fake cluster every native test runs over, the conformance tables of
//! each language, the catalogue of bad inputs, the heap probe, the probe
//! `make differential` runs, the layering check, and the fuzz target's body
//! (built for `cargo fuzz` through the `fuzzing` feature).

#[cfg(test)]
mod bad_inputs;
#[cfg(test)]
mod cel_authorizer;
#[cfg(test)]
pub(crate) mod cel_comprehensions;
#[cfg(test)]
mod cel_conformance;
#[cfg(test)]
mod cel_differential;
#[cfg(test)]
pub(crate) mod cel_libraries;
#[cfg(test)]
mod cel_patch_conformance;
#[cfg(test)]
pub(crate) mod cel_spec_conformance;
#[cfg(test)]
mod evaluate;
#[cfg(test)]
pub(crate) mod fake_cluster;
pub mod fuzzing;
// A counting global allocator for one measurement (test builds only).
#[cfg(test)]
#[allow(unsafe_code)]
mod heap_peak;
#[cfg(test)]
pub(crate) mod jmes_functions;
#[cfg(test)]
mod kyverno_conformance;
#[cfg(test)]
mod layering;
#[cfg(test)]
mod yaml_conformance;
