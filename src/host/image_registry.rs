//! What a container registry says of an image, read through Kubewarden's
//! OCI host capabilities: Kyverno's `imageRegistry` context entry
//! ([`image_data`]) and CEL's `image.GetMetadata` ([`image_metadata`]).
//!
//! Kyverno gives the entry `{image, resolvedImage, registry, repository,
//! identifier, manifestList, manifest, configData}`, names spelled as its
//! registry client spells them (Docker Hub is `index.docker.io`, its
//! one-segment repositories are under `library/`). The digest alone answers
//! `resolvedImage`, the manifest and config the rest: each is asked for only
//! when the entry's `jmesPath` (or its absence) can reach it.

use serde_json::{Map, Value, json};

use crate::host::cluster::{CachedCluster, ImageRead, Read};

/// A reference split as Kyverno's registry client splits it.
#[derive(Debug, PartialEq, Eq)]
pub struct ImageName {
    pub registry: String,
    pub repository: String,
    /// The tag, the digest, or `tag@digest` when the reference has both.
    pub identifier: String,
}

impl ImageName {
    /// `None` for text that is not an image reference. Read by the same
    /// parser as the CEL `image()` library (go-containerregistry's rules);
    /// the identifier is the tag, the digest, or `tag@digest` for both, as
    /// Kyverno's registry client gives it.
    pub fn parse(reference: &str) -> Option<ImageName> {
        let image = crate::shared::images::Image::parse(reference.trim())?;
        let identifier = match (image.written_tag(), image.digest()) {
            (Some(tag), Some(digest)) => format!("{tag}@{digest}"),
            (None, Some(digest)) => digest.to_string(),
            (Some(tag), None) => tag.to_string(),
            (None, None) => "latest".to_string(),
        };
        Some(ImageName {
            registry: image.registry().to_string(),
            repository: image.repository().to_string(),
            identifier,
        })
    }
}

/// Whether a `jmesPath` over the entry's data can reach one of `fields`:
/// no path (the whole data is the value), a path naming one, or one that
/// takes the data whole.
fn reaches(jmes_path: Option<&str>, fields: &[&str]) -> bool {
    const WHOLE: [&str; 7] = ["@", "*", "keys", "values", "to_string", "merge", "items"];
    jmes_path.is_none_or(|path| {
        fields
            .iter()
            .chain(WHOLE.iter())
            .any(|word| path.contains(word))
    })
}

/// The entry's data for `reference`, reading only what `jmes_path` needs.
pub fn image_data(
    reference: &str,
    jmes_path: Option<&str>,
    cluster: &CachedCluster,
) -> Result<Value, String> {
    let name = ImageName::parse(reference)
        .ok_or_else(|| format!("{reference:?} is not an image reference"))?;
    let read = |what| {
        cluster.read_json(&Read::Image {
            reference: reference.to_string(),
            what,
        })
    };
    let resolved = if reaches(jmes_path, &["resolvedImage"]) {
        let answer = read(ImageRead::Digest)?;
        let digest = answer
            .get("digest")
            .and_then(Value::as_str)
            .ok_or("the host's answer has no digest")?;
        json!(format!("{}/{}@{digest}", name.registry, name.repository))
    } else {
        Value::Null
    };
    let mut data = Map::new();
    data.insert("image".into(), json!(reference));
    data.insert("resolvedImage".into(), resolved);
    data.insert("registry".into(), json!(name.registry));
    data.insert("repository".into(), json!(name.repository));
    data.insert("identifier".into(), json!(name.identifier));
    // Kubewarden's capabilities give the manifest of the host's platform,
    // not the index above it.
    data.insert("manifestList".into(), Value::Null);
    let (manifest, config) = if reaches(jmes_path, &["manifest", "configData"]) {
        let mut answer = read(ImageRead::ManifestAndConfig)?;
        let mut take = |key: &str| answer.get_mut(key).map(Value::take).unwrap_or_default();
        (take("manifest"), take("config"))
    } else {
        (Value::Null, Value::Null)
    };
    data.insert("manifest".into(), manifest);
    data.insert("configData".into(), config);
    Ok(Value::Object(data))
}

