//! CEL policies as Kyverno and Kubernetes define them, run through
//! `evaluate` with the host answered from a table (the Kyverno rules' table).

use serde_json::{Value, json};

use crate::testing::fake_cluster::{FakeCluster, annotations, get, refused, request, run, run_on};

fn binding_rules() -> Value {
    json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE"], "resources": ["pods/binding"]}]})
}

fn mutating_policy(spec: Value) -> Value {
    json!({"apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy",
        "metadata": {"name": "m"}, "spec": spec})
}

/// The project's job in CEL: the Node's zone onto the Binding.
fn zone_from_node() -> Value {
    mutating_policy(json!({
        "matchConstraints": binding_rules(),
        "variables": [{"name": "node",
            "expression": "resource.Get('v1', 'nodes', '', object.target.name)"}],
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{annotations: {'topology.kubernetes.io/zone': variables.node.metadata.?labels[?'topology.kubernetes.io/zone'].orValue('')}}}"}}]
    }))
}

#[test]
fn kyverno_binding_test_in_cel() {
    // kyverno/kyverno test/cli/test-mutating-policy/mutate-pod-binding-subresource.
    let policy = json!({"apiVersion": "policies.kyverno.io/v1beta1", "kind": "MutatingPolicy",
        "metadata": {"name": "mutate-add-aws-zone-id"},
        "spec": {"matchConstraints": binding_rules(), "mutations": [{"patchType": "ApplyConfiguration",
            "applyConfiguration": {"expression": "Object{\n  metadata: Object.metadata{\n    annotations: {\n      \"pod-topology.k8s.aws/zone-id\": \"test-az\"\n    }\n  }\n}"}}]}});
    let response = run("binding.json", policy);
    assert!(response.accepted, "{:?}", response.message);
    assert_eq!(
        annotations(&response),
        json!({"pod-topology.k8s.aws/zone-id": "test-az"})
    );
}

#[test]
fn zone_from_the_node_is_read_once_and_written() {
    let table = FakeCluster::cluster();
    let response = run_on(request("binding.json"), zone_from_node(), &table);
    assert!(response.accepted, "{:?}", response.message);
    assert_eq!(
        annotations(&response),
        json!({"topology.kubernetes.io/zone": "us-east-2a"})
    );
    assert_eq!(table.reads(), [get("v1", "Node", None, "node-1")]);
    // The host is asked only for what the expressions read.
    assert_eq!(
        table.masks.borrow().as_slice(),
        [vec!["metadata.labels".to_string()]]
    );
    // A Pod is not matched: no read, no change.
    let table = FakeCluster::cluster();
    let response = run_on(
        request("pod-without-node-name.json"),
        zone_from_node(),
        &table,
    );
    assert!(response.accepted && response.mutated_object.is_none());
    assert!(table.reads().is_empty());
}

#[test]
fn a_failing_read_follows_the_failure_policy() {
    let table = FakeCluster::default();
    let response = run_on(request("binding.json"), zone_from_node(), &table);
    assert!(!response.accepted, "Fail is the default for CEL policies");
    let message = response.message.unwrap_or_default();
    assert!(
        message.contains("MutatingPolicy \"m\"") && message.contains("Cannot find"),
        "{message}"
    );
    let mut ignore = zone_from_node();
    ignore["spec"]["failurePolicy"] = json!("Ignore");
    let response = run_on(request("binding.json"), ignore, &table);
    assert!(response.accepted && response.mutated_object.is_none());
    let warnings = response.warnings.unwrap_or_default().join(" ");
    assert!(warnings.contains("not applied"), "{warnings}");
}

