//! Kubernetes' `authorizer` in CEL policies, through `evaluate` with the
//! host's `kubernetes/can_i` answered from a table.

use serde_json::{Value, json};

use crate::host::cluster::Read;
use crate::testing::fake_cluster::{FakeCluster, refused, request, run_on};

fn can_i(user: &str, groups: &[&str], resource: &str, sub: &str, ns: &str, verb: &str) -> Read {
    Read::CanI {
        user: user.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        group: String::new(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: String::new(),
        verb: verb.into(),
    }
}

const SCHEDULER: &str = "system:kube-scheduler";
const AUTHENTICATED: &[&str] = &["system:authenticated"];

/// A MutatingAdmissionPolicy: Kyverno's MutatingPolicy has no authorizer.
fn policy(annotations: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "m"}, "spec": {"reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["pods/binding"]}]},
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            format!("Object{{metadata: Object.metadata{{annotations: {annotations}}}}}")}}]}})
}

#[test]
fn checks_ask_the_host_once_each_for_the_requests_user() {
    let sa = "system:serviceaccount:ops:placer";
    let sa_groups = &["system:serviceaccounts", "system:serviceaccounts:ops"];
    let table = FakeCluster::default()
        .with(
            can_i(
                SCHEDULER,
                AUTHENTICATED,
                "pods",
                "binding",
                "default",
                "create",
            ),
            json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding"}),
        )
        .with(
            can_i(sa, sa_groups, "nodes", "", "", "get"),
            json!({"allowed": false, "evaluationError": "webhook unreachable"}),
        );
    let check = "authorizer.group('').resource('pods').subresource('binding').namespace(object.metadata.namespace).check('create')";
    let response = run_on(
        request("binding.json"),
        policy(&format!(
            "{{'allowed': string({check}.allowed()), 'again': string({check}.allowed()), \
             'reason': {check}.reason(), \
             'sa': string(authorizer.serviceAccount('ops', 'placer').group('').resource('nodes').check('get').errored()), \
             'sa-error': authorizer.serviceAccount('ops', 'placer').group('').resource('nodes').check('get').error(), \
             'request': string(authorizer.requestResource.check('create').errored()), \
             'request-error': authorizer.requestResource.check('create').error()}}"
        )),
        &table,
    );
    let object = response.mutated_object.unwrap_or_default();
    let annotations = &object["metadata"]["annotations"];
    assert_eq!(annotations["allowed"], "true", "{object}");
    assert_eq!(annotations["again"], "true");
    assert_eq!(annotations["reason"], "RBAC: allowed by ClusterRoleBinding");
    assert_eq!(annotations["sa"], "true");
    assert_eq!(annotations["sa-error"], "webhook unreachable");
    // The request's own resource, its name included: not in the table, so
    // the check errored (as a failed authorizer does in Kubernetes).
    assert_eq!(annotations["request"], "true");
    assert!(
        annotations["request-error"]
            .as_str()
            .unwrap_or_default()
            .contains("Cannot find"),
        "{object}"
    );
    let mut reads = table.reads();
    let made = reads.len();
    reads.sort();
    reads.dedup();
    assert_eq!(made, 3, "each distinct check once: {reads:?}");
    assert_eq!(reads.len(), 3);
    assert!(
        reads
            .iter()
            .any(|r| matches!(r, Read::CanI { name, subresource, .. }
        if name == "busybox" && subresource == "binding"))
    );
}

#[test]
fn checks_count_in_the_bound_on_host_reads() {
    let response = run_on(
        request("binding.json"),
        policy(
            "{'n': string([1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17].filter(i, \
             authorizer.group('').resource('r' + string(i)).check('get').allowed()).size())}",
        ),
        &FakeCluster::default(),
    );
    assert!(!response.accepted);
    let message = response.message.unwrap_or_default();
    assert!(message.contains("more than 16"), "{message}");
}

#[test]
fn what_can_i_cannot_ask_is_refused_at_load() {
    for (call, named) in [
        ("authorizer.path('/healthz').check('get').allowed()", "path"),
        (
            "authorizer.group('').resource('pods').labelSelector('a=b').check('list').allowed()",
            "labelSelector",
        ),
        (
            "authorizer.serviceAccount('a', 'b').group('').resource('pods').fieldSelector('x=y').check('list').allowed()",
            "fieldSelector",
        ),
    ] {
        let message = refused(policy(&format!("{{'a': string({call})}}")));
        assert!(
            message.contains(&format!("`authorizer` {named}(...)"))
                && message.contains("applyConfiguration.expression"),
            "{message}"
        );
    }
    // Invalid service account names fail the check, as in Kubernetes.
    let response = run_on(
        request("binding.json"),
        policy(
            "{'a': string(authorizer.serviceAccount('Not!', 'b').group('').resource('pods').check('get').allowed())}",
        ),
        &FakeCluster::default(),
    );
    let message = response.message.unwrap_or_default();
    assert!(
        message.contains("Invalid service account namespace"),
        "{message}"
    );
}
