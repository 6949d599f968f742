//! What CEL expressions read through Kubewarden's host capabilities: Kyverno's
//! `resource.Get` and `resource.List` and `image.GetMetadata` as values of the
//! environment that record what they are asked for (the engine asks the host
//! and evaluates again with the answers), and the one translation of a
//! `resource` call into a host read.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ::cel::common::types::Type;
use ::cel::common::value::{CowVal, StaticVal, Val};
use ::cel::{Env, ExecutionError, Value};

use super::{string_arg, string_type as string};
use crate::host::cluster::{CachedCluster, Read, Selection};
use crate::shared::reach::Reach;
use crate::shared::resources::ResourceKind;

static RESOURCE_TYPE: Type = Type::new_unspecified_type("kyverno.resource");

/// One read `resource.Get` or `resource.List` asks for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResourceCall {
    pub api_version: String,
    pub resource: String,
    pub namespace: String,
    /// `None` for a list.
    pub name: Option<String>,
}

/// Kyverno's `resource` library. CEL functions here are plain function
/// pointers, so the answers travel in the `resource` value itself: a call
/// whose answer is not there yet records the read and fails; the engine
/// makes the reads through the host and evaluates again (expressions have
/// no side effects, so a second evaluation gives what one with the answers
/// would have). Each read is made once per evaluation.
#[derive(Debug, Clone, Default)]
pub struct ResourceLibrary {
    pub answers: Arc<BTreeMap<ResourceCall, Result<Value, String>>>,
    pub wanted: Arc<Mutex<Vec<ResourceCall>>>,
}

impl Val for ResourceLibrary {
    fn get_type(&self) -> &Type {
        &RESOURCE_TYPE
    }
    fn cel_type() -> &'static Type {
        &RESOURCE_TYPE
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for ResourceLibrary {}

/// The error a call without its answer ends the evaluation with.
pub const READ_PENDING: &str = "resource read pending";

fn resource_call<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    with_name: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let library = args
        .first()
        .and_then(|this| this.downcast_ref::<ResourceLibrary>())
        .ok_or_else(|| ExecutionError::function_error(function, "called on something else"))?;
    let call = ResourceCall {
        api_version: string_arg(&args, 1, function)?.to_string(),
        resource: string_arg(&args, 2, function)?.to_string(),
        namespace: string_arg(&args, 3, function)?.to_string(),
        name: if with_name {
            Some(string_arg(&args, 4, function)?.to_string())
        } else {
            None
        },
    };
    answered(&library.answers, &library.wanted, call, function)
}

/// The answer to `call`, or, without one yet, the call recorded as wanted and
/// [`READ_PENDING`].
fn answered<'b, 'v, K: Ord>(
    answers: &BTreeMap<K, Result<Value, String>>,
    wanted: &Mutex<Vec<K>>,
    call: K,
    function: &str,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match answers.get(&call) {
        Some(Ok(value)) => Box::<dyn Val>::try_from(value.clone()).map(CowVal::Owned),
        Some(Err(why)) => Err(ExecutionError::function_error(function, why)),
        None => {
            if let Ok(mut wanted) = wanted.lock() {
                wanted.push(call);
            }
            Err(ExecutionError::function_error(function, READ_PENDING))
        }
    }
}

static IMAGEDATA_TYPE: Type = Type::new_unspecified_type("kyverno.imagedata");

/// Kyverno's `imagedata` library, bound as `image` beside the image
/// library's `image(...)` function: what a registry says of an image,
/// through Kubewarden's OCI host capabilities. Answers travel as in
/// [`ResourceLibrary`]: a call without its answer records the reference and
/// fails, and the engine reads it and evaluates again.
#[derive(Debug, Clone, Default)]
pub struct ImageDataLibrary {
    pub answers: Arc<BTreeMap<String, Result<Value, String>>>,
    pub wanted: Arc<Mutex<Vec<String>>>,
}

impl Val for ImageDataLibrary {
    fn get_type(&self) -> &Type {
        &IMAGEDATA_TYPE
    }
    fn cel_type() -> &'static Type {
        &IMAGEDATA_TYPE
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for ImageDataLibrary {}

fn image_metadata<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let function = "image.GetMetadata";
    let library = args
        .first()
        .and_then(|this| this.downcast_ref::<ImageDataLibrary>())
        .ok_or_else(|| ExecutionError::function_error(function, "called on something else"))?;
    let reference = string_arg(&args, 1, function)?.to_string();
    answered(&library.answers, &library.wanted, reference, function)
}

fn resource_get<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    resource_call(args, "resource.Get", true)
}

fn resource_list<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    resource_call(args, "resource.List", false)
}

/// Makes one read through the host and gives its answer.
pub fn read(
    call: &ResourceCall,
    masks: &[String],
    reach: Option<&Reach>,
    kinds: &[ResourceKind],
    cluster: &CachedCluster,
) -> Result<serde_json::Value, String> {
    let selection = |namespaced: bool| Selection {
        // A cluster-scoped kind is read without the namespace given.
        namespace: (namespaced && !call.namespace.is_empty()).then(|| call.namespace.clone()),
        name: call.name.clone(),
        field_masks: masks.to_vec(),
        ..Selection::default()
    };
    let (request, _) = Read::of_resource(&call.api_version, &call.resource, kinds, selection)
        .map_err(|_| {
            format!(
                "{:?} in {:?} is not a resource this policy knows; name it under the resourceKinds setting",
                call.resource, call.api_version
            )
        })?;
    match (reach, &request) {
        (Some(reach), Read::Get { .. }) => cluster.read_json_reach(&request, reach),
        _ => cluster.read_json(&request),
    }
}

/// Adds the `resource` and `image.GetMetadata` members the policy's
/// expressions call.
pub fn register(env: &mut Env, resource: bool, imagedata: bool) {
    if resource {
        for (name, id) in [
            ("Get", "resource.Get(string,string,string,string)"),
            ("get", "resource.get(string,string,string,string)"),
        ] {
            let _ = env.add_member_overload(
                name,
                id,
                RESOURCE_TYPE.to_owned(),
                (0..4).map(|_| string()).collect(),
                resource_get,
            );
        }
        for (name, id) in [
            ("List", "resource.List(string,string,string)"),
            ("list", "resource.list(string,string,string)"),
        ] {
            let _ = env.add_member_overload(
                name,
                id,
                RESOURCE_TYPE.to_owned(),
                (0..3).map(|_| string()).collect(),
                resource_list,
            );
        }
    }
    if imagedata {
        for (name, id) in [
            ("GetMetadata", "image.GetMetadata(string)"),
            ("getMetadata", "image.getMetadata(string)"),
        ] {
            let _ = env.add_member_overload(
                name,
                id,
                IMAGEDATA_TYPE.to_owned(),
                vec![string()],
                image_metadata,
            );
        }
    }
}
