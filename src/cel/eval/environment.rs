//! The CEL environment admission expressions run in: the `cel` crate's
//! standard library and its strings, lists and math extensions, the struct
//! types mutations construct (`Object...`, `JSONPatch`), `jsonpatch`, and
//! Kyverno's `resource` library over the host (see [`crate::cel::libraries::host_reads`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ::cel::common::types::{CelString, Type};
use ::cel::common::value::{CowVal, Val};
use ::cel::{Env, ExecutionError, StructType, Value};

use crate::cel::libraries::host_reads;
use crate::cel::libraries::{self, string_arg};
use crate::cel::program::library_use::Libraries;

/// The environment an evaluation runs in: the standard library, the
/// libraries asked for, and the struct types its expressions construct.
pub fn runtime_env(struct_names: &BTreeSet<String>, libraries: Libraries) -> Env {
    let mut env = Env::stdlib();
    // cel-go builds a map literal entry by entry: a repeated key keeps its
    // last value, and `1` and `1u` are two keys.
    env.set_error_on_duplicate_map_keys(false);
    libraries::double_text::register(&mut env);
    libraries::runtime_cost::register(&mut env);
    // The extensions and functions below are declared once each, in an
    // environment that starts empty of them: a clash is a bug found by the
    // first test, never by input.
    if libraries.strings {
        let _ = env.add_extension(::cel::extensions::strings);
        // `format` as Kubernetes and Kyverno run it, under its own name.
        libraries::string_format::register(&mut env);
    }
    if libraries.lists {
        let _ = env.add_extension(::cel::extensions::lists);
        libraries::lists::register_reverse(&mut env);
        libraries::cost_tracker::register(&mut env);
    }
    if libraries.math {
        let _ = env.add_extension(::cel::extensions::math);
        libraries::math::register(&mut env);
    }
    let string = libraries::string_type;
    if libraries.jsonpatch {
        let _ = env.add_overload(
            "jsonpatch.escapeKey",
            "jsonpatch.escapeKey(string)",
            vec![string()],
            escape_key,
        );
    }
    if libraries.regex {
        // Regular expressions through regex-lite, already in the module:
        // the crate's own `matches` (its `regex` feature) adds 0.95 MB.
        let _ = env.add_member_overload(
            "matches",
            "string.matches(string)",
            string(),
            vec![string()],
            regex_matches,
        );
        let _ = env.add_overload(
            "matches",
            "matches(string,string)",
            vec![string(), string()],
            regex_matches,
        );
        let _ = env.add_member_overload(
            "find",
            "string.find(string)",
            string(),
            vec![string()],
            regex_find,
        );
        let _ = env.add_member_overload(
            "findAll",
            "string.findAll(string)",
            string(),
            vec![string()],
            regex_find_all,
        );
        let _ = env.add_member_overload(
            "findAll",
            "string.findAll(string,int)",
            string(),
            vec![string(), libraries::int_type()],
            regex_find_all,
        );
    }
    if libraries.kubernetes_lists {
        let any = libraries::dyn_type;
        let list = libraries::list_type;
        let _ = env.add_member_overload(
            "indexOf",
            "list.indexOf(dyn)",
            list(),
            vec![any()],
            list_index_of,
        );
        let _ = env.add_member_overload(
            "lastIndexOf",
            "list.lastIndexOf(dyn)",
            list(),
            vec![any()],
            list_last_index_of,
        );
    }
    host_reads::register(&mut env, libraries.resource, libraries.imagedata);
    if libraries.image {
        libraries::image::register(&mut env);
    }
    if libraries.regex_namespace {
        libraries::regex::register(&mut env);
    }
    if libraries.json {
        libraries::data::register_json(&mut env);
    }
    if libraries.yaml {
        libraries::data::register_yaml(&mut env);
    }
    if libraries.user {
        libraries::data::register_user(&mut env);
    }
    if libraries.quantity {
        libraries::quantity::register(&mut env);
    }
    if libraries.semver {
        libraries::semver::register(&mut env);
    }
    if libraries.list_functions {
        libraries::lists::register(&mut env);
    }
    if libraries.sets {
        libraries::lists::register_sets(&mut env);
    }
    if libraries.ip {
        libraries::ip::register(&mut env);
    }
    if libraries.authorizer {
        libraries::authorizer::register(&mut env);
    }
    if libraries.comprehensions {
        crate::cel::program::comprehensions::register(&mut env);
    }
    if libraries.hash {
        libraries::hash::register(&mut env);
    }
    if libraries.url {
        libraries::url::register(&mut env);
    }
    if libraries.format {
        libraries::format::register(&mut env);
    }
    if libraries.gzip {
        libraries::gzip::register(&mut env);
    }
    if libraries.base64 {
        let _ = env.add_extension(::cel::extensions::encoders);
    }
    if libraries.time {
        libraries::time::register(&mut env);
    }
    for name in struct_names {
        // A name that is not an identifier path is refused by the crate,
        // and an expression constructing it then fails by failurePolicy.
        let _ = env.add_type(ObjectType(Type::new_struct(name.clone())));
    }
    env
}