/// Issue 34: a metadata key the API server would refuse, computed when the
/// mutation runs, follows failurePolicy, and the answer names the policy and
/// the mutation; ignored, the request goes through unchanged (no empty map).
#[test]
fn a_computed_invalid_metadata_key_follows_the_failure_policy() {
    let key = "object.target.name + ' zone'";
    for (patch_type, field, expression) in [
        (
            "ApplyConfiguration",
            "applyConfiguration",
            format!("Object{{metadata: Object.metadata{{labels: {{{key}: 'x'}}}}}}"),
        ),
        (
            "JSONPatch",
            "jsonPatch",
            format!("[JSONPatch{{op: 'add', path: '/metadata/labels', value: {{{key}: 'x'}}}}]"),
        ),
    ] {
        let policy = |failure_policy: Option<&str>| {
            let mut spec = json!({"matchConstraints": binding_rules(),
                "mutations": [{"patchType": patch_type, field: {"expression": expression}}]});
            if let Some(failure_policy) = failure_policy {
                spec["failurePolicy"] = json!(failure_policy);
            }
            mutating_policy(spec)
        };
        let why = "label \"node-1 zone\" is not a valid key: name part \"node-1 zone\" may contain only letters, digits, '-', '_' and '.'";
        for failure_policy in [None, Some("Fail")] {
            let response = run("binding.json", policy(failure_policy));
            assert!(!response.accepted, "{patch_type}: {failure_policy:?}");
            assert_eq!(
                response.message.as_deref(),
                Some(
                    format!("node-metadata-policy: MutatingPolicy \"m\": mutations[0]: {why}")
                        .as_str()
                ),
                "{patch_type}"
            );
        }
        let response = run("binding.json", policy(Some("Ignore")));
        assert!(response.accepted, "{patch_type}");
        assert_eq!(
            response.mutated_object, None,
            "{patch_type}: no patch at all"
        );
        assert_eq!(
            response.warnings.unwrap_or_default(),
            [format!(
                "node-metadata-policy: MutatingPolicy \"m\" not applied: mutations[0]: {why}"
            )],
            "{patch_type}"
        );
    }
    // A label value is checked as the short form checks it.
    let response = run(
        "binding.json",
        mutating_policy(json!({"matchConstraints": binding_rules(),
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{metadata: Object.metadata{labels: {'zone': object.target.name + ' a'}}}"}}]})),
    );
    assert!(
        response.message.as_deref().is_some_and(|m| m.starts_with(
            "node-metadata-policy: MutatingPolicy \"m\": mutations[0]: label \"zone\": value \"node-1 a\" is not a valid label value"
        )),
        "{:?}",
        response.message
    );
}

#[test]
fn json_patch_applies_in_order_and_must_apply() {
    let policy = |expression: &str| {
        mutating_policy(
            json!({"matchConstraints": binding_rules(), "failurePolicy": "Fail",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}]}),
        )
    };
    let response = run(
        "binding.json",
        policy(
            "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}, JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey('example.com/a'), value: 'x'}]",
        ),
    );
    assert!(response.accepted, "{:?}", response.message);
    assert_eq!(annotations(&response), json!({"example.com/a": "x"}));
    // A failed `test` leaves the object as it was, as in Kubernetes and
    // Kyverno (kubernetes/apiserver json_patch_test.go).
    let response = run(
        "binding.json",
        policy(
            "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'a': 'b'}}, JSONPatch{op: 'test', path: '/metadata/name', value: 'other'}]",
        ),
    );
    assert!(response.accepted, "{:?}", response.message);
    assert!(response.mutated_object.is_none());
    // Any other operation that does not apply is an error.
    let response = run(
        "binding.json",
        policy("[JSONPatch{op: 'remove', path: '/metadata/labels/missing'}]"),
    );
    assert!(!response.accepted);
    assert!(
        response
            .message
            .unwrap_or_default()
            .contains("JSON Patch does not apply"),
    );
}

#[test]
fn match_conditions_gate_the_mutations() {
    let policy = |condition: &str| {
        mutating_policy(json!({"matchConstraints": binding_rules(),
            "matchConditions": [{"name": "c", "expression": condition}],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{metadata: Object.metadata{annotations: {'a': request.userInfo.username}}}"}}]}))
    };
    let applied = run("binding.json", policy("request.namespace == 'default'"));
    assert_eq!(annotations(&applied), json!({"a": "system:kube-scheduler"}));
    let skipped = run("binding.json", policy("request.namespace == 'other'"));
    assert!(skipped.accepted && skipped.mutated_object.is_none());
    let failed = run("binding.json", policy("object.nothere.x == 1"));
    assert!(!failed.accepted, "an error follows failurePolicy (Fail)");
}

#[test]
fn a_mutating_admission_policy_reads_its_inline_params() {
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "p"},
        "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "reinvocationPolicy": "Never",
            "matchConstraints": binding_rules(),
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{metadata: Object.metadata{annotations: {'team': params.data.team}}}"}}]},
        "params": {"data": {"team": "web"}}});
    let response = run("binding.json", policy);
    assert_eq!(annotations(&response), json!({"team": "web"}));
}

#[test]
fn a_mutating_admission_policy_kubernetes_would_not_store_is_refused() {
    // What `make cluster-test` found against a real API server.
    let policy = |spec: Value| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "p"}, "spec": spec})
    };
    let mutations = json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
        "Object{metadata: Object.metadata{labels: {'a': 'b'}}}"}}]);
    assert_eq!(
        refused(policy(
            json!({"matchConstraints": binding_rules(), "mutations": mutations})
        )),
        "settings.spec.reinvocationPolicy: required in a MutatingAdmissionPolicy (Never or IfNeeded), as Kubernetes requires it"
    );
    assert_eq!(
        refused(policy(
            json!({"matchConstraints": binding_rules(), "reinvocationPolicy": "Never",
            "mutations": []})
        )),
        "settings.spec.mutations: required: a MutatingAdmissionPolicy has at least one mutation, as Kubernetes requires"
    );
    let deletes = json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE", "DELETE"], "resources": ["pods"]}]});
    assert_eq!(
        refused(policy(
            json!({"matchConstraints": deletes, "reinvocationPolicy": "Never",
            "mutations": mutations})
        )),
        "settings.spec.matchConstraints.resourceRules[0].operations: \"DELETE\": a MutatingAdmissionPolicy mutates CREATE, UPDATE and CONNECT requests (or *), as Kubernetes requires"
    );
    // A Kyverno MutatingPolicy is not held to them.
    let mut kyverno = policy(json!({"matchConstraints": deletes, "mutations": mutations}));
    kyverno["apiVersion"] = json!("policies.kyverno.io/v1");
    kyverno["kind"] = json!("MutatingPolicy");
    let verdict = crate::check_settings(&serde_json::to_vec(&kyverno).unwrap());
    assert!(verdict.valid, "{:?}", verdict.message);
}

