//! Kyverno-equivalent rules (kyverno.io/v1 `spec.rules`), evaluated at
//! admission: load-time checks here, evaluation in [`engine`].

pub mod autogen;
pub mod conditions;
pub mod engine;
pub mod field_paths;
pub mod images;
pub mod jmes;
pub mod jmes_functions;
pub mod jmes_values;
pub mod matching;
pub mod patch;
pub mod pattern;
pub mod queries;
pub mod references;
pub mod spec;
pub mod variable_names;
pub mod variables;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::shared::request_facts::AdmissionRequest;
use crate::shared::resources::ResourceKind;
use spec::{ContextEntry, ForeachSpec, MatchSpec, RuleSpec};

/// The admission request as JMESPath data for the rules, and its object as
/// JSON (when it has one). Only the request fields expressions can reach are
/// decoded: any `request.FIELD` the settings name (all of them when the
/// settings use `request` otherwise); matching reads its own
/// (`matching::RequestFacts`). `request.object` is supplied per rule from the
/// object as mutated so far.
pub fn request_data(
    request: &AdmissionRequest,
    settings: &str,
    need_object: bool,
) -> Option<(jmespath::Variable, Option<serde_json::Value>)> {
    let object = match request.raw("object") {
        Some(o) if need_object => serde_json::from_str::<serde_json::Value>(o.get())
            .ok()
            .filter(|o| o.is_object()),
        _ => None,
    };
    // One pass over the settings for the `request.FIELD` they name.
    let mut named: Vec<&str> = Vec::new();
    let mut whole = false;
    for (at, _) in settings.match_indices("request") {
        match settings
            .get(at + "request".len()..)
            .and_then(|rest| rest.strip_prefix('.'))
        {
            Some(rest) => {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                named.push(rest.get(..end).unwrap_or_default());
            }
            None => whole = true,
        }
    }
    let mut fields = BTreeMap::new();
    for (name, value) in &request.fields {
        let name: &str = name;
        let wanted = whole || named.contains(&name);
        if name != "object" && wanted {
            let var = serde_json::from_str::<jmespath::Variable>(value.get()).ok()?;
            fields.insert(name.to_string(), std::rc::Rc::new(var));
        }
    }
    Some((jmespath::Variable::Object(fields), object))
}

/// Kyverno's "mutate existing" way of labelling Pods from their Node: a rule
/// on `Pod/binding` whose one target is the very Pod being bound. Its
/// metadata rides on the Binding, which the API server copies onto the Pod,
/// so it runs here, synchronously, as a mutation of the Binding.
fn check_bound_pod_target(rule: &RuleSpec, targets: &[spec::TargetSpec]) -> Result<(), String> {
    let compact = |text: &Option<String>| -> String {
        text.as_deref()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect()
    };
    let only_binding = rule.match_.as_deref().is_some_and(|m| {
        let mut kinds = autogen::descriptions(m)
            .flat_map(|r| r.kinds.iter())
            .peekable();
        kinds.peek().is_some() && kinds.all(|k| k == "Pod/binding")
    });
    let [target] = targets else {
        return Err(
            "the one target honoured at admission is the Pod being bound (a single target)"
                .to_string(),
        );
    };
    let the_bound_pod = only_binding
        && target.api_version.as_deref() == Some("v1")
        && target.kind.as_deref() == Some("Pod")
        && compact(&target.name) == "{{request.object.metadata.name}}"
        && compact(&target.namespace) == "{{request.object.metadata.namespace}}"
        && target.uid.is_none()
        && target.selector.is_none()
        && target.context.is_none()
        && target.preconditions.is_none();
    if !the_bound_pod {
        return Err("the one target honoured at admission is the Pod being bound: match only `Pod/binding` and target apiVersion v1, kind Pod, name \"{{ request.object.metadata.name }}\", namespace \"{{ request.object.metadata.namespace }}\"".to_string());
    }
    let Some(mutate) = rule.mutate.as_deref() else {
        return Ok(());
    };
    let metadata_only = |patch: &serde_json::Value| {
        patch.as_object().is_some_and(|top| {
            top.iter().all(|(key, value)| {
                key == "metadata"
                    && value
                        .as_object()
                        .is_some_and(|m| m.keys().all(|k| k == "labels" || k == "annotations"))
            })
        })
    };
    if mutate.foreach.is_some()
        || mutate.patches_json6902.is_some()
        || !mutate
            .patch_strategic_merge
            .as_ref()
            .is_some_and(metadata_only)
    {
        return Err("for the Pod being bound, only a patchStrategicMerge of metadata.labels and metadata.annotations can ride on the Binding".to_string());
    }
    Ok(())
}

