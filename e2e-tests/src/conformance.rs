//! Runs Kyverno CLI tests (`kyverno-test.yaml`, `cli.kyverno.io/v1alpha1`
//! `Test`) through the policy: every mutate result of a `kyverno.io`
//! ClusterPolicy/Policy, with the policy document as the settings, as
//! Kyverno's CLI does (all policies of a test applied in file order, each on
//! the previous one's output). Values files answer the host calls the rules
//! make (Namespaces for `namespaceSelector`, ConfigMaps for `configMap`
//! context entries).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::capabilities::{Capabilities, InMemoryCluster};
use crate::policy::PolicyModule;

/// What became of one result of a test.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Pass,
    /// The first path where the policy's output and the expected resource differ.
    Fail(String),
    /// `validate_settings` refused the policy, or the request was rejected.
    Refused(String),
    Skipped(String),
}

#[derive(Debug, Clone)]
pub struct ResultLine {
    pub test: PathBuf,
    pub policy: String,
    pub rule: String,
    pub resource: String,
    pub outcome: Outcome,
    /// What kwctl made of the same steps, when it ran.
    pub kwctl: Option<Result<(), String>>,
}

#[derive(Debug, Deserialize)]
struct TestFile {
    #[serde(default)]
    policies: Vec<String>,
    /// Kyverno `PolicyException` files.
    #[serde(default)]
    exceptions: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    /// Objects already in the cluster, for the policy's reads: plain
    /// resource files or `ClusterResource` documents (`spec.resources`
    /// inline, `spec.crds` naming CRD files).
    #[serde(default, rename = "clusterResources")]
    cluster_resources: Vec<String>,
    /// A `Context` document: `spec.images` stand for the registry.
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    variables: Option<String>,
    #[serde(default)]
    results: Vec<TestResult>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TestResult {
    policy: String,
    #[serde(default)]
    rule: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    patched_resource: Option<String>,
    #[serde(default)]
    patched_resources: Option<String>,
    #[serde(default)]
    result: String,
    #[serde(default)]
    is_mutating_policy: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Values {
    #[serde(default)]
    policies: Vec<PolicyValues>,
    #[serde(default)]
    global_values: BTreeMap<String, Value>,
    #[serde(default)]
    namespace_selector: Vec<NamespaceLabels>,
    /// Kinds that are subresources of another (a Binding is `pods/binding`).
    #[serde(default)]
    subresources: Vec<Subresource>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Subresource {
    parent_resource: ResourceName,
    subresource: SubresourceName,
}

#[derive(Debug, Deserialize)]
struct ResourceName {
    name: String,
}

#[derive(Debug, Deserialize)]
struct SubresourceName {
    kind: String,
    name: String,
}

/// A request for an object of a subresource kind, as the API server sends
/// it: the parent's resource, the subresource, the object's kind.
pub fn subresource_request(request: &mut Value, subresources: &[(String, String, String)]) {
    let kind = request["kind"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some((_, parent, sub)) = subresources.iter().find(|(k, _, _)| *k == kind) {
        request["resource"]["resource"] = json!(parent);
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
}

#[derive(Debug, Deserialize)]
struct PolicyValues {
    name: String,
    #[serde(default)]
    rules: Vec<RuleValues>,
}

#[derive(Debug, Deserialize)]
struct RuleValues {
    name: String,
    #[serde(default)]
    values: BTreeMap<String, Value>,
}

#[derive(Debug, Deserialize)]
struct NamespaceLabels {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// Every `kyverno-test.yaml` under `root`, sorted.
pub fn find_tests(root: &Path) -> Vec<PathBuf> {
    find_files_named(root, "kyverno-test.yaml")
}

/// Every file called `file_name` under `root`, sorted.
pub fn find_files_named(root: &Path, file_name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == file_name) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

pub fn read_documents(path: &Path) -> Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde_yaml::with::singleton_map_recursive::deserialize(doc)
            .with_context(|| format!("parsing {}", path.display()))?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                docs.extend(
                    map.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => docs.push(other),
        }
    }
    Ok(docs)
}

/// Kinds without a namespace; every other object gets `default` when its
/// file names none, as the API server gives it one on creation (Kyverno's CLI
/// does the same for the resources and the expected results).
pub const CLUSTER_SCOPED: [&str; 16] = [
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "StorageClass",
    "CustomResourceDefinition",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ClusterPolicy",
    "IngressClass",
    "RuntimeClass",
    "CSIDriver",
    "APIService",
    "ClusterIssuer",
];

pub fn with_default_namespace(mut object: Value) -> Value {
    let namespaced = !CLUSTER_SCOPED.contains(&kind_of(&object));
    if namespaced
        && namespace_of(&object).is_empty()
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.insert("namespace".to_string(), json!("default"));
    }
    object
}

pub fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

pub fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

pub fn kind_of(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

/// Kyverno's result `kind` may be `Kind` or `group/version/Kind`.
fn short_kind(kind: &str) -> &str {
    kind.rsplit('/').next().unwrap_or(kind)
}

/// A result names a resource as `name` or `namespace/name`.
fn find_resource<'a>(objects: &'a [Value], kind: &str, reference: &str) -> Option<&'a Value> {
    let (namespace, name) = match reference.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, reference),
    };
    objects.iter().find(|o| {
        name_of(o) == name
            && (kind.is_empty() || kind_of(o) == short_kind(kind))
            && namespace.is_none_or(|ns| namespace_of(o) == ns)
    })
}

