//! What the API server and its built-in controllers do around admission that
//! chainsaw tests see: the built-in admission plugins that run before the
//! webhooks, and the objects a controller creates when a Namespace appears.

use serde_json::{Value, json};

use crate::conformance::{kind_of, name_of};

/// What a new object goes through before the webhooks: defaulting, and two
/// built-in mutating admission plugins: `DefaultTolerationSeconds`, which
/// gives a Pod 300 s tolerations of `not-ready` and `unreachable` Nodes,
/// where it has none for those keys, and `ServiceAccount` ([`service_account`]).
pub fn before_webhooks(object: Value) -> Value {
    let mut object = with_defaults(object);
    if kind_of(&object) != "Pod" {
        return object;
    }
    service_account(&mut object);
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let Some(list) = list_at(&mut object["spec"]["tolerations"]) else {
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

/// The list in `slot`, made empty where there was none; `None` where
/// something else is there.
fn list_at(slot: &mut Value) -> Option<&mut Vec<Value>> {
    if slot.is_null() {
        *slot = json!([]);
    }
    slot.as_array_mut()
}

/// The `ServiceAccount` admission plugin: a Pod runs as `default` unless it
/// names an account, and, unless it opts out (`automountServiceAccountToken:
/// false`), gets the account's token as a projected volume at the end of its
/// volumes, mounted read-only in each container. Policies iterating volumes
/// see it (Kyverno's tests removing volumes by index count on it).
fn service_account(pod: &mut Value) {
    let spec = &mut pod["spec"];
    if spec["serviceAccountName"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        spec["serviceAccountName"] = json!("default");
    }
    spec["serviceAccount"] = spec["serviceAccountName"].clone();
    if spec["automountServiceAccountToken"] == json!(false) {
        return;
    }
    // The API server appends five random characters; tests match the prefix.
    let volume = "kube-api-access-x7k2q";
    let mount_path = "/var/run/secrets/kubernetes.io/serviceaccount";
    for containers in ["initContainers", "containers"] {
        let list = spec.get_mut(containers).and_then(Value::as_array_mut);
        for container in list.into_iter().flatten() {
            if let Some(list) = list_at(&mut container["volumeMounts"])
                && !list.iter().any(|m| m["mountPath"] == mount_path)
            {
                list.push(json!({"name": volume, "readOnly": true, "mountPath": mount_path}));
            }
        }
    }
    if let Some(list) = list_at(&mut spec["volumes"]) {
        list.push(json!({"name": volume, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]}}));
    }
}

/// Schema defaulting the tests read back, done on every object the API
/// server decodes (before the webhooks and again on what they return): a
/// `hostPath` volume's `type` is `""`, in a Pod and in the Pod templates of
/// its controllers; and a built-in kind's empty lists and maps are gone
/// ([`without_empty`]).
pub fn with_defaults(mut object: Value) -> Value {
    if is_built_in(&object) {
        without_empty(&mut object);
    }
    if kind_of(&object) == "CustomResourceDefinition" {
        crd_status(&mut object);
    }
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

/// Built-in kinds whose objects the API server gives a `metadata.generation`
/// (measured on kube-apiserver 1.37: not ConfigMaps, Secrets, Services,
/// ServiceAccounts, Namespaces, ClusterRoles or RuntimeClasses); every
/// custom resource has one.
const GENERATION_KINDS: [&str; 8] = [
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "Ingress",
    "PriorityClass",
];

/// What the API server's storage sets after admission: `metadata.generation`,
/// 1 on create, one more on an update that changes the spec (anything but
/// metadata and status, for a custom resource).
pub fn with_generation(mut object: Value, old: Option<&Value>) -> Value {
    if is_built_in(&object) && !GENERATION_KINDS.contains(&kind_of(&object)) {
        return object;
    }
    let generation = match old {
        None => 1,
        Some(old) => {
            let spec = |o: &Value| match is_built_in(o) {
                true => o["spec"].clone(),
                false => {
                    let mut rest = o.clone();
                    if let Some(map) = rest.as_object_mut() {
                        map.remove("metadata");
                        map.remove("status");
                    }
                    rest
                }
            };
            let before = old["metadata"]["generation"].as_i64().unwrap_or(1);
            before + i64::from(spec(old) != spec(&object))
        }
    };
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("generation".to_string(), json!(generation));
    }
    object
}

