//! The simulated cluster a Kyverno CLI test runs against: the host answers
//! built from its values file (Namespaces, ConfigMaps), its `Context` images,
//! its `clusterResources` and PolicyExceptions, with every host call recorded
//! for replay in kwctl.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Result;
use serde_json::{Value, json};

use super::documents::{kind_of, name_of, read_documents, with_default_namespace};
use super::test_file::Values;
use crate::capabilities::{Capabilities, InMemoryCluster};

/// One host call as made and answered: operation, request, answer or error.
pub type Exchange = (String, Value, Result<String, String>);

/// Host answers for a test: Namespaces from the values file's
/// `namespaceSelector`, ConfigMaps built from the values of `configMap`
/// context entries. Every call and its answer is kept, to replay in kwctl.
pub struct TestCluster {
    cluster: InMemoryCluster,
    pub exchanges: Mutex<Vec<Exchange>>,
    /// Kinds that are a subresource of another: (kind, parent resource,
    /// subresource), from the values file.
    pub(super) subresources: Vec<(String, String, String)>,
    /// The test's PolicyExceptions: each goes into the settings beside the
    /// policies it names.
    pub(super) exceptions: Vec<Value>,
    /// `resourceKinds` settings entries for the test's CRDs: a Kubewarden
    /// policy learns a custom resource's kind from its settings, where
    /// Kyverno asks the API server's discovery.
    pub(super) resource_kinds: Vec<Value>,
}

impl Capabilities for TestCluster {
    fn answer(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        let answer = self.cluster.answer(binding, namespace, operation, payload);
        if let Ok(mut exchanges) = self.exchanges.lock() {
            exchanges.push((
                operation.to_string(),
                serde_json::from_slice(payload).unwrap_or(Value::Null),
                answer
                    .clone()
                    .map(|a| String::from_utf8_lossy(&a).into_owned()),
            ));
        }
        answer
    }
}

impl TestCluster {
    /// A host answering from `cluster`, recording every exchange; `subresources`
    /// are (kind, parent resource, subresource), e.g. a Binding as `pods/binding`.
    pub fn new(
        cluster: InMemoryCluster,
        subresources: Vec<(String, String, String)>,
    ) -> TestCluster {
        TestCluster {
            cluster,
            exchanges: Mutex::default(),
            subresources,
            exceptions: Vec::new(),
            resource_kinds: Vec::new(),
        }
    }

    /// The exchanges recorded so far.
    pub fn recorded(&self) -> Vec<Exchange> {
        self.exchanges.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

fn set_path(target: &mut Value, path: &[&str], value: Value) {
    let Some((first, rest)) = path.split_first() else {
        *target = value;
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Some(map) = target.as_object_mut() {
        let child = map.entry(first.to_string()).or_insert(Value::Null);
        set_path(child, rest, value);
    }
}

pub(super) fn test_cluster(values: &Values, policies: &[Value]) -> TestCluster {
    let mut cluster = InMemoryCluster::default();
    for ns in &values.namespace_selector {
        cluster = cluster.with(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns.name, "labels": ns.labels},
        }));
    }
    for policy in policies {
        let Some(rules) = policy["spec"]["rules"].as_array() else {
            continue;
        };
        for rule in rules {
            let rule_values = values
                .policies
                .iter()
                .filter(|p| p.name == name_of(policy))
                .flat_map(|p| &p.rules)
                .filter(|r| Some(r.name.as_str()) == rule["name"].as_str())
                .flat_map(|r| &r.values);
            let rule_values: Vec<(&String, &Value)> = rule_values.collect();
            for entry in rule["context"].as_array().into_iter().flatten() {
                let (Some(name), Some(cm)) = (entry["name"].as_str(), entry.get("configMap"))
                else {
                    continue;
                };
                let mut object = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": cm["name"], "namespace": cm["namespace"]},
                });
                for (key, value) in &rule_values {
                    if let Some(rest) = key.strip_prefix(&format!("{name}.")) {
                        let path: Vec<&str> = rest.split('.').collect();
                        set_path(&mut object, &path, (*value).clone());
                    }
                }
                cluster = cluster.with(object);
            }
        }
    }
    let subresources = values
        .subresources
        .iter()
        .filter_map(|s| {
            let (_, sub) = s.subresource.name.split_once('/')?;
            Some((
                s.subresource.kind.clone(),
                s.parent_resource.name.clone(),
                sub.to_string(),
            ))
        })
        .collect();
    TestCluster::new(cluster, subresources)
}

