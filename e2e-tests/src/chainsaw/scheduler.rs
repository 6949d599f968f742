//! The scheduler's filters that decide whether the simulated cluster's one
//! Node can take a Pod: its `nodeSelector`, its required node affinity and
//! its PersistentVolumeClaims. A Pod that fails one stays pending, unbound,
//! as the real scheduler leaves it (found by the chainsaw tests on the real
//! cluster: Kyverno's samples add node selectors the Node does not satisfy,
//! and name claims no test creates). Taints and resources are not checked:
//! the Node has no taints and room for any request.

use serde_json::{Value, json};

use super::cluster::SimulatedCluster;
use crate::conformance::namespace_of;

/// Why `node` cannot take `pod`, if it cannot.
pub fn unschedulable(pod: &Value, node: &Value, cluster: &SimulatedCluster) -> Option<String> {
    let labels = &node["metadata"]["labels"];
    let spec = &pod["spec"];
    if let Some(selector) = spec["nodeSelector"].as_object()
        && let Some((key, value)) = selector.iter().find(|(k, v)| &labels[k.as_str()] != *v)
    {
        return Some(format!(
            "the Node does not match its nodeSelector {key}={value}"
        ));
    }
    let required =
        &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    if let Some(terms) = required["nodeSelectorTerms"].as_array()
        && !terms.iter().any(|term| term_matches(term, node))
    {
        return Some("the Node does not match its required node affinity".into());
    }
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        let Some(claim) = volume["persistentVolumeClaim"]["claimName"].as_str() else {
            continue;
        };
        let wanted = json!({"kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace_of(pod)}});
        if cluster.get(&wanted).is_none() {
            return Some(format!("its PersistentVolumeClaim {claim} does not exist"));
        }
    }
    None
}

/// A node selector term: every expression on labels (`matchExpressions`)
/// and on fields (`matchFields`, `metadata.name`) holds.
fn term_matches(term: &Value, node: &Value) -> bool {
    let holds = |expressions: &Value, value_of: &dyn Fn(&str) -> Option<String>| {
        expressions.as_array().into_iter().flatten().all(|e| {
            let value = value_of(e["key"].as_str().unwrap_or_default());
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let number = |s: &str| s.parse::<i64>().ok();
            match (e["operator"].as_str().unwrap_or_default(), value.as_deref()) {
                ("In", Some(v)) => values.contains(&v),
                ("NotIn", v) => v.is_none_or(|v| !values.contains(&v)),
                ("Exists", v) => v.is_some(),
                ("DoesNotExist", v) => v.is_none(),
                ("Gt", Some(v)) => number(v) > values.first().and_then(|w| number(w)),
                ("Lt", Some(v)) => {
                    number(v).is_some() && number(v) < values.first().and_then(|w| number(w))
                }
                _ => false,
            }
        })
    };
    let label = |key: &str| node["metadata"]["labels"][key].as_str().map(String::from);
    let field = |key: &str| match key {
        "metadata.name" => node["metadata"]["name"].as_str().map(String::from),
        _ => None,
    };
    holds(&term["matchExpressions"], &label) && holds(&term["matchFields"], &field)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Value {
        json!({"kind": "Node", "metadata": {"name": "n", "labels": {"zone": "a", "size": "4"}}})
    }

    #[test]
    fn node_selectors_and_required_affinity_are_checked() {
        let cluster = SimulatedCluster::default();
        let pod =
            |spec: Value| json!({"kind": "Pod", "metadata": {"namespace": "ns"}, "spec": spec});
        assert!(
            unschedulable(
                &pod(json!({"nodeSelector": {"zone": "a"}})),
                &node(),
                &cluster
            )
            .is_none()
        );
        assert!(
            unschedulable(
                &pod(json!({"nodeSelector": {"zone": "b"}})),
                &node(),
                &cluster
            )
            .is_some()
        );
        let affinity = |expressions: Value| {
            pod(
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}}}),
            )
        };
        let fits =
            |expressions: Value| unschedulable(&affinity(expressions), &node(), &cluster).is_none();
        assert!(fits(
            json!([{"key": "zone", "operator": "In", "values": ["a", "b"]}])
        ));
        assert!(!fits(
            json!([{"key": "zone", "operator": "NotIn", "values": ["a"]}])
        ));
        assert!(fits(json!([{"key": "gpu", "operator": "DoesNotExist"}])));
        assert!(fits(
            json!([{"key": "size", "operator": "Gt", "values": ["2"]}])
        ));
        assert!(!fits(
            json!([{"key": "size", "operator": "Lt", "values": ["2"]}])
        ));
    }

    #[test]
    fn a_claim_that_does_not_exist_keeps_the_pod_pending() {
        let mut cluster = SimulatedCluster::default();
        let pod = json!({"kind": "Pod", "metadata": {"namespace": "ns"}, "spec": {"volumes": [
            {"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}});
        assert!(unschedulable(&pod, &node(), &cluster).is_some());
        cluster.put(
            json!({"kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "ns"}}),
        );
        assert!(unschedulable(&pod, &node(), &cluster).is_none());
    }
}
