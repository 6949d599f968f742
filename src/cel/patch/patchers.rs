//! One patcher per mutation, made by the compiler: what the mutation's
//! expression gives is applied to the object as its patch type says, an
//! apply configuration merged as server-side apply merges it, a JSON Patch
//! applied in order, and what either wrote in the object's labels and
//! annotations checked as the API server would check it.

use serde_json::Value;

use crate::cel::patch::apply;
use crate::cel::spec::Place;

/// A mutation's patch type (`patchType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    ApplyConfiguration,
    JsonPatch,
}

impl PatchKind {
    /// The field of the mutation that holds the expression.
    pub fn field(self) -> &'static str {
        match self {
            PatchKind::ApplyConfiguration => "applyConfiguration",
            PatchKind::JsonPatch => "jsonPatch",
        }
    }
}

/// One compiled mutation: its place in `spec.mutations`, its patch type,
/// its expression, and where the policy keeps that expression's program.
#[derive(Debug, Clone)]
pub struct Patcher {
    pub index: usize,
    pub kind: PatchKind,
    pub expression: String,
    /// The expression's position among the policy's expressions
    /// (`CelPolicy::sources`), where its parsed program is found
    /// (`CelPolicy::program`).
    pub program: usize,
}

/// What every mutation of a policy is applied with: the object's type (for
/// apply configurations), the type JSON patches are checked against, and
/// whether atomic lists and maps are set whole (server-side apply).
#[derive(Clone, Copy)]
pub struct Patching {
    pub schema: Option<apply::SchemaType>,
    pub typed: Option<apply::SchemaType>,
    pub atomics: bool,
}

impl Patcher {
    /// Where the expression sits in the policy's spec.
    pub fn place(&self) -> Place {
        Place::Mutation(self.index, self.kind.field())
    }

    /// Applies what the expression gave (`result`) to `object`.
    pub fn apply(
        &self,
        object: &mut Value,
        result: Value,
        patching: Patching,
    ) -> Result<(), String> {
        let i = self.index;
        // What the object's labels and annotations were, to check what this
        // mutation writes there as the short form's keys are checked.
        let before = crate::shared::metadata::metadata_maps(object).map(Option::<&Value>::cloned);
        match self.kind {
            PatchKind::ApplyConfiguration => {
                if !result.is_object() {
                    return Err(format!(
                        "mutations[{i}]: an apply configuration must be an object (Object{{...}}), not {result}"
                    ));
                }
                apply::merge(object, &result, patching.schema, patching.atomics)
                    .map_err(|why| format!("mutations[{i}]: error applying patch: {why}"))?;
            }
            PatchKind::JsonPatch => {
                let patch: json_patch::Patch = serde_json::from_value(result).map_err(|why| {
                    format!("mutations[{i}]: not a list of JSONPatch operations: {why}")
                })?;
                crate::cel::patch::json_patch_mutation::apply(object, patch.0, patching.typed)
                    .map_err(|why| format!("mutations[{i}]: {why}"))?;
            }
        }
        if patching.typed.is_some() {
            crate::shared::metadata::drop_empty_metadata_maps(object);
        }
        // A key or label value the API server would refuse is an error, which
        // failurePolicy judges, as Kubernetes would refuse the object.
        if let Some(problem) = crate::shared::metadata::first_metadata_problem(
            before.each_ref().map(Option::as_ref),
            object,
        ) {
            return Err(format!("mutations[{i}]: {problem}"));
        }
        Ok(())
    }
}
