//! The settings schema: what users write (serde, unknown fields refused), its
//! defaults, and parsing with the field's path in every message.

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::documents::{DocumentHeads, PolicyDocument, PolicyMetadata, without_position};
use crate::kyverno::spec::RuleSpec;
use crate::shared::policy_options::FailurePolicy;
use crate::shared::resources::ResourceKind;
use crate::short_form::entry::{CopyEntry, PresetKeys};

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
