//! End-to-end tests of `evaluate` natively, with the host boundary faked.

use std::cell::RefCell;

use serde_json::{Value, json};

use crate::host::node_lookup::{NodeFields, parse_node};
use crate::*;

/// A `NodeLookup` answering from a fixed result and recording every call.
struct FakeLookup {
    answer: Result<Vec<u8>, String>,
    calls: RefCell<Vec<(String, NodeFields)>>,
}

impl FakeLookup {
    fn node_1() -> FakeLookup {
        let node = std::fs::read("test_data/node-1.json").unwrap();
        assert!(parse_node(&node).is_ok());
        FakeLookup {
            answer: Ok(node),
            calls: RefCell::default(),
        }
    }
    fn failing(cause: &str) -> FakeLookup {
        FakeLookup {
            answer: Err(cause.to_string()),
            calls: RefCell::default(),
        }
    }
}

impl NodeLookup for FakeLookup {
    fn fetch_node(&self, name: &str, fields: NodeFields) -> Result<Vec<u8>, String> {
        self.calls.borrow_mut().push((name.to_string(), fields));
        self.answer.clone()
    }
}

impl crate::host::cluster::Cluster for FakeLookup {
    fn read(&self, _read: &crate::host::cluster::Read) -> Result<Vec<u8>, String> {
        self.calls.borrow_mut().push((
            String::from("cluster read"),
            NodeFields {
                labels: true,
                annotations: true,
            },
        ));
        self.answer.clone()
    }
}

fn payload(request_file: &str, settings: Value) -> Vec<u8> {
    let request: Value =
        serde_json::from_slice(&std::fs::read(format!("test_data/{request_file}")).unwrap())
            .unwrap();
    serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap()
}

#[test]
fn binding_with_default_settings_gets_zone_and_region() {
    let lookup = FakeLookup::node_1();
    let response = evaluate(&payload("binding.json", json!({})), &lookup, &lookup);
    assert!(response.accepted);
    assert_eq!(response.warnings, None);
    let mutated = response.mutated_object.unwrap();
    assert_eq!(
        mutated["metadata"]["annotations"],
        json!({"topology.kubernetes.io/zone":"us-east-2a","topology.kubernetes.io/region":"us-east-2"})
    );
    // Unknown and untouched fields survive.
    assert_eq!(
        mutated["metadata"]["uid"],
        "fceccee4-4821-408a-b75b-44262392b93c"
    );
    assert_eq!(mutated["target"], json!({"kind":"Node","name":"node-1"}));
    assert_eq!(
        *lookup.calls.borrow(),
        vec![(
            "node-1".to_string(),
            NodeFields {
                labels: true,
                annotations: false
            }
        )]
    );
}

#[test]
fn placed_pod_is_mutated_and_unplaced_pod_is_not_looked_up() {
    let lookup = FakeLookup::node_1();
    let settings = json!({"copy":[{"label":"node.kubernetes.io/instance-type","to":"labels"},{"annotation":"team.example.com/owner"}]});
    let response = evaluate(
        &payload("pod-with-node-name.json", settings.clone()),
        &lookup,
        &lookup,
    );
    let mutated = response.mutated_object.unwrap();
    assert_eq!(
        mutated["metadata"]["labels"],
        json!({"app":"web","node.kubernetes.io/instance-type":"m5.xlarge"})
    );
    assert_eq!(
        mutated["metadata"]["annotations"],
        json!({"example.com/owner":"web-team","team.example.com/owner":"platform team (on call: #infra)"})
    );
    assert_eq!(
        lookup.calls.borrow()[0].1,
        NodeFields {
            labels: true,
            annotations: true
        }
    );

    let lookup = FakeLookup::node_1();
    let response = evaluate(
        &payload("pod-without-node-name.json", settings),
        &lookup,
        &lookup,
    );
    assert!(response.accepted && response.mutated_object.is_none() && response.warnings.is_none());
    assert!(lookup.calls.borrow().is_empty());
}

#[test]
fn other_requests_are_accepted_without_a_host_call() {
    let lookup = FakeLookup::node_1();
    let response = evaluate(&payload("deployment.json", json!({})), &lookup, &lookup);
    assert!(response.accepted && response.mutated_object.is_none());
    assert!(lookup.calls.borrow().is_empty());
}

