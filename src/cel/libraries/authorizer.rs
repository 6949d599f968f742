//! Kubernetes' `authorizer` library (apiserver `pkg/cel/library/authz.go`)
//! over Kubewarden's `kubernetes/can_i` host capability, which sends a
//! SubjectAccessReview with resource attributes for a user and groups:
//!
//! - `authorizer.group(g).resource(r)` with `.namespace(ns)`, `.name(n)`,
//!   `.subresource(s)`, then `.check(verb)`: a decision, with `.allowed()`,
//!   `.reason()`, `.errored()`, `.error()`;
//! - `authorizer.serviceAccount(ns, name)`: the same checks for a service
//!   account (`system:serviceaccount:ns:name`, in `system:serviceaccounts`
//!   and `system:serviceaccounts:ns`) instead of the request's user;
//! - `authorizer.requestResource`: the check for the request's own resource.
//!
//! The principal is the request's `userInfo` (username and groups). As in
//! Kubernetes, the API version checked is `*`, and a failed check (the host
//! or the API server failing) is a decision that `errored()`, not a failed
//! expression. `authorizer.path(...)` (non-resource URLs) and the
//! `fieldSelector`/`labelSelector` refinements are refused at load: `can_i`
//! sends resource attributes only, without selectors.
//!
//! Answers travel as the `resource` library's do: a check without its answer
//! is recorded and fails with [`READ_PENDING`]; the engine asks the host and
//! evaluates again. Each distinct check is made once per evaluation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ::cel::common::ast::Expr;
use ::cel::common::types::Type;
use ::cel::common::value::CowVal;
use ::cel::objects::Opaque;
use ::cel::{Env, ExecutionError, IdedExpr};

use super::{
    Function, boolean, error, member, opaque, opaque_arg, string, string_arg, string_type,
};
use crate::cel::libraries::host_reads::READ_PENDING;
use crate::host::cluster::{CachedCluster, Read};
use crate::shared::request_facts::AdmissionRequest;
use crate::shared::request_facts::RequestFacts;

const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
const DECISION: &str = "kubernetes.authorization.Decision";

fn opaque_type(name: &'static str) -> impl Fn() -> Type {
    move || Type::new_opaque_type(name)
}

/// Who a check is for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Principal {
    pub user: String,
    pub groups: Vec<String>,
}

/// One SubjectAccessReview.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Check {
    pub principal: Principal,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub verb: String,
}

/// What the authorizer decided.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
    /// Why the check failed, if it did.
    pub error: Option<String>,
}

/// The answers so far, and the checks asked for without one.
#[derive(Debug, Default)]
pub struct Answers {
    pub decisions: BTreeMap<Check, Decision>,
    pub wanted: Mutex<Vec<Check>>,
}

/// Shared by every value of one evaluation; values compare without it.
#[derive(Debug, Clone, Default)]
struct Shared(Arc<Answers>);
impl PartialEq for Shared {
    fn eq(&self, _: &Shared) -> bool {
        true
    }
}
impl Eq for Shared {}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Authorizer {
    principal: Principal,
    answers: Shared,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupCheck {
    authorizer: Authorizer,
    group: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ResourceCheck {
    authorizer: Authorizer,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
}

macro_rules! opaque_named {
    ($($t:ty => $name:expr),*) => {$(
        impl Opaque for $t {
            fn runtime_type_name(&self) -> &str {
                $name
            }
        }
    )*};
}
opaque_named!(Authorizer => AUTHORIZER, GroupCheck => GROUP_CHECK,
    ResourceCheck => RESOURCE_CHECK, Decision => DECISION);

/// The values of `authorizer` and `authorizer.requestResource` for the
/// request's user and resource.
pub fn values(
    admission: &AdmissionRequest,
    info: &RequestFacts,
    answers: Arc<Answers>,
) -> (::cel::Value, ::cel::Value) {
    #[derive(Default, serde::Deserialize)]
    struct UserInfo {
        #[serde(default)]
        username: String,
        #[serde(default)]
        groups: Vec<String>,
    }
    let user: UserInfo = admission.field("userInfo");
    let authorizer = Authorizer {
        principal: Principal {
            user: user.username,
            groups: user.groups,
        },
        answers: Shared(answers),
    };
    let request = ResourceCheck {
        authorizer: authorizer.clone(),
        group: info.group.clone(),
        resource: info.resource.clone(),
        subresource: info.sub_resource.clone(),
        namespace: info.namespace.clone(),
        name: info.name.clone(),
    };
    (
        ::cel::Value::Opaque(Arc::new(authorizer)),
        ::cel::Value::Opaque(Arc::new(request)),
    )
}

/// Declares the library.
pub fn register(env: &mut Env) {
    let (authorizer, group_check) = (opaque_type(AUTHORIZER), opaque_type(GROUP_CHECK));
    let (resource_check, decision) = (opaque_type(RESOURCE_CHECK), opaque_type(DECISION));
    member(
        env,
        "group",
        "authorizer_group",
        authorizer(),
        vec![string_type()],
        group,
    );
    member(
        env,
        "serviceAccount",
        "authorizer_serviceaccount",
        authorizer(),
        vec![string_type(), string_type()],
        service_account,
    );
    member(
        env,
        "resource",
        "groupcheck_resource",
        group_check(),
        vec![string_type()],
        resource,
    );
    let refinements: [(&str, Function); 3] = [
        ("subresource", subresource),
        ("namespace", namespace),
        ("name", name),
    ];
    for (function, op) in refinements {
        let id = format!("resourcecheck_{function}");
        member(
            env,
            function,
            &id,
            resource_check(),
            vec![string_type()],
            op,
        );
    }
    member(
        env,
        "check",
        "resourcecheck_check",
        resource_check(),
        vec![string_type()],
        check,
    );
    let outcomes: [(&str, Function); 4] = [
        ("allowed", allowed),
        ("reason", reason),
        ("errored", errored),
        ("error", error_of),
    ];
    for (function, op) in outcomes {
        member(
            env,
            function,
            &format!("decision_{function}"),
            decision(),
            vec![],
            op,
        );
    }
}

fn group<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let authorizer: Authorizer = opaque_arg(&args, 0, "group")?;
    let group = string_arg(&args, 1, "group")?.to_string();
    opaque(GroupCheck { authorizer, group })
}

fn service_account<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let function = "serviceAccount";
    let authorizer: Authorizer = opaque_arg(&args, 0, function)?;
    let namespace = string_arg(&args, 1, function)?;
    let name = string_arg(&args, 2, function)?;
    if crate::shared::k8s_names::check_dns_subdomain(name).is_err() {
        return Err(error(function, "Invalid service account name"));
    }
    if crate::shared::k8s_names::check_dns_label(namespace).is_err() {
        return Err(error(function, "Invalid service account namespace"));
    }
    opaque(Authorizer {
        principal: Principal {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{namespace}"),
            ],
        },
        answers: authorizer.answers,
    })
}

