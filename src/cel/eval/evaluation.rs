//! One CEL policy's evaluation over one request: the expressions parsed
//! once each, the variables computed once each, the host's answers read
//! once each (with field masks worked out from what the expressions read),
//! and the `cel` crate's context made only for an expression the direct
//! evaluator does not cover.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

use ::cel::common::value::Val;
use ::cel::{Context, Value as CelValue};
use serde_json::Value;

use crate::cel::eval::cluster_reads::{ClusterReads, ResourceReach};
use crate::cel::eval::direct::{self, Direct};
use crate::cel::eval::environment;
use crate::cel::eval::request::{CelRequest, Evaluated, describe};
use crate::cel::libraries::host_reads::{READ_PENDING, ResourceCall};
use crate::cel::libraries::values::from_json;
use crate::cel::libraries::{authorizer, cost_tracker, runtime_cost};
use crate::cel::policy::CelPolicy;
use crate::cel::policy::exception::CelException;
use crate::cel::program::{self, Compiled};
use crate::shared::reach::{Reach, field_masks};

/// One policy's evaluation: the object, the variables computed so far, what
/// it read of the cluster, and, once an expression needs it, the `cel`
/// crate's context.
pub(crate) struct Evaluation<'a> {
    policy: &'a CelPolicy,
    request: &'a CelRequest<'a>,
    object: Rc<Value>,
    /// Built the first time the direct evaluator leaves an expression to the
    /// crate: building the crate's environment is most of what a small
    /// policy would cost otherwise.
    context: Option<Context<'static, 'static>>,
    /// Parsed expressions by their text (the policy's own strings).
    compiled: BTreeMap<&'a str, Rc<Compiled>>,
    /// The crate's values of the variables computed so far.
    variables: BTreeMap<String, Result<CelValue, String>>,
    /// The direct evaluator's; `None`: left to the crate. Lists, here and
    /// for `answers`: an evaluation holds a few of each, and a map's first
    /// node has room for eleven (a fresh instance faults in each new 4 KiB
    /// page of heap).
    direct_variables: Vec<(String, Option<Direct<'static>>)>,
    /// How deep variables being computed directly read other variables.
    direct_depth: usize,
    /// A mutation's own expression is being evaluated directly (not a
    /// variable it reads).
    pub(in crate::cel) in_mutation: bool,
    reads: ClusterReads,
    namespace_bound: bool,
    /// Kyverno's `exceptions` (`allowedImages`, `allowedValues`), once the
    /// policy's exceptions are checked.
    pub(in crate::cel) exceptions: Option<Value>,
    exceptions_bound: bool,
    /// What `resource.Get` reads of fetched objects, once worked out.
    resource_reach: Option<ResourceReach>,
    /// What each variable computed so far cost, in cel-go's runtime cost
    /// model (0 where it is not counted: it cannot come near the limit).
    variable_costs: BTreeMap<String, u64>,
    /// What the last expression run by the crate cost.
    last_cost: u64,
    /// What the `matchConditions` evaluated so far cost.
    conditions_cost: u64,
}

/// kube-apiserver's budget for one mutation of a MutatingAdmissionPolicy:
/// its expression and the variables it reads (`RuntimeCELCostBudget`).
pub(crate) const MUTATION_BUDGET: u64 = 10_000_000;
/// kube-apiserver's budget for a policy's `matchConditions` together
/// (`RuntimeCELCostBudgetMatchConditions`).
pub(crate) const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;
/// kube-apiserver's words past a budget.
pub(crate) const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

fn bind(context: &mut Context, name: &str, value: CelValue) -> Result<(), String> {
    let value: Box<dyn Val> = value
        .try_into()
        .map_err(|e: ::cel::ExecutionError| format!("{name}: {e}"))?;
    context.add_variable_as_val(name, value);
    Ok(())
}

impl<'a> Evaluation<'a> {
    pub(crate) fn new(policy: &'a CelPolicy, request: &'a CelRequest<'a>, object: Value) -> Self {
        Evaluation {
            policy,
            request,
            object: Rc::new(object),
            context: None,
            compiled: BTreeMap::new(),
            variables: BTreeMap::new(),
            direct_variables: Vec::new(),
            direct_depth: 0,
            in_mutation: false,
            reads: ClusterReads::default(),
            namespace_bound: false,
            exceptions: None,
            exceptions_bound: false,
            resource_reach: None,
            variable_costs: BTreeMap::new(),
            last_cost: 0,
            conditions_cost: 0,
        }
    }

