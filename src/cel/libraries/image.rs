//! Kyverno's `image` library: `image(s)` (and its newer name
//! `parseImageReference(s)`), `isImage(s)`, and on the reference
//! `registry()`, `repository()`, `identifier()`, `tag()`, `digest()`,
//! `containsDigest()`. Kyverno reads references with go-containerregistry's
//! `name.ParseReference`, which these follow: Docker Hub is
//! `index.docker.io`, its one-segment repositories are under `library/`, a
//! reference without tag or digest has the tag `latest`, and a reference with
//! a digest has no tag (`tag()` is empty even when one was written).
//! The reference and its parsing are [`Image`]'s, shared with Kyverno's
//! registry reads; this module is the CEL functions over it.

use ::cel::common::types::Type;
use ::cel::common::value::CowVal;
use ::cel::objects::Opaque;
use ::cel::{Env, ExecutionError};

use super::{boolean, error, global, member, opaque, opaque_arg, string, string_arg, string_type};
use crate::shared::images::Image;

const TYPE_NAME: &str = "kyverno.image";

fn image_type() -> Type {
    Type::new_opaque_type(TYPE_NAME)
}

impl Opaque for Image {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
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
    boolean(this(&args, "containsDigest")?.digest().is_some())
}

fn registry<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "registry")?.registry().to_string())
}

fn repository<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this(&args, "repository")?.repository().to_string())
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
    let image = this(&args, "digest")?;
    string(image.digest().unwrap_or_default().to_string())
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{b, s, table};

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