#[test]
fn a_namespaced_policy_applies_only_in_its_namespace() {
    let mut policy = json!({"apiVersion": "policies.kyverno.io/v1", "kind": "NamespacedMutatingPolicy",
        "metadata": {"name": "n", "namespace": "other"},
        "spec": {"matchConstraints": binding_rules(), "mutations": [{"patchType": "ApplyConfiguration",
            "applyConfiguration": {"expression": "Object{metadata: Object.metadata{annotations: {'a': 'b'}}}"}}]}});
    assert!(run("binding.json", policy.clone()).mutated_object.is_none());
    policy["metadata"]["namespace"] = json!("default");
    assert_eq!(annotations(&run("binding.json", policy)), json!({"a": "b"}));
}

#[test]
fn policies_run_in_order_each_seeing_the_last() {
    let cluster_policy = json!({"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "first"}, "spec": {"rules": [{"name": "r",
            "match": {"any": [{"resources": {"kinds": ["Pod/binding"]}}]},
            "mutate": {"patchStrategicMerge": {"metadata": {"annotations": {"a": "1"}}}}}]}});
    let cel = mutating_policy(json!({"matchConstraints": binding_rules(),
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{annotations: {'b': object.metadata.annotations.a + '-seen'}}}"}}]}));
    let response = run("binding.json", json!({"policies": [cluster_policy, cel]}));
    assert_eq!(annotations(&response), json!({"a": "1", "b": "1-seen"}));
}

#[test]
fn pod_mutations_reach_controller_templates_as_kyverno_rewrites_them() {
    let policy = |controllers: Value, expression: &str| {
        mutating_policy(
            json!({"matchConstraints": {"resourceRules": [{"apiGroups": [""],
            "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
            "autogen": {"podControllers": {"controllers": controllers}},
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                expression}}]}),
        )
    };
    // `object.spec` and `object.metadata.labels` are the template's, and
    // the root `Object{spec: ...}` is moved into the template.
    let spec = "Object{spec: Object.spec{hostname: object.metadata.labels.app}}";
    let response = run("deployment.json", policy(json!(["Deployment"]), spec));
    assert!(
        response.accepted && response.warnings.is_none(),
        "{:?} {:?}",
        response.message,
        response.warnings
    );
    let mutated = response.mutated_object.unwrap_or_default();
    assert_eq!(
        mutated.pointer("/spec/template/spec/hostname"),
        Some(&json!("web"))
    );
    assert!(mutated.pointer("/spec/hostname").is_none());
    // A nested `Object.metadata{...}` keeps its name under the template,
    // and Kyverno's type check fails it (failurePolicy Fail).
    let labels = "Object{metadata: Object.metadata{labels: {'seen': object.metadata.labels.app}}}";
    let response = run("deployment.json", policy(json!(["Deployment"]), labels));
    assert!(!response.accepted);
    let message = response.message.unwrap_or_default();
    assert!(
        message.contains(
            "unexpected type name \"Object.metadata\", expected \"Object.spec.template.metadata\""
        ),
        "{message}"
    );
    let response = run("deployment.json", policy(json!([]), labels));
    assert!(response.accepted && response.mutated_object.is_none());
    // Said at load, for each kind of template.
    let warnings =
        |settings: Value| crate::check_settings_and_warn(settings.to_string().as_bytes()).1;
    let warned = warnings(policy(json!(["Deployment", "CronJob"]), labels));
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("on Deployment, CronJob with its expressions rewritten"),
        "{warned:?}"
    );
    assert_eq!(
        warnings(policy(json!(["Deployment"]), spec)),
        Vec::<String>::new()
    );
}

#[test]
fn a_result_that_renames_the_object_is_refused() {
    let policy = mutating_policy(json!({"matchConstraints": binding_rules(),
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{name: 'other'}}"}}]}));
    let response = run("binding.json", policy);
    assert!(!response.accepted);
    let message = response.message.unwrap_or_default();
    assert!(message.contains("metadata.name"), "{message}");
}

#[test]
fn mistakes_are_refused_at_load_with_the_path() {
    let with = |spec: Value| refused(mutating_policy(spec));
    let msg = with(
        json!({"matchConstraints": binding_rules(), "mutations": [{"patchType": "ApplyConfiguration",
        "applyConfiguration": {"expression": "Object{metadata: Object.metadata{"}}]}),
    );
    assert!(
        msg.starts_with(
            "settings.spec.mutations[0].applyConfiguration.expression: line 1, column "
        ),
        "{msg}"
    );
    let msg = with(
        json!({"matchConstraints": binding_rules(), "mutations": [{"patchType": "JSONPatch",
        "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/a', value: variables.zone}]"}}]}),
    );
    assert!(msg.contains("variables.zone is not declared"), "{msg}");
    let msg = with(
        json!({"matchConstraints": binding_rules(), "mutations": [{"patchType": "JSONPatch",
        "jsonPatch": {"expression": "http.Get('https://example.com')"}}]}),
    );
    assert!(msg.contains("uses `http`"), "{msg}");
    let msg = with(
        json!({"matchConstraints": binding_rules(), "mutations": [{"patchType": "JSONPatch",
        "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/a', value: image.GetConfig('nginx')}]"}}]}),
    );
    assert!(
        msg.contains(
            "uses `image.GetConfig`: Kyverno's imagedata library has `image.GetMetadata` only"
        ),
        "{msg}"
    );
    // A container's `image` field read with a method is not the imagedata library.
    let policy = mutating_policy(
        json!({"matchConstraints": binding_rules(), "mutations": [{"patchType": "JSONPatch",
        "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/a', value: [{'image': 'corp.io/a'}].exists(c, c.image.startsWith('corp') && image(c.image).registry() == 'corp.io')}]"}}]}),
    );
    let verdict = crate::check_settings(&serde_json::to_vec(&policy).unwrap());
    assert!(verdict.valid, "{:?}", verdict.message);
    let msg = with(
        json!({"matchConstraints": binding_rules(), "mutations": [{"patchType": "JSONPatch",
        "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/a', value: x509.decode('x')}]"}}]}),
    );
    assert!(
        msg.contains("uses `x509`: Kyverno's x509 library is not supported"),
        "{msg}"
    );
    let msg = with(
        json!({"matchConstraints": binding_rules(), "mutations": [{"patchType": "JSONPatch",
        "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/a', value: resource.Post('v1', 'x', {})}]"}}]}),
    );
    assert!(msg.contains("uses `resource.Post`"), "{msg}");
    // A variable that happens to be called `image` is no library call.
    let ok = crate::check_settings(&serde_json::to_vec(&mutating_policy(json!({"matchConstraints": binding_rules(),
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
            "object.metadata.?labels.orValue({}).map(image, [JSONPatch{op: 'add', path: '/a', value: image}])[0]"}}]}))).unwrap());
    assert!(ok.valid, "{:?}", ok.message);
    let msg = with(json!({"mutations": []}));
    assert!(
        msg.starts_with("settings.spec.matchConstraints: required"),
        "{msg}"
    );
    let msg =
        with(json!({"matchConstraints": binding_rules(), "mutations": [{"patchType": "Merge"}]}));
    assert!(
        msg.starts_with("settings.spec.mutations[0].patchType: \"Merge\""),
        "{msg}"
    );
    let msg = with(json!({"matchConstraints": binding_rules(), "mutationz": []}));
    assert!(
        msg.starts_with("settings.spec.mutationz: unknown field"),
        "{msg}"
    );
    let msg = refused(
        json!({"policies": [zone_from_node(), mutating_policy(json!({
        "matchConstraints": binding_rules(), "matchConditions": [{"name": "x", "expression": "1 +"}]}))]}),
    );
    assert!(
        msg.starts_with("settings.policies[1].spec.matchConditions[0].expression: line 1"),
        "{msg}"
    );
}