/// Kyverno's CLI reads no registry: an `imageRegistry` context entry takes
/// the value the values file gives its name. The same here: such an entry
/// becomes a `variable` holding that value (an entry without one stays, and
/// the policy asks the host's registry).
pub(super) fn with_given_image_data(mut policy: Value, values: &Values) -> Value {
    let policy_name = name_of(&policy).to_string();
    let Some(rules) = policy
        .pointer_mut("/spec/rules")
        .and_then(Value::as_array_mut)
    else {
        return policy;
    };
    for rule in rules {
        let given: BTreeMap<String, Value> = values
            .policies
            .iter()
            .filter(|p| p.name == policy_name)
            .flat_map(|p| &p.rules)
            .filter(|r| Some(r.name.as_str()) == rule["name"].as_str())
            .flat_map(|r| r.values.clone())
            .chain(values.global_values.clone())
            .collect();
        replace_image_entries(rule, &given);
    }
    policy
}

fn replace_image_entries(value: &mut Value, given: &BTreeMap<String, Value>) {
    match value {
        Value::Object(map) => {
            if map.contains_key("imageRegistry")
                && let Some(found) = map
                    .get("name")
                    .and_then(Value::as_str)
                    .and_then(|name| given.get(name))
            {
                let found = found.clone();
                map.remove("imageRegistry");
                map.insert("variable".into(), json!({ "value": found }));
                return;
            }
            for child in map.values_mut() {
                replace_image_entries(child, given);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| replace_image_entries(item, given)),
        _ => {}
    }
}

/// A test's `Context` images as the registry's answers to the OCI host
/// calls: the file's `config` and `manifest`; what it leaves out is filled
/// in as an OCI manifest (no layers) and a digest the file does not give is
/// a stand-in, `sha256:` and zeros.
pub(super) fn add_context_images(cluster: &mut TestCluster, path: &Path) -> Result<()> {
    for doc in read_documents(path)? {
        for image in doc["spec"]["images"].as_array().into_iter().flatten() {
            let Some(reference) = image["image"].as_str() else {
                continue;
            };
            let digest = image["digest"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("sha256:{}", "0".repeat(64)));
            let manifest = match image.get("manifest") {
                Some(manifest) => manifest.clone(),
                None => json!({"schemaVersion": 2,
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                        "digest": digest, "size": 0},
                    "layers": []}),
            };
            let answer = json!({"digest": digest, "manifest": manifest,
                "config": image.get("config").cloned().unwrap_or_else(|| json!({}))});
            cluster.cluster.insert_image(reference, answer);
        }
    }
    Ok(())
}

/// Reads a test's `clusterResources` files into `cluster`.
pub(super) fn add_cluster_resources(
    cluster: &mut TestCluster,
    dir: &Path,
    files: &[String],
) -> Result<()> {
    for file in files {
        let path = dir.join(file);
        for doc in read_documents(&path)? {
            if kind_of(&doc) != "ClusterResource" {
                add_cluster_object(cluster, doc);
                continue;
            }
            let base = path.parent().unwrap_or(dir);
            for crd in doc["spec"]["crds"].as_array().into_iter().flatten() {
                for object in read_documents(&base.join(crd.as_str().unwrap_or_default()))? {
                    add_cluster_object(cluster, object);
                }
            }
            for object in doc["spec"]["resources"].as_array().into_iter().flatten() {
                add_cluster_object(cluster, object.clone());
            }
        }
    }
    Ok(())
}

fn add_cluster_object(cluster: &mut TestCluster, object: Value) {
    if kind_of(&object) == "CustomResourceDefinition" {
        let spec = &object["spec"];
        cluster.resource_kinds.push(json!({
            "group": spec["group"],
            "resource": spec["names"]["plural"],
            "kind": spec["names"]["kind"],
            "namespaced": spec["scope"] == "Namespaced",
        }));
        return;
    }
    // A custom kind the test's CRDs declare cluster-scoped keeps no namespace.
    let cluster_scoped = cluster
        .resource_kinds
        .iter()
        .any(|k| k["kind"] == object["kind"] && k["namespaced"] == false);
    let object = if cluster_scoped {
        object
    } else {
        with_default_namespace(object)
    };
    cluster.cluster.insert(object);
}
