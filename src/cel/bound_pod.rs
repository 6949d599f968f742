//! Kyverno's `evaluation.mutateExisting`: what of it an admission runs.
//!
//! Kyverno runs a mutate-existing MutatingPolicy in two halves. Its webhook
//! runs every MutatingPolicy whose `targetMatchConstraints` name no targets
//! (no resource rules, no expression) over the object being admitted, a
//! mutate-existing one included, unless `evaluation.admission.enabled` is
//! false: that half runs here as any policy does ([`super::engine`]). Its
//! background controller then mutates existing objects (the targets, or
//! without them every object the match constraints select) on each
//! admission that matches and when the policy changes; a Kubewarden policy
//! has no counterpart of that, and [`warning`] says so at load.
//!
//! The one existing object an admission can reach is the Pod a
//! `pods/binding` request binds, and that background run is honoured for
//! it. Kyverno's webhook leaves a policy with targets alone; its background
//! controller runs it over each target the constraints name, once the
//! request's `matchConditions` hold, with `object` the target, its
//! exceptions checked over the target and `targetMatchConditions` in place
//! of `matchConditions`. Here that run happens at the binding: the Pod
//! is read through the host as `targetMatchConstraints.expression` names it,
//! seen as it will be once bound (`spec.nodeName` set and the Binding's
//! annotations copied, as the API server does), and what the mutations
//! change in its labels and annotations rides on the Binding, which the API
//! server copies onto the Pod. A failure in Kyverno's background run leaves
//! the admission alone; so here a target that cannot be mutated this way is
//! a warning, and the Binding goes on unchanged.

use serde_json::{Map, Value};

use super::dispatcher::{check_exceptions, condition_holds, mutate};
use super::spec::MatchResources;
use crate::cel::eval::evaluation::Evaluation;
use crate::cel::eval::request::CelRequest;
use crate::cel::policy::CelPolicy;
use crate::cel::policy::matching;
use crate::host::cluster::Read;
use crate::shared::metadata::section;

/// The Pod being bound, read whole through the host. The load-time check
/// made sure the target expression names it, so it is read here directly:
/// the policy's field masks are worked out for its other reads, and the
/// Pod is the object of the mutations, read whole.
fn read_target(request: &CelRequest) -> Result<Value, String> {
    let (namespace, name) = (&request.facts.namespace, &request.facts.name);
    request
        .cluster
        .read_json(&Read::Get {
            api_version: "v1".to_string(),
            kind: "Pod".to_string(),
            namespace: Some(namespace.clone()),
            name: name.clone(),
            field_masks: Vec::new(),
        })
        .map_err(|why| format!("cannot read Pod {namespace}/{name}: {why}"))
        .and_then(|pod| {
            if pod.is_object() {
                Ok(pod)
            } else {
                Err(format!("reading Pod {namespace}/{name} gave {pod}"))
            }
        })
}

/// The Binding with what the policy changes in the Pod's labels and
/// annotations; where it cannot, the Binding as it was and a warning.
pub(super) fn mutate_target(
    policy: &CelPolicy,
    request: &CelRequest,
    binding: Value,
) -> (Value, Option<String>) {
    let mutated = read_target(request).and_then(|pod| {
        let pod = as_bound(pod, &binding);
        run_on_target(policy, request, &pod)
            .and_then(|after| after.map(|after| carry(&binding, &pod, &after)).transpose())
    });
    match mutated {
        Ok(Some(mutated)) => (mutated, None),
        Ok(None) => (binding, None),
        Err(why) => {
            let warning = format!(
                "{} {:?}: the Pod being bound is left as it is (mutateExisting): {why}",
                policy.kind.name(),
                policy.name
            );
            (binding, Some(warning))
        }
    }
}

/// The Pod as Kyverno's background controller would read it once bound.
fn as_bound(mut pod: Value, binding: &Value) -> Value {
    if let Some(node) = binding.pointer("/target/name")
        && let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.insert("nodeName".to_string(), node.clone());
    }
    if let Some(annotations) = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        && !annotations.is_empty()
        && let Some(own) = metadata_map(&mut pod, "annotations")
    {
        own.extend(annotations.clone());
    }
    pod
}

