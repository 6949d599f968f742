//! Running rules: `match` → `exclude` → `preconditions` → `mutate`, each
//! context entry loaded when a query first names it ([`queries`]), each rule
//! seeing the previous rule's result as `request.object`.

use std::collections::BTreeMap;
use std::rc::Rc;

use jmespath::{Rcvar, Variable};
use serde_json::{Value, json};

use super::conditions::{Operator, evaluate};
use super::field_paths;
use super::jmes::Functions;
use super::matching::matches;
use super::patch::{Skip, parse_json6902, strategic_merge};
use super::queries::{self, Deferred};
use super::references::ConfigMapMasks;
use super::spec::{ApiCall, Condition, Conditions, ContextEntry, ForeachSpec, RuleSpec};
use super::variables::{At, substitute, substitute_patch, substitute_str, substitute_str_at};
use super::{jmes, jmes_values};
use crate::host::cluster::{CachedCluster, Read, Selection};
use crate::host::image_registry;
use crate::shared::request_facts::RequestFacts;
use crate::shared::resources::ResourceKind;
use crate::shared::rfc6902::apply_json6902;

/// At most this many elements of a `foreach` list are processed.
pub const MAX_FOREACH_ELEMENTS: usize = 1000;
/// Deepest nesting of `foreach` loops.
pub const MAX_FOREACH_DEPTH: usize = 4;
/// At most this many loop iterations per rule, nested loops counted.
pub const MAX_FOREACH_ITERATIONS: usize = 10_000;

/// What a rule needs to run: Kyverno's rules, their resources and functions.
pub struct Engine<'r> {
    pub resource_kinds: &'r [ResourceKind],
    /// The function table for the rules' settings (see `jmes::Functions`).
    pub functions: &'r Functions<'r>,
    /// What the rules' expressions read of each ConfigMap entry: the field
    /// masks of its read.
    pub config_map_masks: &'r ConfigMapMasks<'r>,
    /// What matching reads of the request, decoded once for all rules.
    pub facts: &'r RequestFacts,
    /// A namespaced `Policy`'s namespace: its `apiCall`s read only there.
    pub policy_namespace: Option<&'r str>,
}

/// The namespace an API path names, as Kyverno finds it
/// (`^/api(s)?/.*?/namespaces/([^/]+)`).
fn namespace_in_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api")?;
    let rest = rest.strip_prefix('s').unwrap_or(rest).strip_prefix('/')?;
    let at = rest.find("/namespaces/")?;
    rest.get(at + "/namespaces/".len()..)?
        .split('/')
        .next()
        .filter(|namespace| !namespace.is_empty())
}

/// What one rule did to the object.
pub enum RuleResult {
    Applied(Value),
    Skipped,
}