/// The status the API server writes on a CustomResourceDefinition it
/// serves: the names accepted (the spec's, with `listKind` and `singular`
/// defaulted), the storage version, `NamesAccepted` and `Established`.
fn crd_status(crd: &mut Value) {
    let mut accepted = crd["spec"]["names"].clone();
    let kind = accepted["kind"].as_str().unwrap_or_default().to_string();
    if let Some(names) = accepted.as_object_mut() {
        names
            .entry("listKind")
            .or_insert_with(|| json!(format!("{kind}List")));
        names
            .entry("singular")
            .or_insert_with(|| json!(kind.to_lowercase()));
    }
    let stored: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == json!(true))
        .map(|v| v["name"].clone())
        .collect();
    crd["status"] = json!({
        "acceptedNames": accepted,
        "storedVersions": stored,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                "message": "no conflicts found"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted"},
        ],
    });
}

/// A kind of Kubernetes' own API groups (`v1`, `apps/v1`, `*.k8s.io`),
/// which the API server decodes into Go types.
fn is_built_in(object: &Value) -> bool {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    match api_version.rsplit_once('/') {
        None => true,
        Some((group, _)) => !group.contains('.') || group.ends_with(".k8s.io"),
    }
}

/// A built-in kind's optional lists are `omitempty` in its Go types: an
/// empty list a policy leaves (every `env` entry removed) is not there when
/// the object is read back; nor are empty `labels` and `annotations` (Go
/// maps). An empty object elsewhere is a struct (`emptyDir: {}`) and stays.
fn without_empty(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.values_mut().for_each(without_empty);
            map.retain(|key, v| match v {
                Value::Array(items) => !items.is_empty(),
                Value::Object(m) => !(m.is_empty() && (key == "labels" || key == "annotations")),
                _ => true,
            });
        }
        Value::Array(items) => items.iter_mut().for_each(without_empty),
        _ => {}
    }
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
    fn pods_get_the_service_account_token_unless_they_opt_out() {
        let pod = json!({"kind": "Pod", "spec": {"containers": [{"name": "c"}],
            "volumes": [{"name": "v", "emptyDir": {}}]}});
        let admitted = before_webhooks(pod);
        assert_eq!(admitted["spec"]["serviceAccountName"], "default");
        let volumes = admitted["spec"]["volumes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(volumes.len(), 2);
        assert!(volumes[1]["projected"].is_object());
        assert_eq!(
            admitted["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
            "/var/run/secrets/kubernetes.io/serviceaccount"
        );
        let opted_out = before_webhooks(json!({"kind": "Pod", "spec": {
            "automountServiceAccountToken": false, "serviceAccountName": "sa",
            "containers": [{"name": "c"}]}}));
        assert_eq!(opted_out["spec"]["serviceAccountName"], "sa");
        assert!(opted_out["spec"].get("volumes").is_none());
        assert!(
            opted_out["spec"]["containers"][0]
                .get("volumeMounts")
                .is_none()
        );
        // No list appears that the Pod did not have.
        assert!(admitted["spec"].get("initContainers").is_none());
    }

    #[test]
    fn built_in_kinds_lose_empty_lists_and_maps() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {}},
            "spec": {"containers": [{"name": "c", "env": []}],
                "volumes": [{"name": "v", "emptyDir": {}}]}});
        let read = with_defaults(pod);
        assert!(read["metadata"].get("labels").is_none());
        assert!(read["spec"]["containers"][0].get("env").is_none());
        assert_eq!(read["spec"]["volumes"][0]["emptyDir"], json!({}));
        let custom =
            json!({"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"items": []}});
        assert_eq!(with_defaults(custom.clone()), custom);
    }

    #[test]
    fn generation_is_one_on_create_and_counts_spec_changes() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}, "spec": {"replicas": 1}});
        let created = with_generation(deployment, None);
        assert_eq!(created["metadata"]["generation"], 1);
        let mut labelled = created.clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(
            with_generation(labelled, Some(&created))["metadata"]["generation"],
            1
        );
        let mut scaled = created.clone();
        scaled["spec"]["replicas"] = json!(2);
        assert_eq!(
            with_generation(scaled, Some(&created))["metadata"]["generation"],
            2
        );
        let config_map =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert!(
            with_generation(config_map, None)["metadata"]
                .get("generation")
                .is_none()
        );
        let custom = json!({"apiVersion": "config.kio.kasten.io/v1alpha1", "kind": "Policy",
            "metadata": {"name": "p"}, "frequency": "@hourly"});
        assert_eq!(with_generation(custom, None)["metadata"]["generation"], 1);
    }

    #[test]
    fn a_crd_gets_the_status_the_api_server_writes() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"names": {"kind": "Policy", "plural": "policies"},
                "versions": [{"name": "v1alpha1", "storage": true}, {"name": "v1", "storage": false}]}});
        let status = &with_defaults(crd)["status"];
        assert_eq!(
            status["acceptedNames"],
            json!({"kind": "Policy", "plural": "policies", "listKind": "PolicyList", "singular": "policy"})
        );
        assert_eq!(status["storedVersions"], json!(["v1alpha1"]));
        assert_eq!(status["conditions"][1]["type"], "Established");
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