/// The policy's second run, over the Pod: `None` where the target
/// constraints or conditions leave it out.
fn run_on_target(
    policy: &CelPolicy,
    request: &CelRequest,
    pod: &Value,
) -> Result<Option<Value>, String> {
    let unconstrained = MatchResources::default();
    let constraints = policy
        .spec
        .target_match_constraints
        .as_ref()
        .unwrap_or(&unconstrained);
    if !matching::object_selected(constraints, Some(pod)) {
        return Ok(None);
    }
    let mut evaluation = Evaluation::new(policy, request, pod.clone());
    if constraints.namespace_selector.is_some() && !request.facts.namespace.is_empty() {
        let namespace = evaluation.namespace()?;
        if !matching::namespace_selected(constraints, Some(&namespace)) {
            return Ok(None);
        }
    }
    if !check_exceptions(policy, &mut evaluation)? {
        return Ok(None);
    }
    for (i, condition) in policy.spec.target_match_conditions.iter().enumerate() {
        let at = || format!("{}.spec.targetMatchConditions[{i}]", policy.at);
        if !condition_holds(&mut evaluation, &condition.expression, at)
            .map_err(|why| format!("targetMatchConditions[{i}] ({:?}): {why}", condition.name))?
        {
            return Ok(None);
        }
    }
    mutate(
        policy,
        &mut evaluation,
        crate::cel::patch::apply::schema_of("v1", "Pod"),
    )
    // A Kyverno policy: no mutation is skipped, the policy fails whole.
    .map(|(object, _)| Some(object))
}

/// The Binding with the Pod's new or changed labels and annotations; what
/// a Binding cannot carry (a removal, a change elsewhere) is an error.
fn carry(binding: &Value, before: &Value, after: &Value) -> Result<Value, String> {
    let without_metadata_maps = |pod: &Value| {
        let mut pod = pod.clone();
        if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("labels");
            metadata.remove("annotations");
        }
        pod
    };
    if without_metadata_maps(before) != without_metadata_maps(after) {
        return Err("the mutations change more than the Pod's metadata.labels and metadata.annotations, and a Binding carries only those".to_string());
    }
    let mut binding = binding.clone();
    for key in ["labels", "annotations"] {
        let field = |pod: &'_ Value| {
            pod.get("metadata")
                .and_then(|m| m.get(key))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let (old, new) = (field(before), field(after));
        if let Some(gone) = old.keys().find(|k| !new.contains_key(*k)) {
            return Err(format!(
                "the mutations remove the Pod's {key} {gone:?}, and a Binding can only add or change them"
            ));
        }
        for (name, value) in new {
            if old.get(&name) != Some(&value) {
                let Some(own) = metadata_map(&mut binding, key) else {
                    return Err(format!("the Binding's metadata.{key} is not a map"));
                };
                own.insert(name, value);
            }
        }
    }
    Ok(binding)
}

/// `metadata.<key>` of an object as a map, made where missing or null.
fn metadata_map<'v>(object: &'v mut Value, key: &str) -> Option<&'v mut Map<String, Value>> {
    let metadata = section(object.as_object_mut()?, "metadata")?;
    section(metadata, key)
}

#[cfg(test)]
mod tests {
    use kubewarden_policy_sdk::response::ValidationResponse;
    use serde_json::{Value, json};

    use crate::testing::fake_cluster::{FakeCluster, annotations, get, refused, request, run_on};

    const THE_BOUND_POD: &str =
        "resource.get(\"v1\", \"pods\", object.metadata.namespace, object.metadata.name)";