/// Where a CEL evaluation's time goes, natively (`cargo test --release
/// cel_cost -- --ignored --nocapture`): settings, environment, parsing,
/// the whole evaluation.
#[test]
#[ignore]
fn cel_cost() {
    let settings: Value = serde_json::from_slice(
        &std::fs::read("test_data/kyverno-mutating-policy-binding.json").unwrap(),
    )
    .unwrap();
    let raw = serde_json::to_vec(&settings).unwrap();
    let n = 2000;
    let time = |label: &str, f: &mut dyn FnMut()| {
        let start = std::time::Instant::now();
        for _ in 0..n {
            f();
        }
        eprintln!("{label}: {:?} each", start.elapsed() / n);
    };
    time("settings", &mut || {
        crate::settings::load_for_request(&raw).unwrap();
    });
    let names =
        std::collections::BTreeSet::from(["Object".to_string(), "Object.metadata".to_string()]);
    time("environment", &mut || {
        let _ = crate::cel::eval::environment::runtime_env(
            &names,
            crate::cel::program::library_use::Libraries {
                resource: true,
                ..Default::default()
            },
        );
    });
    let sources: Vec<String> = settings["spec"]["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["expression"].as_str().unwrap().to_string())
        .chain([
            settings["spec"]["mutations"][0]["applyConfiguration"]["expression"]
                .as_str()
                .unwrap()
                .to_string(),
        ])
        .collect();
    time("Env::stdlib", &mut || {
        let _ = ::cel::Env::stdlib();
    });
    time("Env::stdlib + strings", &mut || {
        let mut env = ::cel::Env::stdlib();
        let _ = env.add_extension(::cel::extensions::strings);
    });
    time("Env::stdlib + lists + math", &mut || {
        let mut env = ::cel::Env::stdlib();
        let _ = env.add_extension(::cel::extensions::lists);
        let _ = env.add_extension(::cel::extensions::math);
    });
    time("parse", &mut || {
        for source in &sources {
            crate::cel::program::compile(source, "e").unwrap();
        }
    });
    let node: Value =
        serde_json::from_slice(&std::fs::read("test_data/node-large.json").unwrap()).unwrap();
    let table = FakeCluster::default().with(get("v1", "Node", None, "node-1"), node);
    let payload =
        serde_json::to_vec(&json!({"request": request("binding.json"), "settings": settings}))
            .unwrap();
    time("evaluate", &mut || {
        let response = crate::evaluate(&payload, &table, &table);
        assert!(response.mutated_object.is_some());
    });
    let default =
        serde_json::to_vec(&json!({"request": request("binding.json"), "settings": {}})).unwrap();
    time("evaluate, default settings", &mut || {
        crate::evaluate(&default, &table, &table);
    });
}

fn exception(api_version: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": "PolicyException",
        "metadata": {"name": "exclude-dev"}, "spec": spec})
}

