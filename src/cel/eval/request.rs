//! What one evaluation of CEL policies shares about the request: its facts,
//! the admission request itself and its `request` and `oldObject` values,
//! made once when an expression first reads them; and what an expression
//! gives.

use std::cell::OnceCell;

use ::cel::Value as CelValue;
use serde_json::Value;

use crate::cel::libraries::values::from_json;
use crate::host::cluster::CachedCluster;
use crate::shared::request_facts::AdmissionRequest;
use crate::shared::request_facts::RequestFacts;
use crate::shared::resources::ResourceKind;

/// An evaluation error in words: a library function's own message, after
/// the function's name.
pub(in crate::cel) fn describe(error: &::cel::ExecutionError) -> String {
    match error {
        ::cel::ExecutionError::FunctionError { function, message } => {
            format!("{function}: {message}")
        }
        other => other.to_string(),
    }
}

/// What an expression gave: JSON from the direct evaluator, or a value of
/// the `cel` crate.
pub(crate) enum Evaluated {
    Json(Value),
    Cel(CelValue),
}

/// What one evaluation of CEL policies shares.
pub struct CelRequest<'a> {
    pub facts: &'a RequestFacts,
    pub admission: &'a AdmissionRequest<'a>,
    /// The admission request without `object` and `oldObject`, made the
    /// first time an expression reads `request`.
    pub request: &'a OnceCell<CelValue>,
    pub old_object: &'a OnceCell<CelValue>,
    /// `oldObject` as JSON, decoded once for both evaluators.
    pub old_object_json: &'a OnceCell<Value>,
    pub kinds: &'a [ResourceKind],
    pub cluster: &'a CachedCluster<'a>,
}

impl CelRequest<'_> {
    /// Kubernetes leaves `object` and `oldObject` out of `request` (they
    /// are variables of their own); Kyverno's CEL policies see them in it.
    pub(in crate::cel) fn request(&self, with_objects: bool) -> CelValue {
        let build = || {
            let mut fields = serde_json::Map::new();
            for (name, value) in &self.admission.fields {
                let name: &str = name;
                if !with_objects && (name == "object" || name == "oldObject") {
                    continue;
                }
                if let Ok(value) = serde_json::from_str::<Value>(value.get()) {
                    fields.insert(name.to_string(), value);
                }
            }
            from_json(&Value::Object(fields))
        };
        if with_objects {
            build()
        } else {
            self.request.get_or_init(build).clone()
        }
    }

    /// `oldObject` as JSON (null when the request has none).
    pub(in crate::cel) fn old_object_json(&self) -> &Value {
        self.old_object_json.get_or_init(|| {
            self.admission
                .raw("oldObject")
                .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                .unwrap_or(Value::Null)
        })
    }

    pub(in crate::cel) fn old_object(&self) -> CelValue {
        self.old_object
            .get_or_init(|| match self.old_object_json() {
                Value::Null => CelValue::Null,
                old => from_json(old),
            })
            .clone()
    }
}
