//! `make bench`: the cost of one evaluation, measured the way policy-server
//! runs the policy (a fresh instance per evaluation from a pre-compiled
//! module), with the Node answered from memory so the policy is what is timed.
//!
//! Usage: bench POLICY.wasm BASELINE.wasm [--quick]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
use policy_host::{InMemoryCluster, PolicyModule, validate_payload};
use serde_json::{Map, Value, json};

struct Scenario {
    name: String,
    settings: Value,
    request: Value,
    cluster: Arc<InMemoryCluster>,
}

struct Timing {
    median: Duration,
    p99: Duration,
}

fn timing(mut samples: Vec<Duration>) -> Timing {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Timing {
        median: at(0.5),
        p99: at(0.99),
    }
}

fn binding_request() -> Value {
    serde_json::from_slice(
        &std::fs::read(repo("test_data/binding.json")).expect("test_data/binding.json"),
    )
    .expect("binding request JSON")
}

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// A Node named node-1 with `labels` labels (`bench.example.com/label-N`,
/// plus zone and region) and `annotations` annotations.
fn node(labels: usize, annotations: usize) -> Value {
    let mut l = Map::new();
    l.insert("topology.kubernetes.io/zone".into(), json!("us-east-2a"));
    l.insert("topology.kubernetes.io/region".into(), json!("us-east-2"));
    for i in 0..labels {
        let group = if i < 40 { "selected" } else { "other" };
        l.insert(
            format!("{group}.example.com/label-{i}"),
            json!(format!("value-{i}")),
        );
    }
    let a: Map<String, Value> = (0..annotations)
        .map(|i| {
            (
                format!("note.example.com/annotation-{i}"),
                json!("x".repeat(64)),
            )
        })
        .collect();
    json!({"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1","labels":l,"annotations":a}})
}

fn copy_rules(n: usize) -> Value {
    let entries: Vec<Value> = (0..n)
        .map(|i| json!({"label": format!("selected.example.com/label-{i}"), "rename": format!("node.example.com/rule-{i}"), "default": "none"}))
        .collect();
    json!({ "copy": entries })
}

/// The `mutate-pod-binding` sample from Kyverno's blog, `spec.rules` verbatim.
fn kyverno_mutate_pod_binding() -> Value {
    serde_json::from_slice(
        &std::fs::read(repo("test_data/kyverno-mutate-pod-binding.json")).expect("sample rules"),
    )
    .expect("sample rules JSON")
}

fn scenario(name: &str, settings: Value, node: Value) -> Scenario {
    Scenario {
        name: name.to_string(),
        settings,
        request: binding_request(),
        cluster: Arc::new(InMemoryCluster::default().with(node)),
    }
}

/// The realistic Node (test_data/node-large.json, 19 KB: managedFields,
/// 60 images, 40 labels) and a Binding to it.
fn large_node_scenario(name: &str, settings: Value) -> Result<Scenario> {
    let read = |p: &str| -> Result<Value> { Ok(serde_json::from_slice(&std::fs::read(repo(p))?)?) };
    Ok(Scenario {
        name: name.to_string(),
        settings,
        request: read("test_data/binding-large-node.json")?,
        cluster: Arc::new(InMemoryCluster::default().with(read("test_data/node-large.json")?)),
    })
}

struct Measured {
    fresh: Timing,
    warm: Timing,
    /// The baseline timed in the same loop, interleaved with this scenario,
    /// so machine drift hits both alike.
    base_fresh: Timing,
    base_warm: Timing,
    host_calls_per_eval: f64,
}

/// A scenario ready to run: module, encoded payload, cluster.
struct Prepared<'m> {
    module: &'m PolicyModule,
    payload: Vec<u8>,
    request: Value,
    cluster: Arc<InMemoryCluster>,
}

impl<'m> Prepared<'m> {
    fn new(module: &'m PolicyModule, s: &Scenario) -> Result<Self> {
        let verdict = module.validate_settings(&s.settings)?;
        ensure!(
            verdict.valid,
            "{}: settings refused: {:?}",
            s.name,
            verdict.message
        );
        // Check once that the scenario does what it claims before timing it.
        let check = module.evaluate(&s.request, &s.settings, s.cluster.clone())?;
        ensure!(
            check.accepted,
            "{}: request rejected: {:?}",
            s.name,
            check.message
        );
        reset(&s.cluster);
        Ok(Prepared {
            module,
            // Encoded once: policy-server's encoding of the request is not the policy's cost.
            payload: validate_payload(&s.request, &s.settings)?,
            request: s.request.clone(),
            cluster: s.cluster.clone(),
        })
    }