    /// What the variables computed so far cost, in cel-go's runtime cost
    /// model (the differential test compares it with cel-go's).
    #[cfg(test)]
    pub(crate) fn variables_cost(&self) -> u64 {
        self.variable_costs.values().sum()
    }

    /// What a MutatingAdmissionPolicy's last expression and the variables
    /// it reads (through other variables too) cost; `Err` past `budget`, as
    /// kube-apiserver stops there. Kyverno's engine has no such budget.
    fn within_budget(&mut self, compiled: &Compiled, budget: u64) -> Result<(), String> {
        if self.policy.kind.is_kyverno() {
            return Ok(());
        }
        let mut seen = BTreeSet::new();
        let mut pending: Vec<String> = compiled.variables.iter().cloned().collect();
        let mut total = self.last_cost;
        while let Some(name) = pending.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            let own = self.variable_expression(&name).ok();
            // A variable the direct evaluator answered: the most it costs.
            let cost = self.variable_costs.get(&name).copied();
            let cost = cost.or_else(|| own.as_ref().and_then(|own| own.cost_bound));
            total = total.saturating_add(cost.unwrap_or(0));
            if let Some(own) = own {
                pending.extend(own.variables.iter().cloned());
            }
        }
        if total > budget {
            return Err(OUT_OF_BUDGET.to_string());
        }
        Ok(())
    }

    /// Adds what the last `matchConditions` expression cost to what those
    /// before it cost; `Err` past kube-apiserver's budget for them.
    pub(in crate::cel) fn condition_within_budget(&mut self) -> Result<(), String> {
        if self.policy.kind.is_kyverno() {
            return Ok(());
        }
        self.conditions_cost = self.conditions_cost.saturating_add(self.last_cost);
        if self.conditions_cost > MATCH_CONDITIONS_BUDGET {
            return Err(OUT_OF_BUDGET.to_string());
        }
        Ok(())
    }

    /// The crate's context, made on first use.
    fn context(&mut self) -> Result<&mut Context<'static, 'static>, String> {
        if self.context.is_none() {
            let env = Arc::new(environment::runtime_env(
                self.policy.struct_names(),
                self.policy.libraries(),
            ));
            let mut context = Context::with_env(env);
            bind(&mut context, "object", from_json(&self.object))?;
            // The rest only when some expression names it.
            if self.policy.mentions("oldObject") {
                bind(&mut context, "oldObject", self.request.old_object())?;
            }
            if self.policy.mentions("request") {
                let with_objects = self.policy.kind.is_kyverno();
                bind(&mut context, "request", self.request.request(with_objects))?;
            }
            if self.policy.mentions("params") {
                let params = self
                    .policy
                    .params
                    .as_ref()
                    .map(from_json)
                    .unwrap_or(CelValue::Null);
                bind(&mut context, "params", params)?;
            }
            self.context = Some(context);
        }
        self.context
            .as_mut()
            .ok_or_else(|| "no CEL context".to_string())
    }

    /// The object as the expressions see it now.
    pub(in crate::cel) fn object(&self) -> &Value {
        &self.object
    }

    /// The object, leaving null in its place: see [`Evaluation::set_object`].
    pub(in crate::cel) fn take_object(&mut self) -> Value {
        let object = std::mem::replace(&mut self.object, Rc::new(Value::Null));
        Rc::try_unwrap(object).unwrap_or_else(|shared| (*shared).clone())
    }

    /// The object changed: later expressions see it (`more`: there are
    /// any), and variables are computed again from it.
    pub(in crate::cel) fn set_object(&mut self, object: Value, more: bool) -> Result<(), String> {
        self.object = Rc::new(object);
        if !more {
            return Ok(());
        }
        self.variables.clear();
        self.variable_costs.clear();
        self.direct_variables.clear();
        match &mut self.context {
            Some(context) => bind(context, "object", from_json(&self.object)),
            None => Ok(()),
        }
    }

    /// The request's Namespace, read once through the host.
    pub(in crate::cel) fn namespace(&mut self) -> Result<Value, String> {
        self.reads.namespace(self.request)
    }

    /// `source` parsed, once per evaluation; `at` (its path in the
    /// settings, for a message) is made only when it is parsed.
    fn compile(
        &mut self,
        source: &'a str,
        at: impl Fn() -> String,
    ) -> Result<Rc<Compiled>, String> {
        if let Some(compiled) = self.compiled.get(source) {
            return Ok(compiled.clone());
        }
        let compiled = match self.policy.compiled(source) {
            Some(compiled) => compiled?,
            None => {
                let mut compiled =
                    program::compile_at(source, &Deferred(at), self.policy.evaluators)?;
                compiled.cost_bound = self.policy.prepare(&mut compiled.expression);
                Rc::new(compiled)
            }
        };
        self.compiled.insert(source, compiled.clone());
        Ok(compiled)
    }

    /// Evaluates the expression at `at`: directly over JSON where the
    /// direct evaluator can, otherwise by the crate, with the variables and
    /// context it reads made ready first.
    pub(crate) fn evaluate(
        &mut self,
        source: &'a str,
        at: impl Fn() -> String,
    ) -> Result<Evaluated, String> {
        let compiled = self.compile(source, at)?;
        self.evaluate_parsed(&compiled)
    }

    /// Evaluates the policy's expression at `position` among its sources
    /// (a patcher's program), as [`Evaluation::evaluate`] does.
    pub(in crate::cel) fn evaluate_program(
        &mut self,
        position: usize,
        at: impl Fn() -> String,
    ) -> Result<Evaluated, String> {
        let compiled = self.policy.program(position).ok_or_else(at)??;
        let evaluated = self.evaluate_parsed(&compiled)?;
        self.within_budget(&compiled, MUTATION_BUDGET)?;
        Ok(evaluated)
    }

    fn evaluate_parsed(&mut self, compiled: &Compiled) -> Result<Evaluated, String> {
        self.last_cost = compiled.cost_bound.unwrap_or(0);
        if let Some(value) = self.direct(compiled) {
            return Ok(Evaluated::Json(value));
        }
        self.evaluate_compiled(compiled).map(Evaluated::Cel)
    }

    /// Evaluates the expression at `at` by the crate alone.
    pub(in crate::cel) fn evaluate_with_crate(
        &mut self,
        source: &'a str,
        at: impl Fn() -> String,
    ) -> Result<CelValue, String> {
        let compiled = self.compile(source, at)?;
        self.evaluate_compiled(&compiled)
    }

    fn evaluate_compiled(&mut self, compiled: &Compiled) -> Result<CelValue, String> {
        self.prepare(compiled, 0)?;
        self.execute(compiled)
    }

    /// The direct evaluator's JSON answer, when it has one.
    fn direct(&mut self, compiled: &Compiled) -> Option<Value> {
        if !self.policy.evaluators.direct {
            return None;
        }
        let object = self.object.clone();
        match direct::evaluate(&compiled.expression, &object, self) {
            Ok(Direct::Json(value)) => Some(value.into_owned()),
            _ => None,
        }
    }

    /// Whether every condition of `exception` holds for the request (it
    /// then exempts it); an error follows the policy's failurePolicy.
    pub(in crate::cel) fn exception_holds(
        &mut self,
        exception: &'a CelException,
    ) -> Result<bool, String> {
        for (i, condition) in exception.spec.match_conditions.iter().enumerate() {
            let at = || format!("{}.spec.matchConditions[{i}].expression", exception.at);
            let value = match self.evaluate(&condition.expression, at) {
                Ok(Evaluated::Json(Value::Bool(b))) => b,
                Ok(Evaluated::Cel(CelValue::Bool(b))) => b,
                Ok(_) => {
                    return Err(format!(
                        "PolicyException {:?}: matchConditions[{i}] ({:?}) does not give a bool",
                        exception.name, condition.name
                    ));
                }
                Err(why) => {
                    return Err(format!(
                        "PolicyException {:?}: matchConditions[{i}] ({:?}): {why}",
                        exception.name, condition.name
                    ));
                }
            };
            if !value {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The crate's context ready for `compiled`: `namespaceObject` and the
    /// variables it reads.
    fn prepare(&mut self, compiled: &Compiled, depth: usize) -> Result<(), String> {
        if compiled.identifiers.contains("namespaceObject") && !self.namespace_bound {
            let namespace = from_json(&self.namespace()?);
            bind(self.context()?, "namespaceObject", namespace)?;
            self.namespace_bound = true;
        }
        if compiled.identifiers.contains("exceptions")
            && !self.exceptions_bound
            && let Some(exceptions) = self.exceptions.as_ref().map(from_json)
        {
            bind(self.context()?, "exceptions", exceptions)?;
            self.exceptions_bound = true;
        }
        let wanted: BTreeSet<String> = compiled
            .variables
            .iter()
            .filter(|name| !self.variables.contains_key(*name))
            .cloned()
            .collect();
        if wanted.is_empty() {
            return self.bind_variables();
        }
        // Variables read variables; a cycle cannot be deeper than their number.
        if depth > self.policy.spec.variables.len() {
            return Err("variables refer to each other in a cycle".to_string());
        }
        for name in wanted {
            let own = self.variable_expression(&name)?;
            self.prepare(&own, depth + 1)?;
            // A failure is named by the variable where it happened; those
            // reading it carry that name on.
            let value = self.execute(&own);
            self.variable_costs.insert(name.clone(), self.last_cost);
            let value = value.map_err(|why| {
                if why.starts_with("variables.") {
                    why
                } else {
                    format!("variables.{name}: {why}")
                }
            });
            self.variables.insert(name, value);
        }
        self.bind_variables()
    }

    /// The declared variable `name`, parsed.
    fn variable_expression(&mut self, name: &str) -> Result<Rc<Compiled>, String> {
        let policy = self.policy;
        let Some((i, variable)) = policy
            .spec
            .variables
            .iter()
            .enumerate()
            .find(|(_, v)| v.name == name)
        else {
            return Err(format!("variables.{name} is not declared"));
        };
        self.compile(&variable.expression, || {
            format!("{}.spec.variables[{i}].expression", policy.at)
        })
    }

    fn bind_variables(&mut self) -> Result<(), String> {
        let mut computed = std::collections::HashMap::new();
        for (name, value) in &self.variables {
            if let Ok(value) = value {
                computed.insert(::cel::objects::Key::from(name.as_str()), value.clone());
            }
        }
        bind(
            self.context()?,
            "variables",
            CelValue::Map(::cel::objects::Map {
                map: Arc::new(computed),
            }),
        )
    }

    /// The fields of the objects `resource.Get` reads that any expression of
    /// the policy can reach, as host field masks (none: whole objects). One
    /// set for every read of the policy: what one read needs, all get.
    fn work_out_resource_reach(&mut self) -> Result<(), String> {
        if self.resource_reach.is_some() {
            return Ok(());
        }
        let mut compiled = Vec::new();
        let mut gets = BTreeSet::new();
        let policy = self.policy;
        for (place, source) in policy.sources() {
            compiled.push(self.compile(source, || policy.path(place))?);
        }
        for variable in &policy.spec.variables {
            // Parsed in the loop above: `sources` includes the variables.
            let at = || format!("{}.spec.variables", policy.at);
            if self.compile(&variable.expression, at)?.uses.is_get {
                gets.insert(variable.name.clone());
            }
        }
        let mut paths: Vec<&Vec<String>> = Vec::new();
        let mut whole = false;
        for expression in &compiled {
            whole |= expression.uses.whole;
            paths.extend(&expression.uses.get_paths);
            for (variable, used) in &expression.uses.variable_paths {
                if gets.contains(variable) {
                    whole |= used.iter().any(Vec::is_empty);
                    paths.extend(used);
                }
            }
        }
        let masks = if whole {
            Vec::new()
        } else {
            let mut reach = Reach::Fields(Vec::new());
            for path in &paths {
                reach.take(path.iter().map(String::as_str));
            }
            field_masks(&reach)
        };
        self.resource_reach = Some(ResourceReach {
            masks,
            paths: (!whole).then(|| paths.into_iter().cloned().collect()),
        });
        Ok(())
    }

    /// The host's answer to `call`, read once per evaluation.
    fn read(&mut self, call: ResourceCall) -> Result<Value, String> {
        self.work_out_resource_reach()?;
        self.reads
            .resource(call, self.resource_reach.as_ref(), self.request)
    }

    /// Runs a parsed expression by the crate, making the host reads it asks
    /// for.
    fn execute(&mut self, compiled: &Compiled) -> Result<CelValue, String> {
        loop {
            let libraries = self.reads.libraries(
                self.policy.libraries().imagedata,
                self.policy.libraries().authorizer,
            );
            let request = self.request;
            let context = self.context()?;
            if let Some(checks) = &libraries.checks {
                let (value, request_resource) =
                    authorizer::values(request.admission, request.facts, checks.clone());
                bind(context, "authorizer", value)?;
                bind(context, "authorizer.requestResource", request_resource)?;
            }
            context.add_variable_as_val("resource", Box::new(libraries.resource.clone()));
            if let Some(images) = &libraries.images {
                context.add_variable_as_val("image", Box::new(images.clone()));
            }
            cost_tracker::clear();
            runtime_cost::clear();
            let outcome = context.resolve(&compiled.expression);
            self.last_cost = compiled.cost_bound.unwrap_or_else(runtime_cost::spent);
            let tracked_failure = cost_tracker::failed();
            let wanted = libraries.wanted();
            let error = match (outcome, tracked_failure) {
                (Ok(value), None) => return Ok(value),
                // The operand's own error, where it was not absorbed.
                (Err(error), Some(cost_tracker::UNCOUNTED)) if wanted.is_empty() => {
                    return Err(describe(&error));
                }
                (_, Some(why)) if wanted.is_empty() => return Err(why.to_string()),
                // The failed value may be a read not served yet: served,
                // the expression runs again.
                (_, Some(_)) => ::cel::ExecutionError::function_error("resource", READ_PENDING),
                (Err(error), None) => error,
            };
            // A variable that failed is left out of `variables`: reading it
            // fails with its own error. Variables are lazy, so one an
            // expression names but does not reach (`a ? variables.x : y`)
            // fails nothing.
            if let ::cel::ExecutionError::NoSuchKey(name) = &error
                && let Some(Err(why)) = self.variables.get(name.as_str())
            {
                return Err(why.clone());
            }
            if wanted.is_empty() || !error.to_string().contains(READ_PENDING) {
                return Err(describe(&error));
            }
            // Every resource read of the policy decodes as far as any needs.
            if wanted.reads_resources() {
                self.work_out_resource_reach()?;
            }
            self.reads
                .serve(wanted, self.resource_reach.as_ref(), self.request)?;
        }
    }
}

impl direct::Names for Evaluation<'_> {
    fn identifier(&mut self, name: &str) -> Option<Value> {
        match name {
            "oldObject" => Some(self.request.old_object_json().clone()),
            "params" => Some(self.policy.params.clone().unwrap_or(Value::Null)),
            "namespaceObject" => self.namespace().ok(),
            "exceptions" => self.exceptions.clone(),
            _ => None,
        }
    }

    fn variable(&mut self, name: &str) -> Option<Direct<'static>> {
        if let Some((_, value)) = self.direct_variables.iter().find(|(n, _)| n == name) {
            return value.clone();
        }
        // Variables read variables; a cycle is left to the crate to report.
        if self.direct_depth > self.policy.spec.variables.len() {
            return None;
        }
        let compiled = self.variable_expression(name).ok()?;
        self.direct_depth += 1;
        let in_mutation = std::mem::replace(&mut self.in_mutation, false);
        let object = self.object.clone();
        let value = direct::evaluate(&compiled.expression, &object, self)
            .ok()
            .map(Direct::into_owned);
        self.in_mutation = in_mutation;
        self.direct_depth -= 1;
        // A cycle may have recorded the variable meanwhile: the outermost
        // evaluation's value is the one kept.
        match self.direct_variables.iter_mut().find(|(n, _)| n == name) {
            Some((_, slot)) => *slot = value.clone(),
            None => self
                .direct_variables
                .push((name.to_string(), value.clone())),
        }
        value
    }

    fn read(&mut self, call: ResourceCall) -> Option<Value> {
        Evaluation::read(self, call).ok()
    }

    fn is_struct(&self, name: &str) -> bool {
        // The crate knows the struct types named in the mutations' text; in
        // a mutation's own expression, that is every one it constructs,
        // without reading the text for them.
        if self.in_mutation {
            name == "JSONPatch" || name == "Object" || name.starts_with("Object.")
        } else {
            self.policy.struct_names().contains(name)
        }
    }
}

/// A path written by a closure when a message needs it.
struct Deferred<F: Fn() -> String>(F);

impl<F: Fn() -> String> std::fmt::Display for Deferred<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&(self.0)())
    }
}
