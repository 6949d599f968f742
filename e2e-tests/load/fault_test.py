#!/usr/bin/env python3
"""`make fault-test`: the policy in real policy-server while the API server
misbehaves (stub_apiserver.py with stub_faults.py), on loopback.

Part 1, per settings (default, the policy's failurePolicy Fail, Kyverno's
mutate-pod-binding sample, timeoutEvalSeconds as long as the webhook's wait) and
per fault: the answer each binding gets, its time (p50 / p99 / max), and the
Node reads the API server receives per binding. Part 2: the reads a failing
API server receives at a fixed binding rate. Part 3, a hanging API server:
how long a binding waits; whether other requests on the same policy-server (a
Pod, another policy, a binding to a healthy Node) still answer; the same when
the client gives up after the webhook's timeoutSeconds; with more workers; on
a policy-server of its own; how long until bindings are answered again.
Then, against that reproduction of today's hang, the recommended setup as a
whole, read from examples/dedicated-policy-server.yaml (its PolicyServer's
workers and replicas, its ClusterAdmissionPolicy's timeoutSeconds,
failurePolicy, timeoutEvalSeconds and settings): bindings at 1 and at 5 a second,
Pods under this policy and Pods under another policy (on a policy-server of
its own) sent throughout, first with the API server healthy, then hanging.

Exits 1 when policy-server crashes, a fault gets an answer other than the
one docs/operations.md documents for it, or the recommended setup misses the
issue's target: the other policy at its healthy latency (p99 at most twice
its healthy p99 plus 2 ms, no request over 1 s) and no binding or Pod under
this policy waiting past the webhook's timeoutSeconds (then the webhook's
failurePolicy decides: the example's Fail rejects the binding and the
scheduler retries it) or rejected by the policy. SKIPPED without
policy-server; the recommended setup SKIPPED without PyYAML.

Usage: fault_test.py --policy A.wasm --baseline B.wasm [--hang S] [--hang-only]
                     [--part1-only] [--settings ...] [--delays 0.5,5,12] [--delay-bindings N]
"""
import argparse
import base64
import collections
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
POLICY_TIMEOUT = 2  # seconds: policy-server's default --policy-timeout
INTERRUPTED = "rejected: Policy execution interrupted"
ADDED = "allowed, metadata added"
# What one evaluation spends besides the Node read, with room for a slow day
# (measured: 30 to 40 ms on the kyverno and cel settings).
OVERHEAD = 0.25


def delay_expectation(seconds, limit):
    """The answers a Node read taking `seconds` may get under a time limit of
    `limit` seconds. policy-server counts the limit in wasmtime epochs that a
    task advances once a second, so the deadline passes between limit - 1 and
    limit seconds after the evaluation starts; it is noticed when the guest
    runs again, after the read returns."""
    if seconds + OVERHEAD < limit - 1:
        return ADDED
    if seconds >= limit:
        return INTERRUPTED
    return (ADDED, INTERRUPTED)


def delay_label(seconds):
    text = f"delay {seconds:g} s"
    if seconds >= WEBHOOK_TIMEOUT:
        return text + f" (above the {POLICY_TIMEOUT} s policy timeout and a {WEBHOOK_TIMEOUT} s webhook)"
    if seconds >= POLICY_TIMEOUT:
        return text + f" (above the {POLICY_TIMEOUT} s policy timeout, below a {WEBHOOK_TIMEOUT} s webhook)"
    if seconds + OVERHEAD >= POLICY_TIMEOUT - 1:
        return text + f" (within the {POLICY_TIMEOUT} s policy timeout's last tick)"
    return text


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


EXAMPLE = os.path.join(harness.ROOT, "examples", "dedicated-policy-server.yaml")


def recommended_setup():
    """What the scenario takes from examples/dedicated-policy-server.yaml, or None without PyYAML."""
    try:
        import yaml
    except ImportError:
        return None
    with open(EXAMPLE) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    server = next(d for d in docs if d["kind"] == "PolicyServer")
    policy = next(d for d in docs if d["kind"] == "ClusterAdmissionPolicy"
                  and d["spec"].get("policyServer") == server["metadata"]["name"])
    env = {e["name"]: e.get("value") for e in server["spec"].get("env", [])}
    spec = policy["spec"]
    return {
        "workers": int(env["KUBEWARDEN_WORKERS"]),
        "replicas": int(server["spec"].get("replicas", 1)),
        # Kubernetes' defaults for a webhook; Kubewarden's for failurePolicy.
        "timeoutSeconds": int(spec.get("timeoutSeconds", 10)),
        "failurePolicy": spec.get("failurePolicy", "Fail"),
        "timeoutEvalSeconds": spec.get("timeoutEvalSeconds"),
        "settings": spec.get("settings") or {},
    }


