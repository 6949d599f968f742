//! The packaging files agree with each other and with the policy: versions,
//! the rules and context-aware resources a deployment needs, and example
//! settings the real policy accepts.

use std::path::{Path, PathBuf};

use policy_host::PolicyModule;
use serde_yaml::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn yaml(path: &str) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(root().join(path)).unwrap()).unwrap()
}

fn yaml_docs(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .collect()
}

fn crate_version() -> String {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.starts_with("version = "))
        .unwrap();
    line.trim_start_matches("version = ")
        .trim_matches('"')
        .to_string()
}

/// README's Quick start is what `make kubewarden-test` runs line by line
/// (where it can run: root, Go, the controller's source); here, on every
/// machine, its files exist and its policy and PolicyServer are the
/// production example's.
#[test]
fn quick_start_applies_the_examples() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## Quick start\n")
        .nth(1)
        .expect("README has a Quick start")
        .split("\n## ")
        .next()
        .unwrap();
    let block = section
        .split("```sh\n")
        .nth(1)
        .expect("Quick start has a sh block")
        .split("```")
        .next()
        .unwrap();
    let applied: Vec<&str> = block
        .lines()
        .filter_map(|line| line.strip_prefix("kubectl apply -f "))
        .collect();
    assert_eq!(
        applied,
        [
            "examples/rbac.yaml",
            "examples/dedicated-policy-server.yaml",
            "examples/pod-reading-node-metadata.yaml"
        ],
        "README's Quick start applies other files than make kubewarden-test expects"
    );
    for file in &applied {
        assert!(root().join(file).exists(), "{file} is missing");
    }
    assert!(
        block.contains("kubectl wait clusteradmissionpolicy/node-metadata")
            && yaml_docs("examples/dedicated-policy-server.yaml")
                .iter()
                .any(|doc| doc["kind"] == "ClusterAdmissionPolicy"
                    && doc["metadata"]["name"] == "node-metadata"),
        "the Quick start waits for the policy examples/dedicated-policy-server.yaml defines"
    );
}

#[test]
fn versions_agree() {
    let version = crate_version();
    let metadata = yaml("metadata.yml");
    assert_eq!(
        metadata["annotations"]["io.kubewarden.policy.version"].as_str(),
        Some(version.as_str())
    );
    let artifacthub = yaml("artifacthub-pkg.yml");
    assert_eq!(artifacthub["version"].as_str(), Some(version.as_str()));
    let image = artifacthub["containersImages"][0]["image"]
        .as_str()
        .unwrap();
    assert!(image.ends_with(&format!(":v{version}")), "{image}");
    let policy = &yaml_docs("examples/cluster-admission-policy.yaml")[0];
    let module = policy["spec"]["module"].as_str().unwrap();
    assert!(module.ends_with(&format!(":v{version}")), "{module}");
}

#[test]
fn metadata_declares_what_the_policy_needs() {
    let metadata = yaml("metadata.yml");
    let rule = &metadata["rules"][0];
    let resources: Vec<&str> = rule["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(resources, ["pods/binding", "pods"]);
    assert_eq!(rule["operations"][0].as_str(), Some("CREATE"));
    assert_eq!(metadata["mutating"].as_bool(), Some(true));
    assert_eq!(metadata["backgroundAudit"].as_bool(), Some(false));
    assert_eq!(metadata["executionMode"].as_str(), Some("kubewarden-wapc"));
    assert_eq!(
        metadata["contextAwareResources"][0]["kind"].as_str(),
        Some("Node")
    );
    assert_eq!(
        metadata["contextAwareResources"][0]["apiVersion"].as_str(),
        Some("v1")
    );
}

#[test]
fn example_policy_is_deployable_and_its_settings_are_valid() {
    let policy = &yaml_docs("examples/cluster-admission-policy.yaml")[0];
    let spec = &policy["spec"];
    assert_eq!(policy["kind"].as_str(), Some("ClusterAdmissionPolicy"));
    assert_eq!(spec["mutating"].as_bool(), Some(true));
    assert_eq!(
        spec["contextAwareResources"][0]["kind"].as_str(),
        Some("Node")
    );
    let excluded = spec["namespaceSelector"]["matchExpressions"][0]["values"]
        .as_sequence()
        .unwrap();
    assert!(excluded.iter().any(|v| v.as_str() == Some("kubewarden")));
    assert!(excluded.iter().any(|v| v.as_str() == Some("kube-system")));

    let wasm =
        std::env::var_os("POLICY_WASM").map_or_else(|| root().join("policy.wasm"), PathBuf::from);
    let module = PolicyModule::load(&wasm).unwrap();
    let settings: serde_json::Value = serde_json::to_value(&spec["settings"]).unwrap();
    let verdict = module.validate_settings(&settings).unwrap();
    assert!(verdict.valid, "{:?}", verdict.message);

    let rbac = yaml_docs("examples/rbac.yaml");
    assert_eq!(rbac[0]["rules"][0]["resources"][0].as_str(), Some("nodes"));
    assert_eq!(rbac[1]["roleRef"]["name"], rbac[0]["metadata"]["name"]);
}

#[test]
fn every_e2e_case_also_runs_through_kwctl() {
    let cases: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root().join("e2e-tests/cases.json")).unwrap())
            .unwrap();
    let bats = std::fs::read_to_string(root().join("e2e-tests/e2e.bats")).unwrap();
    for case in cases.as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        assert!(
            bats.contains(&format!("  run_case {name}\n")),
            "e2e.bats has no test for case {name}"
        );
    }
}