impl Engine<'_> {
    /// Runs one rule over `object`, the request's object as the steps before
    /// left it; `request` is the admission request as JMESPath data. An error
    /// is the reason the rule failed, for `failurePolicy` to judge.
    pub fn apply(
        &self,
        rule: &RuleSpec,
        request: &Rcvar,
        object: &Value,
        cluster: &CachedCluster,
    ) -> Result<RuleResult, String> {
        let rt = self.functions;
        let facts = self.facts;
        let Some(match_spec) = &rule.match_ else {
            return Ok(RuleResult::Skipped);
        };
        if !matches(match_spec, facts, object, cluster)? {
            return Ok(RuleResult::Skipped);
        }
        if let Some(exclude) = &rule.exclude
            && matches(exclude, facts, object, cluster)?
        {
            return Ok(RuleResult::Skipped);
        }
        let mut scope = Scope::new(request, &facts.user().username, object);
        let mut deferred = Deferred::default().with(&rule.context);
        let mutation_queries = rule.mutate.as_ref().map_or_else(Vec::new, |mutate| {
            queries::mutation_queries(
                mutate.patch_strategic_merge.as_ref(),
                mutate.patches_json6902.as_deref(),
                mutate.foreach.as_deref(),
            )
        });
        let ready = (rule.preconditions.as_ref(), &mutation_queries[..]);
        if !self.preconditions_hold(ready, &mut deferred, &mut scope, cluster)? {
            return Ok(RuleResult::Skipped);
        }
        let Some(mutate) = &rule.mutate else {
            return Ok(RuleResult::Skipped);
        };
        let data = scope.var();
        let mut resource = object.clone();
        let patches = Patches {
            strategic_merge: mutate.patch_strategic_merge.as_ref(),
            json6902: mutate.patches_json6902.as_deref(),
            label: "patchesJson6902",
        };
        if !patches.apply(rt, &mut resource, &data)? {
            return Ok(RuleResult::Skipped);
        }
        let mut iterations = 0;
        for each in mutate.foreach.iter().flatten() {
            let mut looping = Loop {
                resource: &mut resource,
                iterations: &mut iterations,
            };
            self.run_foreach(each, &mut looping, (&scope, &deferred), cluster, 0)?;
        }
        Ok(RuleResult::Applied(resource))
    }

    /// One foreach over `scope`, with the context entries in scope
    /// (`deferred`): those of the rule and of the loops around this one.
    fn run_foreach(
        &self,
        each: &ForeachSpec,
        looping: &mut Loop,
        (scope, deferred): (&Scope, &Deferred),
        cluster: &CachedCluster,
        depth: usize,
    ) -> Result<(), String> {
        let rt = self.functions;
        let data = scope.var();
        let list = jmes::search_var(rt, &each.list, &data)
            .map_err(|e| format!("foreach list {:?}: {e}", each.list))?;
        // Kyverno's list: a field the object does not have fails the rule;
        // anything but a list, null included, is a list of one.
        if matches!(*list, Variable::Null) && jmes::names_missing_key(&each.list, &data) {
            return Err(format!(
                "foreach list {:?}: names a key the object does not have (Kyverno: Unknown key)",
                each.list
            ));
        }
        let elements: Vec<Rcvar> = match &*list {
            Variable::Array(items) => items.clone(),
            _ => vec![list.clone()],
        };
        if elements.len() > MAX_FOREACH_ELEMENTS {
            return Err(format!(
                "foreach list {:?} has {} elements; at most {MAX_FOREACH_ELEMENTS} are processed",
                each.list,
                elements.len()
            ));
        }
        // Kyverno walks a strategic merge foreach from the last element to
        // the first unless told otherwise: each merge puts the patched
        // element first, so the list ends in its own order.
        let descending = match each.order.as_deref() {
            Some(order) => order == "Descending",
            None => each.patch_strategic_merge.is_some(),
        };
        let indices: Vec<usize> = if descending {
            (0..elements.len()).rev().collect()
        } else {
            (0..elements.len()).collect()
        };
        let mutation_queries = queries::mutation_queries(
            each.patch_strategic_merge.as_ref(),
            each.patches_json6902.as_deref(),
            each.foreach.as_deref(),
        );
        for index in indices {
            let Some(element) = elements.get(index) else {
                continue;
            };
            *looping.iterations += 1;
            if *looping.iterations > MAX_FOREACH_ITERATIONS {
                return Err(format!(
                    "foreach loops run more than {MAX_FOREACH_ITERATIONS} times in one rule"
                ));
            }
            let mut scoped = scope.clone();
            let index_var = jmes_values::to_var(&json!(index));
            scoped.set("element", element.clone());
            scoped.set("elementIndex", index_var.clone());
            scoped.set(&format!("element{depth}"), element.clone());
            scoped.set(&format!("elementIndex{depth}"), index_var);
            // The resource as patched so far.
            scoped.set_object(looping.resource);
            // Each iteration loads what it names afresh: a rule's entry
            // named first in a loop sees the iteration's `element`.
            let mut in_scope = deferred.with(&each.context);
            let ready = (each.preconditions.as_ref(), &mutation_queries[..]);
            if !self.preconditions_hold(ready, &mut in_scope, &mut scoped, cluster)? {
                continue;
            }
            let data = scoped.var();
            let patches = Patches {
                strategic_merge: each.patch_strategic_merge.as_ref(),
                json6902: each.patches_json6902.as_deref(),
                label: "foreach patchesJson6902",
            };
            patches.apply(rt, looping.resource, &data)?;
            for nested in each.foreach.iter().flatten() {
                self.run_foreach(nested, looping, (&scoped, &in_scope), cluster, depth + 1)?;
            }
        }
        Ok(())
    }

    /// Kyverno's order in a rule or a loop iteration: the entries the
    /// preconditions name, the preconditions, then, when they hold, the
    /// entries the mutation's queries name.
    fn preconditions_hold(
        &self,
        (preconditions, mutation_queries): (Option<&Conditions>, &[String]),
        deferred: &mut Deferred,
        scope: &mut Scope,
        cluster: &CachedCluster,
    ) -> Result<bool, String> {
        let queries = queries::condition_queries(preconditions);
        self.load_named(deferred, &queries, scope, cluster)?;
        if let Some(conditions) = preconditions
            && !conditions_hold(self.functions, conditions, &scope.var())?
        {
            return Ok(false);
        }
        self.load_named(deferred, mutation_queries, scope, cluster)?;
        Ok(true)
    }

    /// Loads the context entries `queries` name that are not loaded yet
    /// ([`queries`]), each after the entries before it that its own queries name.
    fn load_named(
        &self,
        deferred: &mut Deferred,
        queries: &[String],
        scope: &mut Scope,
        cluster: &CachedCluster,
    ) -> Result<(), String> {
        self.load_named_before(deferred, queries, deferred.count(), scope, cluster)
    }

    fn load_named_before(
        &self,
        deferred: &mut Deferred,
        queries: &[String],
        limit: usize,
        scope: &mut Scope,
        cluster: &CachedCluster,
    ) -> Result<(), String> {
        while let Some((at, entry)) = deferred.next_named(queries, limit) {
            self.load_named_before(deferred, &queries::queries_of(entry), at, scope, cluster)?;
            let value = self.context_value(entry, &scope.var(), cluster)?;
            scope.set(&entry.name, value);
        }
        Ok(())
    }

    /// One context entry's value over the variables so far.
    fn context_value(
        &self,
        entry: &ContextEntry,
        data: &Rcvar,
        cluster: &CachedCluster,
    ) -> Result<Rcvar, String> {
        let rt = self.functions;
        let value = if let Some(variable) = &entry.variable {
            let base = match &variable.value {
                Some(value) => Some(jmes_values::to_var(&substitute(rt, value, data)?)),
                None => None,
            };
            let result = match (&variable.jmes_path, base) {
                (Some(path), Some(base)) => jmes::search_var(rt, &render(rt, path, data)?, &base),
                (Some(path), None) => jmes::search_var(rt, &render(rt, path, data)?, data),
                (None, Some(base)) => Ok(base),
                (None, None) => Ok(Rc::new(Variable::Null)),
            };
            with_default(result, variable.default.as_ref(), rt, data, &entry.name)?
        } else if let Some(call) = &entry.api_call {
            self.api_call(call, data, cluster, &entry.name)?
        } else if let Some(config_map) = &entry.config_map {
            let name = render(rt, &config_map.name, data)?;
            let namespace = match &config_map.namespace {
                Some(ns) => render(rt, ns, data)?,
                None => "default".to_string(),
            };
            let object = cluster
                .read_var(&Read::Get {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespace: Some(namespace.clone()),
                    name: name.clone(),
                    field_masks: self.config_map_masks.for_entry(&entry.name),
                })
                .map_err(|e| {
                    format!(
                        "context {:?}: ConfigMap {namespace}/{name}: {e}",
                        entry.name
                    )
                })?;
            let field = |key: &str| {
                object
                    .as_object()
                    .and_then(|o| o.get(key).cloned())
                    .unwrap_or_else(|| Rc::new(Variable::Object(BTreeMap::new())))
            };
            let mut exposed = BTreeMap::new();
            exposed.insert("data".to_string(), field("data"));
            exposed.insert("metadata".to_string(), field("metadata"));
            Rc::new(Variable::Object(exposed))
        } else if let Some(registry) = &entry.image_registry {
            let reference = render(rt, &registry.reference, data)?;
            let path = match &registry.jmes_path {
                Some(path) => Some(render(rt, path, data)?),
                None => None,
            };
            let image = image_registry::image_data(&reference, path.as_deref(), cluster)
                .map_err(|e| format!("context {:?}: image {reference:?}: {e}", entry.name))?;
            let image = jmes_values::to_var(&image);
            match path {
                Some(path) => jmes::search_var(rt, &path, &image)?,
                None => image,
            }
        } else {
            Rc::new(Variable::Null)
        };
        Ok(value)
    }

    fn api_call(
        &self,
        call: &ApiCall,
        data: &Rcvar,
        cluster: &CachedCluster,
        name: &str,
    ) -> Result<Rcvar, String> {
        let rt = self.functions;
        let url = render(rt, call.url_path.as_deref().unwrap_or(""), data)?;
        // Kyverno holds a namespaced Policy's reads to its namespace.
        if let Some(policy_namespace) = self.policy_namespace {
            match namespace_in_path(&url) {
                None => {
                    return Err(format!(
                        "context {name:?}: path {url} does not contain a namespace segment, which is required for namespaced policies"
                    ));
                }
                Some(namespace) if namespace != policy_namespace => {
                    return Err(format!(
                        "context {name:?}: path {url} refers to namespace {namespace}, which is different from the policy namespace {policy_namespace}"
                    ));
                }
                Some(_) => {}
            }
        }
        let mut read = parse_url(&url, self.resource_kinds)
            .map_err(|e| format!("context {name:?}: urlPath {url:?}: {e}"))?;
        // Rendered before the read, so that a field path over one object
        // reads only the fields it names; a rendering error still counts only
        // once the read has succeeded, as before.
        let path = call.jmes_path.as_ref().map(|path| render(rt, path, data));
        let reach = match (&read, &path) {
            (Read::Get { .. }, Some(Ok(path))) => field_paths::reach(path),
            _ => None,
        };
        // Only those fields are asked of the host, which prunes the object
        // before it serialises it (a Node is mostly status and managedFields).
        if let (Some(reach), Read::Get { field_masks, .. }) = (&reach, &mut read) {
            *field_masks = crate::shared::reach::field_masks(reach);
        }
        let answer = match &reach {
            Some(reach) => cluster.read_reach(&read, reach),
            None => cluster.read_var(&read),
        };
        let answer = answer.map(|answer| match read {
            // List answers are shaped like the API server's: `{"items": [...]}`.
            Read::List { .. } => {
                let items = answer
                    .as_object()
                    .and_then(|o| o.get("items").cloned())
                    .unwrap_or_else(|| Rc::new(Variable::Array(Vec::new())));
                let mut list = BTreeMap::new();
                list.insert("items".to_string(), items);
                Rc::new(Variable::Object(list))
            }
            Read::Get { .. } | Read::Image { .. } | Read::CanI { .. } => answer,
        });
        let result = match (answer, path) {
            (Ok(answer), Some(path)) => jmes::search_var(rt, &path?, &answer),
            (Ok(answer), None) => Ok(answer),
            (Err(e), _) => Err(e),
        };
        with_default(result, call.default.as_ref(), rt, data, name)
    }
}

