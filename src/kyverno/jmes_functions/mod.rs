//! Every Kyverno JMESPath function this policy provides beside JMESPath's
//! own, one file a family; the runtime ([`super::jmes`]) registers them
//! through [`register`] and refuses the [`REFUSED`] ones at load time.

use jmespath::functions::ArgumentType as T;

use super::jmes_values::Body;

mod arithmetic;
mod regex;
mod strings;
mod structures;
mod time;
mod versions;

/// The Kyverno functions this policy provides beside JMESPath's own.
pub const KYVERNO_FUNCTIONS: &[&str] = &[
    "add",
    "base64_decode",
    "base64_encode",
    "compare",
    "divide",
    "equal_fold",
    "items",
    "label_match",
    "lookup",
    "modulo",
    "multiply",
    "object_from_lists",
    "parse_json",
    "parse_yaml",
    "pattern_match",
    "regex_match",
    "regex_replace_all",
    "regex_replace_all_literal",
    "replace",
    "replace_all",
    "round",
    "semver_compare",
    "split",
    "subtract",
    "sum",
    "time_add",
    "time_after",
    "time_before",
    "time_between",
    "time_diff",
    "time_parse",
    "time_since",
    "time_to_cron",
    "time_truncate",
    "time_utc",
    "to_lower",
    "to_upper",
    "trim",
    "trim_prefix",
    "truncate",
];

/// Kyverno functions left out, with the reason given at load time.
pub const REFUSED: &[(&str, &str)] = &[(
    "random",
    "random values would make the same request mutate differently on each evaluation",
)];

/// Registers every function through `add(name, argument types, body)`.
pub fn register(add: &mut dyn FnMut(&str, Vec<T>, Body)) {
    strings::register(add);
    structures::register(add);
    arithmetic::register(add);
    regex::register(add);
    versions::register(add);
    time::register(add);
}