/// Kubernetes' typed construction (`Object.spec{...}`), without its schema:
/// any field, any value. What the fields mean is decided when the result is
/// merged into the object.
struct ObjectType(Type);

impl StructType for ObjectType {
    fn get_type(&self) -> &Type {
        &self.0
    }

    fn new_value<'b, 'v>(
        &self,
        fields: BTreeMap<String, CowVal<'b, 'v>>,
    ) -> Result<Box<dyn Val + 'v>, ExecutionError> {
        let mut value = ::cel::common::types::CelStruct::new(self.0.name().to_owned());
        for (name, field) in fields {
            // `?field: optional`: set when the optional holds a value,
            // left out when not. The crate hands the optional itself here.
            match field.downcast_ref::<::cel::common::types::CelOptional>() {
                Some(optional) => {
                    if let Some(inner) = optional.inner() {
                        value.add_field_value(name, CowVal::Owned(inner.clone_as_boxed()));
                    }
                }
                None => value.add_field_value(name, field),
            }
        }
        Ok(Box::new(value))
    }
}

/// `jsonpatch.escapeKey`: a key as a JSON Pointer segment (RFC 6901).
fn escape_key<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let key = string_arg(&args, 0, "jsonpatch.escapeKey")?;
    Ok(CowVal::owned(CelString::from(
        key.replace('~', "~0").replace('/', "~1"),
    )))
}

fn regex_of(args: &[CowVal<'_, '_>], function: &str) -> Result<regex_lite::Regex, ExecutionError> {
    let pattern = string_arg(args, 1, function)?;
    regex_lite::Regex::new(pattern).map_err(|e| {
        ExecutionError::function_error(function, format!("{pattern:?} is not a valid regex: {e}"))
    })
}

/// `s.matches(re)`: whether the regular expression matches anywhere in `s`.
fn regex_matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let regex = regex_of(&args, "matches")?;
    let text = string_arg(&args, 0, "matches")?;
    Ok(CowVal::owned(::cel::common::types::CelBool::from(
        regex.is_match(text),
    )))
}

/// Kubernetes' `s.find(re)`: the first match, or "".
fn regex_find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let regex = regex_of(&args, "find")?;
    let text = string_arg(&args, 0, "find")?;
    let found = regex.find(text).map(|m| m.as_str()).unwrap_or_default();
    Ok(CowVal::owned(CelString::from(found.to_string())))
}

/// Kubernetes' `s.findAll(re)`: every match; `s.findAll(re, n)`: at most
/// `n` of them, every one for a negative `n`.
fn regex_find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let regex = regex_of(&args, "findAll")?;
    let text = string_arg(&args, 0, "findAll")?;
    let limit = match args
        .get(2)
        .map(|n| Value::try_from(n.as_ref()))
        .transpose()?
    {
        Some(Value::Int(n)) => usize::try_from(n).unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    let found: Vec<Value> = regex
        .find_iter(text)
        .take(limit)
        .map(|m| Value::from(m.as_str()))
        .collect();
    Box::<dyn Val>::try_from(Value::List(Arc::new(found))).map(CowVal::Owned)
}

/// Kubernetes' `list.indexOf(x)`: the first position of `x`, or -1.
fn list_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    list_position(args, "indexOf", false)
}

/// Kubernetes' `list.lastIndexOf(x)`: the last position of `x`, or -1.
fn list_last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    list_position(args, "lastIndexOf", true)
}

