#!/usr/bin/env python3
"""`make load-test`: the policy in real policy-server, as users run it.

Starts a stub Kubernetes API server on loopback (stub_apiserver.py, serving
the Nodes under test_data/), policy-server with a policies file written the way
the Kubewarden controller writes one for a ClusterAdmissionPolicy
(contextAwareResources, hostCapabilities, allowedToMutate), and drives each
row with wrk: rows interleaved and repeated, so a noisy machine still gives
steady ratios. Prints req/s, p50 and p99 per row (medians over the rounds),
the ratio to the row's reference, policy-server's own CPU time and page faults
per request (read from /proc, so the load generator's share of the two cores
is left out), and how often the API server was asked for each Node.
Loopback only; stops by itself.

Usage: run.py --policy A.wasm --baseline B.wasm --floor F.wasm
              [--variant NAME=ANNOTATED.wasm ...] [--duration S] [--rounds N]
All modules annotated (kwctl annotate). Exits 0 with SKIPPED when
policy-server or wrk is missing.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request

from harness import data, entry, post, review, start_policy_server, start_stub, stop

NODE_CACHE_SECONDS = 5  # policy-server caches get_resource answers this long


def server_usage(pid):
    """policy-server's CPU seconds (user + system) and minor page faults so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    # Fields after the command: state is [0], minflt [7], utime [11], stime [12].
    return (int(fields[11]) + int(fields[12])) / ticks, int(fields[7])


def counts(stub):
    with urllib.request.urlopen(f"{stub}/stub/counts", timeout=5) as resp:
        return json.load(resp)


WRK_LATENCY = re.compile(r"^\s*(50|99)(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$")


