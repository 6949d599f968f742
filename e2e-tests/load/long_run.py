#!/usr/bin/env python3
"""A long run at a fixed rate: bindings round-robin over N distinct realistic
Nodes through real policy-server (default settings, 2 workers), sent on a
fixed schedule by this script (standard library threads; latency counted
from the scheduled send time, so a stall is not hidden). Samples
policy-server's RSS every 10 s and checks the issue's targets: RSS grows at
most 10 % after warm-up, the last minute's p99 within 20 % of the first
minute's after warm-up, no errors, at most one Node read per Node per 5 s.

To tell where a drift comes from, it also prints, per minute: p50 and p99,
the CPU seconds policy-server, the stub API server and every other process
on the machine used (from /proc: a run with other work on the machine shows
it), and the garbage-collection pauses of this sender process (Python's gc
callbacks). Run it with the floor policy (--policy annotated-floor.wasm: only
the Node read) to compare with this policy under the same harness.

Usage: long_run.py --policy ANNOTATED.wasm [--rate 100] [--minutes 10]
                   [--warmup 60] [--nodes 2000]
"""
import argparse
import gc
import http.client
import os
import json
import queue
import shutil
import sys
import tempfile
import threading
import time

import harness



def p99(values):
    values = sorted(values)
    return values[int(0.99 * (len(values) - 1))] if values else float("nan")


def machine_busy_seconds():
    """CPU seconds the whole machine has spent busy so far (all but idle and iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def cpu_sample(server, stub_pid):
    """(policy-server, stub API server, everything else on the machine) CPU seconds so far."""
    ours = harness.cpu_seconds(server.pid), harness.cpu_seconds(stub_pid)
    return (*ours, machine_busy_seconds() - sum(ours) - harness.cpu_seconds(os.getpid()))


class GcPauses:
    """This process's garbage-collection pauses: (start, seconds, generation)."""

    def __init__(self):
        self.pauses, self.started = [], None
        gc.callbacks.append(self.callback)

    def callback(self, phase, info):
        now = time.monotonic()
        if phase == "start":
            self.started = now
        elif self.started is not None:
            self.pauses.append((self.started, now - self.started, info["generation"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--nodes", type=int, default=2000)
    args = ap.parse_args()
    if shutil.which("policy-server") is None:
        print("long run: SKIPPED (policy-server is not on PATH)")
        return 0
    work = tempfile.mkdtemp(prefix="node-metadata-long-")
    processes = []
    try:
        started = harness.default_on_any_node(processes, work, args.policy)
        if started is None:
            print("long run: the stub or policy-server did not start")
            return 1
        stub, base, server = started
        stub_pid = processes[0].pid
        pauses = GcPauses()
        review = json.loads(harness.review("binding-large-node.json"))
        host, port = base.rsplit("/", 1)[1].split(":")
        jobs = queue.Queue()
        results = []  # (scheduled time, latency, ok)
        lock = threading.Lock()

        def sender():
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            while True:
                job = jobs.get()
                if job is None:
                    return
                scheduled, body = job
                try:
                    conn.request("POST", "/validate/default", body, {"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    answer = json.loads(resp.read())["response"]
                    ok = resp.status == 200 and answer.get("allowed") and bool(answer.get("patch"))
                except Exception:
                    conn.close()
                    conn = http.client.HTTPConnection(host, int(port), timeout=10)
                    ok = False
                with lock:
                    results.append((scheduled, time.monotonic() - scheduled, ok))

        threads = [threading.Thread(target=sender, daemon=True) for _ in range(16)]
        for t in threads:
            t.start()
        total = args.warmup + int(args.minutes * 60)
        start = time.monotonic()
        rss = []
        cpu = []  # (time, policy-server CPU s, stub CPU s, other processes' CPU s), every 10 s
        reads_at_warmup = None
        next_sample = start
        for i in range(total * args.rate):
            scheduled = start + i / args.rate
            now = time.monotonic()
            if now >= next_sample:
                rss.append((now - start, harness.rss_kib(server.pid)))
                cpu.append((now - start, *cpu_sample(server, stub_pid)))
                next_sample += 10
                if reads_at_warmup is None and now - start >= args.warmup:
                    reads_at_warmup = harness.node_reads(stub)
            if scheduled > now:
                time.sleep(scheduled - now)
            review["request"]["object"]["target"]["name"] = f"node-{i % args.nodes}"
            jobs.put((scheduled, json.dumps(review)))
        cpu.append((time.monotonic() - start, *cpu_sample(server, stub_pid)))
        for _ in threads:
            jobs.put(None)
        for t in threads:
            t.join(timeout=15)
        reads = harness.node_reads(stub) - (reads_at_warmup or 0)
        measured = args.minutes * 60
        after = [r for r in results if r[0] - start >= args.warmup]
        first = [r[1] for r in after if r[0] - start < args.warmup + 60]
        last = [r[1] for r in after if r[0] - start >= total - 60]
        errors = sum(1 for r in results if not r[2])
        rss_warm = [kib for t, kib in rss if t >= args.warmup]
        growth = (max(rss_warm) - rss_warm[0]) / rss_warm[0] if rss_warm else float("nan")
        allowed_reads = args.nodes * (measured / 5 + 1)
        print(f"long run: {args.rate} bindings/s for {args.minutes:g} min after {args.warmup} s warm-up, "
              f"{args.nodes} Nodes round-robin, {len(results)} bindings, {errors} errors")
        print("RSS MiB every 10 s: " + " ".join(f"{kib / 1024:.0f}" for _, kib in rss))
        print(f"RSS growth after warm-up (max over first sample): {growth:.1%} (target at most 10%)")
        print(f"p99 first minute after warm-up {p99(first) * 1000:.1f} ms, last minute {p99(last) * 1000:.1f} ms "
              f"(target within 20%)")
        print("per minute after warm-up: p50 ms, p99 ms, CPU s of policy-server, of the stub API server and of "
              "every other process on the machine (not this sender), GC pauses of this sender (count, longest "
              "ms, total ms)")
        for m in range(int(args.minutes)):
            lo, hi = args.warmup + 60 * m, args.warmup + 60 * (m + 1)
            times = sorted(r[1] for r in after if lo <= r[0] - start < hi)
            span = [c for c in cpu if lo <= c[0] <= hi + 1]
            used = [f"{span[-1][k] - span[0][k]:.1f}" if len(span) > 1 else "?" for k in (1, 2, 3)]
            gcs = [d for t, d, _ in pauses.pauses if lo <= t - start < hi]
            print(f"  minute {m + 1}: p50 {times[len(times) // 2] * 1000 if times else float('nan'):.1f}, "
                  f"p99 {p99(times) * 1000:.1f}, policy-server {used[0]} s, stub {used[1]} s, other {used[2]} s, "
                  f"GC {len(gcs)} / {max(gcs, default=0) * 1000:.1f} / {sum(gcs) * 1000:.1f}")
        print(f"Node reads after warm-up: {reads} (at most {allowed_reads:.0f}: one per Node per 5 s)")
        met = errors == 0 and growth <= 0.10 and p99(last) <= 1.2 * p99(first) and reads <= allowed_reads
        print("long run: " + ("targets met" if met else "targets NOT met"))
        return 0 if met else 1
    finally:
        harness.stop(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