    /// Kyverno's mutate-existing form of the project's job: the Pod being
    /// bound gets its Node's zone as a label and an annotation.
    fn zone_onto_the_bound_pod(extra: Value) -> Value {
        let mut spec = json!({
            "evaluation": {"mutateExisting": {"enabled": true}},
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods/binding"]}]},
            "targetMatchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}],
                "expression": THE_BOUND_POD},
            "variables": [{"name": "zone", "expression":
                "resource.get('v1', 'nodes', '', object.spec.nodeName).metadata.labels['topology.kubernetes.io/zone']"}],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{metadata: Object.metadata{labels: {'zone': variables.zone}, annotations: {'zone': variables.zone}}}"}}]
        });
        for (key, value) in extra.as_object().into_iter().flatten() {
            spec[key] = value.clone();
        }
        json!({"apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy",
            "metadata": {"name": "zone-on-bound-pod"}, "spec": spec})
    }

    fn cluster_with_the_pod(labels: Value) -> FakeCluster {
        FakeCluster::cluster().with(
            get("v1", "Pod", Some("default"), "busybox"),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "busybox", "namespace": "default", "labels": labels},
                "spec": {"containers": [{"name": "busybox", "image": "busybox"}]}}),
        )
    }

    #[test]
    fn the_pods_new_metadata_rides_on_the_binding() {
        let table = cluster_with_the_pod(json!({"app": "web"}));
        let response = run_on(
            request("binding.json"),
            zone_onto_the_bound_pod(json!({})),
            &table,
        );
        assert!(response.accepted, "{:?}", response.message);
        assert_eq!(
            annotations(&response),
            json!({"zone": "us-east-2a"}),
            "{:?} {:?}",
            response.warnings,
            table.reads()
        );
        let labels = response
            .mutated_object
            .as_ref()
            .and_then(|b| b.pointer("/metadata/labels"))
            .cloned();
        // Only what the mutation changed: the Pod's own label stays off
        // the Binding.
        assert_eq!(labels, Some(json!({"zone": "us-east-2a"})));
        // The Pod, then its Node (named by the binding's target).
        let kinds: Vec<String> = table
            .reads()
            .iter()
            .map(|read| format!("{read:?}"))
            .collect();
        assert_eq!(kinds.len(), 2, "{kinds:?}");
        assert!(
            kinds[0].contains("Pod") && kinds[1].contains("node-1"),
            "{kinds:?}"
        );
    }

    #[test]
    fn target_conditions_and_selectors_see_the_pod() {
        let conditions = json!({"targetMatchConditions": [{"name": "web only",
            "expression": "object.metadata.labels.app == 'web'"}]});
        let table = cluster_with_the_pod(json!({"app": "db"}));
        let response = run_on(
            request("binding.json"),
            zone_onto_the_bound_pod(conditions),
            &table,
        );
        assert!(response.accepted && response.mutated_object.is_none());
        let selector = json!({"targetMatchConstraints": {"expression": THE_BOUND_POD,
            "objectSelector": {"matchLabels": {"app": "web"}}}});
        let table = cluster_with_the_pod(json!({"app": "web"}));
        let response = run_on(
            request("binding.json"),
            zone_onto_the_bound_pod(selector.clone()),
            &table,
        );
        assert_eq!(annotations(&response), json!({"zone": "us-east-2a"}));
        let table = cluster_with_the_pod(json!({"app": "db"}));
        let response = run_on(
            request("binding.json"),
            zone_onto_the_bound_pod(selector),
            &table,
        );
        assert!(response.accepted && response.mutated_object.is_none());
        // The request's matchConditions gate everything, before any read.
        let gate = json!({"matchConditions": [{"name": "never", "expression": "false"}]});
        let table = cluster_with_the_pod(json!({}));
        let response = run_on(
            request("binding.json"),
            zone_onto_the_bound_pod(gate),
            &table,
        );
        assert!(response.accepted && response.mutated_object.is_none());
        assert!(table.reads().is_empty());
    }

    #[test]
    fn what_a_binding_cannot_carry_leaves_the_pod_alone_with_a_warning() {
        let spec_change = json!({"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
            "[JSONPatch{op: 'add', path: '/spec/priority', value: 1}]"}}]});
        let removal = json!({"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
            "[JSONPatch{op: 'remove', path: '/metadata/labels/app'}]"}}]});
        for (extra, expected) in [
            (spec_change, "more than the Pod's metadata.labels"),
            (removal, "remove the Pod's labels \"app\""),
            (json!({}), "Cannot find"),
        ] {
            let table = if expected == "Cannot find" {
                FakeCluster::cluster()
            } else {
                cluster_with_the_pod(json!({"app": "web"}))
            };
            let response = run_on(
                request("binding.json"),
                zone_onto_the_bound_pod(extra),
                &table,
            );
            assert!(response.accepted, "{:?}", response.message);
            assert!(response.mutated_object.is_none());
            let warning = response.warnings.unwrap_or_default().join("\n");
            assert!(
                warning.contains("the Pod being bound is left as it is")
                    && warning.contains(expected),
                "{warning}"
            );
        }
    }

    /// The load-time warnings of the settings (policy-server's log).
    fn warnings(settings: &Value) -> Vec<String> {
        let (verdict, warnings) =
            crate::check_settings_and_warn(&serde_json::to_vec(settings).unwrap());
        assert!(verdict.valid, "{:?}", verdict.message);
        warnings
    }

    /// Kyverno's `other-mpol/label-existing-namespaces`, in short: every
    /// Namespace gets `mykey: myvalue`.
    fn label_namespaces(evaluation: Value) -> Value {
        json!({"apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy",
            "metadata": {"name": "label-existing-namespaces"},
            "spec": {"evaluation": evaluation,
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["namespaces"]}]},
                "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                    "Object{metadata: Object.metadata{labels: {'mykey': 'myvalue'}}}"}}]}})
    }

    fn labels(response: &ValidationResponse) -> Option<Value> {
        response
            .mutated_object
            .as_ref()
            .and_then(|o| o.pointer("/metadata/labels"))
            .cloned()
    }

    #[test]
    fn the_admission_half_mutates_the_trigger_with_a_warning_for_the_rest() {
        let policy = label_namespaces(json!({"mutateExisting": {"enabled": true}}));
        let table = FakeCluster::default();
        let response = run_on(request("namespace-create.json"), policy.clone(), &table);
        assert!(response.accepted, "{:?}", response.message);
        assert_eq!(
            labels(&response),
            Some(json!({"kubernetes.io/metadata.name": "team-a", "mykey": "myvalue"}))
        );
        assert!(table.reads().is_empty(), "{:?}", table.reads());
        assert_eq!(
            warnings(&policy),
            [
                "settings.spec.evaluation.mutateExisting.enabled: MutatingPolicy \"label-existing-namespaces\": the object being admitted is mutated, as Kyverno's webhook mutates it; the background half, mutating other existing objects, needs Kyverno's background controller, which a Kubewarden policy has no counterpart of"
            ]
        );
        // `targetMatchConstraints` without targets is none, as Kyverno reads it.
        let mut empty = policy.clone();
        empty["spec"]["targetMatchConstraints"] = json!({"resourceRules": []});
        let response = run_on(
            request("namespace-create.json"),
            empty,
            &FakeCluster::default(),
        );
        assert_eq!(labels(&response).unwrap()["mykey"], "myvalue");
        // matchConditions gate the admission half as any policy's.
        let mut gated = policy;
        gated["spec"]["matchConditions"] =
            json!([{"name": "not-team-a", "expression": "object.metadata.name != 'team-a'"}]);
        let response = run_on(
            request("namespace-create.json"),
            gated,
            &FakeCluster::default(),
        );
        assert!(response.accepted && response.mutated_object.is_none());
    }

    #[test]
    fn admission_disabled_skips_the_admission_half() {
        let policy = label_namespaces(json!({"admission": {"enabled": false},
            "mutateExisting": {"enabled": true}}));
        let table = FakeCluster::default();
        let response = run_on(request("namespace-create.json"), policy.clone(), &table);
        assert!(response.accepted && response.mutated_object.is_none());
        assert!(table.reads().is_empty());
        let warned = warnings(&policy);
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(
            warned[0].starts_with("settings.spec.evaluation.mutateExisting.enabled: MutatingPolicy \"label-existing-namespaces\": evaluation.admission.enabled is false, so nothing runs here; the background half"),
            "{warned:?}"
        );
        // Written true, it runs, as by default.
        let policy = label_namespaces(json!({"admission": {"enabled": true},
            "mutateExisting": {"enabled": true}}));
        let response = run_on(
            request("namespace-create.json"),
            policy,
            &FakeCluster::default(),
        );
        assert_eq!(labels(&response).unwrap()["mykey"], "myvalue");
    }

    #[test]
    fn other_targets_load_with_a_warning_and_leave_the_request_alone() {
        // Not the bound Pod: Kyverno's webhook leaves such a policy to its
        // background controller; so the Binding goes on untouched, unread.
        let mut pods = zone_onto_the_bound_pod(json!({}));
        pods["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = json!(["pods"]);
        let configmaps = json!({"targetMatchConstraints": {"expression": THE_BOUND_POD,
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}});
        for (settings, hint) in [
            (pods, false),
            (
                zone_onto_the_bound_pod(json!({"targetMatchConstraints":
                {"expression": "resource.list('v1', 'pods', object.metadata.namespace)"}})),
                true,
            ),
            (
                zone_onto_the_bound_pod(
                    json!({"targetMatchConstraints": {"resourceRules": [{"apiGroups": [""],
                "apiVersions": ["v1"], "resources": ["pods"]}]}}),
                ),
                true,
            ),
            (zone_onto_the_bound_pod(configmaps), true),
            (
                zone_onto_the_bound_pod(
                    json!({"targetMatchConstraints": {"expression": THE_BOUND_POD,
                "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}}),
                ),
                true,
            ),
        ] {
            let table = cluster_with_the_pod(json!({}));
            let response = run_on(request("binding.json"), settings.clone(), &table);
            assert!(
                response.accepted && response.mutated_object.is_none(),
                "{settings}"
            );
            assert!(table.reads().is_empty(), "{:?}", table.reads());
            let warned = warnings(&settings);
            assert_eq!(warned.len(), 1, "{warned:?}");
            let expected = "settings.spec.evaluation.mutateExisting.enabled: MutatingPolicy \"zone-on-bound-pod\": with targets, Kyverno's webhook leaves the object being admitted alone, and so does this policy; the background half, mutating the targets, needs Kyverno's background controller, which a Kubewarden policy has no counterpart of";
            let expected = if hint {
                format!(
                    "{expected}; the one target an admission can reach is the Pod being bound: match only pods/binding, and name the Pod with targetMatchConstraints.expression: resource.get(\"v1\", \"pods\", object.metadata.namespace, object.metadata.name)"
                )
            } else {
                expected.to_string()
            };
            assert_eq!(warned[0], expected);
        }
        // Targets without mutateExisting: Kyverno's webhook skips it too.
        let mut targets_only = zone_onto_the_bound_pod(json!({"failurePolicy": "Ignore"}));
        targets_only["spec"]["evaluation"] = json!({});
        let table = cluster_with_the_pod(json!({}));
        let response = run_on(request("binding.json"), targets_only.clone(), &table);
        assert!(response.accepted && response.mutated_object.is_none());
        assert!(table.reads().is_empty());
        assert_eq!(
            warnings(&targets_only),
            [
                "settings.spec.targetMatchConstraints: MutatingPolicy \"zone-on-bound-pod\" has targets without evaluation.mutateExisting.enabled: it changes nothing, in Kyverno as here"
            ]
        );
    }

    #[test]
    fn the_bound_pod_loads_without_a_warning_and_fields_are_still_checked() {
        assert_eq!(
            warnings(&zone_onto_the_bound_pod(json!({}))),
            Vec::<String>::new()
        );
        for (extra, field) in [
            (
                json!({"targetMatchConstraints": {"expression": THE_BOUND_POD, "color": 1}}),
                "settings.spec.targetMatchConstraints.color: unknown field",
            ),
            (
                json!({"targetMatchConditions": [{"name": "c", "expression": "object.("}]}),
                "settings.spec.targetMatchConditions[0].expression",
            ),
            (
                json!({"targetMatchConstraints": {"expression": "resource.get('v1', 'pods', objct.metadata.namespace, 'x')"}}),
                "settings.spec.targetMatchConstraints.expression",
            ),
            (
                json!({"matchConstraints": {"expression": THE_BOUND_POD, "resourceRules": []}}),
                "settings.spec.matchConstraints.expression: unknown field",
            ),
        ] {
            let msg = refused(zone_onto_the_bound_pod(extra));
            assert!(msg.starts_with(field), "{field}: {msg}");
        }
    }
}