/// Kyverno's CEL `image.GetMetadata(reference)`: `{image, resolvedImage,
/// registry, repository, identifier, tag, digest, manifest, config}`, the
/// resolved image being `name:tag@digest` (or `name@digest`). The digest is
/// the reference's own when it has one, else the registry's.
pub fn image_metadata(reference: &str, cluster: &CachedCluster) -> Result<Value, String> {
    let name = ImageName::parse(reference)
        .ok_or_else(|| format!("{reference:?} is not an image reference"))?;
    let (_, tag, digest) = crate::shared::images::split_reference(reference.trim())
        .ok_or_else(|| format!("{reference:?} is not an image reference"))?;
    let read = |what| {
        cluster.read_json(&Read::Image {
            reference: reference.to_string(),
            what,
        })
    };
    let digest = match digest {
        Some(digest) => digest.to_string(),
        None => read(ImageRead::Digest)?
            .get("digest")
            .and_then(Value::as_str)
            .ok_or("the host's answer has no digest")?
            .to_string(),
    };
    let mut answer = read(ImageRead::ManifestAndConfig)?;
    let mut take = |key: &str| answer.get_mut(key).map(Value::take).unwrap_or_default();
    let (manifest, config) = (take("manifest"), take("config"));
    let context = format!("{}/{}", name.registry, name.repository);
    let resolved = match tag {
        Some(tag) => format!("{context}:{tag}@{digest}"),
        None => format!("{context}@{digest}"),
    };
    let mut data = Map::new();
    data.insert("image".into(), json!(reference));
    data.insert("resolvedImage".into(), json!(resolved));
    data.insert("registry".into(), json!(name.registry));
    data.insert("repository".into(), json!(name.repository));
    data.insert("identifier".into(), json!(name.identifier));
    if let Some(tag) = tag {
        data.insert("tag".into(), json!(tag));
    }
    data.insert("digest".into(), json!(digest));
    data.insert("manifest".into(), manifest);
    data.insert("config".into(), config);
    Ok(Value::Object(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::cluster::Cluster;

    #[test]
    fn references_split_as_kyvernos_registry_client_splits_them() {
        const DOCKER_HUB: &str = "index.docker.io";
        const DIGEST: &str =
            "sha256:6aefddb645ee6963afd681b1845c661d0ea4c3b20ab9db86d9e753b203d385f2";
        let with_digest = |text: &str| text.replace("sha256:abc", DIGEST);
        let cases = [
            ("busybox", DOCKER_HUB, "library/busybox", "latest"),
            ("busybox:1.28", DOCKER_HUB, "library/busybox", "1.28"),
            (
                "docker.io/kyverno/kyverno:v1",
                DOCKER_HUB,
                "kyverno/kyverno",
                "v1",
            ),
            (
                "ghcr.io/kyverno/test-busybox:1.35",
                "ghcr.io",
                "kyverno/test-busybox",
                "1.35",
            ),
            (
                "localhost:5000/team/app:v1@sha256:abc",
                "localhost:5000",
                "team/app",
                "v1@sha256:abc",
            ),
            (
                "ghcr.io/org/app@sha256:abc",
                "ghcr.io",
                "org/app",
                "sha256:abc",
            ),
        ];
        for (reference, registry, repository, identifier) in cases {
            let (reference, identifier) = (with_digest(reference), with_digest(identifier));
            let name = ImageName::parse(&reference).unwrap();
            assert_eq!(
                (
                    name.registry.as_str(),
                    name.repository.as_str(),
                    name.identifier.as_str()
                ),
                (registry, repository, identifier.as_str()),
                "{reference}"
            );
        }
        // A short digest is not a digest (go-containerregistry checks it).
        for bad in [
            "",
            "UPPER/case",
            "nginx:",
            "a//b",
            "nginx@",
            "app@sha256:abc",
        ] {
            assert!(ImageName::parse(bad).is_none(), "{bad:?}");
        }
    }

    /// A registry with one image, counting what is asked of it.
    struct Registry(std::cell::RefCell<Vec<ImageRead>>);

    impl Cluster for Registry {
        fn read(&self, read: &Read) -> Result<Vec<u8>, String> {
            let Read::Image { reference, what } = read else {
                return Err("not an image read".into());
            };
            self.0.borrow_mut().push(*what);
            if reference != "ghcr.io/org/app:1" {
                return Err(format!("{reference}: manifest unknown"));
            }
            Ok(match what {
                ImageRead::Digest => br#"{"digest":"sha256:index"}"#.to_vec(),
                ImageRead::ManifestAndConfig => br#"{"digest":"sha256:amd64","manifest":{"schemaVersion":2},"config":{"config":{"User":"1000"}}}"#.to_vec(),
            })
        }
    }

    #[test]
    fn the_digest_alone_answers_resolved_image() {
        let registry = Registry(Default::default());
        let cluster = CachedCluster::new(&registry);
        let data = image_data("ghcr.io/org/app:1", Some("resolvedImage"), &cluster).unwrap();
        assert_eq!(data["resolvedImage"], "ghcr.io/org/app@sha256:index");
        assert_eq!(data["identifier"], "1");
        assert_eq!(*registry.0.borrow(), [ImageRead::Digest]);
        // Asked again in the same evaluation: answered from the cache.
        image_data("ghcr.io/org/app:1", Some("resolvedImage"), &cluster).unwrap();
        assert_eq!(registry.0.borrow().len(), 1);
    }

    #[test]
    fn the_config_is_read_when_the_path_reaches_it() {
        let registry = Registry(Default::default());
        let cluster = CachedCluster::new(&registry);
        let data = image_data(
            "ghcr.io/org/app:1",
            Some("configData.config.User"),
            &cluster,
        )
        .unwrap();
        assert_eq!(data["configData"]["config"]["User"], "1000");
        assert_eq!(data["manifest"]["schemaVersion"], 2);
        assert_eq!(*registry.0.borrow(), [ImageRead::ManifestAndConfig]);
        // Kyverno's CEL image.GetMetadata: the digest and the manifest and
        // config, each read once for the evaluation.
        let metadata = image_metadata("ghcr.io/org/app:1", &cluster).unwrap();
        assert_eq!(metadata["resolvedImage"], "ghcr.io/org/app:1@sha256:index");
        assert_eq!(metadata["config"]["config"]["User"], "1000");
        assert_eq!(
            (metadata["tag"].as_str(), metadata["digest"].as_str()),
            (Some("1"), Some("sha256:index"))
        );
        assert_eq!(
            *registry.0.borrow(),
            [ImageRead::ManifestAndConfig, ImageRead::Digest]
        );
        let missing = image_data("ghcr.io/org/other:1", None, &cluster).unwrap_err();
        assert!(missing.contains("manifest unknown"), "{missing}");
        assert!(image_data("Not An Image", None, &cluster).is_err());
    }
}
