//! What every language's documents share: what a policy does with a request
//! it cannot handle (`failurePolicy`, the short form's `onError`), and how
//! thoroughly a load checks the documents.

use serde::Deserialize;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum FailurePolicy {
    /// Accept the request unchanged, with a warning naming the Node and cause.
    #[default]
    Ignore,
    /// Reject the request with that message.
    Fail,
}

impl TryFrom<String> for FailurePolicy {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "Ignore" => Ok(FailurePolicy::Ignore),
            "Fail" => Ok(FailurePolicy::Fail),
            _ => Err(format!(
                "unknown value {value:?}: expected `Ignore` or `Fail`"
            )),
        }
    }
}

/// How much checking a load does (`settings::Settings::compile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checks {
    /// Everything: what `validate_settings` runs when policy-server loads the
    /// policy.
    Full,
    /// The structure only, for `validate` on every request. policy-server
    /// refuses to run a policy whose settings failed `validate_settings`, so
    /// the character-level key checks and conflict search would only repeat
    /// themselves on every scheduled Pod; every key and value produced is
    /// still checked before it is written.
    Structural,
}
