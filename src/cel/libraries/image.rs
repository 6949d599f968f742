//! Kyverno's `image` library: `image(s)` (and its newer name
//! `parseImageReference(s)`), `isImage(s)`, and on the reference
//! `registry()`, `repository()`, `identifier()`, `tag()`, `digest()`,
//! `containsDigest()`. Kyverno reads references with go-containerregistry's
//! `name.ParseReference`, which these follow: Docker Hub is
//! `index.docker.io`, its one-segment repositories are under `library/`, a
//! reference without tag or digest has the tag `latest`, and a reference with
//! a digest has no tag (`tag()` is empty even when one was written).
//! The splitting is the one the ClusterPolicy `images` variable uses
//! ([`crate::kyverno::images`]); the rules on top are go-containerregistry's.

use ::cel::common::types::Type;
use ::cel::common::value::CowVal;
use ::cel::objects::Opaque;
use ::cel::{Env, ExecutionError};

use super::{boolean, error, global, member, opaque, opaque_arg, string, string_arg, string_type};
use crate::kyverno::images::{split_host, split_reference};

const TYPE_NAME: &str = "kyverno.image";
const DOCKER_HUB: &str = "index.docker.io";

fn image_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

/// A parsed image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    original: String,
    registry: String,
    repository: String,
    /// The tag as written (`tag()` answers none when there is a digest).
    tag: Option<String>,
    digest: Option<String>,
}

impl Opaque for Image {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// Whether every character of `text` is one of `allowed` or an ASCII
/// alphanumeric (lower case only unless `upper`), and its length is in range.
fn well_formed(text: &str, min: usize, max: usize, upper: bool, allowed: &str) -> bool {
    (min..=max).contains(&text.chars().count())
        && text.chars().all(|c| {
            c.is_ascii_digit()
                || c.is_ascii_lowercase()
                || (upper && c.is_ascii_uppercase())
                || allowed.contains(c)
        })
}

/// A registry is a URI authority: a host, optionally `:port`.
fn valid_registry(registry: &str) -> bool {
    let (host, port) = match registry.strip_prefix('[') {
        // An IPv6 literal: `[::1]:5000`.
        Some(rest) => match rest.split_once(']') {
            Some((address, port)) => (address, port.strip_prefix(':').or(Some(port))),
            None => return false,
        },
        None => match registry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        },
    };
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '~'))
        && port.is_none_or(|p| p.chars().all(|c| c.is_ascii_digit()))
}

impl Image {
    /// Parses as go-containerregistry's `name.ParseReference` does, with
    /// its default (not strict) options.
    pub fn parse(reference: &str) -> Option<Image> {
        let (name, tag, digest) = split_reference(reference)?;
        if let Some(digest) = digest {
            let hex = digest.strip_prefix("sha256:")?;
            if hex.len() != 64 || !hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
                return None;
            }
        }
        if let Some(tag) = tag
            && !well_formed(tag, 1, 128, true, "_-.")
        {
            return None;
        }
        let (registry, repository) = split_host(name, false);
        // Path components are never empty (`a//b` is not a repository).
        if !well_formed(repository, 2, 255, false, "_-./")
            || repository.split('/').any(str::is_empty)
        {
            return None;
        }
        let registry = match registry {
            None | Some("docker.io") => DOCKER_HUB,
            Some(registry) if valid_registry(registry) => registry,
            Some(_) => return None,
        };
        let repository = if registry == DOCKER_HUB && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository.to_string()
        };
        Some(Image {
            original: reference.to_string(),
            registry: registry.to_string(),
            repository,
            tag: tag.map(str::to_string),
            digest: digest.map(str::to_string),
        })
    }

    /// `index.docker.io` for Docker Hub.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// `library/nginx` for Docker Hub's `nginx`.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag as written, even beside a digest.
    pub fn written_tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// go-containerregistry's tag: none for a reference with a digest,
    /// `latest` for one with neither.
    fn reference_tag(&self) -> &str {
        match (&self.digest, &self.tag) {
            (Some(_), _) => "",
            (None, Some(tag)) => tag,
            (None, None) => "latest",
        }
    }
}

/// Declares the library.
pub fn register(env: &mut Env) {
    for (name, id) in [
        ("image", "image_string"),
        ("parseImageReference", "parse_image_reference_string"),
    ] {
        global(env, name, id, vec![string_type()], parse);
    }
    global(
        env,
        "isImage",
        "is_image_string",
        vec![string_type()],
        is_image,
    );
    let members: [(&str, super::Function); 6] = [
        ("containsDigest", contains_digest),
        ("registry", registry),
        ("repository", repository),
        ("identifier", identifier),
        ("tag", tag),
        ("digest", digest),
    ];
    for (name, op) in members {
        member(
            env,
            name,
            &format!("image_{name}"),
            image_type(),
            vec![],
            op,
        );
    }
}