/// A policy document the settings take whole: a ClusterPolicy or Policy,
/// a MutatingPolicy or NamespacedMutatingPolicy, a MutatingAdmissionPolicy.
pub fn is_supported_policy(doc: &Value) -> bool {
    let api = doc["apiVersion"].as_str().unwrap_or_default();
    (api.starts_with("kyverno.io/") && matches!(kind_of(doc), "ClusterPolicy" | "Policy"))
        || (api.starts_with("policies.kyverno.io/")
            && matches!(kind_of(doc), "MutatingPolicy" | "NamespacedMutatingPolicy"))
        || (api.starts_with("admissionregistration.k8s.io/")
            && kind_of(doc) == "MutatingAdmissionPolicy")
}

/// Whether a PolicyException names `policy` among its policyRefs.
fn names_policy(exception: &Value, policy: &Value) -> bool {
    exception["spec"]["policyRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["kind"] == policy["kind"] && r["name"] == policy["metadata"]["name"])
}

/// Policies that apply only in their own namespace.
pub fn is_namespaced_policy(doc: &Value) -> bool {
    matches!(kind_of(doc), "Policy" | "NamespacedMutatingPolicy")
}

fn rule_of<'a>(policy: &'a Value, rule: &str) -> Option<&'a Value> {
    policy["spec"]["rules"]
        .as_array()?
        .iter()
        .find(|r| r["name"].as_str() == Some(rule))
}

fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') || lower.ends_with('x') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// The admission request the API server would send for creating `object`.
pub fn create_request(object: &Value, namespace: Option<&str>) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = kind_of(object);
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let mut request = json!({
        "uid": "kyverno-conformance",
        "kind": gvk,
        "requestKind": gvk,
        "resource": {"group": group, "version": version, "resource": plural(kind)},
        "name": name_of(object),
        "operation": "CREATE",
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": object,
        "oldObject": null,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    });
    let namespace = namespace.unwrap_or_else(|| namespace_of(object));
    if !namespace.is_empty() {
        request["namespace"] = json!(namespace);
    }
    request
}

/// Kyverno's `Tidy`: nulls, empty maps and empty lists removed, recursively.
pub fn tidy(value: &Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Object(map) => {
            let out: Map<String, Value> = map
                .iter()
                .filter_map(|(k, v)| tidy(v).map(|v| (k.clone(), v)))
                .collect();
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) => {
            let out: Vec<Value> = items.iter().filter_map(tidy).collect();
            (!out.is_empty()).then_some(Value::Array(out))
        }
        other => Some(other.clone()),
    }
}