#[test]
fn lookup_failure_follows_the_failure_policy() {
    let cause = "Cannot find v1/Node named 'node-1' inside of namespace 'None'";
    let response = evaluate(
        &payload("binding.json", json!({})),
        &FakeLookup::failing(cause),
        &FakeLookup::failing(cause),
    );
    assert!(response.accepted && response.mutated_object.is_none());
    assert_eq!(
        response.warnings.unwrap(),
        vec![format!(
            "node-metadata-policy: Node metadata not added: cannot read Node \"node-1\": {cause}"
        )]
    );
    let response = evaluate(
        &payload("binding.json", json!({"failurePolicy":"Fail"})),
        &FakeLookup::failing(cause),
        &FakeLookup::failing(cause),
    );
    assert!(!response.accepted);
    assert_eq!(
        response.message.unwrap(),
        format!("node-metadata-policy: cannot read Node \"node-1\": {cause}")
    );
}

#[test]
fn mutated_binding_evaluated_again_changes_nothing() {
    let lookup = FakeLookup::node_1();
    let first = evaluate(
        &payload(
            "binding.json",
            json!({"copy":[{"label":"rack.example.com/*"}]}),
        ),
        &lookup,
        &lookup,
    );
    let mutated = first.mutated_object.unwrap();
    let mut request: Value =
        serde_json::from_slice(&std::fs::read("test_data/binding.json").unwrap()).unwrap();
    request["object"] = mutated;
    let again = serde_json::to_vec(
        &json!({"request": request, "settings": {"copy":[{"label":"rack.example.com/*"}]}}),
    )
    .unwrap();
    let second = evaluate(&again, &lookup, &lookup);
    assert!(second.accepted && second.mutated_object.is_none());
}

#[test]
fn spoofed_placed_pod_is_corrected_or_rejected() {
    let response = evaluate(
        &payload("pod-with-node-name-spoofed.json", json!({})),
        &FakeLookup::node_1(),
        &FakeLookup::node_1(),
    );
    let annotations = &response.mutated_object.unwrap()["metadata"]["annotations"];
    assert_eq!(annotations["topology.kubernetes.io/zone"], "us-east-2a");
    assert_eq!(annotations["topology.kubernetes.io/region"], "us-east-2");
    let response = evaluate(
        &payload(
            "pod-with-node-name-spoofed.json",
            json!({"onPresetKeys":"Reject"}),
        ),
        &FakeLookup::node_1(),
        &FakeLookup::node_1(),
    );
    assert!(!response.accepted);
    let message = response.message.unwrap();
    assert!(message.contains("annotation \"topology.kubernetes.io/region\", annotation \"topology.kubernetes.io/zone\""), "{message}");
}

#[test]
fn undecodable_requests_are_accepted_with_the_reason() {
    let lookup = FakeLookup::node_1();
    for bad in [&b"not json"[..], b"{}", b"{\"request\": 3}", b""] {
        let response = evaluate(bad, &lookup, &lookup);
        assert!(response.accepted);
        let warning = &response.warnings.unwrap()[0];
        assert!(
            warning.starts_with("node-metadata-policy: request not handled: it cannot be decoded"),
            "{warning}"
        );
    }
    assert!(lookup.calls.borrow().is_empty());
}