    fn fresh_once(&self) -> Result<Duration> {
        let started = Instant::now();
        let host = self.module.instantiate(self.cluster.clone())?;
        let evaluation = PolicyModule::evaluate_payload(&host, &self.payload, &self.request)?;
        let elapsed = started.elapsed();
        std::hint::black_box(evaluation);
        Ok(elapsed)
    }
}

fn measure(
    module: &PolicyModule,
    s: &Scenario,
    base: &Prepared,
    iterations: usize,
) -> Result<Measured> {
    let run = Prepared::new(module, s)?;
    let (mut fresh, mut base_fresh) = (Vec::new(), Vec::new());
    for _ in 0..iterations {
        fresh.push(run.fresh_once()?);
        base_fresh.push(base.fresh_once()?);
    }
    let calls = reset(&run.cluster);

    let host = module.instantiate(run.cluster.clone())?;
    let base_host = base.module.instantiate(base.cluster.clone())?;
    let (mut warm, mut base_warm) = (Vec::new(), Vec::new());
    for _ in 0..iterations {
        let started = Instant::now();
        std::hint::black_box(PolicyModule::evaluate_payload(
            &host,
            &run.payload,
            &run.request,
        )?);
        warm.push(started.elapsed());
        let started = Instant::now();
        std::hint::black_box(PolicyModule::evaluate_payload(
            &base_host,
            &base.payload,
            &base.request,
        )?);
        base_warm.push(started.elapsed());
    }
    reset(&run.cluster);
    Ok(Measured {
        fresh: timing(fresh),
        warm: timing(warm),
        base_fresh: timing(base_fresh),
        base_warm: timing(base_warm),
        host_calls_per_eval: calls as f64 / iterations as f64,
    })
}

