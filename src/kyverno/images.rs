//! Kyverno's built-in `images` variable: every container image of the object
//! under admission (a Pod, or the Pod template of a controller), split into
//! registry, path, name, tag and digest the way Kyverno reads references.

use serde_json::{Map, Value, json};

use crate::shared::images::{split_host, split_reference};

/// Where the Pod spec sits in the objects Kyverno reads images from.
fn pod_spec(object: &Value) -> Option<&Value> {
    match object.get("kind").and_then(Value::as_str) {
        Some("Pod") => object.get("spec"),
        Some("CronJob") => object.pointer("/spec/jobTemplate/spec/template/spec"),
        // A controller, or autogen's view of its template (`autogen.rs`).
        _ => object
            .pointer("/spec/template/spec")
            .or_else(|| object.get("spec").filter(|s| s.get("containers").is_some())),
    }
}

/// `{containers: {<name>: info}, initContainers: ..., ephemeralContainers: ...}`,
/// each list present only when the object has it; `None` without any.
pub fn images(object: &Value) -> Option<Value> {
    let spec = pod_spec(object)?;
    let mut out = Map::new();
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(containers) = spec.get(list).and_then(Value::as_array) else {
            continue;
        };
        let infos: Map<String, Value> = containers
            .iter()
            .filter_map(|c| {
                let name = c.get("name")?.as_str()?;
                let image = c.get("image")?.as_str()?;
                Some((name.to_string(), image_info(image)?))
            })
            .collect();
        out.insert(list.to_string(), Value::Object(infos));
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// One reference, as Kyverno's image info: a first segment that is not a
/// host (no `.` or `:`, not `localhost`, lower case) means `docker.io`; no
/// tag and no digest means `latest`.
pub fn image_info(image: &str) -> Option<Value> {
    let image = image.trim();
    if image.is_empty() {
        return None;
    }
    let (repository, tag, digest) = split_reference(image)?;
    let (registry, path) = split_host(repository, true);
    let registry = registry.unwrap_or("docker.io");
    if path.is_empty() || registry.is_empty() {
        return None;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    let tag = match (tag, digest) {
        (None, None) => Some("latest"),
        (tag, _) => tag,
    };
    let with_tag = format!("{registry}/{path}:{}", tag.unwrap_or_default());
    let reference = match digest {
        Some(digest) => format!("{registry}/{path}@{digest}"),
        None => with_tag.clone(),
    };
    let mut info = Map::new();
    info.insert("registry".into(), json!(registry));
    info.insert("path".into(), json!(path));
    info.insert("name".into(), json!(name));
    info.insert("reference".into(), json!(reference));
    info.insert("referenceWithTag".into(), json!(with_tag));
    if let Some(tag) = tag {
        info.insert("tag".into(), json!(tag));
    }
    if let Some(digest) = digest {
        info.insert("digest".into(), json!(digest));
    }
    Some(Value::Object(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_read_as_kyverno_reads_them() {
        let info = image_info("nginx").unwrap();
        assert_eq!(info["registry"], "docker.io");
        assert_eq!(info["path"], "nginx");
        assert_eq!(info["tag"], "latest");
        assert_eq!(info["reference"], "docker.io/nginx:latest");
        let info = image_info("kyverno/kyverno:1.2.3").unwrap();
        assert_eq!(
            (info["registry"].as_str(), info["path"].as_str()),
            (Some("docker.io"), Some("kyverno/kyverno"))
        );
        assert_eq!(info["name"], "kyverno");
        let info = image_info("localhost:5000/team/app:v1@sha256:abc").unwrap();
        assert_eq!(info["registry"], "localhost:5000");
        assert_eq!(info["path"], "team/app");
        assert_eq!(info["tag"], "v1");
        assert_eq!(info["digest"], "sha256:abc");
        assert_eq!(info["reference"], "localhost:5000/team/app@sha256:abc");
        assert_eq!(info["referenceWithTag"], "localhost:5000/team/app:v1");
        let info = image_info("ghcr.io/org/app@sha256:abc").unwrap();
        assert!(info.get("tag").is_none());
        assert!(image_info("").is_none());
    }

    #[test]
    fn images_come_from_pods_and_pod_templates() {
        let pod = json!({"kind": "Pod", "spec": {"containers": [{"name": "a", "image": "nginx"}]}});
        assert_eq!(images(&pod).unwrap()["containers"]["a"]["path"], "nginx");
        assert!(images(&pod).unwrap().get("initContainers").is_none());
        let cron = json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {"initContainers": [{"name": "i", "image": "busybox:1"}]}}}}}});
        assert_eq!(images(&cron).unwrap()["initContainers"]["i"]["tag"], "1");
        assert!(images(&json!({"kind": "Binding", "target": {}})).is_none());
    }
}