/// release.env holds where the policy is published; every copy agrees.
#[test]
fn release_info_is_set_in_one_place() {
    let env = std::fs::read_to_string(root().join("release.env")).unwrap();
    let value = |key: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap()
            .trim()
            .to_string()
    };
    let (repository, source) = (value("OCI_REPOSITORY"), value("SOURCE_URL"));
    let reference = format!("{repository}:v{}", crate_version());
    let metadata = yaml("metadata.yml");
    let annotations = &metadata["annotations"];
    assert_eq!(
        annotations["io.kubewarden.policy.ociUrl"].as_str(),
        Some(repository.as_str())
    );
    assert_eq!(
        annotations["io.kubewarden.policy.url"].as_str(),
        Some(source.as_str())
    );
    assert_eq!(
        annotations["io.kubewarden.policy.source"].as_str(),
        Some(source.as_str())
    );
    let artifacthub = yaml("artifacthub-pkg.yml");
    assert_eq!(artifacthub["homeURL"].as_str(), Some(source.as_str()));
    assert_eq!(
        artifacthub["links"][0]["url"].as_str(),
        Some(source.as_str())
    );
    assert_eq!(
        artifacthub["containersImages"][0]["image"].as_str(),
        Some(reference.as_str())
    );
    // Every registry:// reference users copy names this release.
    for path in [
        "artifacthub-pkg.yml",
        "examples/cluster-admission-policy.yaml",
        "docs/kyverno.md",
        "docs/recipes.md",
        "docs/development.md",
    ] {
        let text = std::fs::read_to_string(root().join(path)).unwrap();
        let mut found = 0;
        for (at, _) in text.match_indices("registry://") {
            let rest = &text[at + "registry://".len()..];
            let end = rest
                .find(|c: char| c.is_whitespace() || "`\"'".contains(c))
                .unwrap_or(rest.len());
            assert_eq!(
                &rest[..end],
                reference,
                "{path}: a registry:// reference that is not this release"
            );
            found += 1;
        }
        assert!(found > 0, "{path} names no registry:// reference");
    }
}

/// Every ```yaml block of README.md and docs/, with where it came from.
fn doc_yaml_blocks() -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    files.push(root().join("README.md"));
    files.sort();
    let mut blocks = Vec::new();
    for path in files {
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, block) in text.split("```yaml\n").skip(1).enumerate() {
            let block = block.split("\n```").next().unwrap();
            blocks.push((format!("{name} yaml block {}", i + 1), block.to_string()));
        }
    }
    blocks
}

/// What a user may do with a block of the docs.
enum Block {
    /// A Kubewarden policy manifest: `kubectl apply` it, or `kwctl run` it.
    Manifest(Value),
    /// Policy settings: a `settings:` block, which goes under a
    /// ClusterAdmissionPolicy's `spec`, or a policy document (Kyverno's or
    /// Kubernetes') that is the settings whole.
    Settings(Value),
    /// Another whole Kubernetes object (a ConfigMap, a Pod).
    Object,
    /// Part of something else, saying so in its first line (`fragment:`),
    /// which any target refuses: kubectl as an unknown field or a document
    /// without `apiVersion`, the policy as an unknown setting.
    Fragment,
}

const POLICY_DOCUMENT_KINDS: [&str; 5] = [
    "ClusterPolicy",
    "Policy",
    "MutatingPolicy",
    "NamespacedMutatingPolicy",
    "MutatingAdmissionPolicy",
];

