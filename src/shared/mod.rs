//! What more than one language (the short form, [`crate::kyverno`],
//! [`crate::cel`]) uses; nothing here depends on any of them.

/// Kyverno's autogen: which controllers, and the Pod template's view.
pub mod autogen;
/// Key patterns (`rack.example.com/*`) and Kyverno's wildcards.
pub mod glob;
/// Floats as Go's `strconv` writes them.
pub mod go_float;
/// JSON text as Go's `encoding/json` writes it.
pub mod go_json;
/// A JSON object read field by field, each field kept as received: how the
/// request and its object are read.
pub mod json_fields;
/// The API server's rules for keys, names and values.
pub mod k8s_names;
/// Labels and annotations the API server would refuse.
pub mod metadata;
/// `failurePolicy` and how thoroughly a load checks.
pub mod policy_options;
/// The facts of a request every language matches on, decoded once.
pub mod request_facts;
/// JSON Patch as the two Go libraries apply it.
pub mod rfc6902;
/// YAML as `sigs.k8s.io/yaml` reads it (YAML 1.1, keys as text).
pub mod yaml;

/// Image references: split, and parsed as go-containerregistry parses them.
pub mod images;
/// Kubernetes label selectors and their matching.
pub mod label_selector;
/// The parts of a document an expression reaches, and decoding only those.
pub mod reach;
/// Resource names (plural) to kinds.
pub mod resources;
/// Points in time: RFC 3339, Go layouts, civil dates.
pub mod time;
/// Kubernetes quantities and Go durations, exact.
pub mod units;
