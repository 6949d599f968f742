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
    policy_with(&[], annotations)
}

/// [`policy`] with variables: each is a program of its own, under its own
/// cost limit (an authorizer check costs 350,000 of 1,000,000).
fn policy_with(variables: &[(&str, String)], annotations: &str) -> Value {
    let variables: Vec<Value> = variables
        .iter()
        .map(|(name, expression)| json!({"name": name, "expression": expression}))
        .collect();
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "m"}, "spec": {"reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["pods/binding"]}]},
        "variables": variables,
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
    let sa_check =
        "authorizer.serviceAccount('ops', 'placer').group('').resource('nodes').check('get')";
    let variables = [
        ("allowed", format!("string({check}.allowed())")),
        ("again", format!("string({check}.allowed())")),
        ("reason", format!("{check}.reason()")),
        ("sa", format!("string({sa_check}.errored())")),
        ("sa_error", format!("{sa_check}.error()")),
        (
            "request",
            "string(authorizer.requestResource.check('create').errored())".into(),
        ),
        (
            "request_error",
            "authorizer.requestResource.check('create').error()".into(),
        ),
    ];
    let response = run_on(
        request("binding.json"),
        policy_with(
            &variables,
            "{'allowed': variables.allowed, 'again': variables.again, 'reason': variables.reason, \
             'sa': variables.sa, 'sa-error': variables.sa_error, 'request': variables.request, \
             'request-error': variables.request_error}",
        ),
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
    // One check a variable: three in one expression pass the cost limit.
    let variables: Vec<(&str, String)> = (1..=17)
        .map(|i| {
            let name: &str = [
                "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13",
                "v14", "v15", "v16", "v17",
            ][i - 1];
            (
                name,
                format!("authorizer.group('').resource('r{i}').check('get').allowed()"),
            )
        })
        .collect();
    let read: Vec<String> = (1..=17).map(|i| format!("variables.v{i}")).collect();
    let response = run_on(
        request("binding.json"),
        policy_with(
            &variables,
            &format!("{{'n': string([{}].filter(b, b).size())}}", read.join(", ")),
        ),
        &FakeCluster::default(),
    );
    assert!(!response.accepted);
    let message = response.message.unwrap_or_default();
    assert!(message.contains("more than 16"), "{message}");
}

#[test]
fn three_checks_in_one_expression_pass_the_cost_limit() {
    // kube-apiserver charges each check 350,000 and stops an expression
    // past 1,000,000.
    let check = "authorizer.group('').resource('pods').namespace('default').check('{}').allowed()";
    let checks: Vec<String> = ["get", "list", "watch"]
        .iter()
        .map(|verb| check.replace("{}", verb))
        .collect();
    let response = run_on(
        request("binding.json"),
        policy(&format!("{{'n': string([{}].size())}}", checks.join(", "))),
        &FakeCluster::default(),
    );
    let message = response.message.unwrap_or_default();
    assert!(message.contains("actual cost limit exceeded"), "{message}");
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

/// A MutatingAdmissionPolicy whose one mutation reads `variables` variables
/// and which has `conditions` matchConditions, each of them two checks
/// (700,004 in cel-go's runtime cost model).
fn costly_policy(variables: usize, conditions: usize) -> Value {
    let checks = "[authorizer.group('').resource('pods').check('get').allowed(), \
                  authorizer.group('').resource('pods').check('list').allowed()].size()";
    let names: Vec<String> = (0..variables).map(|i| format!("v{i}")).collect();
    let read: Vec<String> = names
        .iter()
        .map(|name| format!("variables.{name}"))
        .collect();
    let sum = if read.is_empty() {
        "0".to_string()
    } else {
        read.join(" + ")
    };
    let variables: Vec<(&str, String)> = names
        .iter()
        .map(|name| (name.as_str(), checks.to_string()))
        .collect();
    let mut policy = policy_with(&variables, &format!("{{'n': string({sum})}}"));
    policy["spec"]["matchConditions"] = (0..conditions)
        .map(|i| json!({"name": format!("m{i}"), "expression": format!("{checks} > 0")}))
        .collect();
    policy
}

#[test]
fn a_mutation_and_the_variables_it_reads_share_kube_apiservers_budget() {
    // kube-apiserver v0.37.2 admits 14 such variables and stops at 15:
    // 10,000,000 for a mutation with the variables it reads.
    let run = |variables| {
        run_on(
            request("binding.json"),
            costly_policy(variables, 0),
            &FakeCluster::default(),
        )
    };
    let within = run(14);
    assert!(within.accepted, "{:?}", within.message);
    let past = run(15);
    assert!(!past.accepted);
    let message = past.message.unwrap_or_default();
    assert!(message.contains("running out of cost budget"), "{message}");
}

#[test]
fn match_conditions_share_kube_apiservers_budget() {
    // 2,500,000 for a policy's matchConditions together.
    let run = |conditions| {
        run_on(
            request("binding.json"),
            costly_policy(0, conditions),
            &FakeCluster::default(),
        )
    };
    let within = run(3);
    assert!(within.accepted, "{:?}", within.message);
    let past = run(4);
    let message = past.message.unwrap_or_default();
    assert!(
        !past.accepted && message.contains("running out of cost budget"),
        "{message}"
    );
}
