//! Writing the host calls of one step as a kwctl session file, so that kwctl
//! can replay the step with the same answers.

use serde_json::{Value, json};

use super::cluster::Exchange;

/// A kwctl session file replaying a step's host calls.
pub fn session_yaml(exchanges: &[Exchange]) -> String {
    let mut out = String::new();
    for (operation, payload, answer) in exchanges {
        let tag = match operation.as_str() {
            "get_resource" => "KubernetesGetResource",
            "list_resources_all" => "KubernetesListResourceAll",
            "list_resources_by_namespace" => "KubernetesListResourceNamespace",
            "v1/manifest_digest" => "OciManifestDigest",
            "v1/oci_manifest_config" => "OciManifestAndConfig",
            other => other,
        };
        // kwctl writes an OCI call's bare reference as `image: <reference>`.
        let fields = match payload {
            Value::String(image) => serde_yaml::to_string(&json!({ "image": image })),
            other => serde_yaml::to_string(other),
        }
        .unwrap_or_default();
        let request: String = fields.lines().map(|l| format!("    {l}\n")).collect();
        out.push_str(&format!(
            "- type: Exchange\n  request: |\n    !{tag}\n{request}"
        ));
        match answer {
            Ok(payload) => out.push_str(&format!(
                "  response:\n    type: Success\n    payload: {}\n",
                serde_json::to_string(payload).unwrap_or_default()
            )),
            Err(message) => out.push_str(&format!(
                "  response:\n    type: Error\n    message: {}\n",
                serde_json::to_string(message).unwrap_or_default()
            )),
        }
    }
    if out.is_empty() {
        "[]\n".to_string()
    } else {
        out
    }
}
