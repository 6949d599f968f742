//! What users write in the short form: the `copy` entries and
//! `onPresetKeys`, as serde reads them from the settings.

use serde::Deserialize;

/// At most this many `copy` entries: one evaluation's work stays bounded.
pub const MAX_COPY_ENTRIES: usize = 500;

/// One short-form entry: copy a Node label or annotation (an exact key or a
/// glob) onto the Pod.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "camelCase",
    expecting = "a copy entry, a map such as `{label: topology.kubernetes.io/zone}` or `{annotation: example.com/rack}`"
)]
pub struct CopyEntry {
    /// Node label key or glob to read. Exactly one of `label` / `annotation`.
    pub label: Option<String>,
    /// Node annotation key or glob to read.
    pub annotation: Option<String>,
    /// Where the value goes on the Pod.
    #[serde(default)]
    pub to: Destination,
    /// New key for the value (exact `label`/`annotation` only).
    pub rename: Option<String>,
    /// Prefix put in front of every produced key.
    pub add_prefix: Option<String>,
    /// Replace the leading `from` of every produced key by `to`.
    pub replace_prefix: Option<ReplacePrefix>,
    /// Value to write when the Node lacks the key (exact keys only). Without it
    /// the key is skipped.
    pub default: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplacePrefix {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Destination {
    #[default]
    Annotations,
    /// Pod labels. On a Binding they reach the Pod only where the
    /// `PodTopologyLabelsAdmission` feature gate is on (beta and on by default
    /// from Kubernetes 1.35); on older clusters they are silently dropped.
    Labels,
    Both,
}

impl TryFrom<String> for Destination {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "annotations" | "annotation" => Ok(Destination::Annotations),
            "labels" | "label" => Ok(Destination::Labels),
            "both" => Ok(Destination::Both),
            _ => Err(format!(
                "unknown value {value:?}: expected `annotations`, `labels` or `both`"
            )),
        }
    }
}

impl Destination {
    pub fn annotations(self) -> bool {
        matches!(self, Destination::Annotations | Destination::Both)
    }
    pub fn labels(self) -> bool {
        matches!(self, Destination::Labels | Destination::Both)
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum PresetKeys {
    /// Overwrite them with the Node's values (or remove them when the Node has
    /// no value for them).
    #[default]
    Overwrite,
    /// Reject the Pod, naming the keys.
    Reject,
}

impl TryFrom<String> for PresetKeys {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "Overwrite" => Ok(PresetKeys::Overwrite),
            "Reject" => Ok(PresetKeys::Reject),
            _ => Err(format!(
                "unknown value {value:?}: expected `Overwrite` or `Reject`"
            )),
        }
    }
}

/// The Node labels copied when the settings ask for nothing.
pub const DEFAULT_LABELS: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];
