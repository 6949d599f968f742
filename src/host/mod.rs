//! The host boundary: what the policy reads through Kubewarden's host
//! capabilities. Everything else reaches the cluster through these traits,
//! so that it runs natively in tests with the host faked.

/// Any object or list, each read once per evaluation ([`cluster::Cluster`]).
pub mod cluster;
/// What a container registry says of an image.
pub mod image_registry;
/// The Node of a Binding or a placed Pod, for the short form
/// ([`node_lookup::NodeLookup`]).
pub mod node_lookup;