/// At most this many rules: one evaluation's work stays bounded.
pub const MAX_RULES: usize = 200;

/// Everything that can be checked before the first request: unsupported
/// fields (with the reason), operators, JMESPath, patches without variables.
pub fn check(rules: &[RuleSpec], kinds: &[ResourceKind], path: &str) -> Result<(), String> {
    if rules.len() > MAX_RULES {
        return Err(format!(
            "{path}: {} rules; at most {MAX_RULES} are allowed",
            rules.len()
        ));
    }
    let rt = jmes::runtime();
    for (i, rule) in rules.iter().enumerate() {
        let at = |field: &str| format!("{path}[{i}].{field}");
        if rule.name.trim().is_empty() {
            return Err(format!("{}: a rule needs a name", at("name")));
        }
        if rules.iter().take(i).any(|r| r.name == rule.name) {
            return Err(format!(
                "{}: rule name {:?} is used twice",
                at("name"),
                rule.name
            ));
        }
        let refused = [
            (
                rule.validate.is_some(),
                "validate",
                "validate rules are not supported: this is a mutating policy; use a Kubewarden validating policy",
            ),
            (
                rule.generate.is_some(),
                "generate",
                "generate rules need a background controller that creates objects; an admission policy can only change the object under admission",
            ),
            (
                rule.verify_images.is_some(),
                "verifyImages",
                "image verification is not supported here; use Kubewarden's image signature policies",
            ),
            (
                rule.image_extractors.is_some(),
                "imageExtractors",
                "image extractors are not supported",
            ),
            (
                rule.cel_preconditions.is_some(),
                "celPreconditions",
                "CEL preconditions are not supported; use `preconditions`",
            ),
        ];
        if let Some((_, field, why)) = refused.iter().find(|(present, _, _)| *present) {
            return Err(format!("{}: {why}", at(field)));
        }
        let Some(match_spec) = &rule.match_ else {
            return Err(format!(
                "{}: a rule needs `match` to say which requests it applies to",
                at("match")
            ));
        };
        check_match(match_spec, &at("match"))?;
        if let Some(exclude) = &rule.exclude {
            check_match(exclude, &at("exclude"))?;
        }
        check_context(&rule.context, &at("context"), kinds)?;
        check_conditions(rule.preconditions.as_ref(), &at("preconditions"))?;
        let Some(mutate) = &rule.mutate else {
            return Err(format!(
                "{}: a rule needs `mutate`; this policy only mutates",
                at("mutate")
            ));
        };
        let background = "mutating existing resources needs a background controller; an admission policy can only change the object under admission";
        if mutate.mutate_existing_on_policy_update.is_some() {
            return Err(format!(
                "{}: {background}",
                at("mutate.mutateExistingOnPolicyUpdate")
            ));
        }
        if let Some(targets) = &mutate.targets {
            check_bound_pod_target(rule, targets)
                .map_err(|why| format!("{}: {background}; {why}", at("mutate.targets")))?;
        }
        let merge_patch = match &mutate.foreach {
            Some(foreach) => foreach.iter().enumerate().find_map(|(j, f)| {
                f.patch_strategic_merge
                    .as_ref()
                    .map(|p| (format!("foreach[{j}].patchStrategicMerge"), p))
            }),
            None => mutate
                .patch_strategic_merge
                .as_ref()
                .map(|p| ("patchStrategicMerge".to_string(), p)),
        };
        if let Some((field, patch)) = merge_patch {
            check_metadata_strings(patch)
                .map_err(|why| format!("{}.{why}", at(&format!("mutate.{field}"))))?;
        }
        if mutate.patch_strategic_merge.is_none()
            && mutate.patches_json6902.is_none()
            && mutate.foreach.is_none()
        {
            return Err(format!(
                "{}: set patchStrategicMerge, patchesJson6902 or foreach",
                at("mutate")
            ));
        }
        check_strategic_merge(
            mutate.patch_strategic_merge.as_ref(),
            &at("mutate.patchStrategicMerge"),
        )?;
        if let Some(text) = &mutate.patches_json6902 {
            if !text.contains("{{") {
                patch::parse_json6902(text)
                    .map_err(|e| format!("{}: {e}", at("mutate.patchesJson6902")))?;
            }
            if let Some(path) = path_without_slash(text) {
                return Err(format!(
                    "{}: path must begin with a forward slash: {path:?}",
                    at("mutate.patchesJson6902")
                ));
            }
        }
        check_foreach(mutate.foreach.as_deref(), &at("mutate.foreach"), 0, kinds)?;
        for expression in queries::expressions_of(rule) {
            jmes::check(&rt, &expression)
                .map_err(|e| format!("{path}[{i}]: JMESPath {expression:?} is invalid: {e}"))?;
        }
    }
    Ok(())
}

