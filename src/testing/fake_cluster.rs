//! A fake cluster for native tests: the host's reads answered from a
//! table of reads and their answers, every read and its field masks
//! recorded; and the helpers that run whole settings through `evaluate`,
//! the entry point `validate` uses, over it.

use std::cell::RefCell;

use kubewarden_policy_sdk::response::ValidationResponse;
use serde_json::{Value, json};

use crate::cel::program::Evaluators;
use crate::host::cluster::{Cluster, Read};
use crate::host::node_lookup::{NodeFields, NodeLookup};

/// The cluster as a table of reads and their answers; records every read.
#[derive(Default)]
pub(crate) struct FakeCluster {
    answers: Vec<(Read, Value)>,
    reads: RefCell<Vec<Read>>,
    /// The field masks of each read, in order.
    pub(crate) masks: RefCell<Vec<Vec<String>>>,
}

pub(crate) fn get(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Read {
    Read::Get {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_string),
        name: name.into(),
        field_masks: Vec::new(),
    }
}

pub(crate) fn list(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    labels: Option<&str>,
) -> Read {
    Read::List {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_string),
        label_selector: labels.map(str::to_string),
        field_selector: None,
    }
}

impl FakeCluster {
    pub(crate) fn with(mut self, read: Read, answer: Value) -> FakeCluster {
        self.answers.push((read, answer));
        self
    }

    /// node-1 in us-east-2a, and the `default` Namespace labelled team=web.
    pub(crate) fn cluster() -> FakeCluster {
        FakeCluster::default()
            .with(
                get("v1", "Node", None, "node-1"),
                json!({"metadata": {"name": "node-1", "labels": {
                    "topology.kubernetes.io/zone": "us-east-2a",
                    "topology.kubernetes.io/region": "us-east-2",
                    "node.kubernetes.io/instance-type": "m5.large"}}}),
            )
            .with(
                get("v1", "Namespace", None, "default"),
                json!({"metadata": {"name": "default", "labels": {"team": "web"}}}),
            )
    }

    pub(crate) fn reads(&self) -> Vec<Read> {
        self.reads.borrow().clone()
    }
}

/// What the host returns for field masks: only the masked paths.
fn pruned(value: &Value, masks: &[String]) -> Value {
    if masks.is_empty() {
        return value.clone();
    }
    let mut out = json!({});
    for mask in masks {
        let pointer: String = mask.split('.').map(|s| format!("/{s}")).collect();
        if let Some(found) = value.pointer(&pointer) {
            let mut at = &mut out;
            for step in mask.split('.') {
                at = at
                    .as_object_mut()
                    .unwrap()
                    .entry(step.to_string())
                    .or_insert(json!({}));
            }
            *at = found.clone();
        }
    }
    out
}

impl Cluster for FakeCluster {
    fn read(&self, read: &Read) -> Result<Vec<u8>, String> {
        let (unmasked, masks) = match read.clone() {
            Read::Get {
                api_version,
                kind,
                namespace,
                name,
                field_masks,
            } => (
                Read::Get {
                    api_version,
                    kind,
                    namespace,
                    name,
                    field_masks: Vec::new(),
                },
                field_masks,
            ),
            list => (list, Vec::new()),
        };
        self.masks.borrow_mut().push(masks.clone());
        self.reads.borrow_mut().push(unmasked.clone());
        self.answers
            .iter()
            .find(|(r, _)| *r == unmasked)
            .map(|(_, answer)| serde_json::to_vec(&pruned(answer, &masks)).unwrap())
            .ok_or_else(|| format!("Cannot find {read:?}"))
    }
}

impl NodeLookup for FakeCluster {
    fn fetch_node(&self, name: &str, _fields: NodeFields) -> Result<Vec<u8>, String> {
        self.read(&get("v1", "Node", None, name))
    }
}

pub(crate) fn request(file: &str) -> Value {
    serde_json::from_slice(&std::fs::read(format!("test_data/{file}")).unwrap()).unwrap()
}

pub(crate) fn run_on(request: Value, settings: Value, table: &FakeCluster) -> ValidationResponse {
    let verdict = crate::check_settings(&serde_json::to_vec(&settings).unwrap());
    assert!(verdict.valid, "settings refused: {:?}", verdict.message);
    let payload = serde_json::to_vec(&json!({"request": request, "settings": settings})).unwrap();
    let (reads, masks) = (table.reads.borrow().len(), table.masks.borrow().len());
    let response = crate::evaluate(&payload, table, table);
    // CEL policies: the `cel` crate alone must answer the same, with the
    // same reads (the direct evaluator only ever saves it work).
    let copy = FakeCluster {
        answers: table.answers.clone(),
        ..FakeCluster::default()
    };
    let crate_only = Evaluators {
        subset_parser: true,
        direct: false,
        count_every_cost: true,
    };
    let by_crate = crate::decide_with(&payload, &copy, &copy, crate_only).into_response();
    assert_eq!(
        serde_json::to_value(&by_crate).unwrap(),
        serde_json::to_value(&response).unwrap(),
        "the cel crate alone answers otherwise"
    );
    assert_eq!(copy.reads.borrow()[..], table.reads.borrow()[reads..]);
    assert_eq!(copy.masks.borrow()[..], table.masks.borrow()[masks..]);
    response
}

pub(crate) fn run(file: &str, settings: Value) -> ValidationResponse {
    run_on(request(file), settings, &FakeCluster::cluster())
}

pub(crate) fn annotations(response: &ValidationResponse) -> Value {
    response
        .mutated_object
        .as_ref()
        .and_then(|o| o.pointer("/metadata/annotations"))
        .cloned()
        .unwrap_or(Value::Null)
}

pub(crate) fn refused(settings: Value) -> String {
    let verdict = crate::check_settings(&serde_json::to_vec(&settings).unwrap());
    assert!(!verdict.valid, "settings were accepted: {settings}");
    verdict.message.unwrap()
}
