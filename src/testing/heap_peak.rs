//! How much heap one evaluation holds at its peak, per load-test row
//! (`cargo test --release heap_peak -- --ignored --nocapture`). In
//! policy-server every evaluation is a fresh instance whose heap starts
//! untouched, so the peak is about how many 4 KiB pages it faults in: the
//! currency docs/performance.md measures the load test in. Natively pointers
//! are 8 bytes where wasm's are 4, so compare rows, not absolute figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use serde_json::{Value, json};

use crate::testing::fake_cluster::{FakeCluster, get};

/// Counts this thread's live bytes and their peak while `COUNTING` is on.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are
// thread-local cells touched without allocating.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn count(delta: isize) {
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            LIVE.with(|live| {
                let now = live.get().saturating_add_signed(delta);
                live.set(now);
                PEAK.with(|peak| peak.set(peak.get().max(now)));
            });
            if delta > 0 {
                ALLOCATIONS.with(|n| n.set(n.get() + 1));
            }
        }
    });
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak live bytes and allocations of one `evaluate` of `payload`, and the
/// warnings it answers with (a row that warns does more than its job).
fn measure(payload: &[u8], table: &FakeCluster) -> (usize, usize, Option<Vec<String>>) {
    LIVE.with(|c| c.set(0));
    PEAK.with(|c| c.set(0));
    ALLOCATIONS.with(|c| c.set(0));
    COUNTING.with(|c| c.set(true));
    let response = crate::evaluate(payload, table, table);
    COUNTING.with(|c| c.set(false));
    (
        PEAK.with(Cell::get),
        ALLOCATIONS.with(Cell::get),
        response.warnings,
    )
}

fn read(path: &str) -> Value {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null)
}

#[test]
#[ignore]
fn heap_peak() {
    let node = read("test_data/node-large.json");
    let binding = read("test_data/binding-large-node.json");
    let name = node["metadata"]["name"].as_str().unwrap_or_default();
    let table = FakeCluster::default().with(get("v1", "Node", None, name), node.clone());
    let rows = [
        ("default settings, Binding", binding.clone(), json!({})),
        (
            "Kyverno mutate-pod-binding",
            binding.clone(),
            read("test_data/kyverno-mutate-pod-binding.json"),
        ),
        (
            "MutatingPolicy (CEL)",
            binding,
            read("test_data/kyverno-mutating-policy-binding.json"),
        ),
        (
            "Pod without spec.nodeName",
            read("test_data/pod-without-node-name.json"),
            json!({}),
        ),
    ];
    // HEAP_ROW=CEL runs only the rows whose name contains it (for `valgrind
    // --tool=dhat`, which then names the allocation sites).
    let only = std::env::var("HEAP_ROW").unwrap_or_default();
    for (row, request, settings) in rows.into_iter().filter(|(row, ..)| row.contains(&only)) {
        let payload = serde_json::to_vec(&json!({"request": request, "settings": settings}))
            .unwrap_or_default();
        let (peak, allocations, warnings) = measure(&payload, &table);
        eprintln!(
            "{row}: payload {} bytes, peak heap {peak} bytes, {allocations} allocations, warnings {warnings:?}",
            payload.len()
        );
    }
}