/// `foreach` loops, nested ones included, up to [`engine::MAX_FOREACH_DEPTH`].
fn check_foreach(
    loops: Option<&[ForeachSpec]>,
    at: &str,
    depth: usize,
    kinds: &[ResourceKind],
) -> Result<(), String> {
    let Some(loops) = loops else {
        return Ok(());
    };
    if depth >= engine::MAX_FOREACH_DEPTH {
        return Err(format!(
            "{at}: foreach nests deeper than {} levels",
            engine::MAX_FOREACH_DEPTH
        ));
    }
    for (j, each) in loops.iter().enumerate() {
        let at_each = |f: &str| format!("{at}[{j}].{f}");
        if each.patch_strategic_merge.is_none()
            && each.patches_json6902.is_none()
            && each.foreach.is_none()
        {
            return Err(format!(
                "{at}[{j}]: set patchStrategicMerge, patchesJson6902 or a nested foreach"
            ));
        }
        if let Some(order) = &each.order
            && order != "Ascending"
            && order != "Descending"
        {
            return Err(format!(
                "{}: expected Ascending or Descending, got {order:?}",
                at_each("order")
            ));
        }
        check_strategic_merge(
            each.patch_strategic_merge.as_ref(),
            &at_each("patchStrategicMerge"),
        )?;
        check_context(&each.context, &at_each("context"), kinds)?;
        check_conditions(each.preconditions.as_ref(), &at_each("preconditions"))?;
        check_foreach(
            each.foreach.as_deref(),
            &at_each("foreach"),
            depth + 1,
            kinds,
        )?;
    }
    Ok(())
}

/// A strategic merge patch is merged into the object, so it must be a map of
/// the object's fields. Kyverno takes any other value into the policy and then
/// fails every request it applies to ("wrong node kind: expected MappingNode");
/// here it is refused when the policy loads. The usual slip is a patch pasted
/// as a YAML string (`patchStrategicMerge: |` followed by quoted text).
fn check_strategic_merge(patch: Option<&serde_json::Value>, at: &str) -> Result<(), String> {
    let what = match patch {
        None | Some(serde_json::Value::Object(_)) => return Ok(()),
        Some(serde_json::Value::String(_)) => "a string",
        Some(serde_json::Value::Array(_)) => "a list",
        Some(_) => "a single value",
    };
    Err(format!(
        "{at}: a strategic merge patch must be a map of the object's fields (such as `metadata: {{annotations: ...}}`), not {what}; write the fields as YAML under the key instead of quoting them"
    ))
}

