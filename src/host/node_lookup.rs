//! The host boundary: the one place that talks to Kubewarden's host
//! capabilities. Everything else takes a `&dyn NodeLookup`, so it runs natively
//! in tests with a fake.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// The part of a Node this policy reads, borrowed from the host's answer
/// where it can be: a Node may carry thousands of labels, and copying each
/// one is most of the cost of reading it.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
pub struct NodeMetadata<'a> {
    #[serde(default, borrow)]
    pub labels: KeyValues<'a>,
    #[serde(default, borrow)]
    pub annotations: KeyValues<'a>,
}

/// A string map kept as a sorted list of pairs: decoding a Node's labels
/// into a tree costs far more than the lookups it would speed up.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KeyValues<'a>(Vec<(Text<'a>, Text<'a>)>);

impl<'a> KeyValues<'a> {
    pub fn get(&self, key: &str) -> Option<&Text<'a>> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .and_then(|at| self.0.get(at))
            .map(|(_, v)| v)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Text<'a>, &Text<'a>)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<'a> FromIterator<(Text<'a>, Text<'a>)> for KeyValues<'a> {
    fn from_iter<I: IntoIterator<Item = (Text<'a>, Text<'a>)>>(iter: I) -> Self {
        let mut pairs: Vec<_> = iter.into_iter().collect();
        sort_and_dedup(&mut pairs);
        KeyValues(pairs)
    }
}

/// Sorted by key for binary search; a key given twice keeps its last value,
/// as a JSON decoder into a map would.
fn sort_and_dedup(pairs: &mut Vec<(Text<'_>, Text<'_>)>) {
    // The API server sends map keys sorted already: check before sorting.
    if !pairs.is_sorted_by(|a, b| a.0 < b.0) {
        pairs.reverse();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|later, earlier| later.0 == earlier.0);
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for KeyValues<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for PairsVisitor<'a> {
            type Value = KeyValues<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of strings to strings")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(KeyValues::default())
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
                while let Some(pair) = map.next_entry::<Text<'a>, Text<'a>>()? {
                    pairs.push(pair);
                }
                sort_and_dedup(&mut pairs);
                Ok(KeyValues(pairs))
            }
        }
        deserializer.deserialize_any(PairsVisitor(std::marker::PhantomData))
    }
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

/// The SDK's `GetResourceRequest`, field for field, borrowing instead of
/// owning: every Binding pays for this request, and building the SDK's
/// owned strings and mask set cost more than writing it.
#[derive(Serialize)]
struct NodeRequest<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    namespace: Option<&'a str>,
    disable_cache: bool,
    field_masks: Option<&'a [&'a str]>,
}

impl NodeFields {
    /// The field masks, sorted as the SDK's set would send them.
    fn masks(self) -> &'static [&'static str] {
        match (self.labels, self.annotations) {
            (true, true) => &["metadata.annotations", "metadata.labels"],
            (true, false) => &["metadata.labels"],
            (false, true) => &["metadata.annotations"],
            (false, false) => &[],
        }
    }
}

fn node_request(name: &str, fields: NodeFields) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&NodeRequest {
        api_version: "v1",
        kind: "Node",
        name,
        namespace: None,
        disable_cache: false,
        field_masks: Some(fields.masks()),
    })
}

impl NodeLookup for HostNodeLookup {
    fn fetch_node(&self, name: &str, fields: NodeFields) -> Result<Vec<u8>, String> {
        let payload = node_request(name, fields)
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
    fn the_node_request_is_the_sdks() {
        use kubewarden_policy_sdk::host_capabilities::kubernetes::GetResourceRequest;
        for (labels, annotations) in [(true, true), (true, false), (false, true), (false, false)] {
            let fields = NodeFields {
                labels,
                annotations,
            };
            let mut masks = std::collections::BTreeSet::new();
            if labels {
                masks.insert("metadata.labels".to_string());
            }
            if annotations {
                masks.insert("metadata.annotations".to_string());
            }
            let sdk = GetResourceRequest {
                api_version: "v1".to_string(),
                kind: "Node".to_string(),
                name: "node \"1\"".to_string(),
                namespace: None,
                disable_cache: false,
                field_masks: Some(masks),
            };
            assert_eq!(
                node_request("node \"1\"", fields).unwrap(),
                serde_json::to_vec(&sdk).unwrap()
            );
        }
    }

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
    fn unsorted_and_repeated_keys_behave_like_a_map() {
        let node =
            parse_node(br#"{"metadata":{"labels":{"b":"1","a":"2","b":"3"},"annotations":null}}"#)
                .unwrap();
        assert_eq!(node.labels.get("a").map(Text::as_str), Some("2"));
        assert_eq!(node.labels.get("b").map(Text::as_str), Some("3"));
        assert_eq!(node.labels.get("c"), None);
        assert_eq!(node.labels.iter().count(), 2);
        assert_eq!(node.annotations.iter().count(), 0);
    }

    #[test]
    fn refuses_non_string_values_with_a_reason() {
        let err = parse_node(br#"{"metadata":{"labels":{"a":1}}}"#).unwrap_err();
        assert!(err.contains("not a Node"), "{err}");
        assert!(parse_node(b"not json").is_err());
    }
}