/// The state `foreach` loops share, nested ones included.
struct Loop<'r> {
    /// The resource as patched so far.
    resource: &'r mut Value,
    iterations: &'r mut usize,
}

/// A rule's (or a foreach element's) patches, applied in Kyverno's order.
struct Patches<'p> {
    strategic_merge: Option<&'p Value>,
    json6902: Option<&'p str>,
    /// How errors of the JSON patch are introduced.
    label: &'static str,
}

impl Patches<'_> {
    /// Substitutes and applies; `Ok(false)` when a global anchor did not hold,
    /// so nothing else applies.
    fn apply(&self, rt: &Functions, resource: &mut Value, data: &Rcvar) -> Result<bool, String> {
        if let Some(patch) = self.strategic_merge {
            let patch = substitute_patch(rt, patch, data)?;
            let late =
                |text: &str, current: &Value| substitute_str_at(rt, text, data, At::Value(current));
            match strategic_merge(resource, &patch, &late) {
                Err(Skip::Global(_)) => return Ok(false),
                Err(Skip::Failed(why)) => return Err(why),
                Ok(_) => {}
            }
        }
        if let Some(text) = self.json6902 {
            let label = self.label;
            let text = render(rt, text, data)?;
            let patch = parse_json6902(&text).map_err(|e| format!("{label} {e}"))?;
            apply_json6902(resource, &patch).map_err(|e| format!("{label}: {e}"))?;
        }
        Ok(true)
    }
}