fn check_match(spec: &MatchSpec, at: &str) -> Result<(), String> {
    if spec.any.is_some() && spec.all.is_some() {
        return Err(format!("{at}: set either `any` or `all`, not both"));
    }
    if (spec.any.is_some() || spec.all.is_some())
        && (spec.resources.is_some() || spec.subjects.is_some())
    {
        return Err(format!(
            "{at}: `resources`/`subjects` go inside the `any` or `all` filters"
        ));
    }
    let filters = spec.any.iter().chain(spec.all.iter()).flatten();
    for resources in filters
        .filter_map(|f| f.resources.as_ref())
        .chain(spec.resources.iter())
    {
        for op in &resources.operations {
            if !matches!(op.as_str(), "CREATE" | "UPDATE" | "DELETE" | "CONNECT") {
                return Err(format!(
                    "{at}: operation {op:?} is not CREATE, UPDATE, DELETE or CONNECT"
                ));
            }
        }
    }
    Ok(())
}

fn check_context(entries: &[ContextEntry], at: &str, kinds: &[ResourceKind]) -> Result<(), String> {
    for (k, entry) in entries.iter().enumerate() {
        let at = format!("{at}[{k}]");
        if entry.name.trim().is_empty() {
            return Err(format!("{at}.name: a context entry needs a name"));
        }
        if let Some(registry) = &entry.image_registry {
            if registry.image_registry_credentials.is_some() {
                return Err(format!(
                    "{at}.imageRegistry.imageRegistryCredentials: policy-server reads registries with its own credentials and registry settings (its sources file and docker config); remove this field and configure policy-server"
                ));
            }
            if registry.reference.trim().is_empty() {
                return Err(format!("{at}.imageRegistry.reference: required"));
            }
        }
        if entry.global_reference.is_some() {
            return Err(format!(
                "{at}.globalReference: Kyverno's global context does not exist in Kubewarden; use apiCall"
            ));
        }
        let sources = [
            entry.variable.is_some(),
            entry.api_call.is_some(),
            entry.config_map.is_some(),
            entry.image_registry.is_some(),
        ];
        if sources.iter().filter(|s| **s).count() != 1 {
            return Err(format!(
                "{at}: set exactly one of variable, apiCall, configMap, imageRegistry"
            ));
        }
        if let Some(call) = &entry.api_call {
            if call.service.is_some() {
                return Err(format!(
                    "{at}.apiCall.service: calls to services are not possible; policy-server only reads the Kubernetes API"
                ));
            }
            if call.data.is_some() || call.method.as_deref().is_some_and(|m| m != "GET") {
                return Err(format!(
                    "{at}.apiCall.method: only GET is possible; policy-server only reads the Kubernetes API"
                ));
            }
            let Some(url) = &call.url_path else {
                return Err(format!("{at}.apiCall.urlPath: required"));
            };
            if !url.contains("{{") {
                engine::parse_url(url, kinds).map_err(|e| format!("{at}.apiCall.urlPath: {e}"))?;
            }
        }
        if let Some(variable) = &entry.variable
            && variable.value.is_none()
            && variable.jmes_path.is_none()
        {
            return Err(format!("{at}.variable: set value or jmesPath"));
        }
    }
    Ok(())
}

