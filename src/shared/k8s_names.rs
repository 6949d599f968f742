//! The API server's rules for metadata keys and label values. Writing anything
//! that breaks them makes the whole Binding (or Pod) invalid, and a refused
//! Binding is a Pod that cannot be scheduled, so every produced key and value
//! is checked here first.

/// Kubernetes' limit on the summed size of all annotation keys and values.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

const NAME_MAX: usize = 63;
const PREFIX_MAX: usize = 253;

/// Checks a label or annotation key: `[prefix/]name`, the prefix a DNS-1123
/// subdomain, the name at most 63 characters of `[A-Za-z0-9_.-]` starting and
/// ending alphanumeric.
pub fn check_qualified_name(key: &str) -> Result<(), String> {
    // Every produced key passes through here: answer the common case with
    // one byte loop, and spell out the reason only for a key that fails.
    if is_qualified_name(key.as_bytes()) {
        return Ok(());
    }
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        check_dns_subdomain(prefix).map_err(|why| format!("prefix {prefix:?} {why}"))?;
    }
    check_name_part(name).map_err(|why| format!("name part {name:?} {why}"))
}

fn is_qualified_name(key: &[u8]) -> bool {
    match key.iter().position(|b| *b == b'/') {
        Some(slash) => {
            let (prefix, name) = key.split_at(slash);
            is_dns_subdomain(prefix) && name.get(1..).is_some_and(is_name_part)
        }
        None => is_name_part(key),
    }
}

fn is_name_part(name: &[u8]) -> bool {
    name.len() <= NAME_MAX && matches_name_part(name)
}

fn is_dns_subdomain(prefix: &[u8]) -> bool {
    prefix.len() <= PREFIX_MAX && matches_dns_subdomain(prefix)
}

/// Kubernetes' name-part pattern `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`,
/// without its length limit.
pub(crate) fn matches_name_part(name: &[u8]) -> bool {
    let edges_ok = matches!((name.first(), name.last()), (Some(a), Some(z)) if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric());
    edges_ok
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Kubernetes' DNS-1123 label pattern `[a-z0-9]([-a-z0-9]*[a-z0-9])?`,
/// without its length limit.
pub(crate) fn matches_dns_label(label: &[u8]) -> bool {
    matches!((label.first(), label.last()), (Some(a), Some(z)) if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric())
        && label
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Kubernetes' DNS-1123 subdomain pattern (labels joined by `.`), without
/// its length limit.
pub(crate) fn matches_dns_subdomain(name: &[u8]) -> bool {
    name.split(|b| *b == b'.').all(matches_dns_label)
}

/// Names and name parts: 1 to 63 characters.
fn check_length(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > NAME_MAX {
        return Err(format!("is longer than {NAME_MAX} characters"));
    }
    Ok(())
}

fn check_name_part(name: &str) -> Result<(), String> {
    check_length(name)?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("may contain only letters, digits, '-', '_' and '.'".into());
    }
    if !starts_and_ends_alphanumeric(name) {
        return Err("must start and end with a letter or digit".into());
    }
    Ok(())
}

pub fn check_dns_subdomain(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Err("must not be empty".into());
    }
    if prefix.len() > PREFIX_MAX {
        return Err(format!("is longer than {PREFIX_MAX} characters"));
    }
    for part in prefix.split('.') {
        let ok = !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && starts_and_ends_alphanumeric(part);
        if !ok {
            return Err("is not a DNS subdomain (lowercase letters, digits, '-' and '.')".into());
        }
    }
    Ok(())
}

/// Checks a namespace name: a DNS-1123 label (at most 63 lowercase letters,
/// digits and '-', starting and ending alphanumeric).
pub fn check_dns_label(name: &str) -> Result<(), String> {
    check_length(name)?;
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || !starts_and_ends_alphanumeric(name)
    {
        return Err(
            "is not a namespace name (lowercase letters, digits and '-', starting and ending with a letter or digit)"
                .into(),
        );
    }
    Ok(())
}

/// Checks a label value: empty, or at most 63 characters of `[A-Za-z0-9_.-]`
/// starting and ending alphanumeric.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_name_part(value.as_bytes()) {
        return Ok(());
    }
    check_name_part(value)
}

fn starts_and_ends_alphanumeric(s: &str) -> bool {
    let first = s.chars().next();
    let last = s.chars().next_back();
    first.is_some_and(|c| c.is_ascii_alphanumeric())
        && last.is_some_and(|c| c.is_ascii_alphanumeric())
}

/// The key's prefix when it is one Kubernetes reserves for itself
/// (`kubernetes.io`, `k8s.io` and their subdomains).
pub fn reserved_prefix(key: &str) -> Option<&str> {
    let (prefix, _) = key.split_once('/')?;
    let reserved = ["kubernetes.io", "k8s.io"].iter().any(|domain| {
        prefix == *domain
            || prefix
                .strip_suffix(domain)
                .is_some_and(|head| head.ends_with('.'))
    });
    reserved.then_some(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(check_qualified_name("topology.kubernetes.io/zone").is_ok());
        assert!(check_qualified_name("zone").is_ok());
        assert!(check_qualified_name("Example_Key.1").is_ok());
        assert!(
            check_qualified_name("Example.com/zone")
                .unwrap_err()
                .contains("DNS subdomain")
        );
        assert!(
            check_qualified_name("example.com/")
                .unwrap_err()
                .contains("empty")
        );
        assert!(
            check_qualified_name("-zone")
                .unwrap_err()
                .contains("start and end")
        );
        assert!(
            check_qualified_name(&"a".repeat(64))
                .unwrap_err()
                .contains("63")
        );
        assert!(check_qualified_name("a/b/c").is_err());
    }

    #[test]
    fn label_values() {
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("us-east-2a").is_ok());
        assert!(check_label_value("has space").is_err());
        assert!(check_label_value(&"v".repeat(64)).is_err());
    }

    #[test]
    fn fast_path_agrees_with_the_detailed_checks() {
        let samples = [
            "a",
            "a/b",
            "A/b",
            "a.b-c/d_e.F",
            "-a",
            "a-",
            "a/",
            "/a",
            "a//b",
            "a..b/c",
            "a.-b/c",
            "Ab_c.D",
            "ä",
            "a/ä",
            "a b",
            "",
            &"x".repeat(63),
            &"x".repeat(64),
            &format!("{}/x", "p".repeat(254)),
        ];
        for key in samples {
            let (prefix, name) = match key.split_once('/') {
                Some((p, n)) => (Some(p), n),
                None => (None, key),
            };
            let detailed = prefix.is_none_or(|p| check_dns_subdomain(p).is_ok())
                && check_name_part(name).is_ok();
            assert_eq!(is_qualified_name(key.as_bytes()), detailed, "{key:?}");
        }
    }

    #[test]
    fn reserved_prefixes() {
        assert_eq!(
            reserved_prefix("kubernetes.io/hostname"),
            Some("kubernetes.io")
        );
        assert_eq!(
            reserved_prefix("topology.kubernetes.io/zone"),
            Some("topology.kubernetes.io")
        );
        assert_eq!(reserved_prefix("k8s.io/x"), Some("k8s.io"));
        assert_eq!(reserved_prefix("node.k8s.io/x"), Some("node.k8s.io"));
        assert_eq!(reserved_prefix("mykubernetes.io/x"), None);
        assert_eq!(reserved_prefix("example.com/zone"), None);
        assert_eq!(reserved_prefix("zone"), None);
    }
}
