//! A short-form entry once checked: which Node keys it reads, which Pod keys
//! it writes and where.

use super::entry::Destination;
use crate::shared::glob::KeyPattern;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Label,
    Annotation,
}

impl Source {
    pub fn noun(self) -> &'static str {
        match self {
            Source::Label => "label",
            Source::Annotation => "annotation",
        }
    }
}

/// How a Node key becomes a Pod key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Naming {
    Same,
    Rename(String),
    AddPrefix(String),
    ReplacePrefix { from: String, to: String },
}

impl Naming {
    /// The Pod key for a Node key. `ReplacePrefix` leaves keys that do not
    /// start with `from` as they are.
    pub fn apply(&self, node_key: &str) -> String {
        match self {
            Naming::Same => node_key.to_string(),
            Naming::Rename(key) => key.clone(),
            Naming::AddPrefix(prefix) => format!("{prefix}{node_key}"),
            Naming::ReplacePrefix { from, to } => match node_key.strip_prefix(from.as_str()) {
                Some(rest) => format!("{to}{rest}"),
                None => node_key.to_string(),
            },
        }
    }
}

/// Where a rule came from: `settings.copy[i]`, or the built-in default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Copy(usize),
    Default,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Copy(i) => write!(f, "copy[{i}]"),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// A validated entry.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyRule {
    /// Where the rule came from, for messages.
    pub origin: Origin,
    pub source: Source,
    pub selector: KeyPattern,
    pub destination: Destination,
    pub naming: Naming,
    /// The pattern Pod keys produced by this rule follow (the selector with
    /// the naming applied). Used to decide which Pod keys the rule manages.
    pub target: KeyPattern,
    pub default: Option<String>,
}

impl CopyRule {
    /// Whether this rule may write `pod_key` when it falls under a prefix
    /// Kubernetes reserves: only when the settings name that prefix literally.
    pub fn names_prefix_of(&self, pod_key: &str) -> bool {
        match pod_key.split_once('/') {
            Some((prefix, _)) => self
                .target
                .literal_prefix()
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/')),
            None => true,
        }
    }
}