fn check_conditions(conditions: Option<&spec::Conditions>, at: &str) -> Result<(), String> {
    let Some(conditions) = conditions else {
        return Ok(());
    };
    let list: Vec<(String, &spec::Condition)> = match conditions {
        spec::Conditions::List(all) => all
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("[{i}]"), c))
            .collect(),
        spec::Conditions::Blocks(b) => b
            .any
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| (format!(".any[{i}]"), c))
            .chain(
                b.all
                    .iter()
                    .flatten()
                    .enumerate()
                    .map(|(i, c)| (format!(".all[{i}]"), c)),
            )
            .collect(),
    };
    for (place, condition) in list {
        conditions::Operator::parse(&condition.operator).map_err(|e| format!("{at}: {e}"))?;
        check_operation_values(condition).map_err(|e| format!("{at}{place}.{e}"))?;
    }
    Ok(())
}

/// Kyverno's policy validation of a condition on `{{request.operation}}`:
/// its values are operations (or a variable), strings, alone or in a list.
fn check_operation_values(condition: &spec::Condition) -> Result<(), String> {
    let key = condition.key.as_str().map(|k| k.replace(' ', ""));
    if key.as_deref() != Some("{{request.operation}}") {
        return Ok(());
    }
    const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];
    let unknown = |v: &str| {
        format!(
            "unknown value '{v}' found under the 'value' field. Only the following values are allowed: [CREATE, UPDATE, DELETE, CONNECT]"
        )
    };
    match &condition.value {
        Value::String(v) if v.len() >= 4 && v.starts_with("{{") && v.ends_with("}}") => Ok(()),
        Value::String(v) if OPERATIONS.contains(&v.as_str()) => Ok(()),
        Value::String(v) => Err(format!("value: {}", unknown(v))),
        Value::Array(values) => {
            for (i, value) in values.iter().enumerate() {
                match value.as_str() {
                    Some(v) if OPERATIONS.contains(&v) => {}
                    Some(v) => return Err(format!("value[{i}]: {}", unknown(v))),
                    None => {
                        return Err(format!("value[{i}]: the values are expected to be strings"));
                    }
                }
            }
            Ok(())
        }
        _ => Err("value: the value is expected to be a string or a list of them".to_string()),
    }
}

/// Kyverno's policy validation of a strategic merge patch (the rule's, or
/// the first `foreach` entry's): labels and annotations it writes, under
/// `metadata` or `spec.template.metadata`, are strings.
fn check_metadata_strings(patch: &Value) -> Result<(), String> {
    for pointer in ["/metadata", "/spec/template/metadata"] {
        for map in ["labels", "annotations"] {
            let Some(Value::Object(entries)) = patch.pointer(pointer).and_then(|m| m.get(map))
            else {
                continue;
            };
            if let Some((key, _)) = entries.iter().find(|(_, v)| !v.is_string()) {
                return Err(format!(
                    "{}.{map}.{key}: labels and annotations supports only string values, \"use double quotes around the non string values\"",
                    pointer.trim_start_matches('/').replace('/', ".")
                ));
            }
        }
    }
    Ok(())
}

/// Kyverno's policy validation of a rule's `patchesJson6902`: every
/// operation's path begins with `/` (so none replaces the whole object),
/// with each `{{ }}` variable read as a placeholder. A patch that does not
/// parse is for the other checks.
fn path_without_slash(text: &str) -> Option<String> {
    let mut replaced = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        replaced.push_str(rest.get(..start).unwrap_or_default());
        match rest.get(start..).and_then(|tail| tail.find("}}")) {
            Some(end) => {
                replaced.push_str("kyvernojsonpatchvariable");
                rest = rest.get(start + end + 2..).unwrap_or_default();
            }
            None => {
                rest = rest.get(start..).unwrap_or_default();
                break;
            }
        }
    }
    replaced.push_str(rest);
    let operations = crate::shared::yaml::to_json(&replaced).ok()?;
    let operations = operations.as_array()?;
    operations.iter().find_map(|operation| {
        operation
            .get("path")
            .and_then(serde_json::Value::as_str)
            .filter(|path| !path.starts_with('/'))
            .map(str::to_string)
    })
}