def summary(times):
    return (f"p50 {statistics.median(times) * 1000:.1f} ms, p99 {percentile(times, 0.99) * 1000:.1f} ms, "
            f"max {max(times) * 1000:.1f} ms ({len(times)} requests)") if times else "no requests"


def paced(calls, every, seconds, out):
    """Sends calls(i) every `every` seconds for `seconds`, each in a thread of
    its own (a slow answer does not delay the next); appends (sent at, seconds,
    answer) to out. Returns the threads."""
    threads, start = [], time.monotonic()
    for i in range(int(seconds / every)):
        delay = start + i * every - time.monotonic()
        if delay > 0:
            time.sleep(delay)

        def run(call=calls(i), sent=time.monotonic() - start):
            out.append((sent, *timed_post(*call)))
        threads.append(threading.Thread(target=run))
        threads[-1].start()
    return threads


# What the API server does with a binding whose webhook call got no answer in time.
GAVE_UP = {"Ignore": "bound without the metadata", "Fail": "rejected, and the scheduler retries it"}


def recommended_scenario(setup, start, processes, stub, policies, hang):
    """The recommended setup while the API server hangs, at a binding rate its
    workers absorb and at one they do not; the failures (empty when the
    target is met)."""
    failures = []
    timeout = setup["timeoutSeconds"]
    print(f"\nThe recommended setup, from examples/dedicated-policy-server.yaml: this policy on "
          f"{setup['replicas']} policy-server replicas of its own with {setup['workers']} workers each, "
          f"timeoutEvalSeconds {setup['timeoutEvalSeconds']}, settings {json.dumps(setup['settings'])}; the "
          f"webhook's timeoutSeconds {timeout} (every client below gives up then, as the API server does) "
          f"and failurePolicy {setup['failurePolicy']}; the other policy on a policy-server of its own "
          f"(2 workers). Each binding, and each Pod under this policy, goes to the next replica in turn.")
    # A binding the client gave up on frees its worker; until then it holds
    # one. 1/s holds fewer than the workers; 5/s holds more.
    workers = setup["workers"] * setup["replicas"]
    for rate in (1, 5):
        print(f"- {rate} binding(s) a second, {rate * timeout} held at once at most against {workers} workers:")
        first = len(processes)
        failures.extend(f"{rate}/s: {f}" for f in recommended_run(setup, start, stub, policies, hang, rate))
        harness.stop(processes[first:])
        del processes[first:]
    print("recommended setup: " + ("target met: the other policy at its healthy latency, every binding and Pod "
                                   f"under this policy answered, or handed to failurePolicy {setup['failurePolicy']}, "
                                   f"within timeoutSeconds ({timeout} s)" if not failures else "target NOT met"))
    return failures


