#!/usr/bin/env python3
"""`make fault-test`: the policy in real policy-server while the API server
misbehaves (stub_apiserver.py with stub_faults.py), on loopback.

Part 1, per settings (default, the policy's failurePolicy Fail, Kyverno's
mutate-pod-binding sample, timeoutEvalSeconds above the webhook's wait) and
per fault: the answer each binding gets, its time (p50 / p99 / max), and the
Node reads the API server receives per binding. Part 2: the reads a failing
API server receives at a fixed binding rate. Part 3, a hanging API server:
how long a binding waits; whether other requests on the same policy-server (a
Pod, another policy, a binding to a healthy Node) still answer; the same when
the client gives up after the webhook's timeoutSeconds; with more workers; on
a policy-server of its own; how long until bindings are answered again.

Exits 1 when policy-server crashes or a fault gets an answer other than the
one docs/operations.md documents for it. SKIPPED without policy-server.

Usage: fault_test.py --policy A.wasm --baseline B.wasm [--hang S]
"""
import argparse
import base64
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import harness

WEBHOOK_TIMEOUT = 10  # seconds: the webhook's timeoutSeconds in the recommended setup


def binding(node):
    review = json.loads(harness.review("binding.json"))
    review["request"]["object"]["target"]["name"] = node
    return json.dumps(review)


def timed_post(url, body, timeout):
    """(seconds, AdmissionResponse or an error string)."""
    start = time.monotonic()
    try:
        answer = harness.post(url, body, timeout=timeout)["response"]
    except urllib.error.HTTPError as e:
        answer = f"HTTP {e.code}"
    except Exception as e:  # a timeout or a reset: what the API server would see
        answer = f"no answer ({type(e).__name__})"
    return time.monotonic() - start, answer



def set_fault(stub, **fault):
    body = json.dumps(fault or {"mode": "ok"}).encode()
    req = urllib.request.Request(f"{stub}/stub/fault", data=body, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=5).close()


def short(text, length):
    """text on one line, Node names and other quoted values elided (they vary), cut to length."""
    return re.sub(r"\s+", " ", re.sub(r'"[^"]*"|\'[^\']*\'', '"..."', text)).strip()[:length]


