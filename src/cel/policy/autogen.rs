//! Kyverno's autogen for CEL policies: a Pod policy also runs on the Pod
//! controllers it names (Deployment, Job, CronJob...). Kyverno does not
//! run it over the controller's Pod template: it rewrites the text of the
//! policy's `matchConditions` and apply configurations for the template
//! (`object.spec` becomes `object.spec.template.spec`, the root `Object{...}`
//! is wrapped in `Object{spec: Object.spec{template: ...}}`) and runs the
//! rewritten policy over the controller as it is. Variables and JSON patches
//! are not rewritten. This module makes the same rewrite, so that a policy
//! does on a controller what it does in Kyverno, where the rewrite does not
//! fit the expression included (a nested `Object.metadata{...}` keeps its
//! name and then fails as Kyverno's type check fails it).
//!
//! The rewrite works on text, as Kyverno's does: a path inside a string
//! literal is rewritten too.

use std::cell::OnceCell;

use crate::cel::patch::patchers::PatchKind;
use crate::cel::policy::CelPolicy;
use crate::shared::request_facts::RequestFacts;

/// The roots Kyverno's rewrite recognises before `.spec` and `.metadata`.
const ROOTS: [&str; 3] = ["object", "oldObject", "Object"];

/// Where a controller keeps its Pod template, as Kyverno's rewrite names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    /// `spec.template` (Deployment, DaemonSet, StatefulSet, ReplicaSet, Job).
    Spec,
    /// `spec.jobTemplate.spec.template` (CronJob).
    JobTemplate,
}

impl Template {
    /// Where a controller of this kind keeps its Pod template.
    pub fn of(kind: &str) -> Template {
        if kind == "CronJob" {
            Template::JobTemplate
        } else {
            Template::Spec
        }
    }

    fn path(self) -> &'static str {
        match self {
            Template::Spec => "spec.template",
            Template::JobTemplate => "spec.jobTemplate.spec.template",
        }
    }

    /// The constructions that lead from `Object` to the template, opened.
    fn wrapper(self) -> (&'static str, &'static str) {
        match self {
            Template::Spec => (
                "Object{spec: Object.spec{template: Object.spec.template{",
                "}}}",
            ),
            Template::JobTemplate => (
                "Object{spec: Object.spec{jobTemplate: Object.spec.jobTemplate{spec: Object.spec.jobTemplate.spec{template: Object.spec.jobTemplate.spec.template{",
                "}}}}}",
            ),
        }
    }
}

/// Whether the request is a Pod controller the policy's Pod rules are
/// generated for, and where that controller keeps its template. (Whether the
/// Pod rules match the template is the engine's to ask.)
pub(in crate::cel) fn template_for(policy: &CelPolicy, info: &RequestFacts) -> Option<Template> {
    if policy.autogen.is_empty() || !info.sub_resource.is_empty() {
        return None;
    }
    let kind = crate::shared::resources::kind_of(&info.group, &info.resource, &[])?.0;
    crate::shared::autogen::template_pointer(&kind, &policy.autogen)?;
    Some(Template::of(&kind))
}

/// The policy Kyverno runs over controllers with their template at
/// `template`: its match conditions and apply configurations rewritten.
pub fn rewritten(policy: &CelPolicy, template: Template) -> CelPolicy {
    let mut rewritten = policy.clone();
    for condition in &mut rewritten.spec.match_conditions {
        condition.expression = rewrite(&condition.expression, template);
    }
    for patcher in &mut rewritten.patchers {
        if patcher.kind == PatchKind::ApplyConfiguration {
            patcher.expression = rewrite(&patcher.expression, template);
        }
    }
    rewritten.autogen.clear();
    rewritten.rewritten_for_template = true;
    rewritten.parsed = OnceCell::new();
    rewritten
}

/// Kyverno's rewrite of one expression for a Pod template.
fn rewrite(expression: &str, template: Template) -> String {
    let path = template.path();
    let expression = rewrite_paths(expression, "spec", &format!("{path}.spec"));
    let expression = rewrite_paths(
        &expression,
        "metadata.labels",
        &format!("{path}.metadata.labels"),
    );
    let expression = rewrite_paths(
        &expression,
        "metadata.annotations",
        &format!("{path}.metadata.annotations"),
    );
    wrap_root_object(&expression, template).unwrap_or(expression)
}