/// The variables a rule's expressions see: `request`, `serviceAccountName`,
/// `serviceAccountNamespace`, then each context entry. Kept as one JMESPath
/// object so the request is converted once per rule, not once per variable,
/// and handed to expressions without copying (a variable set while nobody
/// holds the object changes it in place).
#[derive(Clone)]
struct Scope {
    vars: Rcvar,
}

impl Scope {
    fn new(request: &Rcvar, username: &str, object: &Value) -> Scope {
        let (sa_namespace, sa_name) = username
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .unwrap_or(("", ""));
        let mut vars = BTreeMap::new();
        vars.insert("request".to_string(), request.clone());
        vars.insert(
            "serviceAccountName".to_string(),
            Rc::new(Variable::String(sa_name.to_string())),
        );
        vars.insert(
            "serviceAccountNamespace".to_string(),
            Rc::new(Variable::String(sa_namespace.to_string())),
        );
        // Read once per rule, from the object as the rules before left it; a
        // foreach's own patches do not change what its elements see.
        if let Some(images) = super::images::images(object) {
            vars.insert("images".to_string(), jmes_values::to_var(&images));
        }
        let mut scope = Scope {
            vars: Rc::new(Variable::Object(vars)),
        };
        scope.set_object(object);
        scope
    }

    fn vars(&mut self) -> Option<&mut BTreeMap<String, Rcvar>> {
        match Rc::make_mut(&mut self.vars) {
            Variable::Object(vars) => Some(vars),
            _ => None,
        }
    }