fn parse<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "image")?;
    match Image::parse(text) {
        Some(image) => opaque(image),
        None => Err(error("image", format!("could not parse reference: {text}"))),
    }
}

fn is_image<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(Image::parse(string_arg(&args, 0, "isImage")?).is_some())
}

fn this(args: &[CowVal<'_, '_>], function: &str) -> Result<Image, ExecutionError> {
    opaque_arg::<Image>(args, 0, function)
}

fn contains_digest<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(this(&args, "containsDigest")?.digest.is_some())
}

fn registry<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "registry")?.registry)
}

fn repository<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "repository")?.repository)
}

fn identifier<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let image = this(&args, "identifier")?;
    let identifier = image.digest().unwrap_or(image.reference_tag()).to_string();
    string(identifier)
}

fn tag<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "tag")?.reference_tag().to_string())
}

fn digest<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "digest")?.digest.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{b, s, table};

    const DIGEST: &str = "sha256:6aefddb645ee6963afd681b1845c661d0ea4c3b20ab9db86d9e753b203d385f2";

    #[test]
    fn references_read_as_go_containerregistry_reads_them() {
        let k8s = "registry.k8s.io/kube-apiserver-arm64";
        let with = |suffix: &str, call: &str| format!("image('{k8s}{suffix}').{call}");
        let cases = [
            (format!("isImage('{k8s}:latest')"), b(true)),
            (format!("isImage('{k8s}:@')"), b(false)),
            (format!("parseImageReference('{k8s}:@')"), None),
            ("isImage('nginx')".to_string(), b(true)),
            ("isImage('Nginx')".to_string(), b(false)),
            ("isImage('a')".to_string(), b(false)),
            ("isImage('nginx@sha256:abc')".to_string(), b(false)),
            ("isImage('nginx:')".to_string(), b(false)),
            ("isImage('a//b')".to_string(), b(false)),
            (with("", "containsDigest()"), b(false)),
            (with(":latest", "containsDigest()"), b(false)),
            (with(&format!("@{DIGEST}"), "containsDigest()"), b(true)),
            (
                with(&format!(":latest@{DIGEST}"), "containsDigest()"),
                b(true),
            ),
            (with("", "registry()"), s("registry.k8s.io")),
            (
                with("", "registry().matches('(registry.k8s.io|ghcr.io)')"),
                b(true),
            ),
            (with("", "repository()"), s("kube-apiserver-arm64")),
            (with(":testtag", "identifier()"), s("testtag")),
            (with("", "identifier()"), s("latest")),
            (with(&format!("@{DIGEST}"), "identifier()"), s(DIGEST)),
            (
                with(&format!(":latest@{DIGEST}"), "identifier()"),
                s(DIGEST),
            ),
            (with(":testtag", "tag()"), s("testtag")),
            (with("", "tag()"), s("latest")),
            (with(&format!("@{DIGEST}"), "tag()"), s("")),
            (with("", "digest()"), s("")),
            (with(":testtag", "digest()"), s("")),
            (with(&format!("@{DIGEST}"), "digest()"), s(DIGEST)),
            (with(&format!(":latest@{DIGEST}"), "digest()"), s(DIGEST)),
            ("image('nginx:1.2').registry()".into(), s("index.docker.io")),
            ("image('nginx:1.2').repository()".into(), s("library/nginx")),
            (
                "image('docker.io/kyverno/kyverno').registry()".into(),
                s("index.docker.io"),
            ),
            (
                "image('kyverno/kyverno').repository()".into(),
                s("kyverno/kyverno"),
            ),
            (
                "image('localhost:5000/app:v1').registry()".into(),
                s("localhost:5000"),
            ),
            ("image('localhost/app').registry()".into(), s("localhost")),
            ("image('nginx') == image('nginx')".into(), b(true)),
            ("image('nginx') == image('nginx:latest')".into(), b(false)),
            (
                "[image('a/b:1')].map(i, i.tag())".into(),
                Some(::cel::Value::List(std::sync::Arc::new(vec![
                    ::cel::Value::from("1"),
                ]))),
            ),
        ];
        let cases: Vec<(&str, Option<::cel::Value>)> =
            cases.iter().map(|(e, v)| (e.as_str(), v.clone())).collect();
        table(&cases);
    }
}