/// `expression` with every `<root>.<field>` that starts a word (ASCII word
/// characters, as a regular expression's `\b`) written `<root>.<with>`.
/// Like a regular expression's replace-all, a match ends where it ends:
/// `object.specs` becomes `object.spec.template.specs`.
fn rewrite_paths(expression: &str, field: &str, with: &str) -> String {
    let mut out = String::with_capacity(expression.len() + with.len());
    let mut rest = expression;
    let mut after_word = false;
    while let Some(c) = rest.chars().next() {
        let found = (!after_word)
            .then(|| {
                ROOTS.iter().find_map(|root| {
                    let tail = rest
                        .strip_prefix(root)?
                        .strip_prefix('.')?
                        .strip_prefix(field)?;
                    Some((*root, tail))
                })
            })
            .flatten();
        if let Some((root, tail)) = found {
            out.push_str(root);
            out.push('.');
            out.push_str(with);
            rest = tail;
            // Every field ends in a word character.
            after_word = true;
            continue;
        }
        out.push(c);
        rest = rest.get(c.len_utf8()..).unwrap_or_default();
        after_word = c.is_ascii_alphanumeric() || c == '_';
    }
    out
}

/// A root `Object{...}` (the expression, trimmed, starts with it) with its
/// fields moved into the template: what follows its closing brace is kept.
/// Braces are counted as characters, inside strings too; `None` when there
/// is no such construction or it has no fields.
fn wrap_root_object(expression: &str, template: Template) -> Option<String> {
    let rest = expression.trim().strip_prefix("Object")?;
    let content = rest
        .trim_start_matches([' ', '\t', '\r', '\n'])
        .strip_prefix('{')?;
    let mut depth = 1usize;
    let mut end = None;
    for (i, c) in content.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let end = end.filter(|end| *end > 0)?;
    let inner = content.get(..end)?;
    let after = content.get(end + 1..)?;
    let (open, close) = template.wrapper();
    Some(format!("{open}{inner}{close}{after}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_rewritten_as_kyverno_rewrites_them() {
        let cases = [
            (
                "object.spec.containers.all(c, c.image != '')",
                "object.spec.template.spec.containers.all(c, c.image != '')",
            ),
            (
                "has(object.metadata.labels.app) && oldObject.spec.x == 1",
                "has(object.spec.template.metadata.labels.app) && oldObject.spec.template.spec.x == 1",
            ),
            // The name stays the controller's; a word that merely ends
            // in `object` is not a root; a string is rewritten too.
            (
                "object.metadata.name + myobject.spec + 'object.spec'",
                "object.metadata.name + myobject.spec + 'object.spec.template.spec'",
            ),
            ("object.specs", "object.spec.template.specs"),
        ];
        for (source, want) in cases {
            assert_eq!(rewrite(source, Template::Spec), want, "{source}");
        }
        assert_eq!(
            rewrite("object.metadata.annotations['a']", Template::JobTemplate),
            "object.spec.jobTemplate.spec.template.metadata.annotations['a']"
        );
    }

    #[test]
    fn the_root_object_is_wrapped_and_nested_names_are_kept() {
        assert_eq!(
            rewrite(
                "Object{metadata: Object.metadata{labels: {'a': 'b'}}}",
                Template::Spec
            ),
            "Object{spec: Object.spec{template: Object.spec.template{metadata: Object.metadata{labels: {'a': 'b'}}}}}"
        );
        assert_eq!(
            rewrite("  Object {spec: Object.spec{x: 1}} ", Template::JobTemplate),
            "Object{spec: Object.spec{jobTemplate: Object.spec.jobTemplate{spec: Object.spec.jobTemplate.spec{template: Object.spec.jobTemplate.spec.template{spec: Object.spec.jobTemplate.spec.template.spec{x: 1}}}}}}"
        );
        // Not a root construction, or an empty one: left as it is.
        for source in [
            "Object{}",
            "Object.metadata{x: 1}",
            "[Object{}]",
            "Objects{a: 1}",
        ] {
            assert_eq!(rewrite(source, Template::Spec), source);
        }
    }
}
