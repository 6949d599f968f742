//! What Kyverno's rules ([`crate::kyverno`]) and CEL policies
//! ([`crate::cel`]) both use; nothing here depends on either language.

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
