//! The host boundary: the one place that talks to Kubewarden's host
//! capabilities. Everything else takes a `&dyn NodeLookup`, so it runs natively
//! in tests with a fake.

use std::borrow::{Borrow, Cow};
use std::collections::{BTreeMap, BTreeSet};

use kubewarden_policy_sdk::host_capabilities::kubernetes::GetResourceRequest;
use serde::Deserialize;

/// The part of a Node this policy reads, borrowed from the host's answer
/// where it can be: a Node may carry thousands of labels, and copying each
/// one is most of the cost of reading it.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
pub struct NodeMetadata<'a> {
    #[serde(default, borrow)]
    pub labels: BTreeMap<Text<'a>, Text<'a>>,
    #[serde(default, borrow)]
    pub annotations: BTreeMap<Text<'a>, Text<'a>>,
}

/// A string from the host's answer: borrowed unless it had JSON escapes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(transparent)]
pub struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Text<'static> {
    fn from(value: &str) -> Self {
        Text(Cow::Owned(value.to_string()))
    }
}

/// Which parts of the Node's metadata an evaluation needs: the field masks
/// sent to the host, so it returns (and we parse) only those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeFields {
    pub labels: bool,
    pub annotations: bool,
}

pub trait NodeLookup {
    /// Fetches a Node as JSON (parse it with [`parse_node`]). The error is the
    /// cause, in words for a user.
    fn fetch_node(&self, name: &str, fields: NodeFields) -> Result<Vec<u8>, String>;
}

/// Reads Nodes through policy-server's `kubernetes/get_resource` capability.
pub struct HostNodeLookup;

#[derive(Deserialize)]
struct NodeDocument<'a> {
    #[serde(default, borrow)]
    metadata: NodeMetadata<'a>,
}

impl NodeLookup for HostNodeLookup {
    fn fetch_node(&self, name: &str, fields: NodeFields) -> Result<Vec<u8>, String> {
        let mut masks = BTreeSet::new();
        if fields.labels {
            masks.insert("metadata.labels".to_string());
        }
        if fields.annotations {
            masks.insert("metadata.annotations".to_string());
        }
        let request = GetResourceRequest {
            api_version: "v1".to_string(),
            kind: "Node".to_string(),
            name: name.to_string(),
            namespace: None,
            disable_cache: false,
            field_masks: Some(masks),
        };
        let payload = serde_json::to_vec(&request)
            .map_err(|e| format!("cannot encode the host request: {e}"))?;
        wapc_guest::host_call("kubewarden", "kubernetes", "get_resource", &payload)
            .map_err(|e| host_error_cause(&e.to_string()))
    }
}

/// The host's words without the transport's wrapping ("Host error:
/// Callback evaluation failure: ..."), which tells a user nothing.
pub fn host_error_cause(error: &str) -> String {
    let mut cause = error.trim();
    for wrapper in ["Host error:", "Callback evaluation failure:"] {
        cause = cause.strip_prefix(wrapper).map_or(cause, str::trim_start);
    }
    if cause.is_empty() {
        "the host returned an empty error".to_string()
    } else {
        cause.to_string()
    }
}

/// Parses the host's answer. Only `metadata.labels` and `.annotations` are read;
/// anything else the host sends is skipped without being materialised.
pub fn parse_node(answer: &[u8]) -> Result<NodeMetadata<'_>, String> {
    serde_json::from_slice::<NodeDocument>(answer)
        .map(|doc| doc.metadata)
        .map_err(|e| {
            format!("the host's answer is not a Node with string labels and annotations: {e}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_metadata() {
        let node = parse_node(
            br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"a":"1"}},"status":{"x":[1,2]}}"#,
        )
        .unwrap();
        assert_eq!(node.labels.get("a").map(Text::as_str), Some("1"));
        assert!(matches!(node.labels.get("a"), Some(Text(Cow::Borrowed(_)))));
        assert!(node.annotations.is_empty());
    }

    #[test]
    fn host_errors_lose_their_wrapping() {
        assert_eq!(
            host_error_cause(
                "Host error: Callback evaluation failure: Cannot find v1/Node named 'x' inside of namespace 'None'"
            ),
            "Cannot find v1/Node named 'x' inside of namespace 'None'"
        );
        assert_eq!(host_error_cause("Host error: boom"), "boom");
        assert_eq!(host_error_cause(""), "the host returned an empty error");
    }

    #[test]
    fn refuses_non_string_values_with_a_reason() {
        let err = parse_node(br#"{"metadata":{"labels":{"a":1}}}"#).unwrap_err();
        assert!(err.contains("not a Node"), "{err}");
        assert!(parse_node(b"not json").is_err());
    }
}
