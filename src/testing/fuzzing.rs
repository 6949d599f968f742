//! The fuzz target's body, shared with the corpus replay in `make test`:
//! arbitrary bytes become a request, settings and a host answer, and go
//! through the same native entry points `validate` and `validate_settings` use.
//! Besides "never panics", it checks what a user relies on: every answer is
//! well formed (the JSON `validate` and `validate_settings` write reads back
//! as the SDK's response types, with the shape policy-server expects), and
//! everything the policy writes is metadata the API server accepts.
//!
//! Input layout: `request \0 settings \0 host answer`, where an answer that
//! starts with `!` is a host error with that text.

// Panicking is how a harness reports a broken property to the fuzzer.
#![allow(clippy::panic)]

use kubewarden_policy_sdk::response::ValidationResponse;
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use serde_json::Value;

use crate::host::node_lookup::{NodeFields, NodeLookup};
use crate::shared::k8s_names::{
    TOTAL_ANNOTATION_SIZE_LIMIT, check_label_value, check_qualified_name,
};

struct ScriptedLookup<'a>(Result<&'a [u8], String>);

impl NodeLookup for ScriptedLookup<'_> {
    fn fetch_node(&self, _name: &str, _fields: NodeFields) -> Result<Vec<u8>, String> {
        self.0.clone().map(<[u8]>::to_vec)
    }
}

impl crate::host::cluster::Cluster for ScriptedLookup<'_> {
    fn read(&self, _read: &crate::host::cluster::Read) -> Result<Vec<u8>, String> {
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

    check_settings_answer(&crate::check_settings(settings));

    // The raw bytes as a whole payload...
    check_answer(&crate::evaluate(request, &lookup, &lookup));
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
    // What policy-server reads: validate's bytes as the SDK's type.
    let read_back = serde_json::from_slice::<ValidationResponse>(&written)
        .unwrap_or_else(|e| panic!("validate's JSON is not a ValidationResponse: {e}"));
    check_answer(&read_back);
    if let Some(mutated) = &response.mutated_object {
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

/// `validate_settings`'s answer: its JSON reads back as the SDK's type, with
/// exactly its two fields; refused settings say why, accepted ones say
/// nothing.
fn check_settings_answer(verdict: &SettingsValidationResponse) {
    let written = serde_json::to_vec(verdict)
        .unwrap_or_else(|e| panic!("settings answer does not serialise: {e}"));
    let fields = serde_json::from_slice::<Value>(&written)
        .ok()
        .and_then(|v| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()))
        .unwrap_or_default();
    assert!(
        fields.iter().all(|f| f == "valid" || f == "message")
            && fields.iter().any(|f| f == "valid"),
        "settings answer has fields {fields:?}"
    );
    let read_back = serde_json::from_slice::<SettingsValidationResponse>(&written)
        .unwrap_or_else(|e| panic!("settings answer is not a SettingsValidationResponse: {e}"));
    if read_back.valid {
        assert!(
            read_back.message.is_none(),
            "accepted settings with a message"
        );
    } else {
        assert!(
            read_back
                .message
                .as_deref()
                .is_some_and(|m| !m.trim().is_empty()),
            "refused settings without a reason"
        );
    }
}

/// A `validate` answer has the shape policy-server and the API server
/// expect: a rejection has a message (with the policy's prefix) and nothing
/// else, a code if any in 400-599; an acceptance has no message; warnings,
/// when there are any, are at most `MAX_WARNINGS` and a count of the rest,
/// each non-empty with the prefix; audit annotations have non-empty keys; a
/// mutated object is a JSON object.
fn check_answer(response: &ValidationResponse) {
    let prefixed = |text: &str| {
        text.strip_prefix(crate::WARNING_PREFIX)
            .is_some_and(|rest| !rest.trim().is_empty())
    };
    if response.accepted {
        assert!(response.message.is_none(), "accepted with a message");
        assert!(response.code.is_none(), "accepted with a code");
    } else {
        let message = response.message.as_deref().unwrap_or_default();
        assert!(prefixed(message), "rejected without a message: {message:?}");
        assert!(
            response.mutated_object.is_none(),
            "mutated a rejected request"
        );
        assert!(
            response.code.is_none_or(|code| (400..600).contains(&code)),
            "rejected with code {:?}",
            response.code
        );
    }
    if let Some(warnings) = &response.warnings {
        assert!(!warnings.is_empty(), "an empty list of warnings");
        assert!(
            warnings.len() <= crate::MAX_WARNINGS + 1,
            "{} warnings",
            warnings.len()
        );
        for warning in warnings {
            assert!(prefixed(warning), "warning without the prefix: {warning:?}");
        }
    }
    if let Some(annotations) = &response.audit_annotations {
        assert!(!annotations.is_empty(), "an empty map of audit annotations");
        assert!(
            annotations.keys().all(|k| !k.is_empty()),
            "an audit annotation without a key"
        );
    }
    if let Some(mutated) = &response.mutated_object {
        assert!(
            mutated.is_object(),
            "the answer is not an object: {mutated}"
        );
    }
}

/// A payload the byte-level shortcut lets through is one the full decode
/// lets through silently too. (The shortcut skips what it does not read
/// without validating it, so only JSON is held to this: UTF-8 text, as
/// policy-server sends, that parses. Parsing alone is not enough: serde_json
/// skips an ignored value without checking its bytes are UTF-8.)
fn check_shortcut(payload: &[u8], lookup: &ScriptedLookup) {
    if crate::admission::pass_through::certain(payload)
        && std::str::from_utf8(payload)
            .is_ok_and(|text| serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok())
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
    /// Bytes that are not UTF-8, in an object key or in a field of the
    /// request, are not JSON: the shortcut lets such a payload through
    /// unread, the full decode refuses it, and the shortcut's property does
    /// not hold them to each other. Found by the fuzzer
    /// (`fuzz/regressions/shortcut-key-not-utf8`).
    #[test]
    fn shortcut_property_is_for_json_only() {
        for payload in [
            &b"{\"request\":{},\"x\xff\":0}"[..],
            b"{\"request\":{\"a\":\"\xff\"}}",
            b"{\"request\":{\"operation\":\"UPDATE\",\"x\":\"\xff\"}}",
        ] {
            assert!(crate::admission::pass_through::certain(payload));
            super::exercise(payload);
        }
    }

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
