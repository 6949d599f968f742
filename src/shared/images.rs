//! Image references as both languages read them: split at the digest and
//! tag (Kyverno's `images` variable, its registry reads) and parsed as
//! go-containerregistry's `name.ParseReference` does (CEL's `image()`
//! library, Kyverno's `imageRegistry` entry and CEL's `image.GetMetadata`).

const DOCKER_HUB: &str = "index.docker.io";

/// A reference split at its `@` (digest) and at a last `:` that is not
/// part of a host (tag): `(name, tag, digest)`. Shared by Kyverno's image
/// info (`kyverno::images`) and [`Image::parse`], which read the parts
/// differently.
pub fn split_reference(image: &str) -> Option<(&str, Option<&str>, Option<&str>)> {
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    let (name, tag) = match rest.rfind(':') {
        Some(at) if !rest.get(at..)?.contains('/') => (rest.get(..at)?, rest.get(at + 1..)),
        _ => (rest, None),
    };
    Some((name, tag, digest))
}

/// A name's host, when its first segment is one: it has a `.` or a `:`, or
/// is `localhost` (or, for Kyverno's image info, is not lower case).
pub fn split_host(name: &str, upper_case_is_host: bool) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((first, path))
            if first.contains(['.', ':'])
                || first == "localhost"
                || (upper_case_is_host && first.to_lowercase() != first) =>
        {
            (Some(first), path)
        }
        _ => (None, name),
    }
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
    pub fn reference_tag(&self) -> &str {
        match (&self.digest, &self.tag) {
            (Some(_), _) => "",
            (None, Some(tag)) => tag,
            (None, None) => "latest",
        }
    }
}
