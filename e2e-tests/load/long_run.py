#!/usr/bin/env python3
"""A long run at a fixed rate: bindings round-robin over N distinct realistic
Nodes through real policy-server (default settings, 2 workers), sent on a
fixed schedule by this script (standard library threads; latency counted
from the scheduled send time, so a stall is not hidden). Samples
policy-server's RSS every 10 s and checks the issue's targets: RSS grows at
most 10 % after warm-up, the last minute's p99 within 20 % of the first
minute's after warm-up, no errors, at most one Node read per Node per 5 s.

Usage: long_run.py --policy ANNOTATED.wasm [--rate 100] [--minutes 10]
                   [--warmup 60] [--nodes 2000]
"""
import argparse
import http.client
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
        reads_at_warmup = None
        next_sample = start
        for i in range(total * args.rate):
            scheduled = start + i / args.rate
            now = time.monotonic()
            if now >= next_sample:
                rss.append((now - start, harness.rss_kib(server.pid)))
                next_sample += 10
                if reads_at_warmup is None and now - start >= args.warmup:
                    reads_at_warmup = harness.node_reads(stub)
            if scheduled > now:
                time.sleep(scheduled - now)
            review["request"]["object"]["target"]["name"] = f"node-{i % args.nodes}"
            jobs.put((scheduled, json.dumps(review)))
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
        print(f"Node reads after warm-up: {reads} (at most {allowed_reads:.0f}: one per Node per 5 s)")
        met = errors == 0 and growth <= 0.10 and p99(last) <= 1.2 * p99(first) and reads <= allowed_reads
        print("long run: " + ("targets met" if met else "targets NOT met"))
        return 0 if met else 1
    finally:
        harness.stop(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