fn resource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let check: GroupCheck = opaque_arg(&args, 0, "resource")?;
    let resource = string_arg(&args, 1, "resource")?;
    if resource.trim().is_empty() {
        return Err(error("resource", "resource must not be empty"));
    }
    opaque(ResourceCheck {
        authorizer: check.authorizer,
        group: check.group,
        resource: resource.to_string(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
    })
}

/// A resource check with one of its fields set.
fn refine<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    field: fn(&mut ResourceCheck) -> &mut String,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut check: ResourceCheck = opaque_arg(&args, 0, function)?;
    *field(&mut check) = string_arg(&args, 1, function)?.to_string();
    opaque(check)
}

fn subresource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    refine(args, "subresource", |c| &mut c.subresource)
}

fn namespace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    refine(args, "namespace", |c| &mut c.namespace)
}

fn name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    refine(args, "name", |c| &mut c.name)
}

fn check<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let resource: ResourceCheck = opaque_arg(&args, 0, "check")?;
    let verb = string_arg(&args, 1, "check")?.to_string();
    let answers = resource.authorizer.answers.0.clone();
    let check = Check {
        principal: resource.authorizer.principal,
        group: resource.group,
        resource: resource.resource,
        subresource: resource.subresource,
        namespace: resource.namespace,
        name: resource.name,
        verb,
    };
    match answers.decisions.get(&check) {
        Some(decision) => opaque(decision.clone()),
        None => {
            if let Ok(mut wanted) = answers.wanted.lock() {
                wanted.push(check);
            }
            Err(error("check", READ_PENDING))
        }
    }
}

fn decision(args: &[CowVal<'_, '_>], function: &str) -> Result<Decision, ExecutionError> {
    opaque_arg(args, 0, function)
}

fn allowed<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(decision(&args, "allowed")?.allowed)
}

fn reason<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(decision(&args, "reason")?.reason)
}

fn errored<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(decision(&args, "errored")?.error.is_some())
}

fn error_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(decision(&args, "error")?.error.unwrap_or_default())
}

/// Asks the host, through `kubernetes/can_i`.
pub fn read(check: &Check, cluster: &CachedCluster) -> Decision {
    let read = Read::CanI {
        user: check.principal.user.clone(),
        groups: check.principal.groups.clone(),
        group: check.group.clone(),
        resource: check.resource.clone(),
        subresource: check.subresource.clone(),
        namespace: check.namespace.clone(),
        name: check.name.clone(),
        verb: check.verb.clone(),
    };
    let failed = |why: String| Decision {
        error: Some(why),
        ..Decision::default()
    };
    let status = match cluster.read_json(&read) {
        Ok(status) => status,
        Err(why) => return failed(why),
    };
    let text = |field: &str| {
        status
            .get(field)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    };
    Decision {
        allowed: status.get("allowed").and_then(|v| v.as_bool()) == Some(true),
        reason: text("reason").to_string(),
        error: Some(text("evaluationError").to_string()).filter(|e| !e.is_empty()),
    }
}

/// What `can_i` cannot ask, called in `expr`: non-resource paths and
/// selector refinements, with why.
pub fn unsupported(expr: &IdedExpr) -> Option<String> {
    let mut found = None;
    visit_calls(expr, &mut |function, target| {
        let why = match function {
            "path" => "non-resource URLs: Kubewarden's can_i host capability checks resources only",
            "fieldSelector" | "labelSelector" => {
                "selectors: Kubewarden's can_i host capability sends none"
            }
            _ => return,
        };
        if found.is_none() && rooted_at_authorizer(target) {
            found = Some(format!("`authorizer` {function}(...) checks {why}"));
        }
    });
    found
}

/// Whether a chain of calls and selections starts at `authorizer`.
fn rooted_at_authorizer(mut expr: &IdedExpr) -> bool {
    loop {
        match &expr.expr {
            Expr::Ident(name) => return name == "authorizer",
            Expr::Call(call) => match &call.target {
                Some(target) => expr = target,
                None => return false,
            },
            Expr::Select(select) => expr = &select.operand,
            _ => return false,
        }
    }
}

/// Calls `f(function, target)` for every receiver call in `expr`.
fn visit_calls(expr: &IdedExpr, f: &mut dyn FnMut(&str, &IdedExpr)) {
    if let Expr::Call(call) = &expr.expr
        && let Some(target) = &call.target
    {
        f(&call.func_name, target);
    }
    crate::cel::syntax::ast::children(expr, &mut |child| visit_calls(child, f));
}
