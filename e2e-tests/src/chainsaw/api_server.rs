//! What the API server and its built-in controllers do around admission that
//! chainsaw tests see: the built-in admission plugins that run before the
//! webhooks, and the objects a controller creates when a Namespace appears.

use serde_json::{Value, json};

use crate::conformance::{kind_of, name_of};

/// What a new object goes through before the webhooks: defaulting, and the
/// built-in mutating admission `DefaultTolerationSeconds`, which gives a Pod
/// 300 s tolerations of `not-ready` and `unreachable` Nodes, where it has
/// none for those keys.
pub fn before_webhooks(object: Value) -> Value {
    let mut object = with_defaults(object);
    if kind_of(&object) != "Pod" {
        return object;
    }
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerations = &mut object["spec"]["tolerations"];
        if tolerations.is_null() {
            *tolerations = json!([]);
        }
        let Some(list) = tolerations.as_array_mut() else {
            continue;
        };
        if !list.iter().any(|t| t["key"] == key) {
            list.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}),
            );
        }
    }
    object
}

/// Schema defaulting the tests read back, done on every object the API
/// server decodes (before the webhooks and again on what they return): a
/// `hostPath` volume's `type` is `""`, in a Pod and in the Pod templates of
/// its controllers.
pub fn with_defaults(mut object: Value) -> Value {
    for pointer in [
        "/spec/volumes",
        "/spec/template/spec/volumes",
        "/spec/jobTemplate/spec/template/spec/volumes",
    ] {
        for volume in object
            .pointer_mut(pointer)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(host_path) = volume.get_mut("hostPath").and_then(Value::as_object_mut) {
                host_path.entry("type").or_insert(json!(""));
            }
        }
    }
    object
}

/// The `default` ServiceAccount the service account controller creates in a
/// new Namespace (through admission, as its own user).
pub fn default_service_account(namespace: &Value) -> Option<Value> {
    (kind_of(namespace) == "Namespace").then(|| {
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": name_of(namespace)}})
    })
}

pub const SERVICE_ACCOUNT_CONTROLLER: &str =
    "system:serviceaccount:kube-system:service-account-controller";

/// `expected` asks for its own version of the object: the API server serves
/// an object in every version of its group, so a stored object of another
/// version of the same group is compared as if converted (only
/// `apiVersion` changes, which holds for the policy kinds tests read back).
pub fn served_as(stored: &Value, expected: &Value) -> Value {
    let group = |v: &Value| {
        v["apiVersion"]
            .as_str()
            .and_then(|a| a.rsplit_once('/'))
            .map(|(g, _)| g.to_string())
    };
    let mut served = stored.clone();
    if group(stored).is_some() && group(stored) == group(expected) {
        served["apiVersion"] = expected["apiVersion"].clone();
    }
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_get_default_tolerations_once() {
        let pod = json!({"kind": "Pod", "spec": {"tolerations": [
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]}});
        let defaulted = before_webhooks(pod);
        let keys: Vec<&Value> = defaulted["spec"]["tolerations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| &t["key"])
            .collect();
        assert_eq!(
            keys,
            [
                &json!("node.kubernetes.io/unreachable"),
                &json!("node.kubernetes.io/not-ready")
            ]
        );
    }

    #[test]
    fn host_path_volumes_get_their_default_type() {
        let deployment = json!({"kind": "Deployment", "spec": {"template": {"spec": {"volumes": [
            {"name": "a", "hostPath": {"path": "/a"}},
            {"name": "b", "hostPath": {"path": "/b", "type": "Directory"}},
            {"name": "c", "emptyDir": {}}]}}}});
        let volumes = &with_defaults(deployment)["spec"]["template"]["spec"]["volumes"];
        assert_eq!(volumes[0]["hostPath"]["type"], "");
        assert_eq!(volumes[1]["hostPath"]["type"], "Directory");
        assert!(volumes[2]["emptyDir"].get("type").is_none());
    }

    #[test]
    fn versions_of_one_group_are_one_object() {
        let stored = json!({"apiVersion": "kyverno.io/v2beta1", "kind": "ClusterPolicy"});
        let v1 = json!({"apiVersion": "kyverno.io/v1"});
        assert_eq!(served_as(&stored, &v1)["apiVersion"], "kyverno.io/v1");
        let other = json!({"apiVersion": "policies.kyverno.io/v1"});
        assert_eq!(
            served_as(&stored, &other)["apiVersion"],
            "kyverno.io/v2beta1"
        );
    }
}
