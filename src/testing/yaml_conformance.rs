//! `src/shared/yaml.rs` against Kyverno's reading of the same texts
//! (sigs.k8s.io/yaml's `YAMLToJSON`, answered by Kyverno's oracle). Ignored:
//! the cases are made outside the repository by `tools/yaml_cases.py`, which
//! says how to run it; `YAML_CASES` names its JSON list of `{pool, text,
//! reference}`. Both answers are compared as Go's `any` holds them (every
//! number a double); an error agrees with an error, whatever its words.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::testing::cel_spec_conformance::cases_from_env;

#[derive(Deserialize)]
struct Case {
    pool: String,
    text: String,
    reference: Value,
}

/// A JSON value with every number a double, as `json.Unmarshal` into `any`
/// leaves it.
fn as_go_any(value: &Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Value::Array(items) => Value::Array(items.iter().map(as_go_any).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), as_go_any(v))).collect())
        }
        other => other.clone(),
    }
}

#[test]
#[ignore]
fn yaml_reads_as_kyverno_reads_it() {
    let Some(cases) = cases_from_env::<Case>("YAML_CASES") else {
        return;
    };
    let mut per_pool: BTreeMap<&str, [usize; 2]> = BTreeMap::new();
    let mut differences = Vec::new();
    for case in &cases {
        let ours = crate::shared::yaml::to_json(&case.text);
        let agree = match (&ours, case.reference.get("value")) {
            (Ok(value), Some(reference)) => as_go_any(value) == as_go_any(reference),
            (Err(_), None) => case.reference.get("error").is_some(),
            _ => false,
        };
        let counts = per_pool.entry(&case.pool).or_default();
        counts[usize::from(!agree)] += 1;
        if !agree {
            differences.push(format!(
                "{} {:?}\n    kyverno: {}\n    policy:  {:?}",
                case.pool, case.text, case.reference, ours
            ));
        }
    }
    for (pool, [agree, differ]) in &per_pool {
        println!("{pool}: {agree} agree, {differ} differ");
    }
    for difference in differences.iter().take(40) {
        println!("{difference}");
    }
    assert!(!cases.is_empty(), "YAML_CASES holds no case");
}