#[test]
fn a_policy_exception_exempts_what_its_conditions_hold_for() {
    // As kyverno/kyverno test/cli/test-mutating-policy/exceptions-mutate-deployment.
    let settings = json!({"policies": [
        zone_from_node(),
        exception("policies.kyverno.io/v1alpha1", json!({
            "policyRefs": [{"name": "m", "kind": "MutatingPolicy"}],
            "matchConditions": [{"name": "not-dev",
                "expression": "object.metadata.namespace != 'dev'"}]}))
    ]});
    let table = FakeCluster::cluster();
    let response = run_on(request("binding.json"), settings.clone(), &table);
    assert!(response.accepted && response.mutated_object.is_none());
    assert!(table.reads().is_empty(), "exempt: the Node is not read");
    let mut dev = request("binding.json");
    dev["namespace"] = json!("dev");
    dev["object"]["metadata"]["namespace"] = json!("dev");
    let response = run_on(dev, settings, &FakeCluster::cluster());
    assert_eq!(
        annotations(&response),
        json!({"topology.kubernetes.io/zone": "us-east-2a"})
    );
}

#[test]
fn policy_exceptions_are_checked_at_load() {
    let with = |exception: Value| json!({"policies": [zone_from_node(), exception]});
    let refs = json!([{"name": "m", "kind": "MutatingPolicy"}]);
    let message = refused(with(exception(
        "policies.kyverno.io/v1",
        json!({"policyRefs": [{"name": "other", "kind": "MutatingPolicy"}]}),
    )));
    assert!(
        message
            .contains("settings.policies[1].spec.policyRefs[0]: no MutatingPolicy named \"other\""),
        "{message}"
    );
    let message = refused(with(exception(
        "policies.kyverno.io/v1",
        json!({"policyRefs": refs, "expiresAt": "2026-05-01T00:00:00Z"}),
    )));
    assert!(
        message.contains("spec.expiresAt: not supported"),
        "{message}"
    );
    let message = refused(with(exception(
        "kyverno.io/v2",
        json!({"exceptions": [{"policyName": "p", "ruleNames": ["r"]}]}),
    )));
    assert!(
        message.contains("settings.policies[1].apiVersion: \"kyverno.io/v2\"")
            && message.contains("ClusterPolicy rules) is not supported"),
        "{message}"
    );
    let message = refused(with(exception(
        "policies.kyverno.io/v1",
        json!({"policyRefs": refs, "matchConditions": [{"name": "c", "expression": "object.("}]}),
    )));
    assert!(
        message.contains("settings.policies[1].spec.matchConditions[0].expression: line 1"),
        "{message}"
    );
    let message = refused(exception(
        "policies.kyverno.io/v1",
        json!({"policyRefs": refs}),
    ));
    assert!(message.contains("under `policies`"), "{message}");
}

#[test]
fn a_failing_variable_fails_only_what_reaches_it() {
    // As kyverno/policies other-mpol/mitigate-log4shell: `isController`
    // fails on a Pod (no spec.template), but a Pod never reaches it.
    let policy = |expression: &str| {
        mutating_policy(json!({
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods"]}]},
            "variables": [
                {"name": "isPod", "expression": "object.kind == 'Pod'"},
                {"name": "isController", "expression": "has(object.spec.template.spec)"}],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}]
        }))
    };
    let response = run(
        "pod-with-node-name.json",
        policy(
            "Object{metadata: Object.metadata{annotations: {'kind': variables.isPod ? 'pod' : (variables.isController ? 'controller' : 'other')}}}",
        ),
    );
    assert!(response.accepted, "{:?}", response.message);
    assert_eq!(annotations(&response)["kind"], json!("pod"));
    let response = run(
        "pod-with-node-name.json",
        policy(
            "Object{metadata: Object.metadata{annotations: {'kind': variables.isController ? 'controller' : 'other'}}}",
        ),
    );
    let message = response.message.unwrap_or_default();
    assert!(
        !response.accepted && message.contains("variables.isController: "),
        "{message}"
    );
}

#[test]
fn libraries_run_in_mutations() {
    // The shape of kyverno/kyverno test/cli/test-mutating-policy/cel-regex-replace
    // and kyverno/policies add-imagepullsecrets-for-containers-and-initcontainers.
    let policy = mutating_policy(json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": [""],
            "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
        "variables": [{"name": "hub",
            "expression": "object.spec.containers.exists(c, image(c.image).registry() == 'index.docker.io')"}],
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{labels: {'hub': string(variables.hub), 'size': string(quantity('1Gi').asInteger())}}, spec: Object.spec{containers: object.spec.containers.map(c, Object.spec.containers{name: c.name, image: regex.replace(image(c.image).registry() + '/' + image(c.image).repository(), '^index\\\\.docker\\\\.io/(.*)', r'mirror.example.com/\\1')})}}"}}]
    }));
    let response = run("pod-with-node-name.json", policy);
    assert!(
        response.accepted && response.warnings.is_none(),
        "{:?} {:?}",
        response.message,
        response.warnings
    );
    let mutated = response.mutated_object.unwrap_or_default();
    assert_eq!(
        mutated.pointer("/spec/containers/0/image"),
        Some(&json!("mirror.example.com/library/nginx"))
    );
    assert_eq!(
        mutated.pointer("/metadata/labels/hub"),
        Some(&json!("true"))
    );
    assert_eq!(
        mutated.pointer("/metadata/labels/size"),
        Some(&json!("1073741824"))
    );
}

