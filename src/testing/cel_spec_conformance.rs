//! The cel-spec conformance suite's simple tests (google/cel-spec
//! `tests/simple/testdata/*.textproto`), run through this policy's parse
//! path (`program::compile`: the Pratt parser, the bounds, the macro
//! rewrites) and the `cel` crate's interpreter in the environment the
//! expression's text asks for. Ignored: the cases are not in this
//! repository. `CEL_SPEC_CASES` names a JSON list of `{file, section, name,
//! expr, expected | error | skip}` made from the textprotos (each expected
//! value written as a CEL literal); see docs/cel.md for how it was run.

use std::collections::BTreeMap;

use serde::Deserialize;

// The parse path and environment the two-variable comprehension cases use.
use crate::testing::cel_comprehensions::eval;

#[derive(Deserialize)]
struct Case {
    file: String,
    name: String,
    expr: String,
    #[serde(default)]
    expected: Option<String>,
    #[serde(default)]
    error: bool,
    #[serde(default)]
    skip: Option<String>,
    /// The case runs without cel-go's type check (`disable_check`): a
    /// refusal by the load-time check is then what cel-go's would do.
    #[serde(default)]
    disable_check: bool,
}

/// The cases of an ignored harness, from the JSON file the variable `var`
/// names (made outside the repository); `None`, said as SKIPPED, without it.
pub(crate) fn cases_from_env<T: serde::de::DeserializeOwned>(var: &str) -> Option<Vec<T>> {
    let Ok(path) = std::env::var(var) else {
        println!("SKIPPED: set {var} to the cases' JSON");
        return None;
    };
    Some(serde_json::from_slice(&std::fs::read(path).expect("cases")).expect("cases JSON"))
}

#[test]
#[ignore]
fn cel_spec_simple_tests() {
    let Some(cases) = cases_from_env::<Case>("CEL_SPEC_CASES") else {
        return;
    };
    let mut per_file: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut checked_out = Vec::new();
    for case in &cases {
        let counts = per_file.entry(&case.file).or_default();
        if case.skip.is_some() {
            counts[2] += 1;
            continue;
        }
        // A panic in the crate is a failure too.
        let got = std::panic::catch_unwind(|| eval(&case.expr))
            .unwrap_or_else(|_| Err("panicked".to_string()));
        if case.disable_check
            && case.expected.is_some()
            && got.as_ref().is_err_and(|e| e.starts_with("check: "))
        {
            // Counted apart: not a pass, and not a failure of the engine.
            checked_out.push(format!(
                "{}/{}: {}: {got:?}",
                case.file, case.name, case.expr
            ));
            continue;
        }
        let ok = match (&case.expected, case.error) {
            (_, true) => got.is_err(),
            (Some(expected), false) => match (&got, eval(expected)) {
                (Ok(value), Ok(want)) => {
                    value == &want && value.type_of().to_string() == want.type_of().to_string()
                }
                _ => false,
            },
            (None, false) => false,
        };
        if ok {
            counts[0] += 1;
        } else {
            counts[1] += 1;
            failures.push(format!(
                "{}/{}: {} => {:?}, expected {}",
                case.file,
                case.name,
                case.expr,
                got,
                if case.error {
                    "an error".to_string()
                } else {
                    case.expected.clone().unwrap_or_default()
                }
            ));
        }
    }
    let mut totals = [0; 3];
    for (file, [pass, fail, skip]) in &per_file {
        println!("{file}: {pass} pass, {fail} fail, {skip} skipped");
        totals[0] += pass;
        totals[1] += fail;
        totals[2] += skip;
    }
    println!(
        "total: {} pass, {} fail, {} skipped",
        totals[0], totals[1], totals[2]
    );
    println!(
        "refused by the type check where the case disables cel-go's: {}",
        checked_out.len()
    );
    for refused in &checked_out {
        println!("CHECKED {refused}");
    }
    for failure in &failures {
        println!("FAIL {failure}");
    }
}
