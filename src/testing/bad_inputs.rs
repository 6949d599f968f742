//! "What happens when ...": the catalogue of bad inputs, each with the answer a
//! user gets. The table in docs/operations.md is checked against this list,
//! so the two cannot drift apart.

use std::cell::Cell;

use serde_json::{Value, json};

use crate::host::node_lookup::{NodeFields, NodeLookup};

const NODE_MISSING: &str = "Cannot find v1/Node named 'node-1' inside of namespace 'None'";
const NOT_GRANTED: &str = "Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.";

/// A host that answers every Node lookup the same way and counts the calls.
struct Host {
    answer: Result<Vec<u8>, String>,
    calls: Cell<usize>,
}

impl NodeLookup for Host {
    fn fetch_node(&self, _name: &str, _fields: NodeFields) -> Result<Vec<u8>, String> {
        self.calls.set(self.calls.get() + 1);
        self.answer.clone()
    }
}

impl crate::host::cluster::Cluster for Host {
    fn read(&self, _read: &crate::host::cluster::Read) -> Result<Vec<u8>, String> {
        self.calls.set(self.calls.get() + 1);
        self.answer.clone()
    }
}

fn host_node(node: Value) -> Host {
    Host {
        answer: Ok(serde_json::to_vec(&node).unwrap()),
        calls: Cell::new(0),
    }
}

fn host_error(message: &str) -> Host {
    Host {
        answer: Err(message.to_string()),
        calls: Cell::new(0),
    }
}

fn node_1() -> Host {
    Host {
        answer: Ok(std::fs::read("test_data/node-1.json").unwrap()),
        calls: Cell::new(0),
    }
}

fn fixture(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(format!("test_data/{name}")).unwrap()).unwrap()
}

fn binding_with(object: Value) -> Value {
    let mut request = fixture("binding.json");
    request["object"] = object;
    request
}

fn payload(request: Value, settings: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap()
}

#[derive(Debug)]
enum Answer {
    /// Accepted; `patched` says whether the object changed; the text is part
    /// of a warning ("" for none).
    Accepted {
        patched: bool,
        warning: &'static str,
    },
    /// Rejected with a message containing the text.
    Rejected(&'static str),
    /// `validate_settings` refuses, with a message containing the text.
    SettingsRefused(&'static str),
}

struct Case {
    /// The "What happens when ..." cell in docs/operations.md.
    when: &'static str,
    /// The answer cell in docs/operations.md must contain this.
    answer_text: &'static str,
    answer: Answer,
    run: fn() -> (Vec<u8>, Host),
    /// The host must (or must not) be asked: for the Node, or whatever the case reads.
    reads_node: bool,
}

/// A strategic merge patch pasted as a YAML string.
const ROOT_STRING_PATCH: &str = r#"{"rules":[{"name":"r","match":{"any":[{"resources":{"kinds":["Pod/binding"]}}]},"mutate":{"patchStrategicMerge":"metadata: {}"}}]}"#;

/// A Binding rule applying `patch` (a JSON Patch text).
fn json6902_rule(failure_policy: &str, patch: &str) -> Value {
    json!({"failurePolicy": failure_policy, "rules": [{
        "name": "r",
        "match": {"any": [{"resources": {"kinds": ["Pod/binding"]}}]},
        "mutate": {"patchesJson6902": patch}
    }]})
}

/// A MutatingPolicy on Bindings with a `node` variable (the Node read) and
/// one ApplyConfiguration mutation; `failure_policy` empty for the default.
/// A MutatingPolicy whose one match condition is `condition`.
fn cel_policy_matching(condition: &str) -> String {
    let policy = cel_policy("", "Object{metadata: Object.metadata{labels: {'a': 'b'}}}");
    let mut policy: Value = serde_json::from_str(&policy).unwrap_or_default();
    policy["spec"]["matchConditions"] = json!([{"name": "c", "expression": condition}]);
    policy.to_string()
}

fn cel_policy(failure_policy: &str, expression: &str) -> String {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["pods/binding"]}]},
        "variables": [{"name": "node", "expression": "resource.Get('v1', 'nodes', '', object.target.name)"}],
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}]
    });
    if !failure_policy.is_empty() {
        spec["failurePolicy"] = json!(failure_policy);
    }
    json!({"apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy",
        "metadata": {"name": "m"}, "spec": spec})
    .to_string()
}

fn admission_policy_without_reinvocation_policy() -> String {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "m"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["pods/binding"]}]},
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{metadata: Object.metadata{labels: {'a': 'b'}}}"}}]}})
    .to_string()
}

/// A Binding to `node-1` under [`cel_policy`].
fn cel_binding_case(failure_policy: &str, expression: &str) -> (Vec<u8>, Host) {
    let settings: Value =
        serde_json::from_str(&cel_policy(failure_policy, expression)).unwrap_or_default();
    (payload(fixture("binding.json"), settings), node_1())
}

fn settings_case(settings: &str) -> (Vec<u8>, Host) {
    (settings.as_bytes().to_vec(), node_1())
}

