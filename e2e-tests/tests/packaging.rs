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

/// Every Kubewarden policy manifest a user might copy: the files under
/// examples/ and the ```yaml blocks of README.md and docs/, with where each
/// came from.
fn copyable_manifests() -> Vec<(String, Value)> {
    let mut sources: Vec<(String, String)> = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .chain(std::fs::read_dir(root().join("docs")).unwrap())
        .map(|entry| entry.unwrap().path())
        .collect();
    files.push(root().join("README.md"));
    files.sort();
    for path in files {
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        match path.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => sources.push((name, text)),
            Some("md") => {
                for (i, block) in text.split("```yaml\n").skip(1).enumerate() {
                    let block = block.split("\n```").next().unwrap();
                    sources.push((format!("{name} yaml block {}", i + 1), block.to_string()));
                }
            }
            _ => {}
        }
    }
    let mut manifests = Vec::new();
    for (name, text) in sources {
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let Ok(doc) = <Value as serde::Deserialize>::deserialize(doc) else {
                // Snippets (an env var, a settings fragment) need not be whole
                // documents, but a policy manifest must parse.
                assert!(
                    !text.contains("kind: ClusterAdmissionPolicy")
                        && !text.contains("kind: AdmissionPolicy"),
                    "{name}: a policy manifest that is not valid YAML"
                );
                break;
            };
            let kind = doc["kind"].as_str().unwrap_or_default();
            if kind.ends_with("AdmissionPolicy")
                && doc["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("policies.kubewarden.io/"))
            {
                manifests.push((name.clone(), doc));
            }
        }
    }
    manifests
}

/// A copy of any manifest in the docs is safe on `pods/binding`: the webhook
/// fails open, waits a bounded time, keeps the control plane and Kubewarden
/// out, and has no background audit; its settings load in the real policy.
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
        assert_eq!(
            spec["failurePolicy"].as_str(),
            Some("Ignore"),
            "{name}: failurePolicy"
        );
        // One recommended pair everywhere, the one `make fault-test`
        // measures as a whole (docs/operations.md, "Recommended setup").
        for (field, recommended) in [("timeoutSeconds", 10), ("timeoutEvalSeconds", 15)] {
            assert_eq!(
                spec[field].as_u64(),
                Some(recommended),
                "{name}: {field}, expected the recommended {recommended}"
            );
        }
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
        assert!(
            spec["contextAwareResources"]
                .as_sequence()
                .is_some_and(|r| !r.is_empty()),
            "{name}: no contextAwareResources"
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

/// What `kwctl scaffold manifest` writes for this module (from its metadata)
/// is what every copyable manifest says about mutating and background audit,
/// and what the example says about rules and context-aware resources.
#[test]
fn manifests_agree_with_kwctl_scaffold() {
    let Some(kwctl) = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("kwctl"))
            .find(|path| path.is_file())
    }) else {
        println!("kwctl scaffold comparison: SKIPPED (kwctl is not on PATH)");
        return;
    };
    let wasm =
        std::env::var_os("POLICY_WASM").map_or_else(|| root().join("policy.wasm"), PathBuf::from);
    let dir = std::env::temp_dir().join(format!("scaffold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let annotated = dir.join("annotated.wasm");
    let run = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new(&kwctl)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kwctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    run(&[
        "annotate".as_ref(),
        "-m".as_ref(),
        root().join("metadata.yml").as_os_str(),
        "-o".as_ref(),
        annotated.as_os_str(),
        wasm.as_os_str(),
    ]);
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
    let example = &yaml_docs("examples/cluster-admission-policy.yaml")[0]["spec"];
    for field in ["rules", "contextAwareResources"] {
        assert_eq!(
            example[field], expected[field],
            "examples/cluster-admission-policy.yaml: {field} differs from kwctl scaffold manifest"
        );
    }
}