/// The first path where `actual` and `expected` differ, `None` when equal.
pub fn first_difference(actual: &Value, expected: &Value, path: &str) -> Option<String> {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => {
            let mut keys: Vec<&String> = a.keys().chain(e.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (a.get(k), e.get(k)) {
                    (Some(x), Some(y)) => first_difference(x, y, &p),
                    (Some(_), None) => Some(format!("{p} (added by the policy, not expected)")),
                    _ => Some(format!("{p} (expected, missing)")),
                }
            })
        }
        (Value::Array(a), Value::Array(e)) => {
            if a.len() != e.len() {
                return Some(format!(
                    "{path} ({} elements, expected {})",
                    a.len(),
                    e.len()
                ));
            }
            a.iter()
                .zip(e)
                .enumerate()
                .find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}/{i}")))
        }
        _ if actual == expected => None,
        _ => Some(format!("{path} ({actual} , expected {expected})")),
    }
}

/// Kyverno's CLI comparison (both sides tidied, then equal), and on top of it
/// a check Kyverno's tidy would miss: a list element the policy added that
/// tidies away (`{"hostPath": {}}` in a volume list) still fails.
pub fn compare(actual: &Value, expected: &Value) -> Option<String> {
    let (a, e) = (tidy(actual), tidy(expected));
    let (a, e) = (a.unwrap_or(Value::Null), e.unwrap_or(Value::Null));
    first_difference(&a, &e, "").or_else(|| hidden_elements(actual, expected, ""))
}

fn hidden_elements(actual: &Value, expected: &Value, path: &str) -> Option<String> {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => a.iter().find_map(|(k, v)| {
            hidden_elements(v, e.get(k).unwrap_or(&Value::Null), &format!("{path}/{k}"))
        }),
        (Value::Array(a), e) => {
            let e = e.as_array().map_or(&[][..], Vec::as_slice);
            if a.len() > e.len() {
                return Some(format!(
                    "{path} ({} elements, expected {}: an empty element was added)",
                    a.len(),
                    e.len()
                ));
            }
            a.iter()
                .zip(e)
                .enumerate()
                .find_map(|(i, (x, y))| hidden_elements(x, y, &format!("{path}/{i}")))
        }
        _ => None,
    }
}

/// Host answers for a test: Namespaces from the values file's
/// `namespaceSelector`, ConfigMaps built from the values of `configMap`
/// context entries. Every call and its answer is kept, to replay in kwctl.
/// One host call as made and answered: operation, request, answer or error.
pub type Exchange = (String, Value, Result<String, String>);

/// Checks one step against another host (kwctl).
pub type StepCheck<'a> = &'a dyn Fn(&Step) -> Result<(), String>;