#[test]
fn settings_check_answers_with_the_reason() {
    assert!(check_settings(b"{}").valid);
    let answer = check_settings(br#"{"copy":[{"label":"a b"}]}"#);
    assert!(!answer.valid);
    assert!(
        answer
            .message
            .unwrap()
            .starts_with("settings.copy[0].label:")
    );
    let answer = check_settings(b"not json");
    assert!(
        !answer.valid
            && answer
                .message
                .unwrap()
                .starts_with("settings: must be a JSON object")
    );
}

#[test]
fn warnings_are_capped() {
    let many: Vec<String> = (0..25).map(|i| format!("w{i}")).collect();
    let capped = cap_warnings(many).unwrap();
    assert_eq!(capped.len(), MAX_WARNINGS + 1);
    assert_eq!(
        capped.last().unwrap(),
        "node-metadata-policy: 15 more warnings not shown"
    );
}

/// The `mutate-pod-binding` sample from Kyverno's blog, `spec.rules` verbatim.
fn kyverno_mutate_pod_binding() -> Value {
    serde_json::from_slice(&std::fs::read("test_data/kyverno-mutate-pod-binding.json").unwrap())
        .unwrap()
}

#[test]
fn kyverno_sample_annotates_the_binding_with_the_zone() {
    assert!(check_settings(&serde_json::to_vec(&kyverno_mutate_pod_binding()).unwrap()).valid);
    let lookup = FakeLookup::node_1();
    let response = evaluate(
        &payload("binding.json", kyverno_mutate_pod_binding()),
        &lookup,
        &lookup,
    );
    assert!(
        response.accepted && response.warnings.is_none(),
        "{:?}",
        response.warnings
    );
    let mutated = response.mutated_object.unwrap();
    // Exactly what the Kyverno rule writes: the zone, and not the region the
    // built-in default would add.
    assert_eq!(
        mutated["metadata"]["annotations"],
        json!({"topology.kubernetes.io/zone": "us-east-2a"})
    );
    assert_eq!(lookup.calls.borrow().len(), 1, "one Node read");
}

#[test]
fn kyverno_sample_without_the_label_writes_empty() {
    let lookup = FakeLookup {
        answer: Ok(
            br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1","labels":{}}}"#
                .to_vec(),
        ),
        calls: RefCell::default(),
    };
    let response = evaluate(
        &payload("binding.json", kyverno_mutate_pod_binding()),
        &lookup,
        &lookup,
    );
    let mutated = response.mutated_object.unwrap();
    assert_eq!(
        mutated["metadata"]["annotations"],
        json!({"topology.kubernetes.io/zone": "empty"})
    );
}

#[test]
fn kyverno_sample_ignores_pods_and_follows_the_failure_policy() {
    let lookup = FakeLookup::node_1();
    let response = evaluate(
        &payload("pod-with-node-name.json", kyverno_mutate_pod_binding()),
        &lookup,
        &lookup,
    );
    assert!(response.accepted && response.mutated_object.is_none());
    assert!(
        lookup.calls.borrow().is_empty(),
        "Pod/binding does not match a Pod"
    );

    let missing =
        FakeLookup::failing("Cannot find v1/Node named 'node-1' inside of namespace 'None'");
    let response = evaluate(
        &payload("binding.json", kyverno_mutate_pod_binding()),
        &missing,
        &missing,
    );
    assert!(response.accepted && response.mutated_object.is_none());
    let warning = &response.warnings.unwrap()[0];
    assert!(
        warning.contains("rule \"project-foo\": context \"zone\": Cannot find v1/Node"),
        "{warning}"
    );

    let mut settings = kyverno_mutate_pod_binding();
    settings["failurePolicy"] = json!("Fail");
    let response = evaluate(&payload("binding.json", settings), &missing, &missing);
    assert!(!response.accepted);
    assert!(response.message.unwrap().contains("rule \"project-foo\""));
}

#[test]
fn rule_expressions_are_checked_at_load_wherever_they_are() {
    let mut settings = kyverno_mutate_pod_binding();
    settings["rules"][0]["preconditions"] = json!({"all": [{"key": "{{ x509_decode(request.name) }}", "operator": "Equals", "value": true}]});
    let answer = check_settings(&serde_json::to_vec(&settings).unwrap());
    assert!(!answer.valid);
    let message = answer.message.unwrap();
    assert!(
        message.contains("function x509_decode() is not available"),
        "{message}"
    );
}
/// The CEL policy documents of a YAML text: documents of a CEL kind, the
/// settings of a manifest or fragment (`settings:`), and those under
/// `policies`.
fn cel_documents(text: &str) -> Vec<Value> {
    fn collect(value: &Value, found: &mut Vec<Value>) {
        let kind = value["kind"].as_str().unwrap_or_default();
        if kind.ends_with("MutatingPolicy") || kind == "MutatingAdmissionPolicy" {
            found.push(value.clone());
        }
        for settings in [&value["settings"], &value["spec"]["settings"]] {
            collect_settings(settings, found);
        }
    }
    fn collect_settings(settings: &Value, found: &mut Vec<Value>) {
        if settings.is_object() {
            collect(settings, found);
        }
        for policy in settings["policies"].as_array().into_iter().flatten() {
            collect(policy, found);
        }
    }
    let mut found = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        // Snippets need not be YAML documents (an env var, placeholders).
        let Ok(document) = <Value as serde::Deserialize>::deserialize(document) else {
            break;
        };
        collect(&document, &mut found);
    }
    found
}

