//! The settings schema: what users write (serde, unknown fields refused), its
//! defaults, and parsing with the field's path in every message.

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::documents::{DocumentHeads, PolicyDocument, PolicyMetadata, without_position};
use crate::kyverno::spec::RuleSpec;
use crate::shared::policy_options::FailurePolicy;
use crate::shared::resources::ResourceKind;

/// The settings document (`ClusterAdmissionPolicy.spec.settings`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Settings {
    /// What to copy. Absent: the Node's zone and region labels become Pod
    /// annotations. An empty list copies nothing.
    #[serde(default)]
    pub copy: Option<Vec<CopyEntry>>,
    /// What to do when the Node (or anything a rule reads) cannot be read.
    /// Absent: `spec.failurePolicy` of a pasted policy document, else `Ignore`.
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    /// What to do when a Pod created with `spec.nodeName` already carries a key
    /// this policy manages, with a value the Node does not back.
    #[serde(default)]
    pub on_preset_keys: PresetKeys,
    /// Kyverno's `spec.rules`, pasted as they are.
    #[serde(default)]
    pub rules: Option<Vec<RuleSpec>>,
    /// Resources outside the core and common groups that rules read with
    /// `apiCall` or match as `Kind/subresource`.
    #[serde(default)]
    pub resource_kinds: Vec<ResourceKind>,
    // A whole Kyverno ClusterPolicy/Policy document may be pasted as the
    // settings instead of bare `rules`: these are its top-level fields.
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub metadata: Option<PolicyMetadata>,
    #[serde(default)]
    pub spec: Option<Box<serde_json::value::RawValue>>,
    /// A pasted MutatingAdmissionPolicy's parameters.
    #[serde(default)]
    pub params: Option<serde_json::Value>,
    /// Several whole policy documents, applied in order: each sees the
    /// object as the ones before it left it.
    #[serde(default)]
    pub policies: Option<Vec<PolicyDocument>>,
    // kubectl output carries it; nothing to honour.
    #[serde(default)]
    pub status: Option<IgnoredAny>,
}

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

/// Parses settings JSON, naming the path of any field that does not fit the
/// schema (`copy[1].lable: unknown field ...`).
pub fn parse(raw: &[u8]) -> Result<Settings, String> {
    if raw.iter().all(|b| b.is_ascii_whitespace()) || raw == b"null" {
        return Ok(Settings::default());
    }
    // serde would read a JSON array as a struct's fields in order; settings
    // are only ever a map.
    if raw.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err("settings: must be a JSON object of setting names and values".to_string());
    }
    // Hot path (every evaluation re-reads the settings): plain serde. Only a
    // failure pays for a second, path-tracking pass to name the field.
    if let Ok(settings) = serde_json::from_slice::<Settings>(raw) {
        return Ok(settings);
    }
    // A document of another kind fails on its first field this schema lacks;
    // name the kind instead, which is what is wrong.
    if let Ok(heads) = serde_json::from_slice::<DocumentHeads>(raw) {
        heads.check()?;
    }
    let mut de = serde_json::Deserializer::from_slice(raw);
    let settings: Settings = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = without_position(&err.into_inner());
        if path == "." {
            format!("settings: {inner}")
        } else {
            format!("settings.{path}: {inner}")
        }
    })?;
    de.end()
        .map_err(|err| format!("settings: {}", without_position(&err)))?;
    Ok(settings)
}