def verdict(answer):
    """allowed+patched / allowed+warning / rejected, as the scheduler would see it."""
    if isinstance(answer, str):
        return answer
    if not answer.get("allowed"):
        message = (answer.get("status") or {}).get("message", "")
        return "rejected: " + short(message, 90)
    if answer.get("patch"):
        patch = base64.b64decode(answer["patch"]).decode()
        return "allowed, metadata added" + (" (with warning)" if answer.get("warnings") else "") \
            if "us-east-2" in patch or "topology" in patch else "allowed, patched"
    warnings = answer.get("warnings") or []
    return "allowed, no metadata: " + (short(warnings[0], 100) if warnings else "no warning")


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def concurrently(calls):
    """Runs each (url, body, timeout) at once; their (seconds, answer) in order."""
    results = [None] * len(calls)

    def run(i, call):
        results[i] = timed_post(*call)
    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(c[2] for c in calls) + 10)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--hang", type=float, default=35.0,
                    help="seconds the hanging API server holds a read (above the webhook's 30 s maximum)")
    ap.add_argument("--bindings", type=int, default=20, help="bindings per fault")
    args = ap.parse_args()
    # SIGTERM (timeout, make interrupted) still runs the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if shutil.which("policy-server") is None:
        print("fault test: SKIPPED (policy-server is not on PATH; see docs/performance.md)")
        return 0

    work = tempfile.mkdtemp(prefix="node-metadata-fault-")
    processes = []
    failures = []
    try:
        any_node = ["--any-node", harness.data("node-large.json")]
        stub = harness.start_stub(processes, [], extra=any_node)
        if stub is None:
            print("fault test: the stub API server did not start")
            return 1
        with open(harness.data("kyverno-mutate-pod-binding.json")) as f:
            kyverno = json.load(f)
        policies = {
            "default": harness.entry(args.policy, {}),
            "fail": harness.entry(args.policy, {"failurePolicy": "Fail"}),
            "kyverno": harness.entry(args.policy, kyverno),
            "do-nothing": harness.entry(args.baseline, {}, mutating=False, resources=[]),
            # The ClusterAdmissionPolicy's spec.timeoutEvalSeconds, above the
            # webhook's timeoutSeconds: a slow read is answered late instead
            # of rejected.
            "patient": dict(harness.entry(args.policy, {}), timeoutEvalSeconds=15),
        }

        def start(name, workers=2, served=policies):
            os.makedirs(os.path.join(work, name), exist_ok=True)
            url, proc, log = harness.start_policy_server(
                processes, os.path.join(work, name), served, stub, workers=workers)
            if url is None:
                raise RuntimeError(f"policy-server did not become ready: {open(log).read()[-2000:]}")
            return url, proc

        base, server = start("main")
        version = os.popen("policy-server --version").read().strip().splitlines()[0]
        print(f"fault test: {version}, 2 workers, --policy-timeout 2 s (default), stub API server on loopback")
        print("CEL form of the settings: SKIPPED (this version of the policy has no CEL form yet)")

        # Part 1. Each fault, each settings. `expect` is the documented answer.
        faults = [
            ("none (healthy)", {"mode": "ok"}, "allowed, metadata added"),
            ("delay 1 s", {"mode": "delay", "seconds": 1}, "allowed, metadata added"),
            ("delay 5 s (above the 2 s policy timeout, below a 10 s webhook)", {"mode": "delay", "seconds": 5},
             "rejected: Policy execution interrupted"),
            # The 2 s policy timeout fires when the wasm code runs again,
            # after the host call has returned: a rejection, not a quick one.
            ("delay 12 s (above the 2 s policy timeout and a 10 s webhook)", {"mode": "delay", "seconds": 12},
             "rejected: Policy execution interrupted"),
            ("500", {"mode": "500"}, "no metadata"),
            ("429 with Retry-After", {"mode": "429"}, "no metadata"),
            ("403 (RBAC grant missing)", {"mode": "403"}, "no metadata"),
            ("connection reset mid-body", {"mode": "reset"}, "no metadata"),
            ("malformed JSON", {"mode": "malformed"}, "no metadata"),
            ("1 MB Node", {"mode": "huge"}, "allowed, metadata added"),
            ("Node deleted (404)", {"mode": "gone"}, "no metadata"),
            ("flapping (every other read 500)", {"mode": "flap"}, "either"),
            ("connection refused (API server down)", {"mode": "down"}, "no metadata"),
        ]
        print("\n| settings | fault | answer | bindings | p50 s | p99 s | max s | Node reads per binding |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for settings in ("default", "fail", "kyverno", "patient"):
            for label, fault, expect in faults:
                if settings == "patient" and fault["mode"] != "delay":
                    continue
                if settings == "patient":
                    expect = "allowed, metadata added"
                down = fault["mode"] == "down"
                if down:  # nothing listens on the API server's port
                    harness.stop(processes[:1])
                else:
                    set_fault(stub, **fault)
                slow = fault["mode"] == "delay"
                n = 2 if slow else args.bindings
                before = 0 if down else harness.node_reads(stub)
                key = f"{settings}-{fault['mode']}-{fault.get('seconds', '')}"
                # Distinct Nodes, so policy-server's 5 s cache does not hide the fault.
                calls = [(f"{base}/validate/{settings}", binding(f"{key}-{i}"), WEBHOOK_TIMEOUT + 30)
                         for i in range(n)]
                # One at a time: concurrent reads wait for each other (part 2).
                results = [timed_post(*c) for c in calls]
                if down:  # the API server comes back on the same port
                    restarted = []
                    if harness.start_stub(restarted, [], extra=any_node, port=int(stub.rsplit(":", 1)[1])) is None:
                        raise RuntimeError("the stub API server did not restart")
                    processes[0] = restarted[0]
                reads = 0 if down else harness.node_reads(stub) - before
                times = [t for t, _ in results]
                answers = sorted({verdict(a) for _, a in results})
                if settings == "fail" and expect == "no metadata" and fault["mode"] != "delay":
                    expect = "rejected"
                good = expect == "either" or all(a.startswith(expect) or (expect == "no metadata" and
                                                                          a.startswith("allowed, no metadata"))
                                                  for a in answers)
                if not good:
                    failures.append(f"{settings} / {label}: {answers}")
                print(f"| {settings} | {label} | {'; '.join(answers)} | {n} | {statistics.median(times):.3f} | "
                      f"{percentile(times, 0.99):.3f} | {max(times):.3f} | {reads / n:.2f} |")
                if server.poll() is not None:
                    failures.append(f"policy-server exited ({server.returncode}) during {label}")
                    raise RuntimeError("policy-server crashed")
        set_fault(stub)

        # Part 2. The API server's load at a fixed binding rate, healthy and
        # failing: answers are cached 5 s, errors are not.
        rate, seconds = 50, 6
        print()
        for mode, what in (("ok", "healthy"), ("500", "answering 500")):
            set_fault(stub, mode=mode)
            before = harness.node_reads(stub)
            start_t = time.monotonic()
            threads = []
            for i in range(rate * seconds):
                delay = start_t + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                threads.append(threading.Thread(target=timed_post, args=(
                    f"{base}/validate/default", binding(f"rate-{mode}-{i % 10}"), 10)))
                threads[-1].start()
            for th in threads:
                th.join(timeout=20)
            reads = harness.node_reads(stub) - before
            print(f"API server {what}, {rate} bindings/s for {seconds} s over 10 Nodes: {reads} Node reads "
                  f"({reads / (rate * seconds):.2f} per binding, {reads / seconds:.1f}/s)")
        set_fault(stub)
        if server.poll() is not None:
            failures.append("policy-server exited in part 2")
        # Part 3. A hanging API server, each case on fresh policy-servers (a
        # hang leaves reads queued behind it, which would spill into the next).
        print(f"\nA hanging API server (holds each Node read {args.hang:.0f} s, then closes):")
        pod = harness.review("pod-without-node-name.json")
        own = {"default": policies["default"]}
        rest = {"do-nothing": policies["do-nothing"]}

        def hang_scenario(title, hanging, client_timeout, workers=2, dedicated=False):
            first = len(processes)
            url, _ = start(f"s{first}", workers=workers, served=own if dedicated else policies)
            other_url = start(f"t{first}", served=rest)[0] if dedicated else url
            set_fault(stub, mode="hang", seconds=args.hang, prefix="hang-")
            stamp = f"{time.monotonic():.0f}"
            calls = [(f"{url}/validate/default", binding(f"hang-{stamp}-{i}"), client_timeout)
                     for i in range(hanging)]
            out = {}
            t = threading.Thread(target=lambda: out.update(h=concurrently(calls)))
            t.start()
            time.sleep(1)
            names = ["Pod, same policy", "Pod, another policy", "binding to a healthy Node"]
            others = dict(zip(names, concurrently([
                (f"{url}/validate/default", pod, args.hang + 10),
                (f"{other_url}/validate/do-nothing", pod, args.hang + 10),
                (f"{url}/validate/default", binding(f"healthy-{stamp}"), args.hang + 10)])))
            t.join(timeout=args.hang + 30)
            set_fault(stub)
            print(f"- {title}: {hanging} bindings to hanging Nodes: " + ", ".join(
                f"{s:.1f} s ({verdict(a)[:60]})" for s, a in out.get("h", [])))
            for what, (s, a) in others.items():
                print(f"    {what}, sent 1 s later: {s:.2f} s, {verdict(a)[:70]}")
            # Reads queued behind the hang still go out one at a time.
            s, a = timed_post(f"{url}/validate/default", binding(f"after-{stamp}"), args.hang * hanging + 10)
            alive = all(p.poll() is None for p in processes[first:])
            print(f"    once the API server answers again: a binding to a new Node {s:.2f} s, {verdict(a)[:60]}; "
                  f"policy-server {'up' if alive else 'DOWN'}")
            if not alive:
                failures.append(f"a policy-server exited in: {title}")
            harness.stop(processes[first:])
            del processes[first:]

        hang_scenario("today (2 workers, the client waits)", 1, args.hang + 10)
        hang_scenario("today, 4 hanging bindings", 4, args.hang + 10)
        hang_scenario(f"the client gives up after {WEBHOOK_TIMEOUT} s (the webhook's timeoutSeconds)", 4,
                      WEBHOOK_TIMEOUT)
        hang_scenario("8 workers, 4 hanging bindings", 4, args.hang + 10, workers=8)
        hang_scenario("this policy on a policy-server of its own, 4 hanging bindings; the other policy on "
                      "another policy-server", 4, args.hang + 10, dedicated=True)

        print("\nfault test: " + ("every fault got its documented answer, no policy-server crash" if not failures
                                  else "FAILED:\n  " + "\n  ".join(failures)))
        return 1 if failures else 0
    finally:
        harness.stop(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