#[test]
fn an_exception_with_images_hands_them_to_the_policy() {
    // As kyverno/kyverno test/conformance/chainsaw/mutating-policies/exceptions/exclude-images:
    // the exception does not exempt, the policy reads `exceptions.allowedImages`.
    let policy = mutating_policy(json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["pods"]}]},
        "matchConditions": [{"name": "allowed-images", "expression":
            "object.spec.containers.all(c, string(c.image) in exceptions.allowedImages)"}],
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{labels: {'foo': 'bar'}}}"}}]
    }));
    let settings = |images: Value| {
        json!({"policies": [policy.clone(), exception("policies.kyverno.io/v1",
            json!({"policyRefs": [{"name": "m", "kind": "MutatingPolicy"}], "images": images}))]})
    };
    let labels = |response: &kubewarden_policy_sdk::response::ValidationResponse| {
        response
            .mutated_object
            .as_ref()
            .and_then(|o| o.pointer("/metadata/labels/foo").cloned())
    };
    let pod = request("pod-with-node-name.json");
    let response = run_on(
        pod.clone(),
        settings(json!(["nginx:1.27"])),
        &FakeCluster::cluster(),
    );
    assert_eq!(
        labels(&response),
        Some(json!("bar")),
        "{:?}",
        response.message
    );
    let response = run_on(pod, settings(json!(["busybox"])), &FakeCluster::cluster());
    assert!(response.accepted && labels(&response).is_none());
}

#[test]
fn kyverno_policies_see_the_object_in_request() {
    // Kyverno's `request` carries `object`; Kubernetes' does not.
    let policy = |kind: &str, api_version: &str| {
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "m"},
            "spec": {"matchConstraints": binding_rules(), "reinvocationPolicy": "Never",
                "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                    "Object{metadata: Object.metadata{annotations: {'node': request.object.target.name}}}"}}]}})
    };
    let response = run(
        "binding.json",
        policy("MutatingPolicy", "policies.kyverno.io/v1"),
    );
    assert_eq!(annotations(&response), json!({"node": "node-1"}));
    // Kubernetes' checker refuses it when the policy is created; so does the
    // load-time check here.
    let message = refused(policy(
        "MutatingAdmissionPolicy",
        "admissionregistration.k8s.io/v1",
    ));
    assert!(
        message.ends_with("line 1, column 64: undefined field 'object'"),
        "{message}"
    );
}

#[test]
fn kyverno_generates_pod_controller_mutations_by_default() {
    // As kyverno/policies other-mpol/mutate-large-termination-gps: no `autogen`
    // in the policy, and a Deployment's template is mutated; `object.metadata`
    // outside labels and annotations is the controller's (Kyverno's rewrite
    // leaves `object.metadata.name` as it is).
    let policy = mutating_policy(json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["pods"]}]},
        "matchConditions": [{"name": "in-namespace", "expression": "object.metadata.namespace != ''"}],
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{spec: Object.spec{hostname: object.metadata.name}}"}}]
    }));
    let mut deployment = request("deployment.json");
    deployment["object"]["metadata"]["labels"] = json!({"tier": "front"});
    deployment["object"]["metadata"]["annotations"] = json!({"owner": "team-a"});
    let response = run_on(deployment.clone(), policy, &FakeCluster::cluster());
    let mutated = response.mutated_object.unwrap_or_default();
    // The Deployment's own metadata, labels and annotations included, is left
    // as it was.
    assert_eq!(
        mutated.get("metadata"),
        deployment.pointer("/object/metadata")
    );
    let name = mutated
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        mutated.pointer("/spec/template/spec/hostname"),
        Some(&name),
        "{mutated}"
    );
    // Two resource rules: Kyverno does not generate.
    let two_rules = mutating_policy(json!({
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["services"]}]},
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{labels: {'seen': 'yes'}}}"}}]
    }));
    assert!(run("deployment.json", two_rules).mutated_object.is_none());
}

#[test]
fn image_metadata_comes_from_the_registry_through_the_host() {
    // As kyverno/kyverno test/cli/test-mutating-policy/image-metadata: the
    // image's config through oci/v1/oci_manifest_config, beside the image
    // library's image(...) in the same expression.
    use crate::host::cluster::{ImageRead, Read};
    let image = |what| Read::Image {
        reference: "nginx:1.27".into(),
        what,
    };
    let table = FakeCluster::cluster()
        .with(image(ImageRead::Digest), json!({"digest": "sha256:abc"}))
        .with(
            image(ImageRead::ManifestAndConfig),
            json!({"digest": "sha256:amd", "manifest": {"schemaVersion": 2},
                "config": {"architecture": "amd64", "os": "linux"}}),
        );
    let policy = mutating_policy(json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["pods"]}]},
        "variables": [{"name": "data", "expression": "image.GetMetadata(object.spec.containers[0].image)"}],
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{labels: {'arch': variables.data.config.architecture, 'registry': image(object.spec.containers[0].image).registry()}, annotations: {'resolved': variables.data.resolvedImage}}}"}}]
    }));
    let response = run_on(request("pod-with-node-name.json"), policy, &table);
    let pod = response.mutated_object.unwrap_or_default();
    assert_eq!(
        pod.pointer("/metadata/labels/arch"),
        Some(&json!("amd64")),
        "{pod}"
    );
    assert_eq!(
        pod.pointer("/metadata/labels/registry"),
        Some(&json!("index.docker.io"))
    );
    assert_eq!(
        pod.pointer("/metadata/annotations/resolved"),
        Some(&json!("index.docker.io/library/nginx:1.27@sha256:abc"))
    );
}