fn list_position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (Some(list), Some(wanted)) = (args.first(), args.get(1)) else {
        return Err(ExecutionError::invalid_argument_count(2, args.len()));
    };
    let Some(items) = list.as_iterable() else {
        return Err(ExecutionError::function_error(function, "not a list"));
    };
    let mut found: i64 = -1;
    let mut items = items.iter();
    let mut index: i64 = 0;
    while let Some(item) = items.next() {
        if item.equals(wanted.as_ref()) {
            found = index;
            if !last {
                break;
            }
        }
        index += 1;
    }
    Ok(CowVal::owned(::cel::common::types::CelInt::from(found)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn eval(source: &str) -> Result<Value, ExecutionError> {
        crate::testing::cel_libraries::check_source(source)
            .map_err(|e| ExecutionError::function_error("check", e))?;
        let compiled = crate::cel::program::compile(source, "e").unwrap();
        let names: BTreeSet<String> = compiled.names.structs.clone();
        let env = Arc::new(runtime_env(&names, compiled.names.libraries));
        let context = ::cel::Context::with_env(env);
        context.resolve(&compiled.expression)
    }

    #[test]
    fn escape_key_escapes_as_json_pointer() {
        assert_eq!(
            eval("jsonpatch.escapeKey('example.com/a~b')"),
            Ok(Value::from("example.com~1a~0b"))
        );
    }

    #[test]
    fn regular_expressions_work_as_in_kubernetes() {
        assert_eq!(eval("'abc'.matches('^a.c$')"), Ok(Value::Bool(true)));
        assert_eq!(eval("matches('abc', 'x')"), Ok(Value::Bool(false)));
        assert_eq!(eval("'a1b22'.find('[0-9]+')"), Ok(Value::from("1")));
        assert_eq!(
            eval("'a1b22'.findAll('[0-9]+')"),
            Ok(Value::List(Arc::new(vec![
                Value::from("1"),
                Value::from("22")
            ])))
        );
        assert!(eval("'a'.matches('(')").is_err());
        // kube-apiserver v0.37.2's answers to the limited form.
        let found = |n: usize| Ok(Value::List(Arc::new(vec![Value::from("1"); n])));
        assert_eq!(eval("'a1b1'.findAll('[0-9]', 1)"), found(1));
        assert_eq!(eval("'a1b1'.findAll('[0-9]', -1)"), found(2));
        assert_eq!(eval("'a1b1'.findAll('[0-9]', 0)"), found(0));
    }

    #[test]
    fn lists_index_as_in_kubernetes() {
        assert_eq!(eval("[1, 2, 1].indexOf(1)"), Ok(Value::Int(0)));
        assert_eq!(eval("[1, 2, 1].lastIndexOf(1)"), Ok(Value::Int(2)));
        assert_eq!(eval("['a'].indexOf('b')"), Ok(Value::Int(-1)));
        assert_eq!(eval("'abc'.indexOf('c')"), Ok(Value::Int(2)));
        assert_eq!(
            eval("[{'name': 'x'}, {'name': 'y'}].map(c, c.name).indexOf('y')"),
            Ok(Value::Int(1))
        );
    }

    #[test]
    fn a_repeated_map_key_keeps_its_last_value() {
        // kube-apiserver v0.37.2 and Kyverno v1.19.1 answer these so.
        assert_eq!(eval("{'a': 1, 'a': 2}['a']"), Ok(Value::Int(2)));
        assert_eq!(eval("size({'a': 1, 'b': 2, 'a': 3})"), Ok(Value::Int(2)));
        assert_eq!(
            eval("{'a': 1, ?'a': optional.none()}['a'] + {'a': 1, ?'a': optional.of(5)}['a']"),
            Ok(Value::Int(6))
        );
        assert_eq!(eval("size({dyn(1): 'a', dyn(1u): 'b'})"), Ok(Value::Int(2)));
    }

    #[test]
    fn any_object_struct_can_be_built() {
        let value = eval("Object{spec: Object.spec{replicas: 2}}").unwrap();
        assert_eq!(
            crate::cel::libraries::values::to_json(&value).unwrap(),
            serde_json::json!({"spec": {"replicas": 2}})
        );
    }
}