/// Issue 34: a CEL example on `pods/binding` that leaves `failurePolicy`
/// out gets `Fail`, and one Node that cannot be read stops scheduling. Every
/// example a user may copy sets it (or says why not on a comment line that
/// names it), and such a document loads with a warning that says what
/// happens.
#[test]
fn cel_examples_on_bindings_set_failure_policy_and_the_default_is_warned_about() {
    let mut blocks: Vec<(String, String)> = Vec::new();
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir("docs")
        .unwrap()
        .chain(std::fs::read_dir("examples").unwrap())
        .map(|entry| entry.unwrap().path())
        .collect();
    files.push("README.md".into());
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        if name.ends_with(".md") {
            for (i, block) in text.split("```yaml\n").skip(1).enumerate() {
                let block = block.split("\n```").next().unwrap();
                blocks.push((format!("{name} yaml block {}", i + 1), block.to_string()));
            }
        } else {
            blocks.push((name, text));
        }
    }
    let mut checked = 0;
    for (name, block) in &blocks {
        let explained = block
            .lines()
            .any(|line| line.trim_start().starts_with('#') && line.contains("failurePolicy"));
        for document in cel_documents(block) {
            let Ok(plan) = crate::settings::load(document.to_string().as_bytes()) else {
                continue;
            };
            checked += 1;
            let warned: Vec<String> = plan
                .load_warnings()
                .into_iter()
                .filter(|w| w.contains("sets no failurePolicy"))
                .collect();
            assert!(
                warned.is_empty() || explained,
                "{name}: a CEL example on pods/binding without failurePolicy: {warned:?}"
            );
        }
    }
    assert!(checked >= 5, "only {checked} CEL examples found");

    let mut policy: Value = serde_json::from_slice(
        &std::fs::read("test_data/kyverno-mutating-policy-binding.json").unwrap(),
    )
    .unwrap();
    assert_eq!(policy["spec"]["failurePolicy"], "Ignore");
    let warnings = |policy: &Value| crate::check_settings_and_warn(policy.to_string().as_bytes()).1;
    assert_eq!(warnings(&policy), Vec::<String>::new());
    policy["spec"]["failurePolicy"] = json!("Fail");
    assert_eq!(
        warnings(&policy),
        Vec::<String>::new(),
        "Fail written: no warning"
    );
    policy["spec"]
        .as_object_mut()
        .unwrap()
        .remove("failurePolicy");
    assert_eq!(
        warnings(&policy),
        [
            "settings.spec.failurePolicy: MutatingPolicy \"mutate-pod-binding\" matches pods/binding and sets no failurePolicy, so it gets Fail, the default of its kind: a Node that cannot be read (or any other error) rejects the Binding, the scheduler retries, and Pods stay pending; set `failurePolicy: Ignore` to schedule them without the metadata, or `failurePolicy: Fail` to keep this"
        ]
    );
    // The settings' failurePolicy is the user's word too.
    let mut settings = policy.clone();
    settings["failurePolicy"] = json!("Fail");
    assert_eq!(warnings(&settings), Vec::<String>::new());
    // Under `policies`, the document is named by its path; a document that
    // does not match bindings is not warned about.
    let mut pods = policy.clone();
    pods["metadata"]["name"] = json!("pods");
    pods["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = json!(["pods"]);
    // (Its autogen for controllers would be warned about: see
    // cel::conformance, pod_mutations_reach_controller_templates_...)
    pods["spec"]["autogen"] = json!({"podControllers": {"controllers": []}});
    let mut admission = policy.clone();
    admission["apiVersion"] = json!("admissionregistration.k8s.io/v1");
    admission["kind"] = json!("MutatingAdmissionPolicy");
    admission["spec"]["reinvocationPolicy"] = json!("Never");
    admission["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = json!(["pods/*"]);
    admission["spec"]["variables"] = json!([]);
    admission["spec"]["mutations"][0]["applyConfiguration"]["expression"] =
        json!("Object{metadata: Object.metadata{annotations: {'a': 'b'}}}");
    // Kyverno's mutateExisting on the Pod being bound: its reads fail
    // without rejecting the Binding.
    let recipe: Value = serde_yaml::from_str(
        std::fs::read_to_string("docs/recipes.md")
            .unwrap()
            .split("```yaml\n")
            .skip(1)
            .filter_map(|block| block.split("\n```").next())
            .find(|block| block.contains("mutateExisting"))
            .unwrap(),
    )
    .unwrap();
    let mut bound_pod: Value = serde_json::to_value(recipe).unwrap();
    bound_pod["spec"]
        .as_object_mut()
        .unwrap()
        .remove("failurePolicy");
    assert_eq!(warnings(&bound_pod), Vec::<String>::new());
    let warned = warnings(&json!({"policies": [pods, admission]}));
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].starts_with("settings.policies[1].spec.failurePolicy: MutatingAdmissionPolicy \"mutate-pod-binding\" matches pods/binding and sets no failurePolicy"),
        "{warned:?}"
    );
}

/// The rows of the Markdown table whose header line is `header`, as cells.
fn table_rows(text: &str, header: &str) -> Vec<Vec<String>> {
    let start = text
        .find(header)
        .unwrap_or_else(|| panic!("no table {header}"));
    text[start..]
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_string())
                .collect()
        })
        .collect()
}

/// README.md and every guide in docs/.
fn user_docs() -> Vec<String> {
    let mut files = vec!["README.md".to_string()];
    for entry in std::fs::read_dir("docs").unwrap() {
        let path = entry.unwrap().path().display().to_string();
        if path.ends_with(".md") {
            files.push(path);
        }
    }
    files
}

fn number(text: &str) -> u64 {
    text.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {text}"))
}

/// How many results a "not passing" table of docs/kyverno.md counts as
/// `outcome` ("skipped", "refused"): each `;`-separated part of a row's first
/// cell ending in `(outcome)` counts its named tests, or the "N results" /
/// "one result" it gives.
fn listed(text: &str, section: &str, outcome: &str) -> u64 {
    let at = text.find(section).unwrap();
    let end = text[at + section.len()..]
        .find("\n### ")
        .map_or(text.len(), |e| at + section.len() + e);
    let mut count = 0;
    for row in table_rows(&text[at..end], "| not passing | why |") {
        for part in row[0].split(';') {
            let Some(names) = part.trim().strip_suffix(&format!("({outcome})")) else {
                continue;
            };
            let words: Vec<&str> = names.split_whitespace().collect();
            count += match words.iter().position(|w| w.starts_with("result")) {
                Some(i) if words[i - 1] == "one" => 1,
                Some(i) => number(words[i - 1]),
                None => names.matches('`').count() as u64 / 2,
            };
        }
    }
    count
}

/// Issue 34: a figure is given once, in one table, and anything else that
/// quotes it agrees: Kyverno's conformance counts, the skipped tests against
/// the tables listing them, CEL's conformance counts, and README, docs and
/// CHANGELOG against those.
#[test]
fn conformance_figures_agree_across_readme_docs_and_changelog() {
    let kyverno = std::fs::read_to_string("docs/kyverno.md").unwrap();
    let cel = std::fs::read_to_string("docs/cel.md").unwrap();
    let figures = table_rows(&kyverno, "| source | pass | fail | refused | skipped |");
    assert_eq!(figures.len(), 7, "{figures:?}");
    let row = |source: &str| -> [u64; 4] {
        let row = figures
            .iter()
            .find(|r| r[0] == source)
            .unwrap_or_else(|| panic!("no row {source}"));
        [
            number(&row[1]),
            number(&row[2]),
            number(&row[3]),
            number(&row[4]),
        ]
    };
    for r in &figures {
        assert_eq!(r[2], "0", "{}: a failing result", r[0]);
    }
    // What the CLI sections list as not passing is what the table counts.
    let policies_cli = [
        row("kyverno/policies CLI tests, ClusterPolicy samples"),
        row("kyverno/policies CLI tests, `*-mpol` MutatingPolicy samples"),
    ];
    let section = "### kyverno/policies (the samples)";
    for (column, outcome) in [(2, "refused"), (3, "skipped")] {
        assert_eq!(
            listed(&kyverno, section, outcome),
            policies_cli[0][column] + policies_cli[1][column],
            "{section}: {outcome}"
        );
        let section = "### kyverno/kyverno test/cli";
        assert_eq!(
            listed(&kyverno, section, outcome),
            row("kyverno/kyverno `test/cli`")[column],
            "{section}: {outcome}"
        );
    }

    // CEL's conformance runs: each defined once in docs/cel.md, adding up.
    let cel_spec = regex_lite::Regex::new(
        r"\*\*([\d,]+) pass, (\d+) fail, (\d+) skipped, (\d+) refused by the type\s+check\*\* of ([\d,]+)",
    )
    .unwrap()
    .captures(&cel)
    .expect("cel-spec's figures");
    let [pass, fail, skipped, refused, total] =
        [1, 2, 3, 4, 5].map(|i| number(cel_spec.get(i).unwrap().as_str()));
    assert_eq!(pass + fail + skipped + refused, total, "cel-spec");
    let comprehensions = regex_lite::Regex::new(r"ported: (\d+) of (\d+) pass")
        .unwrap()
        .captures(&cel)
        .expect("cel-go's comprehension cases");
    let patch_tests = regex_lite::Regex::new(r"\*\*(\d+) pass\*\*")
        .unwrap()
        .captures(
            &cel[cel
                .find("## Measured against Kubernetes' patch tests")
                .unwrap()..],
        )
        .expect("Kubernetes' patch tests");

    // Everywhere else, a count of passing results is one of these figures,
    // and "N of M pass" the comprehensions' or the patch tests'.
    let mut known: Vec<u64> = figures.iter().map(|r| number(&r[1])).collect();
    known.extend([pass, number(&comprehensions[1]), number(&patch_tests[1])]);
    let of = [
        (number(&comprehensions[1]), number(&comprehensions[2])),
        (number(&patch_tests[1]), 59),
    ];
    let quoted = regex_lite::Regex::new(r"(\d[\d,]*)(?: of (\d+))?(?: results)? pass\b").unwrap();
    let mut checked = 0;
    for path in user_docs().into_iter().chain(["CHANGELOG.md".to_string()]) {
        let text = std::fs::read_to_string(&path).unwrap();
        for quote in quoted.captures_iter(&text) {
            let n = number(&quote[1]);
            checked += 1;
            match quote.get(2) {
                Some(m) => assert!(
                    of.contains(&(n, number(m.as_str()))),
                    "{path}: \"{}\" is not a figure of docs/cel.md",
                    &quote[0]
                ),
                None => assert!(
                    known.contains(&n),
                    "{path}: \"{}\" is none of the figures docs/kyverno.md and docs/cel.md give",
                    &quote[0]
                ),
            }
        }
    }
    assert!(checked >= 5, "only {checked} quoted figures");
}

/// Issue 34: the sizing advice follows from the measurements it cites.
#[test]
fn sizing_figures_agree_with_the_measurements() {
    let operations = std::fs::read_to_string("docs/operations.md").unwrap();
    let performance = std::fs::read_to_string("docs/performance.md").unwrap();
    // One core per N bindings a second, from the latest load-test run's CPU
    // per request with the default settings.
    let latest = &performance[performance.find("### Latest run").unwrap()..];
    let default_row = table_rows(latest, "| row | req/s | p50 ms | p99 ms |")
        .into_iter()
        .find(|r| r[0] == "default settings, Binding, realistic Node")
        .unwrap();
    let cpu_us = number(&default_row[5]);
    let per_core = regex_lite::Regex::new(r"about one core per ([\d,]+) bindings a second")
        .unwrap()
        .captures(&operations)
        .expect("operations.md's sizing advice");
    let per_core = number(&per_core[1]) as f64;
    let measured = 1_000_000.0 / cpu_us as f64;
    assert!(
        (per_core / measured - 1.0).abs() < 0.1,
        "operations.md says one core per {per_core} bindings a second; {cpu_us} µs per binding gives {measured:.0}"
    );
    // The dedicated PolicyServer's memory limit covers the largest Node
    // count measured.
    let rss = table_rows(&operations, "| Nodes | bindings/s |");
    let largest = rss.last().unwrap();
    let mib: u64 = number(
        largest[3]
            .rsplit("→ ")
            .next()
            .unwrap()
            .trim_end_matches(" MiB"),
    );
    let example = std::fs::read_to_string("examples/dedicated-policy-server.yaml").unwrap();
    let limit = example
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("limits:"))
        .find_map(|l| l.trim().strip_prefix("memory: "))
        .unwrap();
    let limit_mib = match limit.strip_suffix("Gi") {
        Some(gi) => number(gi) * 1024,
        None => number(limit.trim_end_matches("Mi")),
    };
    assert!(
        limit_mib >= mib,
        "the example's memory limit {limit} is under the {mib} MiB measured with {} Nodes",
        largest[0]
    );
    assert!(
        example.contains(&format!("up to {} such Nodes", largest[0])),
        "the example's comment names the Node count its limit covers"
    );
}

/// Issue 34: README serves users, and the docs state current facts; how
/// they came about is CHANGELOG's and the commit log's.
#[test]
fn user_docs_state_current_facts() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines; at most 250");
    let guide = std::fs::read_to_string("docs/development.md").unwrap();
    let lines = guide.lines().count();
    assert!(
        lines < 350,
        "docs/development.md has {lines} lines; under 350"
    );
    for path in user_docs() {
        let text = std::fs::read_to_string(&path).unwrap().to_lowercase();
        for history in [
            "this session",
            "session before",
            "sessions before",
            "earlier session",
            "before this work",
        ] {
            assert!(
                !text.contains(history),
                "{path} says \"{history}\": development history goes to CHANGELOG.md and the commit log"
            );
        }
    }
}

/// Issue 44: docs/development.md's file table is the tree. Every path it
/// names exists; every file and folder at the top of src/ has a row; and a
/// row for a folder of src/ names each of its modules (file stems and
/// subfolders, in backquotes).
#[test]
fn the_development_file_table_matches_the_tree() {
    let guide = std::fs::read_to_string("docs/development.md").unwrap();
    let rows = table_rows(&guide, "| path | what |");
    assert!(rows.len() > 10, "the file table has {} rows", rows.len());
    let quoted = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    let mut named = Vec::new();
    for row in &rows {
        for path in quoted(&row[0]) {
            assert!(
                std::path::Path::new(&path).exists(),
                "docs/development.md names {path}, which does not exist"
            );
            named.push(path.trim_end_matches('/').to_string());
        }
    }
    for entry in std::fs::read_dir("src").unwrap() {
        let path = entry.unwrap().path();
        let shown = path.display().to_string();
        assert!(
            named.contains(&shown),
            "docs/development.md's file table has no row for {shown}"
        );
        if !path.is_dir() {
            continue;
        }
        let row = rows
            .iter()
            .find(|row| {
                quoted(&row[0])
                    .iter()
                    .any(|p| p.trim_end_matches('/') == shown)
            })
            .unwrap();
        let described = quoted(&row[1]);
        for module in std::fs::read_dir(&path).unwrap() {
            let module = module.unwrap().path();
            let name = module.file_name().unwrap().to_string_lossy().to_string();
            let stem = name.trim_end_matches(".rs");
            if stem == "mod" || !(module.is_dir() || name.ends_with(".rs")) {
                continue;
            }
            assert!(
                described
                    .iter()
                    .any(|d| d == stem || d.trim_end_matches('/') == stem),
                "docs/development.md's row for {shown} does not name `{stem}`"
            );
        }
    }
}

/// A ClusterPolicy and a MutatingPolicy that both select by namespace read
/// the request's Namespace once: one read path, with the union of what the
/// two need (the labels, and the whole for `namespaceObject`).
#[test]
fn one_namespace_read_when_both_languages_select_by_namespace() {
    use crate::testing::fake_cluster::{FakeCluster, get, request, run_on};
    let cluster_policy = json!({
        "apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": "by-namespace"},
        "spec": {"rules": [{"name": "mark",
            "match": {"any": [{"resources": {"kinds": ["Pod"],
                "namespaceSelector": {"matchLabels": {"team": "web"}}}}]},
            "mutate": {"patchStrategicMerge": {"metadata": {"annotations": {"rule": "yes"}}}}}]}
    });
    let mutating_policy = json!({
        "apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy", "metadata": {"name": "by-namespace-cel"},
        "spec": {
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["pods"]}],
                "namespaceSelector": {"matchLabels": {"team": "web"}}},
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{metadata: Object.metadata{annotations: {'team': namespaceObject.metadata.labels.team}}}"}}]}
    });
    let table = FakeCluster::cluster();
    let response = run_on(
        request("pod-with-node-name.json"),
        json!({"policies": [cluster_policy, mutating_policy]}),
        &table,
    );
    let patched = response
        .mutated_object
        .expect("both policies mutate the Pod");
    assert_eq!(patched["metadata"]["annotations"]["rule"], "yes");
    assert_eq!(patched["metadata"]["annotations"]["team"], "web");
    let namespace_reads = table
        .reads()
        .into_iter()
        .filter(|read| *read == get("v1", "Namespace", None, "default"))
        .count();
    assert_eq!(namespace_reads, 1, "{:?}", table.reads());
}
