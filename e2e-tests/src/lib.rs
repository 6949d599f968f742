//! A small stand-in for policy-server and kwctl: loads a policy's wasm with
//! wasmtime through waPC, validates its settings first, evaluates each request
//! in a fresh instance from the pre-compiled module, answers host capability
//! calls (from kwctl session files or from memory), and turns
//! `mutated_object` into a JSON Patch with a `json-patch` diff.

pub mod capabilities;
pub mod chainsaw;
pub mod conformance;
pub mod policy;
pub mod session;

pub use capabilities::{Capabilities, Granted, HostCall, InMemoryCluster};
pub use policy::{Evaluation, PolicyModule, SettingsVerdict, validate_payload};
pub use session::SessionReplay;
