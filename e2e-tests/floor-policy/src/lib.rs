//! The load test's floor for this job: what any policy that puts Node
//! metadata on a Binding must do at least. It reads the Binding's target
//! Node through the host with the field masks node-metadata-policy sends by
//! default (`metadata.labels`), and returns the Binding with two fixed
//! annotations. It checks nothing and chooses nothing: every row of the load
//! test is reported against it. With the setting `delayMillis` it computes
//! (spins) that long before it answers: a policy-server that is busy, not
//! frozen, as `make cluster-test`'s slow-answer fault needs.

use std::collections::BTreeSet;

use kubewarden_policy_sdk::host_capabilities::kubernetes::GetResourceRequest;
use kubewarden_policy_sdk::response::ValidationResponse;
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use serde_json::{Value, json};
use wapc_guest::prelude::*;

#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("validate_settings", validate_settings);
    register_function(
        "protocol_version",
        kubewarden_policy_sdk::protocol_version_guest,
    );
}

fn validate(payload: &[u8]) -> CallResult {
    let payload: Value = serde_json::from_slice(payload)?;
    if let Some(millis) = payload["settings"]["delayMillis"].as_u64() {
        let started = std::time::Instant::now();
        let delay = std::time::Duration::from_millis(millis);
        while started.elapsed() < delay {
            std::hint::spin_loop();
        }
    }
    let mut object = payload["request"]["object"].clone();
    let node = object["target"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let request = GetResourceRequest {
        api_version: "v1".to_string(),
        kind: "Node".to_string(),
        name: node,
        namespace: None,
        disable_cache: false,
        field_masks: Some(BTreeSet::from(["metadata.labels".to_string()])),
    };
    let answer = host_call(
        "kubewarden",
        "kubernetes",
        "get_resource",
        &serde_json::to_vec(&request)?,
    );
    let accepted = ValidationResponse {
        accepted: true,
        message: None,
        code: None,
        mutated_object: None,
        audit_annotations: None,
        warnings: None,
    };
    let Ok(answer) = answer else {
        return Ok(serde_json::to_vec(&accepted)?);
    };
    let _node: Value = serde_json::from_slice(&answer)?;
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert(
            "annotations".to_string(),
            json!({"topology.kubernetes.io/zone": "zone", "topology.kubernetes.io/region": "region"}),
        );
    }
    Ok(serde_json::to_vec(&ValidationResponse {
        mutated_object: Some(object),
        ..accepted
    })?)
}

fn validate_settings(_payload: &[u8]) -> CallResult {
    Ok(serde_json::to_vec(&SettingsValidationResponse {
        valid: true,
        message: None,
    })?)
}