fn classify(name: &str, text: &str) -> Block {
    let documents: Vec<Value> = serde_yaml::Deserializer::from_str(text)
        .map(|doc| {
            <Value as serde::Deserialize>::deserialize(doc)
                .unwrap_or_else(|e| panic!("{name}: not valid YAML: {e}"))
        })
        .collect();
    let [document] = documents.as_slice() else {
        panic!(
            "{name}: {} YAML documents; a block holds one thing to copy",
            documents.len()
        );
    };
    let map = document
        .as_mapping()
        .unwrap_or_else(|| panic!("{name}: not a YAML map"));
    let first_key = map.keys().next().and_then(Value::as_str);
    if first_key == Some("fragment") {
        return Block::Fragment;
    }
    if map.len() == 1 && first_key == Some("settings") {
        return Block::Settings(document["settings"].clone());
    }
    let (Some(api_version), Some(kind)) =
        (document["apiVersion"].as_str(), document["kind"].as_str())
    else {
        panic!(
            "{name}: neither a whole document (apiVersion, kind), nor `settings:`, nor a block whose first line says `fragment:`"
        );
    };
    assert!(
        document["metadata"]["name"].as_str().is_some(),
        "{name}: {kind} without metadata.name"
    );
    if api_version.starts_with("policies.kubewarden.io/") && kind.ends_with("AdmissionPolicy") {
        Block::Manifest(document.clone())
    } else if POLICY_DOCUMENT_KINDS.contains(&kind) {
        Block::Settings(document.clone())
    } else {
        Block::Object
    }
}

