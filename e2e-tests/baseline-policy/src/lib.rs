//! The benchmark's floor: a waPC policy built with the same SDK that accepts
//! every request without reading it. Any policy pays at least this much.

use kubewarden_policy_sdk::settings::SettingsValidationResponse;
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

fn validate(_payload: &[u8]) -> CallResult {
    kubewarden_policy_sdk::accept_request()
}

fn validate_settings(_payload: &[u8]) -> CallResult {
    Ok(serde_json::to_vec(&SettingsValidationResponse {
        valid: true,
        message: None,
    })?)
}