#[test]
fn audit_annotations_are_written_as_policy_slash_key() {
    // As kyverno/kyverno conformance mutating-policies/reporting/audit-annotations.
    let policy = mutating_policy(json!({
        "matchConstraints": binding_rules(),
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{annotations: {'seen': 'yes'}}}"}}],
        "auditAnnotations": [
            {"key": "resource-name", "valueExpression": "'binding/' + string(object.metadata.name)"},
            {"key": "target", "valueExpression": "object.target.name"},
            {"key": "absent", "valueExpression": "null"}
        ]
    }));
    let response = run("binding.json", policy);
    assert!(response.accepted, "{:?}", response.message);
    let audit = response.audit_annotations.unwrap_or_default();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(
        audit.get("m/resource-name").map(String::as_str),
        Some("binding/busybox")
    );
    assert_eq!(audit.get("m/target").map(String::as_str), Some("node-1"));

    let number = mutating_policy(json!({"matchConstraints": binding_rules(),
        // An int is refused at load where its type is known (result_types);
        // behind `dyn` it shows only when it runs.
        "auditAnnotations": [{"key": "n", "valueExpression": "dyn(size('ab'))"}]}));
    let response = run("binding.json", number);
    assert!(
        !response.accepted,
        "Fail: a value that is not a string is an error"
    );
    assert!(
        response
            .message
            .unwrap_or_default()
            .contains("auditAnnotations[0]"),
        "the message names the annotation"
    );

    for (annotations, wanted) in [
        (
            json!([{"key": "has space", "valueExpression": "'x'"}]),
            "auditAnnotations[0].key",
        ),
        (
            json!([{"key": "k", "valueExpression": "'x'"}, {"key": "k", "valueExpression": "'y'"}]),
            "auditAnnotations[1].key",
        ),
        (
            json!([{"key": "k", "valueExpression": "'x' +"}]),
            "auditAnnotations[0].valueExpression",
        ),
    ] {
        let msg = refused(mutating_policy(json!({"matchConstraints": binding_rules(),
            "auditAnnotations": annotations})));
        assert!(msg.starts_with(&format!("settings.spec.{wanted}")), "{msg}");
    }
    let admission_policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy", "metadata": {"name": "m"},
        "spec": {"matchConstraints": binding_rules(),
            "auditAnnotations": [{"key": "k", "valueExpression": "'x'"}]}});
    assert!(refused(admission_policy).starts_with("settings.spec.auditAnnotations"));
}

#[test]
fn patches_meet_kubernetes_schema_as_each_engine_checks_it() {
    let rules = |resource: &str, group: &str| {
        json!({"resourceRules": [{"apiGroups": [group], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": [resource]}]})
    };
    let patch = |kind: &str, api_version: &str| {
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "m"},
            "spec": {"matchConstraints": rules("deployments", "apps"), "reinvocationPolicy": "Never",
                "mutations": [{"patchType": "JSONPatch",
                "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/spec/nodeSelector', value: {'a': 'b'}}]"}}]}})
    };
    // Kubernetes decodes the patched Deployment strictly: no such field.
    let response = run(
        "deployment.json",
        patch("MutatingAdmissionPolicy", "admissionregistration.k8s.io/v1"),
    );
    let message = response.message.unwrap_or_default();
    assert!(
        !response.accepted
            && message.contains("strict decoding error: unknown field \"spec.nodeSelector\""),
        "{message}"
    );
    // Kyverno keeps the object unstructured (kyverno/policies
    // other-mpol/add-nodeSelector runs its Pod patch on Deployments).
    let response = run(
        "deployment.json",
        patch("MutatingPolicy", "policies.kyverno.io/v1"),
    );
    assert!(response.accepted, "{:?}", response.message);
    // An apply configuration may not set an atomic map (a Pod's
    // nodeSelector) unless the Kyverno policy asks for server-side apply.
    let apply = |server_side: bool| {
        mutating_policy(json!({"matchConstraints": rules("pods", ""),
            "evaluation": {"useServerSideApply": server_side},
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{spec: Object.spec{nodeSelector: {'zone': 'a'}}}"}}]}))
    };
    let response = run("pod-without-node-name.json", apply(false));
    let message = response.message.unwrap_or_default();
    assert!(
        !response.accepted
            && message
                .contains("may not mutate atomic arrays, maps or structs: .spec.nodeSelector"),
        "{message}"
    );
    let response = run("pod-without-node-name.json", apply(true));
    assert!(response.accepted, "{:?}", response.message);
    assert_eq!(
        response
            .mutated_object
            .unwrap_or_default()
            .pointer("/spec/nodeSelector"),
        Some(&json!({"zone": "a"}))
    );
}

#[test]
fn a_failed_mutation_of_an_ignoring_admission_policy_leaves_the_others() {
    // kube-apiserver's dispatcher records a failed mutation and runs the
    // next on the object as it was (`make differential` seed 1, map-42):
    // with failurePolicy Ignore the Pod keeps what the others did.
    let policy = |failure: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "m"},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods"]}]},
                "failurePolicy": failure, "reinvocationPolicy": "Never",
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                        "Object{metadata: Object.metadata{annotations: {'first': 'x'}, labels: {'l': object.metadata.labels['missing']}}}"}},
                    {"patchType": "JSONPatch", "jsonPatch": {"expression":
                        "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'second': 'y'}}]"}}]}})
    };
    let response = run("pod-without-node-name.json", policy("Ignore"));
    assert!(response.accepted, "{:?}", response.message);
    assert_eq!(annotations(&response), json!({"second": "y"}));
    let warnings = response.warnings.unwrap_or_default().join(" ");
    assert!(
        warnings.contains("MutatingAdmissionPolicy \"m\" mutations[0] not applied"),
        "{warnings}"
    );
    // With Fail the request is rejected, as Kubernetes rejects it.
    let response = run("pod-without-node-name.json", policy("Fail"));
    assert!(!response.accepted);
}