/// Every Kubewarden policy manifest a user might copy: the files under
/// examples/ and the manifests among the docs' blocks, with where each came
/// from.
fn copyable_manifests() -> Vec<(String, Value)> {
    let mut manifests = Vec::new();
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    examples.sort();
    for path in examples {
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        for doc in yaml_docs(&name) {
            if doc["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("AdmissionPolicy"))
            {
                manifests.push((name.clone(), doc));
            }
        }
    }
    for (name, text) in doc_yaml_blocks() {
        if let Block::Manifest(doc) = classify(&name, &text) {
            manifests.push((name, doc));
        }
    }
    manifests
}

/// Issue 34: every block of the docs is whole (a manifest, settings, a
/// policy document, an object) or says in its first line that it is a
/// fragment; every settings block and policy document loads in the policy.
#[test]
fn every_doc_yaml_block_is_whole_and_its_settings_load() {
    let wasm =
        std::env::var_os("POLICY_WASM").map_or_else(|| root().join("policy.wasm"), PathBuf::from);
    let module = PolicyModule::load(&wasm).unwrap();
    let mut settings_blocks = 0;
    for (name, text) in doc_yaml_blocks() {
        if let Block::Settings(settings) = classify(&name, &text) {
            settings_blocks += 1;
            let settings: serde_json::Value = serde_json::to_value(&settings).unwrap();
            let verdict = module.validate_settings(&settings).unwrap();
            assert!(
                verdict.valid,
                "{name}: settings refused: {:?}",
                verdict.message
            );
        }
    }
    assert!(
        settings_blocks >= 10,
        "only {settings_blocks} settings blocks"
    );
}

/// The webhook of a copyable manifest fails open (`Ignore`), or fails closed
/// (`Fail`) only where that cannot stop scheduling by accident: on a
/// PolicyServer of the same file with two replicas or more and
/// `minAvailable`, and with the match condition that keeps every Pod without
/// `spec.nodeName` away from the webhook (examples/dedicated-policy-server.yaml,
/// measured by `make ha-test`).
fn assert_failure_policy_is_safe(name: &str, spec: &Value) {
    match spec["failurePolicy"].as_str() {
        Some("Ignore") => {}
        Some("Fail") => {
            let server = spec["policyServer"].as_str();
            let servers: Vec<Value> = if name.starts_with("examples/") {
                yaml_docs(name)
            } else {
                Vec::new()
            };
            let replicated = servers.iter().any(|doc| {
                doc["kind"].as_str() == Some("PolicyServer")
                    && doc["metadata"]["name"].as_str() == server
                    && doc["spec"]["replicas"].as_u64().is_some_and(|r| r >= 2)
                    && doc["spec"]["minAvailable"].as_u64().is_some_and(|m| m >= 1)
            });
            assert!(
                replicated,
                "{name}: failurePolicy Fail without a PolicyServer {server:?} of 2 replicas or more and minAvailable in the same file"
            );
            let conditions = spec["matchConditions"].as_sequence();
            assert!(
                conditions.is_some_and(|c| c.iter().any(|c| c["expression"]
                    .as_str()
                    .is_some_and(|e| e.contains("request.subResource == 'binding'")
                        && e.contains("object.spec.nodeName")))),
                "{name}: failurePolicy Fail without the binding-or-placed-pod match condition"
            );
        }
        other => panic!("{name}: failurePolicy {other:?}"),
    }
}

/// A copy of any manifest in the docs is safe on `pods/binding`: the webhook
/// fails open or fails closed only where that is safe, waits a bounded time,
/// keeps the control plane and Kubewarden out, and has no background audit;
/// its settings load in the real policy.
#[test]
fn every_copyable_manifest_is_complete_and_safe() {
    let manifests = copyable_manifests();
    assert!(
        manifests.len() >= 3,
        "found only {} manifests",
        manifests.len()
    );
    let wasm =
        std::env::var_os("POLICY_WASM").map_or_else(|| root().join("policy.wasm"), PathBuf::from);
    let module = PolicyModule::load(&wasm).unwrap();
    for (name, policy) in &manifests {
        let spec = &policy["spec"];
        assert_failure_policy_is_safe(name, spec);
        // One recommended pair everywhere, the one `make fault-test`
        // measures as a whole (docs/operations.md, "Recommended setup").
        for (field, recommended) in [("timeoutSeconds", 10), ("timeoutEvalSeconds", 10)] {
            assert_eq!(
                spec[field].as_u64(),
                Some(recommended),
                "{name}: {field}, expected the recommended {recommended}"
            );
        }
        // kubewarden-controller's validating webhook refuses the policy
        // otherwise ("timeoutEvalSeconds cannot be greater than
        // timeoutSeconds"; make kubewarden-test applies the examples).
        assert!(
            spec["timeoutEvalSeconds"].as_u64() <= spec["timeoutSeconds"].as_u64(),
            "{name}: timeoutEvalSeconds above timeoutSeconds is refused by kubewarden-controller"
        );
        assert_eq!(
            spec["backgroundAudit"].as_bool(),
            Some(false),
            "{name}: backgroundAudit"
        );
        assert_eq!(spec["mutating"].as_bool(), Some(true), "{name}: mutating");
        let excluded: Vec<&str> = spec["namespaceSelector"]["matchExpressions"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter(|e| {
                e["key"].as_str() == Some("kubernetes.io/metadata.name")
                    && e["operator"].as_str() == Some("NotIn")
            })
            .flat_map(|e| e["values"].as_sequence().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        for namespace in ["kube-system", "kubewarden"] {
            assert!(
                excluded.contains(&namespace),
                "{name}: namespaceSelector does not keep {namespace} out"
            );
        }
        // The short form reads the Node; rules and policy documents say
        // what they read, and may read nothing.
        let resources = spec["contextAwareResources"].as_sequence();
        let short_form = ["rules", "policies", "kind"]
            .iter()
            .all(|key| spec["settings"].get(key).is_none());
        assert!(
            resources.is_some_and(
                |r| !short_form || r.iter().any(|r| r["kind"].as_str() == Some("Node"))
            ),
            "{name}: contextAwareResources {:?}",
            spec["contextAwareResources"]
        );
        let settings: serde_json::Value = serde_json::to_value(&spec["settings"]).unwrap();
        let verdict = module.validate_settings(&settings).unwrap();
        assert!(
            verdict.valid,
            "{name}: settings refused: {:?}",
            verdict.message
        );
    }
}

fn kwctl() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("kwctl"))
            .find(|path| path.is_file())
    })
}

