//! The short form's entries: each `copy` entry checked and compiled into a
//! [`CopyRule`] (which Node keys, which Pod keys, where), and the search for
//! entries that contradict each other.

use std::collections::BTreeMap;

use super::entry::{CopyEntry, ReplacePrefix};
use super::rule::{CopyRule, Naming, Origin, Source};
use crate::shared::glob::KeyPattern;
use crate::shared::k8s_names::{check_label_value, check_qualified_name};
use crate::shared::policy_options::Checks;

pub(crate) fn default_rule(key: &str, checks: Checks) -> Result<CopyRule, String> {
    CopyEntry {
        label: Some(key.to_string()),
        ..CopyEntry::default()
    }
    .compile(Origin::Default, checks)
}

impl CopyEntry {
    pub(crate) fn compile(self, field: Origin, checks: Checks) -> Result<CopyRule, String> {
        let err = |what: &str, why: String| format!("settings.{field}.{what}: {why}");
        let full = checks == Checks::Full;
        let pattern = |text: &str| {
            if full {
                KeyPattern::parse(text)
            } else {
                Ok(KeyPattern::shape_only(text))
            }
        };
        let check_key = |text: &str| {
            if full {
                check_qualified_name(text)
            } else {
                Ok(())
            }
        };
        let (source, key, key_field) = match (self.label, self.annotation) {
            (Some(key), None) => (Source::Label, key, "label"),
            (None, Some(key)) => (Source::Annotation, key, "annotation"),
            (Some(_), Some(_)) => {
                return Err(format!(
                    "settings.{field}: set either `label` or `annotation`, not both (one entry reads one Node key or glob)"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "settings.{field}: missing `label` or `annotation`: name the Node key or glob to copy"
                ));
            }
        };
        let selector = pattern(&key).map_err(|why| err(key_field, format!("{key:?} {why}")))?;
        if selector.is_exact() {
            check_key(&key)
                .map_err(|why| err(key_field, format!("{key:?} is not a valid key: {why}")))?;
        }

        let naming = match (self.rename, self.add_prefix, self.replace_prefix) {
            (None, None, None) => Naming::Same,
            (Some(new_key), None, None) => {
                if !selector.is_exact() {
                    return Err(err(
                        "rename",
                        format!(
                            "cannot rename the keys of glob {key:?} to one key; use `addPrefix` or `replacePrefix`"
                        ),
                    ));
                }
                check_key(&new_key).map_err(|why| {
                    err("rename", format!("{new_key:?} is not a valid key: {why}"))
                })?;
                Naming::Rename(new_key)
            }
            (None, Some(prefix), None) => {
                if prefix.is_empty() {
                    return Err(err("addPrefix", "must not be empty".into()));
                }
                Naming::AddPrefix(prefix)
            }
            (None, None, Some(ReplacePrefix { from, to })) => {
                if from.is_empty() {
                    return Err(err("replacePrefix.from", "must not be empty".into()));
                }
                if !selector.literal_prefix().starts_with(&from) {
                    return Err(err(
                        "replacePrefix.from",
                        format!(
                            "{from:?} is not a prefix of {key:?}, so it would never apply; it must start the literal part {:?}",
                            selector.literal_prefix()
                        ),
                    ));
                }
                Naming::ReplacePrefix { from, to }
            }
            _ => {
                return Err(format!(
                    "settings.{field}: `rename`, `addPrefix` and `replacePrefix` are alternatives; set at most one"
                ));
            }
        };

        // The pattern of produced keys must itself be a possible key: catch
        // prefixes that would make every produced key invalid now, not per Pod.
        let target_text = naming.apply(selector.as_str());
        let target = if naming == Naming::Same {
            selector.clone()
        } else {
            pattern(&target_text).map_err(|why| {
                err(
                    naming_field(&naming),
                    format!("produces keys like {target_text:?}, which {why}"),
                )
            })?
        };
        if naming == Naming::Same || !full {
            // Checked above as the Node key, or not checked here at all.
        } else if target.is_exact() {
            check_qualified_name(&target_text).map_err(|why| {
                err(
                    naming_field(&naming),
                    format!("produces the key {target_text:?}, which is not valid: {why}"),
                )
            })?;
        } else if let Some((prefix, _)) = target.literal_prefix().split_once('/') {
            check_qualified_name(&format!("{prefix}/x")).map_err(|why| {
                err(
                    naming_field(&naming),
                    format!("produces keys like {target_text:?}, which are not valid: {why}"),
                )
            })?;
        }

        if let Some(default) = &self.default {
            if !selector.is_exact() {
                return Err(err(
                    "default",
                    format!("a default needs one exact key, but {key:?} is a glob"),
                ));
            }
            if full && self.to.labels() {
                check_label_value(default).map_err(|why| {
                    err(
                        "default",
                        format!("{default:?} cannot be a label value: {why}"),
                    )
                })?;
            }
        }

        Ok(CopyRule {
            origin: field,
            source,
            selector,
            destination: self.to,
            naming,
            target,
            default: self.default,
        })
    }
}

fn naming_field(naming: &Naming) -> &'static str {
    match naming {
        Naming::Same => "label",
        Naming::Rename(_) => "rename",
        Naming::AddPrefix(_) => "addPrefix",
        Naming::ReplacePrefix { .. } => "replacePrefix.to",
    }
}

/// Two entries that write the same exact Pod key (in the same place) from
/// different Node keys contradict each other.
pub(crate) fn check_conflicts(rules: &[CopyRule]) -> Result<(), String> {
    let mut seen: BTreeMap<(bool, &str), &CopyRule> = BTreeMap::new();
    for rule in rules.iter().filter(|r| r.target.is_exact()) {
        let places = [
            (true, rule.destination.labels()),
            (false, rule.destination.annotations()),
        ];
        for (is_label, used) in places {
            if !used {
                continue;
            }
            if let Some(earlier) = seen.insert((is_label, rule.target.as_str()), rule) {
                return Err(format!(
                    "settings.{}: writes Pod {} {:?}, which settings.{} already writes; each Pod key can come from one entry",
                    rule.origin,
                    if is_label { "label" } else { "annotation" },
                    rule.target.as_str(),
                    earlier.origin
                ));
            }
        }
    }
    Ok(())
}
