//! The `regex` namespace Kyverno's CEL environment carries (cel-go's regex
//! extension): `regex.replace(target, pattern, replacement[, count])`,
//! `regex.extract(target, pattern)` (an optional) and
//! `regex.extractAll(target, pattern)`, over regex-lite. A replacement
//! names groups as `\1`..`\9` and writes a backslash as `\\`; anything else
//! after a backslash is an error, as in cel-go.

use ::cel::common::types::CelOptional;
use ::cel::common::value::CowVal;
use ::cel::{Env, ExecutionError, Value};

use super::{error, global, int_arg, int_type, owned, string, string_arg, string_type};

/// Declares the library.
pub fn register(env: &mut Env) {
    let s = string_type;
    global(
        env,
        "regex.replace",
        "regex_replace_string_string_string",
        vec![s(), s(), s()],
        replace,
    );
    global(
        env,
        "regex.replace",
        "regex_replace_string_string_string_int",
        vec![s(), s(), s(), int_type()],
        replace,
    );
    global(
        env,
        "regex.extract",
        "regex_extract_string_string",
        vec![s(), s()],
        extract,
    );
    global(
        env,
        "regex.extractAll",
        "regex_extractAll_string_string",
        vec![s(), s()],
        extract_all,
    );
}

fn compile(args: &[CowVal<'_, '_>], function: &str) -> Result<regex_lite::Regex, ExecutionError> {
    let pattern = string_arg(args, 1, function)?;
    regex_lite::Regex::new(pattern)
        .map_err(|e| error(function, format!("given regex is invalid: {e}")))
}

fn replace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "regex.replace";
    let target = string_arg(&args, 0, F)?;
    let replacement = string_arg(&args, 2, F)?;
    let count = if args.len() > 3 {
        int_arg(&args, 3, F)?
    } else {
        -1
    };
    if count == 0 {
        return string(target);
    }
    let regex = compile(&args, F)?;
    let groups = regex.captures_len().saturating_sub(1);
    let mut out = String::with_capacity(target.len());
    let mut last = 0;
    for (n, captures) in regex.captures_iter(target).enumerate() {
        if count > 0 && n as i64 >= count {
            break;
        }
        let Some(whole) = captures.get(0) else {
            continue;
        };
        out.push_str(target.get(last..whole.start()).unwrap_or_default());
        let mut chars = replacement.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                None => {
                    return Err(error(
                        F,
                        format!(
                            "invalid replacement string: '{replacement}' \\ not allowed at end"
                        ),
                    ));
                }
                Some('\\') => out.push('\\'),
                Some(d) => {
                    let Some(group) = d.to_digit(10) else {
                        return Err(error(
                            F,
                            format!(
                                "invalid replacement string: '{replacement}' \\ must be followed by a digit or \\"
                            ),
                        ));
                    };
                    if group as usize > groups {
                        return Err(error(
                            F,
                            format!(
                                "replacement string references group {group} but regex has only {groups} group(s)"
                            ),
                        ));
                    }
                    if let Some(m) = captures.get(group as usize) {
                        out.push_str(m.as_str());
                    }
                }
            }
        }
        last = whole.end();
    }
    out.push_str(target.get(last..).unwrap_or_default());
    string(out)
}

fn one_group_at_most(regex: &regex_lite::Regex, function: &str) -> Result<(), ExecutionError> {
    if regex.captures_len() > 2 {
        return Err(error(
            function,
            format!(
                "regular expression has more than one capturing group: {:?}",
                regex.as_str()
            ),
        ));
    }
    Ok(())
}

fn extract<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "regex.extract";
    let target = string_arg(&args, 0, F)?;
    let regex = compile(&args, F)?;
    one_group_at_most(&regex, F)?;
    let found = regex.captures(target).and_then(|captures| {
        if regex.captures_len() > 1 {
            // An optional group that took part in no match is none.
            captures
                .get(1)
                .map(|m| m.as_str())
                .filter(|m| !m.is_empty())
        } else {
            captures.get(0).map(|m| m.as_str())
        }
    });
    let optional = match found {
        Some(text) => CelOptional::of(Box::new(::cel::common::types::CelString::from(
            text.to_string(),
        ))),
        None => CelOptional::none(),
    };
    Ok(CowVal::owned(optional))
}

fn extract_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "regex.extractAll";
    let target = string_arg(&args, 0, F)?;
    let regex = compile(&args, F)?;
    one_group_at_most(&regex, F)?;
    let group = usize::from(regex.captures_len() > 1);
    let found: Vec<Value> = regex
        .captures_iter(target)
        .filter_map(|captures| captures.get(group).map(|m| m.as_str().to_string()))
        .filter(|m| group == 0 || !m.is_empty())
        .map(Value::from)
        .collect();
    owned(Value::List(std::sync::Arc::new(found)))
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{s, table};
    use ::cel::Value;
    use std::sync::Arc;

    fn list(items: &[&str]) -> Option<Value> {
        Some(Value::List(Arc::new(
            items.iter().map(|i| Value::from(*i)).collect(),
        )))
    }

    #[test]
    fn regex_functions_work_as_in_cel_go() {
        table(&[
            (
                "regex.replace('hello world hello', 'hello', 'hi')",
                s("hi world hi"),
            ),
            ("regex.replace('banana', 'a', 'x', 0)", s("banana")),
            ("regex.replace('banana', 'a', 'x', 1)", s("bxnana")),
            ("regex.replace('banana', 'a', 'x', 2)", s("bxnxna")),
            ("regex.replace('banana', 'a', 'x', -12)", s("bxnxnx")),
            (
                r"regex.replace('foo bar', '(fo)o (ba)r', r'\2 \1')",
                s("ba fo"),
            ),
            (r"regex.replace('a.b', '[.]', r'\\')", s(r"a\b")),
            (r"regex.replace('test', '(.)', r'\2')", None),
            (r"regex.replace('test', '(.)', r'\x')", None),
            (r"regex.replace('test', '(.)', 'x\\')", None),
            ("regex.replace('foo bar', '(', '$2 $1')", None),
            (
                r"regex.replace('docker.io/nginx:latest', '^docker\\.io/(.*)', r'myregistry.io/\1')",
                s("myregistry.io/nginx:latest"),
            ),
            (
                "regex.extract('hello world', 'hello(.*)').value()",
                s(" world"),
            ),
            (
                r"regex.extract('item-A, item-B', 'item-(\\w+)').value()",
                s("A"),
            ),
            (
                "regex.extract('HELLO', 'hello').hasValue()",
                Some(Value::Bool(false)),
            ),
            (
                "regex.extract('abc', 'x(y?)|abc').hasValue()",
                Some(Value::Bool(false)),
            ),
            ("regex.extract('testuser@testdomain', '(.*)@([^.]*)')", None),
            (
                r"regex.extractAll('id:123, id:456', 'id:\\d+')",
                list(&["id:123", "id:456"]),
            ),
            (
                r"regex.extractAll('id:123, id:456', 'id:(\\d+)')",
                list(&["123", "456"]),
            ),
            ("regex.extractAll('id:123, id:456', 'assa')", list(&[])),
            (
                "regex.extractAll('testuser@testdomain', '(.*)@([^.]*)')",
                None,
            ),
        ]);
    }
}