/// Runs kwctl with these arguments; its standard output when it succeeds.
fn run_kwctl(kwctl: &Path, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = std::process::Command::new(kwctl)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kwctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// kwctl, a scratch directory and the module annotated in it, for a test
/// that needs kwctl; None, saying the test is skipped, without kwctl.
fn kwctl_and_module(test: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let Some(kwctl) = kwctl() else {
        println!("{test}: SKIPPED (kwctl is not on PATH)");
        return None;
    };
    let dir = std::env::temp_dir().join(format!(
        "{}-{}",
        test.replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
        std::process::id()
    ));
    let annotated = annotated_module(&kwctl, &dir);
    Some((kwctl, dir, annotated))
}

/// The policy module annotated with metadata.yml in `dir`, as
/// `make annotated-policy.wasm` makes it.
fn annotated_module(kwctl: &Path, dir: &Path) -> PathBuf {
    let wasm =
        std::env::var_os("POLICY_WASM").map_or_else(|| root().join("policy.wasm"), PathBuf::from);
    std::fs::create_dir_all(dir).unwrap();
    let annotated = dir.join("annotated.wasm");
    run_kwctl(
        kwctl,
        &[
            "annotate".as_ref(),
            "-m".as_ref(),
            root().join("metadata.yml").as_os_str(),
            "-o".as_ref(),
            annotated.as_os_str(),
            wasm.as_os_str(),
        ],
    );
    annotated
}

/// Issue 34: what a user copies from the docs, kwctl takes. Each manifest
/// runs as it is (its module replaced by the local build), each settings
/// block and policy document as `--settings-json`, on a Binding to `node-1`
/// whose reads the session answers.
#[test]
fn every_doc_yaml_block_passes_through_kwctl() {
    let Some((kwctl, dir, annotated)) = kwctl_and_module("kwctl run of the docs' blocks") else {
        return;
    };
    let session = root().join("test_data/sessions/node-1.yml");
    let request = root().join("test_data/binding.json");
    let common: [&std::ffi::OsStr; 5] = [
        "--allow-context-aware".as_ref(),
        "--replay-host-capabilities-interactions".as_ref(),
        session.as_os_str(),
        "--request-path".as_ref(),
        request.as_os_str(),
    ];
    let mut ran = 0;
    for (name, text) in doc_yaml_blocks() {
        let stdout = match classify(&name, &text) {
            Block::Manifest(mut manifest) => {
                manifest["spec"]["module"] =
                    Value::String(format!("file://{}", annotated.display()));
                let path = dir.join("manifest.yaml");
                std::fs::write(&path, serde_yaml::to_string(&manifest).unwrap()).unwrap();
                let mut args = vec!["run".as_ref()];
                args.extend(common);
                args.push(path.as_os_str());
                run_kwctl(&kwctl, &args)
            }
            Block::Settings(settings) => {
                let json = serde_json::to_string(&settings).unwrap();
                let mut args = vec!["run".as_ref()];
                args.extend(common);
                args.extend([
                    "--settings-json".as_ref(),
                    json.as_ref(),
                    annotated.as_os_str(),
                ]);
                run_kwctl(&kwctl, &args)
            }
            Block::Object | Block::Fragment => continue,
        };
        let response: serde_json::Value = serde_json::from_slice(&stdout)
            .unwrap_or_else(|e| panic!("{name}: kwctl's answer is not JSON ({e})"));
        assert!(
            response["allowed"].is_boolean(),
            "{name}: kwctl gave no admission response: {response}"
        );
        ran += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("kwctl ran {ran} blocks of the docs");
    assert!(ran >= 15, "only {ran} blocks ran through kwctl");
}

/// What `kwctl scaffold manifest` writes for this module (from its metadata)
/// is what every copyable manifest says about mutating and background audit,
/// and what the example says about rules and context-aware resources.
#[test]
fn manifests_agree_with_kwctl_scaffold() {
    let Some((kwctl, dir, annotated)) = kwctl_and_module("kwctl scaffold comparison") else {
        return;
    };
    let run = |args: &[&std::ffi::OsStr]| run_kwctl(&kwctl, args);
    let scaffold: Value = serde_yaml::from_slice(&run(&[
        "scaffold".as_ref(),
        "manifest".as_ref(),
        "--type".as_ref(),
        "ClusterAdmissionPolicy".as_ref(),
        "--allow-context-aware".as_ref(),
        annotated.as_os_str(),
    ]))
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let expected = &scaffold["spec"];
    for (name, policy) in copyable_manifests() {
        for field in ["mutating", "backgroundAudit"] {
            assert_eq!(
                policy["spec"][field], expected[field],
                "{name}: {field} differs from kwctl scaffold manifest"
            );
        }
    }
    // Artifact Hub's install text scaffolds with the flag used above (without
    // it the manifest has no contextAwareResources, and every Binding is
    // admitted without the metadata), after the RBAC grant.
    let install = yaml("artifacthub-pkg.yml")["install"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let scaffold_line = install
        .lines()
        .find(|line| line.contains("kwctl scaffold manifest"))
        .unwrap_or_default();
    assert!(
        scaffold_line.contains("--allow-context-aware")
            && install.contains("kubectl apply -f rbac.yaml"),
        "artifacthub-pkg.yml: the install text must apply rbac.yaml and scaffold with --allow-context-aware"
    );
    let example = &yaml_docs("examples/cluster-admission-policy.yaml")[0]["spec"];
    for field in ["rules", "contextAwareResources"] {
        assert_eq!(
            example[field], expected[field],
            "examples/cluster-admission-policy.yaml: {field} differs from kwctl scaffold manifest"
        );
    }
}