pub struct TestCluster {
    cluster: InMemoryCluster,
    pub exchanges: Mutex<Vec<Exchange>>,
    /// Kinds that are a subresource of another: (kind, parent resource,
    /// subresource), from the values file.
    subresources: Vec<(String, String, String)>,
    /// The test's PolicyExceptions: each goes into the settings beside the
    /// policies it names.
    exceptions: Vec<Value>,
    /// `resourceKinds` settings entries for the test's CRDs: a Kubewarden
    /// policy learns a custom resource's kind from its settings, where
    /// Kyverno asks the API server's discovery.
    resource_kinds: Vec<Value>,
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

fn test_cluster(values: &Values, policies: &[Value]) -> TestCluster {
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
fn with_given_image_data(mut policy: Value, values: &Values) -> Value {
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
fn add_context_images(cluster: &mut TestCluster, path: &Path) -> Result<()> {
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
fn add_cluster_resources(cluster: &mut TestCluster, dir: &Path, files: &[String]) -> Result<()> {
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

/// One application of one policy to one object, as the steps kwctl replays.
pub struct Step {
    pub settings: Value,
    pub request: Value,
    pub exchanges: Vec<Exchange>,
    pub patch: Option<Value>,
}

/// Applies the policies of the test, in order, to `object`, up to and
/// including `last` (Kyverno's CLI checks a result against the output of its
/// own policy, applied to what the policies before it made).
fn apply_all(
    module: &PolicyModule,
    policies: &[Value],
    last: &Value,
    object: &Value,
    only_rule: Option<&str>,
    namespace: Option<&str>,
    cluster: &Arc<TestCluster>,
) -> Result<(Value, Vec<Step>, Value), Outcome> {
    let mut current = object.clone();
    let mut before_last = object.clone();
    let mut steps = Vec::new();
    for policy in policies {
        // A namespaced Policy applies only in its own namespace (the
        // deployment's namespaceSelector does that job for a Kubewarden policy).
        if is_namespaced_policy(policy) && namespace_of(policy) != namespace_of(&current) {
            continue;
        }
        let mut settings = policy.clone();
        let exceptions: Vec<&Value> = cluster
            .exceptions
            .iter()
            .filter(|e| names_policy(e, policy))
            .collect();
        if policy == last {
            before_last = current.clone();
            // A rule's own effect: the policy with that rule alone.
            if let (Some(rule), Some(rules)) = (
                only_rule,
                settings
                    .pointer_mut("/spec/rules")
                    .and_then(Value::as_array_mut),
            ) {
                rules.retain(|r| r["name"].as_str() == Some(rule));
            }
        }
        if !exceptions.is_empty() || !cluster.resource_kinds.is_empty() {
            let mut documents = vec![settings];
            documents.extend(exceptions.into_iter().cloned());
            settings = json!({"policies": documents});
            if !cluster.resource_kinds.is_empty() {
                settings["resourceKinds"] = json!(cluster.resource_kinds);
            }
        }
        let verdict = module
            .validate_settings(&settings)
            .map_err(|e| Outcome::Refused(format!("validate_settings trapped: {e:#}")))?;
        if !verdict.valid {
            return Err(Outcome::Refused(format!(
                "policy {:?}: {}",
                name_of(policy),
                verdict.message.unwrap_or_default()
            )));
        }
        let mut request = create_request(&current, namespace);
        subresource_request(&mut request, &cluster.subresources);
        if let Ok(mut exchanges) = cluster.exchanges.lock() {
            exchanges.clear();
        }
        let evaluation = module
            .evaluate(&request, &settings, cluster.clone())
            .map_err(|e| Outcome::Refused(format!("evaluation failed: {e:#}")))?;
        if !evaluation.accepted {
            return Err(Outcome::Refused(format!(
                "policy {:?} rejected the request: {}",
                name_of(policy),
                evaluation.message.unwrap_or_default()
            )));
        }
        if let Some(patch) = &evaluation.patch {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| Outcome::Refused(format!("the policy's patch: {e}")))?;
            json_patch::patch(&mut current, &ops)
                .map_err(|e| Outcome::Refused(format!("the policy's patch does not apply: {e}")))?;
        }
        steps.push(Step {
            settings,
            request,
            exchanges: cluster
                .exchanges
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default(),
            patch: evaluation.patch,
        });
        if policy == last {
            break;
        }
    }
    Ok((current, steps, before_last))
}

/// Runs one test file; `kwctl` checks every step against real kwctl too.
pub fn run_test(
    module: &PolicyModule,
    test: &Path,
    kwctl: Option<StepCheck>,
) -> Result<Vec<ResultLine>> {
    let dir = test.parent().ok_or_else(|| anyhow!("no directory"))?;
    let text = std::fs::read_to_string(test)?;
    let spec: TestFile = serde_yaml::from_str(&text).context("not a Kyverno CLI test")?;
    let mut policies = Vec::new();
    for p in &spec.policies {
        policies.extend(read_documents(&dir.join(p))?);
    }
    let mut resources = Vec::new();
    for r in &spec.resources {
        resources.extend(
            read_documents(&dir.join(r))?
                .into_iter()
                .map(with_default_namespace),
        );
    }
    let values: Values = match &spec.variables {
        Some(v) => {
            serde_yaml::from_str(&std::fs::read_to_string(dir.join(v))?).context("values file")?
        }
        None => Values::default(),
    };
    let policies: Vec<Value> = policies
        .into_iter()
        .map(|p| with_given_image_data(p, &values))
        .collect();
    let kyverno_policies: Vec<Value> = policies
        .iter()
        .filter(|p| is_supported_policy(p))
        .cloned()
        .collect();
    let mut cluster = test_cluster(&values, &kyverno_policies);
    for e in &spec.exceptions {
        cluster.exceptions.extend(read_documents(&dir.join(e))?);
    }
    add_cluster_resources(&mut cluster, dir, &spec.cluster_resources)?;
    if let Some(context) = &spec.context {
        add_context_images(&mut cluster, &dir.join(context))?;
    }
    let cluster = Arc::new(cluster);
    let request_namespace = values
        .global_values
        .get("request.namespace")
        .or_else(|| {
            values
                .policies
                .iter()
                .flat_map(|p| &p.rules)
                .find_map(|r| r.values.get("request.namespace"))
        })
        .and_then(Value::as_str);

    let mut lines = Vec::new();
    for result in &spec.results {
        let names: Vec<&String> = result.resources.iter().chain(&result.resource).collect();
        let patched = result
            .patched_resources
            .as_ref()
            .or(result.patched_resource.as_ref());
        // `namespace/name` names a namespaced Policy.
        let policy = policies.iter().find(|p| {
            name_of(p) == result.policy
                || format!("{}/{}", namespace_of(p), name_of(p)) == result.policy
        });
        let is_mutate = policy
            .and_then(|p| rule_of(p, &result.rule))
            .is_some_and(|r| r.get("mutate").is_some())
            || patched.is_some()
            || result.is_mutating_policy;
        if !is_mutate {
            continue;
        }
        for name in names {
            let mut line = ResultLine {
                test: test.to_path_buf(),
                policy: result.policy.clone(),
                rule: result.rule.clone(),
                resource: format!("{}/{name}", short_kind(&result.kind)),
                outcome: Outcome::Pass,
                kwctl: None,
            };
            line.outcome = (|| {
                let Some(policy) = policy else {
                    return Outcome::Skipped(format!("policy {:?} not in the test", result.policy));
                };
                if !is_supported_policy(policy) {
                    return Outcome::Skipped(format!(
                        "{} {} is not a policy kind the settings take",
                        policy["apiVersion"].as_str().unwrap_or("?"),
                        kind_of(policy)
                    ));
                }
                let Some(object) = find_resource(&resources, &result.kind, name) else {
                    return Outcome::Skipped(format!("resource {name} not in the test"));
                };
                let expected = match patched {
                    Some(file) => match read_documents(&dir.join(file)) {
                        Ok(docs) => match find_resource(
                            &docs
                                .into_iter()
                                .map(with_default_namespace)
                                .collect::<Vec<_>>(),
                            &result.kind,
                            name,
                        ) {
                            Some(doc) => Some(doc.clone()),
                            // `result: fail` may name a file without the resource.
                            None if result.result == "fail" => None,
                            None => {
                                return Outcome::Skipped(format!("{name} not in {file}"));
                            }
                        },
                        Err(e) => return Outcome::Skipped(format!("{e:#}")),
                    },
                    // A skip without a patched resource: the rule alone must
                    // leave what its policy received as it was (below).
                    None if result.result == "skip" => None,
                    None => return Outcome::Skipped("no patchedResource to compare".into()),
                };
                let rule_skipped = patched.is_none();
                match apply_all(
                    module,
                    &kyverno_policies,
                    policy,
                    object,
                    rule_skipped.then_some(result.rule.as_str()),
                    request_namespace,
                    &cluster,
                ) {
                    Err(outcome) => outcome,
                    Ok((actual, steps, before)) => {
                        let expected = if rule_skipped { Some(before) } else { expected };
                        if let Some(check) = kwctl {
                            line.kwctl = Some(steps.iter().try_for_each(check));
                        }
                        // `result: fail`: the test expects the output to differ.
                        let difference = expected.as_ref().map_or_else(
                            || Some("the expected file does not hold it".to_string()),
                            |expected| compare(&actual, expected),
                        );
                        match (difference, result.result == "fail") {
                            (None, false) | (Some(_), true) => Outcome::Pass,
                            (Some(path), false) => Outcome::Fail(path),
                            (None, true) => Outcome::Fail(
                                "equals the resource the test expects it to differ from".into(),
                            ),
                        }
                    }
                }
            })();
            lines.push(line);
        }
    }
    if lines.is_empty() && spec.results.iter().any(|r| r.patched_resource.is_some()) {
        bail!("no result could be read");
    }
    Ok(lines)
}

/// A kwctl session file replaying a step's host calls.
pub fn session_yaml(exchanges: &[Exchange]) -> String {
    let mut out = String::new();
    for (operation, payload, answer) in exchanges {
        let tag = match operation.as_str() {
            "get_resource" => "KubernetesGetResource",
            "list_resources_all" => "KubernetesListResourceAll",
            "list_resources_by_namespace" => "KubernetesListResourceNamespace",
            "v1/manifest_digest" => "OciManifestDigest",
            "v1/oci_manifest_config" => "OciManifestAndConfig",
            other => other,
        };
        // kwctl writes an OCI call's bare reference as `image: <reference>`.
        let fields = match payload {
            Value::String(image) => serde_yaml::to_string(&json!({ "image": image })),
            other => serde_yaml::to_string(other),
        }
        .unwrap_or_default();
        let request: String = fields.lines().map(|l| format!("    {l}\n")).collect();
        out.push_str(&format!(
            "- type: Exchange\n  request: |\n    !{tag}\n{request}"
        ));
        match answer {
            Ok(payload) => out.push_str(&format!(
                "  response:\n    type: Success\n    payload: {}\n",
                serde_json::to_string(payload).unwrap_or_default()
            )),
            Err(message) => out.push_str(&format!(
                "  response:\n    type: Error\n    message: {}\n",
                serde_json::to_string(message).unwrap_or_default()
            )),
        }
    }
    if out.is_empty() {
        "[]\n".to_string()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy_compare_is_kyvernos_but_an_empty_added_element_still_fails() {
        let expected = json!({"spec": {"volumes": [{"name": "a"}], "x": {}}});
        assert_eq!(
            compare(&json!({"spec": {"volumes": [{"name": "a"}]}}), &expected),
            None
        );
        let added = json!({"spec": {"volumes": [{"name": "a"}, {"hostPath": {}}]}});
        assert!(compare(&added, &expected).is_some_and(|p| p.starts_with("/spec/volumes")));
        let wrong = json!({"spec": {"volumes": [{"name": "b"}]}});
        assert_eq!(
            compare(&wrong, &expected).as_deref(),
            Some("/spec/volumes/0/name (\"b\" , expected \"a\")")
        );
        let extra =
            json!({"spec": {"volumes": [{"name": "a"}]}, "metadata": {"labels": {"k": "v"}}});
        assert!(compare(&extra, &expected).is_some_and(|p| p.contains("added by the policy")));
    }

    #[test]
    fn requests_name_the_resource_and_namespace() {
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns"}});
        let request = create_request(&object, None);
        assert_eq!(request["resource"]["resource"], "deployments");
        assert_eq!(request["kind"]["group"], "apps");
        assert_eq!(request["namespace"], "ns");
        assert_eq!(plural("NetworkPolicy"), "networkpolicies");
        assert_eq!(plural("Ingress"), "ingresses");
    }
}
