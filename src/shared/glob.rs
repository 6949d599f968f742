//! Key patterns for Node labels and annotations: an exact key, or a glob where
//! `*` matches any run of characters and `?` exactly one (case-sensitive, as in
//! Kyverno's wildcards).

/// A compiled key pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    pattern: String,
    /// Length in bytes of the part before the first wildcard.
    literal_len: usize,
    shape: Shape,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// No wildcard at all.
    Exact,
    /// `literal*`: the common case (`topology.kubernetes.io/*`), a prefix test.
    Prefix,
    /// Anything else: general wildcard matching.
    General(Vec<char>),
}

impl KeyPattern {
    /// Parses a key or glob. Allowed characters are those of a Kubernetes
    /// qualified name (letters, digits, `-`, `_`, `.`, one `/`) plus `*` and `?`.
    pub fn parse(pattern: &str) -> Result<KeyPattern, String> {
        if pattern.is_empty() {
            return Err("must not be empty".to_string());
        }
        // One pass: the first bad character, the '/' count, the first wildcard.
        let mut slashes = 0usize;
        let mut literal_len = None;
        for (at, c) in pattern.char_indices() {
            match c {
                '/' => slashes += 1,
                '*' | '?' => {
                    literal_len.get_or_insert(at);
                }
                c if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') => {}
                bad => {
                    return Err(format!(
                        "character {bad:?} is not allowed (keys use letters, digits, '-', '_', '.' and one '/'; globs add '*' and '?')"
                    ));
                }
            }
        }
        if slashes > 1 {
            return Err("has more than one '/' (a key is [prefix/]name)".to_string());
        }
        if pattern.ends_with('/') {
            return Err("ends with '/': the name part after the prefix is missing".to_string());
        }
        let literal_len = literal_len.unwrap_or(pattern.len());
        let shape = Self::shape_of(pattern, literal_len);
        Ok(KeyPattern {
            pattern: pattern.to_string(),
            literal_len,
            shape,
        })
    }

    /// The same shape as [`KeyPattern::parse`] without checking characters:
    /// for patterns already validated when the settings were loaded.
    pub fn shape_only(pattern: &str) -> KeyPattern {
        let literal_len = pattern.find(['*', '?']).unwrap_or(pattern.len());
        KeyPattern {
            pattern: pattern.to_string(),
            literal_len,
            shape: Self::shape_of(pattern, literal_len),
        }
    }

    fn shape_of(pattern: &str, literal_len: usize) -> Shape {
        if literal_len == pattern.len() {
            Shape::Exact
        } else if pattern.get(literal_len..) == Some("*") {
            Shape::Prefix
        } else {
            Shape::General(pattern.chars().collect())
        }
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    pub fn is_exact(&self) -> bool {
        self.shape == Shape::Exact
    }

    /// The part before the first wildcard (the whole key when exact).
    pub fn literal_prefix(&self) -> &str {
        self.pattern.get(..self.literal_len).unwrap_or("")
    }

    pub fn matches(&self, key: &str) -> bool {
        match &self.shape {
            Shape::Exact => key == self.pattern,
            Shape::Prefix => key.starts_with(self.literal_prefix()),
            Shape::General(pattern) => wildcard_match(pattern, key),
        }
    }
}

/// Kyverno-style wildcard match of `text` against `pattern` (`*`, `?`).
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    wildcard_match(&pattern, text)
}

/// Iterative wildcard match with single-star backtracking: linear in the key for
/// each star, no recursion, so no pathological stack use.
fn wildcard_match(pattern: &[char], key: &str) -> bool {
    let text: Vec<char> = key.chars().collect();
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match (pattern.get(p), text.get(t)) {
            (Some('*'), _) => {
                star = Some((p, t));
                p += 1;
            }
            (Some('?'), Some(_)) => {
                p += 1;
                t += 1;
            }
            (Some(pc), Some(tc)) if pc == tc => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .is_some_and(|rest| rest.iter().all(|c| *c == '*'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, k: &str) -> bool {
        KeyPattern::parse(p).unwrap().matches(k)
    }

    #[test]
    fn exact_keys_match_only_themselves() {
        assert!(m(
            "topology.kubernetes.io/zone",
            "topology.kubernetes.io/zone"
        ));
        assert!(!m(
            "topology.kubernetes.io/zone",
            "topology.kubernetes.io/zones"
        ));
        assert!(KeyPattern::parse("a/b").unwrap().is_exact());
    }

    #[test]
    fn prefix_globs() {
        assert!(m(
            "topology.kubernetes.io/*",
            "topology.kubernetes.io/region"
        ));
        assert!(m("topology.kubernetes.io/*", "topology.kubernetes.io/"));
        assert!(!m("topology.kubernetes.io/*", "kubernetes.io/hostname"));
        assert_eq!(
            KeyPattern::parse("node.example.com/*")
                .unwrap()
                .literal_prefix(),
            "node.example.com/"
        );
    }

    #[test]
    fn general_globs_are_case_sensitive() {
        assert!(m("*zone*", "topology.kubernetes.io/zone"));
        assert!(m("rack?", "rack1"));
        assert!(!m("rack?", "rack12"));
        assert!(m("*.example.com/rack-*", "a.b.example.com/rack-7"));
        assert!(!m("*Zone*", "topology.kubernetes.io/zone"));
        assert!(m("*", ""));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
    }

    #[test]
    fn shape_only_agrees_with_parse_on_valid_patterns() {
        for p in ["a/b", "a/*", "*zone*", "rack?", "*", "a.b/c*d"] {
            assert_eq!(
                KeyPattern::shape_only(p),
                KeyPattern::parse(p).unwrap(),
                "{p}"
            );
        }
    }

    #[test]
    fn invalid_patterns_say_why() {
        assert!(KeyPattern::parse("").unwrap_err().contains("empty"));
        assert!(KeyPattern::parse("a b").unwrap_err().contains("' '"));
        assert!(
            KeyPattern::parse("a/b/c")
                .unwrap_err()
                .contains("more than one '/'")
        );
        assert!(
            KeyPattern::parse("example.com/")
                .unwrap_err()
                .contains("name part")
        );
        assert!(KeyPattern::parse("[a]").is_err());
    }
}