fn reset(cluster: &InMemoryCluster) -> usize {
    cluster
        .calls
        .lock()
        .map(|mut c| std::mem::take(&mut *c))
        .unwrap_or_default()
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [policy_path, baseline_path] = paths.as_slice() else {
        bail!("usage: bench POLICY.wasm BASELINE.wasm [--quick]");
    };
    let iterations = if quick { 300 } else { 3000 };
    let policy = PolicyModule::load(&PathBuf::from(policy_path))?;
    let baseline = PolicyModule::load(&PathBuf::from(baseline_path))?;

    println!(
        "node-metadata-policy benchmark: {iterations} evaluations per row, times per evaluation in µs"
    );
    println!(
        "module: policy.wasm {} bytes (compiled once in {:.0?}); baseline.wasm {} bytes (compiled once in {:.0?})",
        policy.size_bytes, policy.compile_time, baseline.size_bytes, baseline.compile_time
    );
    println!(
        "fresh = new instance per evaluation (as policy-server runs it); warm = one instance reused"
    );
    println!("ratios: against the baseline timed interleaved with the same row");
    println!();

    let node_1: Value = serde_json::from_slice(&std::fs::read(repo("test_data/node-1.json"))?)?;
    let base_scenario = scenario("a. baseline", json!({}), node_1.clone());
    let base = Prepared::new(&baseline, &base_scenario)?;
    let rows = vec![
        scenario("b. default settings, binding", json!({}), node_1.clone()),
        scenario(
            "c. Kyverno mutate-pod-binding rule",
            kyverno_mutate_pod_binding(),
            node_1.clone(),
        ),
        scenario(
            "d. 50 copy entries, each reading the Node",
            copy_rules(50),
            node(50, 0),
        ),
        scenario(
            "e. 200 labels + 50 annotations, glob picks 40",
            json!({"copy":[{"label":"selected.example.com/*"}]}),
            node(200, 50),
        ),
        large_node_scenario("f. default settings, realistic 19 KB Node", json!({}))?,
        large_node_scenario(
            "g. Kyverno mutate-pod-binding, realistic 19 KB Node",
            kyverno_mutate_pod_binding(),
        )?,
        large_node_scenario(
            "i. MutatingPolicy (CEL) doing mutate-pod-binding, realistic 19 KB Node",
            serde_json::from_slice(&std::fs::read(repo(
                "test_data/kyverno-mutating-policy-binding.json",
            ))?)?,
        )?,
        Scenario {
            request: serde_json::from_slice(&std::fs::read(repo(
                "test_data/pod-without-node-name.json",
            ))?)?,
            ..scenario(
                "h. default settings, Pod without spec.nodeName (passed through)",
                json!({}),
                node_1.clone(),
            )
        },
    ];
    // For instruction-count profiling (valgrind): only warm evaluations of one row.
    if let Ok(row) = std::env::var("BENCH_PROFILE_ROW") {
        let s = rows
            .iter()
            .find(|s| s.name.starts_with(&row))
            .unwrap_or(&base_scenario);
        let module = if s.name.starts_with("a.") {
            &baseline
        } else {
            &policy
        };
        let run = Prepared::new(module, s)?;
        let iterations = std::env::var("BENCH_PROFILE_ITERATIONS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(iterations);
        if std::env::var_os("BENCH_PROFILE_FRESH").is_some() {
            let mut samples = Vec::with_capacity(iterations);
            for _ in 0..iterations {
                samples.push(run.fresh_once()?);
            }
            let t = timing(samples);
            eprintln!("fresh median {} µs, p99 {} µs", us(t.median), us(t.p99));
            return Ok(());
        }
        let host = module.instantiate(run.cluster.clone())?;
        for _ in 0..iterations * 10 {
            std::hint::black_box(PolicyModule::evaluate_payload(
                &host,
                &run.payload,
                &run.request,
            )?);
        }
        return Ok(());
    }
    println!(
        "| scenario | fresh median | fresh p99 | warm median | warm p99 | fresh ÷ baseline | warm ÷ baseline | host calls/eval |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut measured = Vec::new();
    for s in &rows {
        measured.push((s.name.clone(), measure(&policy, s, &base, iterations)?));
    }
    if let Some((_, m)) = measured.first() {
        println!(
            "| a. baseline (do-nothing policy, same SDK), timed beside b | {} | {} | {} | {} | 1.00× | 1.00× | 0.00 |",
            us(m.base_fresh.median),
            us(m.base_fresh.p99),
            us(m.base_warm.median),
            us(m.base_warm.p99)
        );
    }
    for (name, m) in &measured {
        println!(
            "| {name} | {} | {} | {} | {} | {:.2}× | {:.2}× | {:.2} |",
            us(m.fresh.median),
            us(m.fresh.p99),
            us(m.warm.median),
            us(m.warm.p99),
            ratio(m.fresh.median, m.base_fresh.median),
            ratio(m.warm.median, m.base_warm.median),
            m.host_calls_per_eval
        );
    }
    // Instantiation alone (wapc_init included), to show which part of "fresh"
    // is the module's start-up rather than the evaluation.
    let (mut inst, mut base_inst) = (Vec::new(), Vec::new());
    let cluster = Arc::new(InMemoryCluster::default());
    for _ in 0..iterations {
        let started = Instant::now();
        let _instance = std::hint::black_box(policy.instantiate(cluster.clone())?);
        inst.push(started.elapsed());
        let started = Instant::now();
        let _instance = std::hint::black_box(baseline.instantiate(cluster.clone())?);
        base_inst.push(started.elapsed());
    }
    let (inst, base_inst) = (timing(inst), timing(base_inst));
    println!(
        "| instantiation only: policy {} µs, baseline {} µs (median) | | | | | {:.2}× | | |",
        us(inst.median),
        us(base_inst.median),
        ratio(inst.median, base_inst.median)
    );

    println!();
    println!("Cost growth (fresh instance, median µs; in brackets the ratio to the first column)");
    println!();
    println!("| copy entries (Node with 200 labels) | 1 | 10 | 50 | 200 |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let growth_iterations = iterations / 3;
    let mut cells = Vec::new();
    for n in [1usize, 10, 50, 200] {
        let s = scenario("rules", copy_rules(n), node(200, 0));
        cells.push(measure(&policy, &s, &base, growth_iterations)?.fresh.median);
    }
    print_growth("µs per evaluation", &cells);
    println!();
    println!("| Node labels (glob picks up to 40) | 10 | 100 | 1000 |");
    println!("| --- | ---: | ---: | ---: |");
    let mut cells = Vec::new();
    for n in [10usize, 100, 1000] {
        let s = scenario(
            "labels",
            json!({"copy":[{"label":"selected.example.com/*"}]}),
            node(n, 0),
        );
        cells.push(measure(&policy, &s, &base, growth_iterations)?.fresh.median);
    }
    print_growth("µs per evaluation", &cells);
    Ok(())
}

fn print_growth(label: &str, cells: &[Duration]) {
    let first = cells[0].as_secs_f64();
    let values: Vec<String> = cells
        .iter()
        .map(|d| format!("{} ({:.2}×)", us(*d), d.as_secs_f64() / first))
        .collect();
    println!("| {label} | {} |", values.join(" | "));
}