    fn set(&mut self, name: &str, value: Rcvar) {
        if let Some(vars) = self.vars() {
            vars.insert(name.to_string(), value);
        }
    }

    /// Replaces `request.object`.
    fn set_object(&mut self, object: &Value) {
        let Some(vars) = self.vars() else { return };
        let Some(request) = vars.get_mut("request") else {
            return;
        };
        if let Variable::Object(request) = Rc::make_mut(request) {
            request.insert("object".to_string(), jmes_values::to_var(object));
        }
    }

    fn var(&self) -> Rcvar {
        self.vars.clone()
    }
}

fn with_default(
    result: Result<Rcvar, String>,
    default: Option<&Value>,
    rt: &Functions,
    data: &Rcvar,
    name: &str,
) -> Result<Rcvar, String> {
    match (result, default) {
        (Ok(value), Some(default)) if matches!(*value, Variable::Null) => {
            Ok(jmes_values::to_var(&substitute(rt, default, data)?))
        }
        (Err(_), Some(default)) => Ok(jmes_values::to_var(&substitute(rt, default, data)?)),
        (Ok(value), _) => Ok(value),
        (Err(e), None) => Err(format!("context {name:?}: {e}")),
    }
}

/// Substitutes a string that must stay a string (URLs, JMESPath, patches).
fn render(rt: &Functions, text: &str, data: &Rcvar) -> Result<String, String> {
    Ok(match substitute_str(rt, text, data)? {
        Value::String(s) => s,
        other => other.to_string(),
    })
}

fn conditions_hold(rt: &Functions, conditions: &Conditions, data: &Rcvar) -> Result<bool, String> {
    let check = |list: &[Condition]| -> Result<Vec<bool>, String> {
        list.iter()
            .map(|c| {
                let key = substitute(rt, &c.key, data)?;
                let value = substitute(rt, &c.value, data)?;
                Ok(evaluate(&key, Operator::parse(&c.operator)?, &value))
            })
            .collect()
    };
    match conditions {
        Conditions::List(all) => Ok(check(all)?.iter().all(|b| *b)),
        Conditions::Blocks(blocks) => {
            let any_ok = match &blocks.any {
                Some(any) if !any.is_empty() => check(any)?.iter().any(|b| *b),
                _ => true,
            };
            let all_ok = match &blocks.all {
                Some(all) => check(all)?.iter().all(|b| *b),
                None => true,
            };
            Ok(any_ok && all_ok)
        }
    }
}

