//! The cluster a chainsaw test runs against, simulated: the objects the test
//! applied (as the policy left them), a Node and the usual Namespaces as a
//! one-node kind cluster has them. It answers the policy's host reads and the
//! test's asserts.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::capabilities::InMemoryCluster;
use crate::conformance::{CLUSTER_SCOPED, TestCluster, kind_of, name_of, namespace_of};

/// The one Node, as chainsaw's usual kind cluster names it.
pub const NODE_NAME: &str = "kind-control-plane";

/// The namespace chainsaw creates for a test; objects that name none go there.
pub const TEST_NAMESPACE: &str = "chainsaw-conformance";

pub struct SimulatedCluster {
    objects: Vec<Value>,
}

impl Default for SimulatedCluster {
    fn default() -> Self {
        let mut objects = vec![json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NODE_NAME, "labels": {
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/control-plane": "",
            }},
            "status": {"nodeInfo": {"containerRuntimeVersion": "containerd://2.1.3",
                "kubeletVersion": "v1.35.0", "operatingSystem": "linux", "architecture": "amd64"}},
        })];
        for namespace in ["default", "kube-system", "kyverno", TEST_NAMESPACE] {
            objects.push(json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": namespace,
                    "labels": {"kubernetes.io/metadata.name": namespace}},
            }));
            objects.push(json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": namespace},
            }));
        }
        SimulatedCluster { objects }
    }
}

/// Whether objects of `kind` live in a namespace.
pub fn is_namespaced(kind: &str) -> bool {
    !CLUSTER_SCOPED.contains(&kind)
        && !matches!(
            kind,
            "MutatingPolicy"
                | "ValidatingPolicy"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
                | "ClusterPolicyReport"
                | "GlobalContextEntry"
        )
}

/// The object with the test's namespace where it names none.
pub fn in_test_namespace(mut object: Value) -> Value {
    if is_namespaced(kind_of(&object))
        && namespace_of(&object).is_empty()
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.insert("namespace".to_string(), json!(TEST_NAMESPACE));
    }
    object
}

fn same_object(a: &Value, b: &Value) -> bool {
    kind_of(a) == kind_of(b) && name_of(a) == name_of(b) && namespace_of(a) == namespace_of(b)
}

impl SimulatedCluster {
    /// Every object, in the order stored.
    pub fn objects(&self) -> &[Value] {
        &self.objects
    }

    /// The stored object with the kind, name and namespace of `object`.
    pub fn get(&self, object: &Value) -> Option<&Value> {
        self.objects.iter().find(|o| same_object(o, object))
    }

    /// Objects that an expected document may match: same kind, and the same
    /// name and namespace where it names them.
    pub fn candidates<'a>(&'a self, expected: &'a Value) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects.iter().filter(move |o| {
            kind_of(o) == kind_of(expected)
                && (name_of(expected).is_empty() || name_of(o) == name_of(expected))
                && (namespace_of(expected).is_empty() || namespace_of(o) == namespace_of(expected))
        })
    }

    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects.iter().filter(move |o| kind_of(o) == kind)
    }

    pub fn put(&mut self, object: Value) {
        match self.objects.iter_mut().find(|o| same_object(o, &object)) {
            Some(stored) => *stored = object,
            None => self.objects.push(object),
        }
    }

    pub fn remove(&mut self, object: &Value) -> bool {
        let before = self.objects.len();
        self.objects.retain(|o| !same_object(o, object));
        self.objects.len() != before
    }

    /// A host answering the policy's reads from the objects as they are now,
    /// recording each exchange for kwctl's replay.
    pub fn host(&self) -> Arc<TestCluster> {
        let cluster = self
            .objects
            .iter()
            .fold(InMemoryCluster::default(), |c, o| c.with(o.clone()));
        Arc::new(TestCluster::new(cluster, Vec::new()))
    }
}

/// What `kubectl apply` of `document` makes of `existing`: maps merged,
/// anything else (lists included) replaced, `null` removing a key.
pub fn merge(existing: &Value, document: &Value) -> Value {
    match (existing, document) {
        (Value::Object(old), Value::Object(new)) => {
            let mut out = old.clone();
            for (key, value) in new {
                if value.is_null() {
                    out.remove(key);
                } else {
                    let merged = old
                        .get(key)
                        .map_or_else(|| value.clone(), |o| merge(o, value));
                    out.insert(key.clone(), merged);
                }
            }
            Value::Object(out)
        }
        _ => document.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_merges_maps_and_replaces_lists() {
        let old = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"ports": [1, 2]}});
        let new = json!({"metadata": {"labels": {"b": "3", "a": null}}, "spec": {"ports": [3]}});
        assert_eq!(
            merge(&old, &new),
            json!({"metadata": {"labels": {"b": "3"}}, "spec": {"ports": [3]}})
        );
    }

    #[test]
    fn namespaced_objects_go_to_the_test_namespace() {
        let pod = in_test_namespace(json!({"kind": "Pod", "metadata": {"name": "p"}}));
        assert_eq!(pod["metadata"]["namespace"], TEST_NAMESPACE);
        let node = in_test_namespace(json!({"kind": "Node", "metadata": {"name": "n"}}));
        assert!(node["metadata"].get("namespace").is_none());
    }
}