#[test]
fn each_mutation_sees_the_object_as_kubernetes_decoded_it() {
    // kube-apiserver decodes each mutation's object into its Go type before
    // the next one: labels emptied by the first are gone for the second,
    // whose `test` then fails and leaves the object as it was
    // (k8s.io/apiserver v0.37.2's patchers, `make differential` seed 1,
    // map-321).
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "m"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["pods"]}]},
            "failurePolicy": "Fail", "reinvocationPolicy": "Never",
            "mutations": [
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'replace', path: '/metadata/labels', value: {}}]"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'test', path: '/metadata/labels', value: {}}, JSONPatch{op: 'add', path: '/metadata/annotations/second', value: 'y'}]"}}]}});
    let response = run("pod-without-node-name.json", policy);
    assert!(response.accepted, "{:?}", response.message);
    assert_eq!(
        annotations(&response),
        json!({"example.com/owner": "web-team"})
    );
    let object = response.mutated_object.as_ref();
    assert!(object.is_some(), "the labels are removed");
    assert_eq!(object.and_then(|o| o.pointer("/metadata/labels")), None);
}

/// Kubernetes declares a variable by its type made one of its declaration
/// types (an optional, a type or `namespaceObject` become `dyn`); Kyverno by
/// the checked type. Each answer checked against kube-apiserver v0.37.2 and
/// Kyverno 1.19.1 (the differential judges).
#[test]
fn a_variables_type_is_what_each_engine_declares() {
    let policy = |kind: &str, variable: &str, expression: &str| {
        let (api_version, extra) = if kind == "MutatingAdmissionPolicy" {
            (
                "admissionregistration.k8s.io/v1",
                json!({"reinvocationPolicy": "Never"}),
            )
        } else {
            ("policies.kyverno.io/v1", json!({}))
        };
        let mut spec = json!({"matchConstraints": binding_rules(),
            "variables": [{"name": "v", "expression": variable}],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                format!("Object{{metadata: Object.metadata{{annotations: {{'a': size([{expression}]) > 0 ? 'y' : 'n'}}}}}}")}}]});
        for (key, value) in extra.as_object().unwrap() {
            spec[key] = value.clone();
        }
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "p"}, "spec": spec})
    };
    let valid =
        |settings: Value| crate::check_settings(&serde_json::to_vec(&settings).unwrap()).valid;
    let map = "MutatingAdmissionPolicy";
    // Kubernetes: `dyn`, so any field and any comparison compiles.
    assert!(valid(policy(
        map,
        "namespaceObject",
        "variables.v.metadata.foo"
    )));
    // kube-apiserver compiles `type(1)` as a variable (`dyn`); this
    // policy's evaluator cannot keep a type value in its variables, and
    // refuses it at load instead of answering otherwise.
    assert!(refused(policy(map, "type(1)", "variables.v == 1")).contains("holds a type value"));
    // `dyn.orValue(1)` is an int, as cel-go binds `optional(A).orValue(A)`.
    let message = refused(policy(
        map,
        "optional.of(2)",
        "variables.v.orValue(1) + 'a'",
    ));
    assert!(
        message.contains("'_+_' applied to '(int, string)'"),
        "{message}"
    );
    // Lists, maps, timestamps keep their types; an empty literal's items
    // are `dyn`.
    let message = refused(policy(map, "[]", "[variables.v, ['x']]"));
    assert!(
        message.contains("expected type 'list(dyn)' but found 'list(string)'"),
        "{message}"
    );
    // Kyverno: the checked type.
    let message = refused(policy(
        "MutatingPolicy",
        "namespaceObject",
        "variables.v.metadata.foo",
    ));
    assert!(message.contains("undefined field 'foo'"), "{message}");
}

/// kube-apiserver v0.37.2's answers: its cel-go evaluates each argument of
/// a call before the call is tracked, so a `sortBy()` whose list failed
/// fails the expression (Kyverno's does not); a variable is a program of
/// its own, so one that failed so is a failed variable, which `||` absorbs.
#[test]
fn cost_tracking_fails_a_mutating_admission_policys_expression() {
    let policy = |annotation: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "p"},
            "spec": {"reinvocationPolicy": "Never", "matchConstraints": binding_rules(),
                "variables": [{"name": "sorted", "expression": "[1 / 0].sortBy(x, x) == [] && false"}],
                "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                    format!("Object{{metadata: Object.metadata{{annotations: {{'result': {annotation}}}}}}}")}}]}})
    };
    let failed = run(
        "binding.json",
        policy("string([1 / 0].sortBy(x, x) == [] && false)"),
    );
    let message = failed.message.unwrap_or_default();
    assert!(
        !failed.accepted && message.contains("internal error"),
        "{message}"
    );
    let over_the_limit = run(
        "binding.json",
        policy("string([[], [[1, 2, 3]]].flatten(600000).size() == 3 || true)"),
    );
    let message = over_the_limit.message.unwrap_or_default();
    assert!(
        !over_the_limit.accepted && message.contains("cost limit exceeded"),
        "{message}"
    );
    let absorbed = run("binding.json", policy("string(variables.sorted || true)"));
    assert_eq!(annotations(&absorbed), json!({"result": "true"}));
}