fn catalog() -> Vec<Case> {
    use Answer::*;
    vec![
        Case {
            when: "the request is not JSON",
            answer_text: "request not handled: it cannot be decoded",
            answer: Accepted {
                patched: false,
                warning: "request not handled: it cannot be decoded: expected value",
            },
            run: || (b"<html>".to_vec(), node_1()),
            reads_node: false,
        },
        Case {
            when: "the request is empty",
            answer_text: "request not handled: it cannot be decoded",
            answer: Accepted {
                patched: false,
                warning: "request not handled: it cannot be decoded: EOF while parsing",
            },
            run: || (Vec::new(), node_1()),
            reads_node: false,
        },
        Case {
            when: "a Binding request has no `object`",
            answer_text: "the pods/binding request has no object to mutate",
            answer: Accepted {
                patched: false,
                warning: "the pods/binding request has no object to mutate",
            },
            run: || {
                let mut request = fixture("binding.json");
                request.as_object_mut().unwrap().remove("object");
                (payload(request, json!({})), node_1())
            },
            reads_node: false,
        },
        Case {
            when: "a Binding has no `target`",
            answer_text: "the Binding has no target, so there is no Node to read",
            answer: Accepted {
                patched: false,
                warning: "the Binding has no target, so there is no Node to read",
            },
            run: || {
                (
                    payload(binding_with(json!({"metadata":{"name":"p"}})), json!({})),
                    node_1(),
                )
            },
            reads_node: false,
        },
        Case {
            when: "a Binding's target name is empty",
            answer_text: "the Binding's target has no Node name",
            answer: Accepted {
                patched: false,
                warning: "the Binding's target has no Node name",
            },
            run: || {
                (
                    payload(
                        binding_with(json!({"target":{"kind":"Node","name":""}})),
                        json!({}),
                    ),
                    node_1(),
                )
            },
            reads_node: false,
        },
        Case {
            when: "the Binding object is not a JSON object",
            answer_text: "the Binding has no target",
            answer: Accepted {
                patched: false,
                warning: "the Binding has no target",
            },
            run: || (payload(binding_with(json!([1, 2])), json!({})), node_1()),
            reads_node: false,
        },
        Case {
            when: "a Binding targets something that is not a Node",
            answer_text: "accepted unchanged, the Node is not read",
            answer: Accepted {
                patched: false,
                warning: "",
            },
            run: || {
                (
                    payload(
                        binding_with(json!({"target":{"kind":"Pod","name":"x"}})),
                        json!({}),
                    ),
                    node_1(),
                )
            },
            reads_node: false,
        },
        Case {
            when: "the Node does not exist (`failurePolicy: Ignore`, the default)",
            answer_text: "Node metadata not added: cannot read Node \"node-1\": Cannot find v1/Node named 'node-1'",
            answer: Accepted {
                patched: false,
                warning: "Node metadata not added: cannot read Node \"node-1\": Cannot find v1/Node named 'node-1'",
            },
            run: || {
                (
                    payload(fixture("binding.json"), json!({})),
                    host_error(NODE_MISSING),
                )
            },
            reads_node: true,
        },
        Case {
            when: "the Node does not exist (`failurePolicy: Fail`)",
            answer_text: "rejected: cannot read Node \"node-1\": Cannot find v1/Node",
            answer: Rejected("cannot read Node \"node-1\": Cannot find v1/Node named 'node-1'"),
            run: || {
                (
                    payload(fixture("binding.json"), json!({"failurePolicy":"Fail"})),
                    host_error(NODE_MISSING),
                )
            },
            reads_node: true,
        },
        Case {
            when: "Node is missing from the policy's `contextAwareResources`",
            answer_text: "Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.",
            answer: Accepted {
                patched: false,
                warning: NOT_GRANTED,
            },
            run: || {
                (
                    payload(fixture("binding.json"), json!({})),
                    host_error(NOT_GRANTED),
                )
            },
            reads_node: true,
        },
        Case {
            when: "the host fails (API server unreachable, RBAC denies Nodes)",
            answer_text: "Node metadata not added: cannot read Node \"node-1\": <the host's words>",
            answer: Accepted {
                patched: false,
                warning: "cannot read Node \"node-1\": nodes \"node-1\" is forbidden",
            },
            run: || {
                let error = "nodes \"node-1\" is forbidden: User \"system:serviceaccount:kubewarden:policy-server\" cannot get resource \"nodes\"";
                (
                    payload(fixture("binding.json"), json!({})),
                    host_error(error),
                )
            },
            reads_node: true,
        },
        Case {
            when: "the host's answer is not a Node",
            answer_text: "the host's answer is not a Node with string labels and annotations",
            answer: Accepted {
                patched: false,
                warning: "the host's answer is not a Node with string labels and annotations",
            },
            run: || {
                (
                    payload(fixture("binding.json"), json!({})),
                    host_node(json!({"metadata":{"labels":["zone"]}})),
                )
            },
            reads_node: true,
        },
        Case {
            when: "the Node has thousands of labels and a glob matches them all",
            answer_text: "at most 1000 keys are written per Pod",
            answer: Accepted {
                patched: true,
                warning: "4000 Node keys not copied from Node \"node-1\": at most 1000 keys are written per Pod",
            },
            run: || {
                let labels: serde_json::Map<String, Value> = (0..5000)
                    .map(|i| (format!("bulk.example.com/l{i:05}"), json!("v")))
                    .collect();
                (
                    payload(
                        fixture("binding.json"),
                        json!({"copy":[{"label":"bulk.example.com/*"}]}),
                    ),
                    host_node(json!({"metadata":{"labels":labels}})),
                )
            },
            reads_node: true,
        },
        Case {
            when: "a Node annotation value is huge (over 256 KiB)",
            answer_text: "not written: it would take the annotations over Kubernetes' 256 KiB limit",
            answer: Accepted {
                patched: false,
                warning: "annotation \"note.example.com/huge\" not written: it would take the annotations over Kubernetes' 256 KiB limit",
            },
            run: || {
                let huge = "x".repeat(300 * 1024);
                (
                    payload(
                        fixture("binding.json"),
                        json!({"copy":[{"annotation":"note.example.com/huge"}]}),
                    ),
                    host_node(json!({"metadata":{"annotations":{"note.example.com/huge":huge}}})),
                )
            },
            reads_node: true,
        },
        Case {
            when: "the Pod's annotations are already near 256 KiB",
            answer_text: "not written: it would take the annotations over Kubernetes' 256 KiB limit",
            answer: Accepted {
                patched: true,
                warning: "annotation \"topology.kubernetes.io/zone\" not written: it would take the annotations over Kubernetes' 256 KiB limit",
            },
            run: || {
                let mut request = fixture("pod-with-node-name.json");
                request["object"]["metadata"]["annotations"]["example.com/blob"] =
                    json!("x".repeat(256 * 1024 - 100));
                (payload(request, json!({})), node_1())
            },
            reads_node: true,
        },
        Case {
            when: "a Node value is not a valid label value and `to: labels`",
            answer_text: "not copied to Pod label ... value is not a valid label value",
            answer: Accepted {
                patched: false,
                warning: "not copied to Pod label \"team.example.com/owner\": value is not a valid label value",
            },
            run: || {
                (
                    payload(
                        fixture("binding.json"),
                        json!({"copy":[{"annotation":"team.example.com/owner","to":"labels"}]}),
                    ),
                    node_1(),
                )
            },
            reads_node: true,
        },
        Case {
            when: "a produced Pod key is not a valid key",
            answer_text: "not copied: Pod key ... is invalid",
            answer: Accepted {
                patched: false,
                warning: "label \"rack.example.com/row\" not copied: Pod key \"rack.example.com/row-with-a-suffix-that-makes-the-name-part-longer-than-sixty-three-chars\"",
            },
            run: || {
                (
                    payload(
                        fixture("binding.json"),
                        json!({"copy":[{"label":"rack.example.com/row","rename":"rack.example.com/row-with-a-suffix-that-makes-the-name-part-longer-than-sixty-three-chars"}]}),
                    ),
                    node_1(),
                )
            },
            reads_node: true,
        },
        Case {
            when: "a Pod created with `spec.nodeName` pre-sets the zone annotation",
            answer_text: "overwritten with the Node's value",
            answer: Accepted {
                patched: true,
                warning: "",
            },
            run: || {
                (
                    payload(fixture("pod-with-node-name-spoofed.json"), json!({})),
                    node_1(),
                )
            },
            reads_node: true,
        },
        Case {
            when: "the same, with `onPresetKeys: Reject`",
            answer_text: "rejected: Pod sets annotation ... that this policy fills from its Node",
            answer: Rejected(
                "Pod sets annotation \"topology.kubernetes.io/region\", annotation \"topology.kubernetes.io/zone\" that this policy fills from its Node",
            ),
            run: || {
                (
                    payload(
                        fixture("pod-with-node-name-spoofed.json"),
                        json!({"onPresetKeys":"Reject"}),
                    ),
                    node_1(),
                )
            },
            reads_node: true,
        },
        Case {
            when: "a Pod's `spec.nodeName` is not a string",
            answer_text: "the Pod cannot be decoded",
            answer: Accepted {
                patched: false,
                warning: "the Pod cannot be decoded: invalid type: integer `5`, expected a string",
            },
            run: || {
                let mut request = fixture("pod-with-node-name.json");
                request["object"]["spec"]["nodeName"] = json!(5);
                (payload(request, json!({})), node_1())
            },
            reads_node: false,
        },
        Case {
            when: "the object's `metadata` is not a map",
            answer_text: "the object's metadata is not a JSON object; left unchanged",
            answer: Accepted {
                patched: false,
                warning: "the object's metadata is not a JSON object; left unchanged",
            },
            run: || {
                (
                    payload(
                        binding_with(json!({"metadata":"x","target":{"name":"node-1"}})),
                        json!({}),
                    ),
                    node_1(),
                )
            },
            reads_node: true,
        },
        Case {
            when: "the request is nested thousands of levels deep",
            answer_text: "the Binding cannot be decoded: recursion limit exceeded",
            answer: Accepted {
                patched: false,
                warning: "the Binding cannot be decoded: recursion limit exceeded",
            },
            run: || {
                let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
                let raw = format!(
                    r#"{{"request":{{"operation":"CREATE","kind":{{"kind":"Binding"}},"resource":{{"resource":"pods"}},"subResource":"binding","object":{{"target":{{"name":"node-1"}},"spec":{deep}}}}},"settings":{{}}}}"#
                );
                (raw.into_bytes(), node_1())
            },
            reads_node: false,
        },
        Case {
            when: "the request is an UPDATE",
            answer_text: "accepted unchanged, the Node is not read",
            answer: Accepted {
                patched: false,
                warning: "",
            },
            run: || {
                let mut request = fixture("pod-with-node-name.json");
                request["operation"] = json!("UPDATE");
                (payload(request, json!({})), node_1())
            },
            reads_node: false,
        },
        Case {
            when: "the request is a DELETE",
            answer_text: "accepted unchanged, the Node is not read",
            answer: Accepted {
                patched: false,
                warning: "",
            },
            run: || {
                let mut request = fixture("pod-with-node-name.json");
                request["operation"] = json!("DELETE");
                request["oldObject"] = request["object"].take();
                (payload(request, json!({})), node_1())
            },
            reads_node: false,
        },
        Case {
            when: "the request is a dry run",
            answer_text: "evaluated as usual (dry runs have no side effects, and neither does the policy)",
            answer: Accepted {
                patched: true,
                warning: "",
            },
            run: || {
                let mut request = fixture("binding.json");
                request["dryRun"] = json!(true);
                (payload(request, json!({})), node_1())
            },
            reads_node: true,
        },
        Case {
            when: "settings have the wrong type",
            answer_text: "settings.copy: invalid type: map, expected a sequence",
            answer: SettingsRefused("settings.copy: invalid type: map, expected a sequence"),
            run: || settings_case(r#"{"copy":{"label":"x"}}"#),
            reads_node: false,
        },
        Case {
            when: "settings are not a JSON object",
            answer_text: "settings: must be a JSON object of setting names and values",
            answer: SettingsRefused("settings: must be a JSON object of setting names and values"),
            run: || settings_case("[1,2]"),
            reads_node: false,
        },
        Case {
            when: "settings have an unknown field",
            answer_text: "settings.copy[0].lable: unknown field `lable`",
            answer: SettingsRefused("settings.copy[0].lable: unknown field `lable`"),
            run: || settings_case(r#"{"copy":[{"lable":"x"}]}"#),
            reads_node: false,
        },
        Case {
            when: "a glob is invalid",
            answer_text: "settings.copy[0].label: \"topology.kubernetes.io/[zone]\" character '[' is not allowed",
            answer: SettingsRefused(
                "settings.copy[0].label: \"topology.kubernetes.io/[zone]\" character '[' is not allowed",
            ),
            run: || settings_case(r#"{"copy":[{"label":"topology.kubernetes.io/[zone]"}]}"#),
            reads_node: false,
        },
        Case {
            when: "a rule uses a Kyverno field an admission policy cannot honour (`mutate.targets`)",
            answer_text: "settings.rules[0].mutate.targets: mutating existing resources needs a background controller",
            answer: SettingsRefused(
                "settings.rules[0].mutate.targets: mutating existing resources needs a background controller",
            ),
            run: || {
                settings_case(
                    r#"{"rules":[{"name":"r","match":{"any":[{"resources":{"kinds":["Pod/binding"]}}]},"mutate":{"targets":[{"apiVersion":"v1","kind":"Pod"}],"patchStrategicMerge":{}}}]}"#,
                )
            },
            reads_node: false,
        },
        Case {
            when: "a rule's JMESPath is invalid",
            answer_text: "settings.rules[0]: JMESPath \"request.object.target.[\" is invalid",
            answer: SettingsRefused(
                "settings.rules[0]: JMESPath \"request.object.target.[\" is invalid",
            ),
            run: || {
                settings_case(
                    r#"{"rules":[{"name":"r","match":{"any":[{"resources":{"kinds":["Pod/binding"]}}]},"context":[{"name":"n","variable":{"jmesPath":"request.object.target.["}}],"mutate":{"patchStrategicMerge":{}}}]}"#,
                )
            },
            reads_node: false,
        },
        Case {
            when: "a rule's `foreach` list is very long",
            answer_text: "foreach list \"request.object.spec.containers\" has 1500 elements; at most 1000 are processed",
            answer: Accepted {
                patched: false,
                warning: "foreach list \"request.object.spec.containers\" has 1500 elements; at most 1000 are processed",
            },
            run: || {
                let mut request = fixture("pod-with-node-name.json");
                let containers: Vec<Value> = (0..1500)
                    .map(|i| json!({"name": format!("c{i}"), "image": "x"}))
                    .collect();
                request["object"]["spec"]["containers"] = json!(containers);
                let rules = json!({"rules": [{
                    "name": "per-container",
                    "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                    "mutate": {"foreach": [{
                        "list": "request.object.spec.containers",
                        "patchStrategicMerge": {"metadata": {"labels": {"seen": "yes"}}}
                    }]}
                }]});
                (payload(request, rules), node_1())
            },
            reads_node: false,
        },
        Case {
            when: "an `imageRegistry` context entry names an image the registry does not hold (`failurePolicy: Ignore`)",
            answer_text: "accepted unchanged, with the warning \"rule \"resolve\": context \"digest\": image \"registry.example.com/team/app:v1\": Fail to interact with OCI registry: ... manifest unknown\" (with `failurePolicy: Fail`, rejected with that message)",
            answer: Accepted {
                patched: false,
                warning: "rule \"resolve\": context \"digest\": image \"registry.example.com/team/app:v1\": Fail to interact with OCI registry: OCI API error: manifest unknown",
            },
            run: || {
                let mut request = fixture("pod-with-node-name.json");
                request["object"]["spec"]["containers"][0]["image"] =
                    json!("registry.example.com/team/app:v1");
                let rules = json!({"rules": [{
                    "name": "resolve",
                    "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                    "mutate": {"foreach": [{
                        "list": "request.object.spec.containers",
                        "context": [{"name": "digest", "imageRegistry": {"reference": "{{ element.image }}", "jmesPath": "resolvedImage"}}],
                        "patchStrategicMerge": {"spec": {"containers": [{"name": "{{ element.name }}", "image": "{{ digest }}"}]}}
                    }]}
                }]});
                (
                    payload(request, rules),
                    host_error(
                        "Fail to interact with OCI registry: OCI API error: manifest unknown",
                    ),
                )
            },
            reads_node: true,
        },
        Case {
            when: "an `imageRegistry` context entry sets `imageRegistryCredentials`",
            answer_text: "refused when policy-server loads the policy: \"settings.rules[0].context[0].imageRegistry.imageRegistryCredentials: policy-server reads registries with its own credentials and registry settings (its sources file and docker config); remove this field and configure policy-server\"",
            answer: SettingsRefused(
                "settings.rules[0].context[0].imageRegistry.imageRegistryCredentials: policy-server reads registries with its own credentials and registry settings (its sources file and docker config); remove this field and configure policy-server",
            ),
            run: || {
                settings_case(
                    r#"{"rules": [{"name": "resolve", "match": {"any": [{"resources": {"kinds": ["Pod"]}}]}, "context": [{"name": "digest", "imageRegistry": {"reference": "nginx", "imageRegistryCredentials": {"secrets": ["regcred"]}}}], "mutate": {"patchStrategicMerge": {"metadata": {"annotations": {"digest": "{{ digest.resolvedImage }}"}}}}}]}"#,
                )
            },
            reads_node: false,
        },
        Case {
            when: "a rule matches on `clusterRoles` and RoleBindings are missing from `contextAwareResources`",
            answer_text: "cannot work out the requester's roles: listing RoleBindings: Policy has not been granted access",
            answer: Accepted {
                patched: false,
                warning: "rule \"scheduler-only\": cannot work out the requester's roles: listing RoleBindings: Policy has not been granted access to Kubernetes rbac.authorization.k8s.io/v1/RoleBinding resources. The violation has been reported.",
            },
            run: || {
                let rules = json!({"rules": [{
                    "name": "scheduler-only",
                    "match": {"any": [{"clusterRoles": ["system:kube-scheduler"]}]},
                    "mutate": {"patchStrategicMerge": {"metadata": {"annotations": {"a": "b"}}}}
                }]});
                (
                    payload(fixture("binding.json"), rules),
                    host_error(
                        "Policy has not been granted access to Kubernetes rbac.authorization.k8s.io/v1/RoleBinding resources. The violation has been reported.",
                    ),
                )
            },
            // The host is asked (for the RoleBindings), not for the Node.
            reads_node: true,
        },
        Case {
            when: "a rule's `patchStrategicMerge` is a string or a list (a YAML patch pasted as quoted text)",
            answer_text: "settings.rules[0].mutate.patchStrategicMerge: a strategic merge patch must be a map of the object's fields",
            answer: SettingsRefused(
                "settings.rules[0].mutate.patchStrategicMerge: a strategic merge patch must be a map of the object's fields (such as `metadata: {annotations: ...}`), not a string",
            ),
            run: || settings_case(ROOT_STRING_PATCH),
            reads_node: false,
        },
        Case {
            when: "a rule's `patchesJson6902` has a path that does not begin with `/` (it would replace the whole object)",
            answer_text: "refused when policy-server loads the policy, as Kyverno refuses such a policy: \"settings.rules[0].mutate.patchesJson6902: path must begin with a forward slash: \"\"\"",
            answer: SettingsRefused(
                "settings.rules[0].mutate.patchesJson6902: path must begin with a forward slash: \"\"",
            ),
            run: || {
                settings_case(
                    &json6902_rule(
                        "Ignore",
                        r#"[{"op":"replace","path":"","value":"{{ request.object.metadata.name }}"}]"#,
                    )
                    .to_string(),
                )
            },
            reads_node: false,
        },
        Case {
            when: "a rule's `foreach` patch would replace the whole object (`failurePolicy: Ignore`)",
            answer_text: "accepted unchanged, with the warning \"rule \"r\" not applied: the mutation would replace the whole object with the string",
            answer: Accepted {
                patched: false,
                warning: "rule \"r\" not applied: the mutation would replace the whole object with the string \"busybox\"; refused",
            },
            run: || {
                (
                    payload(
                        fixture("binding.json"),
                        json!({"failurePolicy": "Ignore", "rules": [{"name": "r",
                            "match": {"any": [{"resources": {"kinds": ["Pod/binding"]}}]},
                            "mutate": {"foreach": [{"list": "[request.object.metadata.name]",
                                "patchesJson6902": r#"[{"op":"replace","path":"","value":"{{ element }}"}]"#}]}}]}),
                    ),
                    node_1(),
                )
            },
            reads_node: false,
        },
        Case {
            when: "a rule's patch would remove or change a Binding's `target`, or the object's `kind`, `apiVersion`, `metadata.name` or `metadata.namespace` (`failurePolicy: Fail`)",
            answer_text: "rejected: rule \"r\": the mutation would remove target, which says which object this is",
            answer: Rejected(
                "rule \"r\": the mutation would remove target, which says which object this is; refused",
            ),
            run: || {
                (
                    payload(
                        fixture("binding.json"),
                        json6902_rule("Fail", r#"[{"op":"remove","path":"/target"}]"#),
                    ),
                    node_1(),
                )
            },
            reads_node: false,
        },
        Case {
            when: "the settings are a Kyverno `ValidatingPolicy` (or another kind that does not mutate)",
            answer_text: "settings.kind: ValidatingPolicy (policies.kyverno.io) validates; this policy mutates",
            answer: SettingsRefused(
                "settings.kind: ValidatingPolicy (policies.kyverno.io) validates; this policy mutates",
            ),
            run: || {
                settings_case(
                    r#"{"apiVersion":"policies.kyverno.io/v1","kind":"ValidatingPolicy","metadata":{"name":"v"},"spec":{"matchConstraints":{},"validations":[]}}"#,
                )
            },
            reads_node: false,
        },
        Case {
            when: "a CEL expression does not parse",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: line 1, column 34: expected '}'\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: line 1, column 34: expected '}'",
            ),
            run: || settings_case(&cel_policy("", "Object{metadata: Object.metadata{")),
            reads_node: false,
        },
        Case {
            when: "a CEL expression names a variable nothing declares (a typo)",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: line 1, column 48: undeclared reference to 'objct' (did you mean 'object'?)\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: line 1, column 48: undeclared reference to 'objct' (did you mean 'object'?)",
            ),
            run: || {
                settings_case(&cel_policy(
                    "",
                    "Object{metadata: Object.metadata{labels: {'a': objct.metadata.name}}}",
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL expression reads a variable `spec.variables` does not declare (a typo)",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: line 1, column 48: variables.nod is not declared under spec.variables (did you mean 'variables.node'?)\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: line 1, column 48: variables.nod is not declared under spec.variables (did you mean 'variables.node'?)",
            ),
            run: || {
                settings_case(&cel_policy(
                    "",
                    "Object{metadata: Object.metadata{labels: {'a': variables.nod.metadata.name}}}",
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL expression calls a function nothing declares (a typo)",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: line 1, column 69: undeclared reference to 'lowerAcsii'\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: line 1, column 69: undeclared reference to 'lowerAcsii'",
            ),
            run: || {
                settings_case(&cel_policy(
                    "",
                    "Object{metadata: Object.metadata{labels: {'a': object.metadata.name.lowerAcsii()}}}",
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL expression applies an operator or function to values of the wrong types",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: line 1, column 64: found no matching overload for '_+_' applied to '(string, int)'\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: line 1, column 64: found no matching overload for '_+_' applied to '(string, int)'",
            ),
            run: || {
                settings_case(&cel_policy(
                    "",
                    "Object{metadata: Object.metadata{annotations: {'n': 'labels: ' + size(object.metadata.labels)}}}",
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL timestamp getter names a time zone that does not exist (a typo)",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: line 1, column 94: unknown time zone America/New_Yrok\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: line 1, column 94: unknown time zone America/New_Yrok",
            ),
            run: || {
                settings_case(&cel_policy(
                    "",
                    "Object{metadata: Object.metadata{annotations: {'h': string(timestamp('2026-07-01T12:00:00Z').getHours('America/New_Yrok'))}}}",
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a MutatingAdmissionPolicy leaves out `reinvocationPolicy` (Kubernetes would not store it)",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.reinvocationPolicy: required in a MutatingAdmissionPolicy (Never or IfNeeded), as Kubernetes requires it\"",
            answer: SettingsRefused(
                "settings.spec.reinvocationPolicy: required in a MutatingAdmissionPolicy (Never or IfNeeded), as Kubernetes requires it",
            ),
            run: || settings_case(&admission_policy_without_reinvocation_policy()),
            reads_node: false,
        },
        Case {
            when: "a CEL expression reads a field `request` does not have (a typo)",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.matchConditions[0].expression: line 1, column 9: undefined field 'operaton'\"",
            answer: SettingsRefused(
                "settings.spec.matchConditions[0].expression: line 1, column 9: undefined field 'operaton'",
            ),
            run: || settings_case(&cel_policy_matching("request.operaton == 'CREATE'")),
            reads_node: false,
        },
        Case {
            when: "a CEL match condition is written to give something other than a bool",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.matchConditions[0].expression: gives a string; it must give a bool\"",
            answer: SettingsRefused(
                "settings.spec.matchConditions[0].expression: gives a string; it must give a bool",
            ),
            run: || settings_case(&cel_policy_matching("'has-zone'")),
            reads_node: false,
        },
        Case {
            when: "a PolicyException names a policy the settings do not have",
            answer_text: "refused when policy-server loads the policy: \"settings.policies[1].spec.policyRefs[0]: no MutatingPolicy named \"other\" among settings.policies\"",
            answer: SettingsRefused(
                "settings.policies[1].spec.policyRefs[0]: no MutatingPolicy named \"other\" among settings.policies",
            ),
            run: || {
                let policy =
                    cel_policy("", "Object{metadata: Object.metadata{labels: {'a': 'b'}}}");
                settings_case(&format!(
                    r#"{{"policies": [{policy}, {{"apiVersion": "policies.kyverno.io/v1", "kind": "PolicyException", "metadata": {{"name": "e"}}, "spec": {{"policyRefs": [{{"name": "other", "kind": "MutatingPolicy"}}]}}}}]}}"#
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL expression nests brackets more than 32 deep",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: line 1, column 33: brackets nested more than 32 deep\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: line 1, column 33: brackets nested more than 32 deep",
            ),
            run: || {
                settings_case(&cel_policy(
                    "",
                    &format!("{}1{}", "(".repeat(40), ")".repeat(40)),
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL expression is a huge list literal",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: 12001 bytes; an expression may have at most 10000\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: 12001 bytes; an expression may have at most 10000",
            ),
            run: || {
                let items: Vec<String> = (0..6000).map(|i| (i % 10).to_string()).collect();
                settings_case(&cel_policy("", &format!("[{}]", items.join(","))))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL expression chains more than 100 operations into one another (`1 + 1 + ... + 1`)",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: operations nested more than 100 deep",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: operations nested more than 100 deep",
            ),
            run: || settings_case(&cel_policy("", &vec!["1"; 500].join(" + "))),
            reads_node: false,
        },
        Case {
            when: "CEL comprehensions nest into a runaway loop",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: its comprehensions may loop 101010100 times (a list that is not a literal counts as 100 items); at most 10000000 are allowed\"",
            answer: SettingsRefused(
                "its comprehensions may loop 101010100 times (a list that is not a literal counts as 100 items); at most 10000000 are allowed",
            ),
            run: || {
                settings_case(&cel_policy(
                    "",
                    "object.a.all(x, object.b.all(y, object.c.all(z, object.d.exists(w, x == w))))",
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL expression uses Kyverno's `http` library",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: uses `http`: Kyverno's http library calls endpoints from the policy; a Kubewarden policy has no host capability for arbitrary HTTP\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: uses `http`: Kyverno's http library calls endpoints from the policy; a Kubewarden policy has no host capability for arbitrary HTTP",
            ),
            run: || settings_case(&cel_policy("", "http.Get('https://example.com')")),
            reads_node: false,
        },
        Case {
            when: "a CEL `Object` construction is named off its field path",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: type mismatch: unexpected type name \"Object.metadatas\", expected \"Object.metadata\", which matches field name path from root Object type\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: type mismatch: unexpected type name \"Object.metadatas\", expected \"Object.metadata\", which matches field name path from root Object type",
            ),
            run: || {
                settings_case(&cel_policy(
                    "",
                    "Object{metadata: Object.metadatas{labels: {'a': 'b'}}}",
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL apply configuration sets a field the kind does not declare",
            answer_text: "rejected (`failurePolicy: Fail`, the default): \"MutatingPolicy \"m\": mutations[0]: error applying patch: failed to convert patch object to typed object: .metadata.label: field not declared in schema\"",
            answer: Rejected(
                "MutatingPolicy \"m\": mutations[0]: error applying patch: failed to convert patch object to typed object: .metadata.label: field not declared in schema",
            ),
            run: || {
                cel_binding_case(
                    "",
                    "Object{metadata: Object.metadata{label: {'zone': variables.node.metadata.labels['topology.kubernetes.io/zone']}}}",
                )
            },
            reads_node: true,
        },
        Case {
            when: "a CEL mutation writes a label key that is not a valid key, as a literal",
            answer_text: "refused when policy-server loads the policy: \"settings.spec.mutations[0].applyConfiguration.expression: line 1, column 43: label \"topology.kubernetes.io/zone name\" is not a valid key: name part \"zone name\" may contain only letters, digits, '-', '_' and '.'\"",
            answer: SettingsRefused(
                "settings.spec.mutations[0].applyConfiguration.expression: line 1, column 43: label \"topology.kubernetes.io/zone name\" is not a valid key: name part \"zone name\" may contain only letters, digits, '-', '_' and '.'",
            ),
            run: || {
                settings_case(&cel_policy(
                    "",
                    "Object{metadata: Object.metadata{labels: {\"topology.kubernetes.io/zone name\": variables.node.metadata.name}}}",
                ))
            },
            reads_node: false,
        },
        Case {
            when: "a CEL mutation writes a label key that is not a valid key, computed when it runs (`failurePolicy: Ignore`)",
            answer_text: "accepted unchanged, with the warning \"MutatingPolicy \"m\" not applied: mutations[0]: label \"node-1 zone\" is not a valid key: name part \"node-1 zone\" may contain only letters, digits, '-', '_' and '.'\"",
            answer: Accepted {
                patched: false,
                warning: "MutatingPolicy \"m\" not applied: mutations[0]: label \"node-1 zone\" is not a valid key: name part \"node-1 zone\" may contain only letters, digits, '-', '_' and '.'",
            },
            run: || {
                cel_binding_case(
                    "Ignore",
                    "Object{metadata: Object.metadata{labels: {object.target.name + ' zone': 'x'}}}",
                )
            },
            reads_node: false,
        },
        Case {
            when: "a MutatingPolicy's Node read fails (`failurePolicy: Ignore`)",
            answer_text: "accepted unchanged, with the warning \"MutatingPolicy \"m\" not applied: variables.node: resource.Get: Cannot find v1/Node named 'node-1'",
            answer: Accepted {
                patched: false,
                warning: "MutatingPolicy \"m\" not applied: variables.node: resource.Get: Cannot find v1/Node named 'node-1'",
            },
            run: || {
                let settings: Value = serde_json::from_str(&cel_policy(
                    "Ignore",
                    "Object{metadata: Object.metadata{annotations: {'zone': variables.node.metadata.labels['topology.kubernetes.io/zone']}}}",
                ))
                .unwrap();
                (
                    payload(fixture("binding.json"), settings),
                    host_error(NODE_MISSING),
                )
            },
            reads_node: true,
        },
        Case {
            when: "a `copy` entry is written as a bare string",
            answer_text: "settings.copy[0]: invalid type: string \"topology.kubernetes.io/zone\", expected a copy entry, a map such as `{label: topology.kubernetes.io/zone}`",
            answer: SettingsRefused(
                "expected a copy entry, a map such as `{label: topology.kubernetes.io/zone}` or `{annotation: example.com/rack}`",
            ),
            run: || settings_case(r#"{"copy":["topology.kubernetes.io/zone"]}"#),
            reads_node: false,
        },
        Case {
            when: "a rule reads a variable nothing defines (`{{ zne }}`)",
            answer_text: "settings.rules[0] (rule \"r\"): variable {{zne}} is not defined",
            answer: SettingsRefused(
                "settings.rules[0] (rule \"r\"): variable {{zne}} is not defined",
            ),
            run: || {
                settings_case(
                    r#"{"rules":[{"name":"r","match":{"any":[{"resources":{"kinds":["Pod/binding"]}}]},"mutate":{"patchStrategicMerge":{"metadata":{"annotations":{"zone":"{{ zne }}"}}}}}]}"#,
                )
            },
            reads_node: false,
        },
        Case {
            when: "a glob meets only Node keys under `kubernetes.io/` or `k8s.io/` (`*/zone`)",
            answer_text: "accepted unchanged, with the warning \"settings.copy[0] glob \"*/zone\" matched only Node labels under prefixes Kubernetes reserves",
            answer: Accepted {
                patched: false,
                warning: "settings.copy[0] glob \"*/zone\" matched only Node labels under prefixes Kubernetes reserves (topology.kubernetes.io/zone), so nothing was copied",
            },
            run: || {
                (
                    payload(
                        fixture("binding.json"),
                        json!({"copy": [{"label": "*/zone"}]}),
                    ),
                    node_1(),
                )
            },
            reads_node: true,
        },
        Case {
            when: "settings are `copy: []`, `rules: []` or a policy with `spec.rules: []`",
            answer_text: "accepted unchanged: an empty list means nothing, not the zone/region default",
            answer: Accepted {
                patched: false,
                warning: "",
            },
            run: || {
                (
                    payload(fixture("binding.json"), json!({"rules": []})),
                    node_1(),
                )
            },
            reads_node: false,
        },
        Case {
            when: "settings list more than 500 entries",
            answer_text: "settings.copy: 501 entries; at most 500 are allowed",
            answer: SettingsRefused("settings.copy: 501 entries; at most 500 are allowed"),
            run: || {
                let entries: Vec<String> =
                    (0..501).map(|i| format!(r#"{{"label":"k{i}"}}"#)).collect();
                (
                    format!(r#"{{"copy":[{}]}}"#, entries.join(",")).into_bytes(),
                    node_1(),
                )
            },
            reads_node: false,
        },
    ]
}

#[test]
fn every_bad_input_gets_its_specific_answer() {
    let cases = catalog();
    assert!(cases.len() >= 25, "the catalogue has {} cases", cases.len());
    for case in cases {
        let (input, host) = (case.run)();
        match case.answer {
            Answer::SettingsRefused(text) => {
                let verdict = crate::check_settings(&input);
                assert!(!verdict.valid, "{}: settings accepted", case.when);
                let message = verdict.message.unwrap_or_default();
                assert!(message.contains(text), "{}: got {message:?}", case.when);
                continue;
            }
            Answer::Accepted { patched, warning } => {
                let response = crate::evaluate(&input, &host, &host);
                assert!(
                    response.accepted,
                    "{}: rejected with {:?}",
                    case.when, response.message
                );
                assert_eq!(
                    response.mutated_object.is_some(),
                    patched,
                    "{}: mutated? {:?}",
                    case.when,
                    response.mutated_object
                );
                let warnings = response.warnings.unwrap_or_default();
                if warning.is_empty() {
                    assert!(
                        warnings.is_empty(),
                        "{}: unexpected warnings {warnings:?}",
                        case.when
                    );
                } else {
                    assert!(
                        warnings.iter().any(|w| w.contains(warning)),
                        "{}: got {warnings:?}",
                        case.when
                    );
                    assert!(
                        warnings.len() <= crate::MAX_WARNINGS + 1,
                        "{}: {} warnings",
                        case.when,
                        warnings.len()
                    );
                }
            }
            Answer::Rejected(text) => {
                let response = crate::evaluate(&input, &host, &host);
                assert!(!response.accepted, "{}: accepted", case.when);
                let message = response.message.unwrap_or_default();
                assert!(message.contains(text), "{}: got {message:?}", case.when);
            }
        }
        assert_eq!(
            host.calls.get() > 0,
            case.reads_node,
            "{}: Node read {} times",
            case.when,
            host.calls.get()
        );
    }
}

#[test]
fn operations_table_matches_the_catalogue() {
    let table = std::fs::read_to_string("docs/operations.md").unwrap();
    for case in catalog() {
        let row = table
            .lines()
            .find(|line| line.starts_with(&format!("| {} |", case.when)))
            .unwrap_or_else(|| panic!("docs/operations.md has no row for {:?}", case.when));
        assert!(
            row.contains(case.answer_text),
            "docs/operations.md row for {:?} does not say {:?}",
            case.when,
            case.answer_text
        );
    }
}
