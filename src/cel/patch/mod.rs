//! What a mutation's value does to the object: one patcher per mutation
//! (`patchers`), an ApplyConfiguration merged as server-side apply merges
//! it (`apply`, by Kubernetes' schema of the built-in kinds in
//! `apply_schema`), a JSON Patch applied and type-checked
//! (`json_patch_mutation`).

pub mod apply;
pub(crate) mod apply_schema;
pub(crate) mod json_patch_mutation;
pub mod patchers;
