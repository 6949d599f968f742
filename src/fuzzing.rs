//! The fuzz target's body, shared with the corpus replay in `make test`:
//! arbitrary bytes become a request, settings and a host answer, and go
//! through the same native entry points `validate` and `validate_settings` use.
//! Besides "never panics", it checks what a user relies on: everything the
//! policy writes is metadata the API server accepts.
//!
//! Input layout: `request \0 settings \0 host answer`, where an answer that
//! starts with `!` is a host error with that text.

// Panicking is how a harness reports a broken property to the fuzzer.
#![allow(clippy::panic)]

use serde_json::Value;

use crate::k8s_names::{TOTAL_ANNOTATION_SIZE_LIMIT, check_label_value, check_qualified_name};
use crate::node_lookup::{NodeFields, NodeLookup};

struct ScriptedLookup<'a>(Result<&'a [u8], String>);

impl NodeLookup for ScriptedLookup<'_> {
    fn fetch_node(&self, _name: &str, _fields: NodeFields) -> Result<Vec<u8>, String> {
        self.0.clone().map(<[u8]>::to_vec)
    }
}

impl crate::cluster::Cluster for ScriptedLookup<'_> {
    fn read(&self, _read: &crate::cluster::Read) -> Result<Vec<u8>, String> {
        self.0.clone().map(<[u8]>::to_vec)
    }
}

pub fn exercise(data: &[u8]) {
    let mut parts = data.splitn(3, |b| *b == 0);
    let request = parts.next().unwrap_or_default();
    let settings = parts.next().unwrap_or_default();
    let answer = parts.next().unwrap_or_default();
    let lookup = ScriptedLookup(match answer.strip_prefix(b"!") {
        Some(error) => Err(String::from_utf8_lossy(error).into_owned()),
        None => Ok(answer),
    });

    let verdict = crate::check_settings(settings);
    assert!(
        verdict.valid || verdict.message.is_some(),
        "refused settings without a reason"
    );

    // The raw bytes as a whole payload...
    let _ = crate::evaluate(request, &lookup, &lookup);
    check_shortcut(request, &lookup);
    // ...and, when the parts are JSON, a well-formed payload around them.
    let (Ok(request), Ok(settings)) = (
        serde_json::from_slice::<Value>(request),
        serde_json::from_slice::<Value>(if settings.is_empty() { b"{}" } else { settings }),
    ) else {
        return;
    };
    let payload = serde_json::json!({ "request": request, "settings": settings });
    let Ok(payload) = serde_json::to_vec(&payload) else {
        return;
    };
    // What `validate` writes (the object as received, metadata rewritten)
    // says the same as the SDK's response built from the decoded object.
    check_shortcut(&payload, &lookup);
    let verdict = crate::decide(&payload, &lookup, &lookup);
    let written =
        serde_json::to_vec(&verdict).unwrap_or_else(|e| panic!("verdict does not serialise: {e}"));
    let response = verdict.into_response();
    let expected = serde_json::to_value(&response)
        .unwrap_or_else(|e| panic!("response does not serialise: {e}"));
    assert_eq!(
        serde_json::from_slice::<Value>(&written).ok(),
        Some(expected),
        "validate's JSON differs from the response"
    );
    if !response.accepted {
        assert!(response.message.is_some(), "rejected without a message");
    }
    if let Some(mutated) = &response.mutated_object {
        assert!(response.accepted, "mutated a rejected request");
        let original = request.get("object").unwrap_or(&Value::Null);
        check_identity(original, mutated);
        check_written(original, mutated, "labels", true);
        check_written(original, mutated, "annotations", false);
        let total = |object: &Value| -> usize {
            object
                .pointer("/metadata/annotations")
                .and_then(Value::as_object)
                .map_or(0, |a| {
                    a.iter()
                        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                        .sum()
                })
        };
        assert!(
            total(mutated) <= total(original).max(TOTAL_ANNOTATION_SIZE_LIMIT),
            "annotations pushed over the size limit"
        );
    }
}

/// A payload the byte-level shortcut lets through is one the full decode
/// lets through silently too. (The shortcut skips what it does not read
/// without validating it, so only JSON is held to this.)
fn check_shortcut(payload: &[u8], lookup: &ScriptedLookup) {
    if crate::pass_through::certain(payload)
        && serde_json::from_slice::<serde::de::IgnoredAny>(payload).is_ok()
    {
        let response = crate::decide_decoded(payload, lookup, lookup).into_response();
        assert!(
            response.accepted && response.mutated_object.is_none() && response.warnings.is_none(),
            "the shortcut let through a request the full decode answers otherwise"
        );
    }
}

/// The answer is still the object received: never the root replaced or
/// removed, never another kind, apiVersion, name or namespace, never a
/// Binding sent to another target. (Checked here on its own terms, not
/// through the policy's guard.)
fn check_identity(original: &Value, mutated: &Value) {
    assert!(
        mutated.is_object(),
        "the answer replaces the object with {mutated}"
    );
    let mut fields = vec![
        "/apiVersion",
        "/kind",
        "/metadata/name",
        "/metadata/namespace",
    ];
    if original.get("kind").and_then(Value::as_str) == Some("Binding") {
        fields.push("/target");
    }
    for field in fields {
        assert_eq!(
            original.pointer(field),
            mutated.pointer(field),
            "the answer changes {field}"
        );
    }
}

/// Every key the policy added or changed is a valid key, and every label
/// value it wrote a valid label value.
fn check_written(original: &Value, mutated: &Value, section: &str, labels: bool) {
    let path = format!("/metadata/{section}");
    let Some(after) = mutated.pointer(&path).and_then(Value::as_object) else {
        return;
    };
    let before = original.pointer(&path).and_then(Value::as_object);
    for (key, value) in after {
        if before.and_then(|b| b.get(key)) == Some(value) {
            continue;
        }
        assert!(
            check_qualified_name(key).is_ok(),
            "wrote invalid key {key:?}"
        );
        let Some(text) = value.as_str() else {
            panic!("wrote a non-string value under {key:?}");
        };
        if labels {
            assert!(
                check_label_value(text).is_ok(),
                "wrote invalid label value {text:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    /// `make test` replays the checked-in corpus: every input the fuzzer
    /// kept, and every crash it ever found, runs on every build.
    #[test]
    fn corpus_replays_cleanly() {
        let mut replayed = 0;
        for dir in ["fuzz/corpus/evaluate", "fuzz/regressions"] {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                // A running fuzzer may be rewriting the corpus meanwhile.
                let Ok(data) = std::fs::read(&path) else {
                    continue;
                };
                super::exercise(&data);
                replayed += 1;
            }
        }
        assert!(
            replayed >= 20,
            "expected the checked-in corpus, replayed only {replayed} inputs"
        );
    }
}