/// An API server URL path as a host read: `/api/v1/...` and
/// `/apis/GROUP/VERSION/...`, optional `namespaces/NS/`, a plural, an
/// optional name, and `labelSelector` / `fieldSelector` query parameters.
pub fn parse_url(url: &str, extra: &[ResourceKind]) -> Result<Read, String> {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err("must start with /api/v1/ or /apis/GROUP/VERSION/".into()),
    };
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name) = match rest {
        [plural] => (*plural, None),
        [plural, name] => (*plural, Some(name.to_string())),
        _ => return Err("must name a resource, optionally followed by one object name".into()),
    };
    let mut label_selector = None;
    let mut field_selector = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value);
        match key {
            "labelSelector" => label_selector = Some(value),
            "fieldSelector" => field_selector = Some(value),
            other => {
                return Err(format!(
                    "query parameter {other:?} is not supported (labelSelector, fieldSelector are)"
                ));
            }
        }
    }
    let selection = |_| Selection {
        namespace,
        name,
        field_masks: Vec::new(),
        label_selector,
        field_selector,
    };
    Read::of_resource(&api_version, plural, extra, selection).map(|(read, _)| read)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |at: usize| bytes.get(at).and_then(|c| (*c as char).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kyverno's namespacePathRegex, which holds a namespaced Policy's
    /// apiCalls to its namespace.
    #[test]
    fn the_namespace_a_path_names() {
        assert_eq!(
            namespace_in_path("/api/v1/namespaces/team-a/configmaps/x"),
            Some("team-a")
        );
        assert_eq!(
            namespace_in_path("/apis/apps/v1/namespaces/b/deployments"),
            Some("b")
        );
        assert_eq!(namespace_in_path("/api/v1/namespaces/c"), Some("c"));
        assert_eq!(namespace_in_path("/api/v1/nodes/node-1"), None);
        assert_eq!(namespace_in_path("/api/namespaces/x"), None);
        assert_eq!(namespace_in_path("/apisx/v1/namespaces/x"), None);
    }

    #[test]
    fn urls_map_onto_host_reads() {
        assert_eq!(
            parse_url("/api/v1/nodes/node-1", &[]).unwrap(),
            Read::Get {
                api_version: "v1".into(),
                kind: "Node".into(),
                namespace: None,
                name: "node-1".into(),
                field_masks: Vec::new(),
            }
        );
        assert_eq!(
            parse_url("/api/v1/namespaces/default/configmaps/zones", &[]).unwrap(),
            Read::Get {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("default".into()),
                name: "zones".into(),
                field_masks: Vec::new(),
            }
        );
        assert_eq!(
            parse_url("/api/v1/namespaces/prod", &[]).unwrap(),
            Read::Get {
                api_version: "v1".into(),
                kind: "Namespace".into(),
                namespace: None,
                name: "prod".into(),
                field_masks: Vec::new(),
            }
        );
        assert_eq!(
            parse_url(
                "/apis/apps/v1/namespaces/web/deployments?labelSelector=app%3Dweb%2Ctier+in+(a)",
                &[]
            )
            .unwrap(),
            Read::List {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("web".into()),
                label_selector: Some("app=web,tier in (a)".into()),
                field_selector: None
            }
        );
        assert!(matches!(
            parse_url("/api/v1/nodes", &[]).unwrap(),
            Read::List {
                namespace: None,
                ..
            }
        ));
        assert!(
            parse_url("/apis/example.com/v1/widgets", &[])
                .unwrap_err()
                .contains("resourceKinds")
        );
        assert!(parse_url("/healthz", &[]).is_err());
        assert!(
            parse_url("/api/v1/nodes?watch=true", &[])
                .unwrap_err()
                .contains("watch")
        );
    }
}