def recommended_run(setup, start, stub, policies, hang, rate):
    failures = []
    timeout = setup["timeoutSeconds"]
    entry = dict(harness.entry(policies["default"]["module"], setup["settings"]))
    if setup["timeoutEvalSeconds"] is not None:
        entry["timeoutEvalSeconds"] = setup["timeoutEvalSeconds"]
    replicas = [start(f"recommended-{rate}-{r}", workers=setup["workers"], served={"node-metadata": entry})
                for r in range(setup["replicas"])]
    other, other_server = start(f"recommended-{rate}-other", served={"do-nothing": policies["do-nothing"]})
    servers = [p for _, p in replicas] + [other_server]
    pod = harness.review("pod-without-node-name.json")

    def this(i, body):  # the webhook Service spreads requests over the replicas
        return (f"{replicas[i % len(replicas)][0]}/validate/node-metadata", body, timeout)

    def phase(node_prefix, seconds):
        """Bindings at `rate`, Pods under this policy 2/s, Pods under the other policy 10/s, for `seconds`."""
        out = {"bindings": [], "pods": [], "other": []}
        stamp = f"{time.monotonic():.0f}"
        threads = []
        streams = [
            ("bindings", lambda i: this(i, binding(f"{node_prefix}{stamp}-{i}")), 1.0 / rate),
            ("pods", lambda i: this(i, pod), 0.5),
            ("other", lambda i: (f"{other}/validate/do-nothing", pod, timeout), 0.1),
        ]
        runners = [threading.Thread(target=lambda k=k, c=c, e=e: threads.extend(paced(c, e, seconds, out[k])))
                   for k, c, e in streams]
        for r in runners:
            r.start()
        for r in runners:
            r.join()
        for t in list(threads):
            t.join(timeout=timeout + 10)
        return out

    healthy = phase("ok-", 10)
    got = sorted({verdict(a) for _, _, a in healthy["bindings"]})
    print(f"    API server healthy, 10 s: bindings {summary([t for _, t, _ in healthy['bindings']])}: {got}")
    if got != ["allowed, metadata added"]:
        failures.append(f"API server healthy: bindings answered {got}")
    for key, what in (("pods", "Pods, this policy"), ("other", "Pods, the other policy")):
        print(f"      {what}: {summary([t for _, t, _ in healthy[key]])}")

    before = harness.node_reads(stub)
    set_fault(stub, mode="hang", seconds=hang, prefix="hang-")
    stuck = phase("hang-", 25)
    # The scheduler's wait is what the webhook call took, at most timeoutSeconds;
    # no answer by then goes to the webhook's failurePolicy: Ignore binds the
    # Pod without the metadata, Fail rejects the binding and the scheduler retries.
    waits = [t for _, t, _ in stuck["bindings"]]
    gave_up = [(s, a) for s, _, a in stuck["bindings"] if isinstance(a, str)]
    answered = sorted({verdict(a) for _, _, a in stuck["bindings"] if not isinstance(a, str)})
    print(f"    API server hanging (each Node read held {hang:.0f} s), 25 s of traffic:")
    print(f"      bindings (the scheduler's wait): {summary(waits)}; {len(gave_up)} of {len(waits)} "
          f"without answer within {timeout} s, so {GAVE_UP[setup['failurePolicy']]} (failurePolicy "
          f"{setup['failurePolicy']}); answered in time: {answered or 'none'}")
    pods = stuck["pods"]
    late = sorted(s for s, _, a in pods if isinstance(a, str))
    print(f"      Pods, this policy: {summary([t for _, t, _ in pods])}; {len(late)} of {len(pods)} without "
          f"answer within {timeout} s" + (f" (the first sent {late[0]:.0f} s into the hang)" if late else ""))
    other_healthy = [t for _, t, _ in healthy["other"]]
    other_hang = [t for _, t, _ in stuck["other"]]
    print(f"      Pods, the other policy: {summary(other_hang)} (healthy, same run: {summary(other_healthy)})")
    set_fault(stub)
    recovered = time.monotonic()
    s, a = timed_post(*this(1, binding(f"after-{recovered:.0f}"))[:2], hang * 2 + 10)
    reads = harness.node_reads(stub) - before
    alive = all(p.poll() is None for p in servers)
    print(f"      once the API server answers again: a binding to a new Node {s:.2f} s, {verdict(a)[:60]}; "
          f"Node reads received since the hang began: {reads} for {len(waits) + 1} bindings; "
          f"policy-servers {'up' if alive else 'DOWN'}")

    if not alive:
        failures.append("a policy-server exited")
    limit = timeout + 0.5  # the client's own timer on top of timeoutSeconds
    if max(waits, default=0) > limit or any(a.startswith("rejected") for a in answered):
        failures.append(f"a binding waited {max(waits):.1f} s (limit {timeout} s) or was rejected: {answered}")
    pod_answers = sorted({verdict(a) for _, _, a in pods if not isinstance(a, str)})
    if max((t for _, t, _ in pods), default=0) > limit or any(a.startswith("rejected") for a in pod_answers):
        failures.append(f"a Pod under this policy waited past {timeout} s or was rejected: {pod_answers}")
    p99_limit = 2 * percentile(other_healthy, 0.99) + 0.002
    if percentile(other_hang, 0.99) > p99_limit or max(other_hang) > 1.0 or \
            any(isinstance(a, str) for _, _, a in stuck["other"]):
        failures.append(f"the other policy's p99 {percentile(other_hang, 0.99) * 1000:.1f} ms "
                        f"(limit {p99_limit * 1000:.1f} ms) or max {max(other_hang):.2f} s (limit 1 s)")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--hang", type=float, default=35.0,
                    help="seconds the hanging API server holds a read (above the webhook's 30 s maximum)")
    ap.add_argument("--bindings", type=int, default=20, help="bindings per fault")
    ap.add_argument("--delays", type=lambda text: [float(x) for x in text.split(",")], default=[0.5, 5, 12],
                    help="the Node read delays part 1 plays, in seconds (default 0.5,5,12)")
    ap.add_argument("--delay-bindings", type=int, default=2, help="bindings per delay")
    ap.add_argument("--settings", default="default,fail,kyverno,cel,patient",
                    help="the settings part 1 runs each fault with (default,fail,kyverno,cel,patient)")
    ap.add_argument("--part1-only", action="store_true",
                    help="only part 1 (each fault with each settings)")
    ap.add_argument("--hang-only", action="store_true",
                    help="only the hanging API server (part 3) and the recommended setup (part 4)")
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
        with open(harness.data("kyverno-mutating-policy-binding.json")) as f:
            mutating_policy = json.load(f)
        # Settings whose failure rejects the binding instead of admitting it
        # without the metadata.
        rejecting = {"fail"}
        if mutating_policy.get("spec", {}).get("failurePolicy", "Fail") == "Fail":
            rejecting.add("cel")
        policies = {
            "default": harness.entry(args.policy, {}),
            "fail": harness.entry(args.policy, {"failurePolicy": "Fail"}),
            "kyverno": harness.entry(args.policy, kyverno),
            # The CEL form: a MutatingPolicy doing mutate-pod-binding's job,
            # with the failurePolicy the sample sets (Fail when unset, as
            # Kyverno's default).
            "cel": harness.entry(args.policy, mutating_policy),
            "do-nothing": harness.entry(args.baseline, {}, mutating=False, resources=[]),
            # The ClusterAdmissionPolicy's spec.timeoutEvalSeconds, equal to
            # the webhook's timeoutSeconds (kubewarden-controller refuses a
            # greater one): a read slower than the 2 s default is answered
            # late instead of rejected.
            "patient": dict(harness.entry(args.policy, {}), timeoutEvalSeconds=10),
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

        # Part 1. Each fault, each settings. `expect` is the documented answer.
        # The delays' answers follow from the policy's time limit (delay_expectation).
        faults = [("none (healthy)", {"mode": "ok"}, "allowed, metadata added")] + [
            (delay_label(seconds), {"mode": "delay", "seconds": seconds}, None) for seconds in args.delays] + [
            ("500", {"mode": "500"}, "no metadata"),
            ("429 with Retry-After", {"mode": "429"}, "no metadata"),
            ("403 (RBAC grant missing)", {"mode": "403"}, "no metadata"),
            ("connection reset mid-body", {"mode": "reset"}, "no metadata"),
            ("malformed JSON", {"mode": "malformed"}, "no metadata"),
            ("1 MB Node", {"mode": "huge"}, "allowed, metadata added"),
            ("Node deleted (404)", {"mode": "gone"}, "no metadata"),
            ("flapping (every other read 500)", {"mode": "flap"}, (ADDED, "no metadata")),
            ("connection refused (API server down)", {"mode": "down"}, "no metadata"),
        ]
        if not args.hang_only:
            print("\n| settings | fault | answer | bindings | p50 s | p99 s | max s | Node reads per binding |")
            print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for settings in () if args.hang_only else args.settings.split(","):
            for label, fault, expect in faults:
                if settings == "patient" and fault["mode"] != "delay":
                    continue
                if fault["mode"] == "delay":
                    limit = policies[settings].get("timeoutEvalSeconds") or POLICY_TIMEOUT
                    expect = delay_expectation(fault["seconds"], limit)
                down = fault["mode"] == "down"
                if down:  # nothing listens on the API server's port
                    harness.stop(processes[:1])
                else:
                    set_fault(stub, **fault)
                slow = fault["mode"] == "delay"
                n = args.delay_bindings if slow else args.bindings
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
                counts = collections.Counter(verdict(a) for _, a in results)
                answers = sorted(counts)
                expected = expect if isinstance(expect, tuple) else (expect,)
                if settings in rejecting:
                    expected = tuple("rejected" if e == "no metadata" else e for e in expected)
                good = all(
                    any(a.startswith(e) or (e == "no metadata" and a.startswith("allowed, no metadata"))
                        for e in expected) for a in answers)
                if not good:
                    failures.append(f"{settings} / {label}: {answers}")
                shown = "; ".join(a + (f" ({counts[a]})" if len(counts) > 1 else "") for a in answers)
                print(f"| {settings} | {label} | {shown} | {n} | {statistics.median(times):.3f} | "
                      f"{percentile(times, 0.99):.3f} | {max(times):.3f} | {reads / n:.2f} |")
                if server.poll() is not None:
                    failures.append(f"policy-server exited ({server.returncode}) during {label}")
                    raise RuntimeError("policy-server crashed")
        set_fault(stub)

        # Part 2. The API server's load at a fixed binding rate, healthy and
        # failing: answers are cached 5 s, errors are not.
        rate, seconds = 50, 6
        print()
        for mode, what in () if args.hang_only or args.part1_only else (("ok", "healthy"), ("500", "answering 500")):
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
        if args.part1_only:
            print("\nfault test, part 1: " + ("every fault got its documented answer, no policy-server crash"
                                              if not failures else "FAILED:\n  " + "\n  ".join(failures)))
            return 1 if failures else 0
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

        # Part 4. The recommended setup as a whole, against the reproduction above.
        setup = recommended_setup()
        if setup is None:
            print("\nrecommended setup: SKIPPED (PyYAML is needed to read examples/dedicated-policy-server.yaml)")
        else:
            failures.extend(recommended_scenario(setup, start, processes, stub, policies, args.hang))

        print("\nfault test: " + ("every fault got its documented answer, no policy-server crash" if not failures
                                  else "FAILED:\n  " + "\n  ".join(failures)))
        return 1 if failures else 0
    finally:
        harness.stop(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