def run_wrk(url, body_file, duration, connections):
    script = body_file + ".lua"
    with open(script, "w") as f:
        f.write('local f = io.open("%s", "rb")\nwrk.method = "POST"\nwrk.body = f:read("*a")\nf:close()\n'
                'wrk.headers["Content-Type"] = "application/json"\n' % body_file)
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{duration}s", "--latency", "-s", script, url],
        capture_output=True, text=True, timeout=duration + 30,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    latency = {}
    for line in out.splitlines():
        m = WRK_LATENCY.match(line)
        if m:
            scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(3)]
            latency[m.group(1)] = float(m.group(2)) * scale
    return rps, latency.get("50"), latency.get("99"), int(errors.group(1)) if errors else 0, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--floor", required=True)
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=ANNOTATED.wasm: another build of the policy, default settings, the Kyverno "
                         "sample and the MutatingPolicy, realistic Node, paired with the current build's rows")
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--only", default="",
                    help="comma-separated policies (do-nothing, floor, default, kyverno, cel, variant-NAME, "
                         "variant-NAME-kyverno, variant-NAME-cel) to run")
    args = ap.parse_args()

    missing = [tool for tool in ("policy-server", "wrk") if shutil.which(tool) is None]
    if missing:
        print(f"load test: SKIPPED (not installed: {', '.join(missing)}); "
              "see docs/performance.md for how to get them")
        return 0

    work = tempfile.mkdtemp(prefix="node-metadata-load-")
    processes = []
    try:
        stub = start_stub(processes, [data("node-1.json"), data("node-large.json")])
        if stub is None:
            print("load test: the stub API server did not start")
            return 1
        with open(data("kyverno-mutate-pod-binding.json")) as f:
            kyverno_rules = json.load(f)
        with open(data("kyverno-mutating-policy-binding.json")) as f:
            mutating_policy = json.load(f)

        policies = {
            "do-nothing": entry(args.baseline, {}, mutating=False, resources=[]),
            "floor": entry(args.floor, {}),
            "default": entry(args.policy, {}),
            "kyverno": entry(args.policy, kyverno_rules),
            "cel": entry(args.policy, mutating_policy),
        }
        variants = []
        for spec in args.variant:
            name, _, module = spec.partition("=")
            policies[f"variant-{name}"] = entry(module, {})
            policies[f"variant-{name}-kyverno"] = entry(module, kyverno_rules)
            policies[f"variant-{name}-cel"] = entry(module, mutating_policy)
            variants.append(name)
        base, server, log = start_policy_server(processes, work, policies, stub)
        if base is None:
            print("load test: policy-server did not become ready; its log:")
            print(open(log).read()[-3000:])
            return 1

        large = "ip-10-0-17-42.us-east-2.compute.internal"
        rows = [
            # label, policy, request, reference row, Node read
            ("do-nothing policy, Binding", "do-nothing", "binding-large-node.json", None, None),
            ("floor policy, Binding, realistic Node", "floor", "binding-large-node.json", None, large),
            ("default settings, Binding, realistic Node", "default", "binding-large-node.json", "floor", large),
            ("default settings, Binding, 7-label Node", "default", "binding.json", "floor", "node-1"),
            ("Kyverno mutate-pod-binding, realistic Node", "kyverno", "binding-large-node.json", "floor", large),
            ("MutatingPolicy (CEL) doing mutate-pod-binding, realistic Node", "cel", "binding-large-node.json",
             "floor", large),
            ("do-nothing policy, Pod", "do-nothing", "pod-without-node-name.json", None, None),
            ("default settings, Pod without spec.nodeName", "default", "pod-without-node-name.json",
             "do-nothing policy, Pod", None),
        ]
        for v in variants:
            rows.append((f"variant {v}, Binding, realistic Node", f"variant-{v}", "binding-large-node.json",
                         "default settings, Binding, realistic Node", large))
            rows.append((f"variant {v}, Kyverno sample, realistic Node", f"variant-{v}-kyverno",
                         "binding-large-node.json", "Kyverno mutate-pod-binding, realistic Node", large))
            rows.append((f"variant {v}, MutatingPolicy, realistic Node", f"variant-{v}-cel",
                         "binding-large-node.json",
                         "MutatingPolicy (CEL) doing mutate-pod-binding, realistic Node", large))
            rows.append((f"variant {v}, Pod without spec.nodeName", f"variant-{v}", "pod-without-node-name.json",
                         "default settings, Pod without spec.nodeName", None))
        references = {"floor": "floor policy, Binding, realistic Node"}
        if args.only:
            keep = set(args.only.split(","))
            rows = [r for r in rows if r[1] in keep]
            # A row whose reference is not run is reported on its own.
            kept = {r[0] for r in rows}
            rows = [r if r[3] is None or references.get(r[3], r[3]) in kept else (*r[:3], None, r[4])
                    for r in rows]
        bodies = {}
        for label, policy, request, _, node_name in rows:
            body_file = os.path.join(work, f"{policy}-{request}")
            with open(body_file, "w") as f:
                f.write(review(request))
            bodies[label] = body_file
            # Each row must do its job before it is timed.
            answer = post(f"{base}/validate/{policy}", open(body_file).read())["response"]
            # Rows that read a Node write its metadata; the others write nothing.
            if not answer.get("allowed") or bool(answer.get("patch")) != bool(node_name):
                print(f"load test: row {label!r} did not answer as expected: {json.dumps(answer)[:400]}")
                return 1

        results = {label: [] for label, *_ in rows}
        reads = {label: [] for label, *_ in rows}
        for round_ in range(args.rounds):
            # Each round starts at a different row, so no row always runs
            # right after the same neighbour (that alone measured up to 10%).
            shift = round_ % len(rows)
            for label, policy, _, _, node_name in rows[shift:] + rows[:shift]:
                before = counts(stub)
                cpu_before, faults_before = server_usage(server.pid)
                rps, p50, p99, errors, total = run_wrk(f"{base}/validate/{policy}", bodies[label],
                                                args.duration, args.connections)
                cpu_after, faults_after = server_usage(server.pid)
                after = counts(stub)
                if errors:
                    print(f"load test: {errors} non-2xx answers in row {label!r}")
                    return 1
                served = max(total, 1)
                results[label].append((rps, p50, p99, (cpu_after - cpu_before) / served * 1e6,
                                       (faults_after - faults_before) / served))
                if node_name:
                    path = f"/api/v1/nodes/{node_name}"
                    reads[label].append(after.get(path, 0) - before.get(path, 0))

        def median(label, i):
            return statistics.median(r[i] for r in results[label])

        version = subprocess.run(["policy-server", "--version"], capture_output=True, text=True).stdout
        print(f"\n{version.splitlines()[0] if version else 'policy-server'}, "
              f"{args.connections} connections, {args.rounds} rounds x {args.duration} s per row, interleaved; "
              f"medians over the rounds. Node reads at the stub per row run "
              f"(policy-server caches a Node {NODE_CACHE_SECONDS} s).")
        print(f"\n| row | req/s | p50 ms | p99 ms | vs reference | server CPU µs/req | faults/req | Node reads per run |")
        print("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
        for label, policy, request, reference, node_name in rows:
            ref_label = references.get(reference, reference)
            ratio = f"{median(label, 0) / median(ref_label, 0):.2f}x {'the floor' if reference == 'floor' else ref_label}" \
                if ref_label else "reference"
            node_reads = ", ".join(str(r) for r in reads[label]) if reads[label] else "-"
            print(f"| {label} | {median(label, 0):,.0f} | {median(label, 1):.2f} | {median(label, 2):.2f} | "
                  f"{ratio} | {median(label, 3):.0f} | {median(label, 4):.1f} | {node_reads} |")
        spread = max(
            (max(r[0] for r in results[label]) - min(r[0] for r in results[label])) / median(label, 0)
            for label, *_ in rows
        )
        print(f"\nLargest spread of req/s between rounds of one row: {spread:.1%}.")
        # Rounds are interleaved, so a row's ratio to its reference within each
        # round cancels most of the machine's drift: the median of those is
        # the steadier figure.
        print("\nPaired ratios (median of per-round ratios to the reference row):")
        for label, policy, request, reference, node_name in rows:
            ref_label = references.get(reference, reference)
            if ref_label:
                paired = statistics.median(a[0] / b[0] for a, b in zip(results[label], results[ref_label]))
                print(f"- {label}: {paired:.3f}x")
        for label, *_ in rows:
            print(f"  {label}: " + ", ".join(f"{r[0]:.0f}" for r in results[label]))
        return 0
    finally:
        stop(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
