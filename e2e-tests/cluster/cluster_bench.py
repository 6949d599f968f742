"""`make cluster-bench`: what users feel, scheduling with the policy. N Pods
over M Nodes (copies of the realistic 19 KB Node), bound by the real
scheduler through policy-server as the webhook, with: no webhook, the floor
policy (reads the Node, writes two annotations, checks nothing), the default
settings, Kyverno's mutate-pod-binding sample and the README's MutatingPolicy;
and, for the same two documents, Kyverno's own admission controller (v1.19.1,
out of cluster, e2e-tests/cluster/kyverno_controllers.py) as the webhook,
each document installed in Kyverno as its users install it, for its rows
only. The setups take turns, round after round, in one run.

Each round creates the N Pods first, selecting a Node label no Node has yet
(each creation goes through the webhook's `pods` CREATE rule: Pods created a
second), then gives every Node that label at once. From that moment, each
Pod's time to bound (the watch event that shows its nodeName, on this
client's clock), and Pods bound a second until the last is bound (each
binding goes through the `pods/binding` rule). Each row's ratio is to the
rows without a webhook of the same run.

The scheduler's client limit is raised (qps and burst 5,000) so that the API
server, the scheduler and the webhook set the pace, not the default 50
requests a second, which would cap every row alike.
"""
import argparse
import copy
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster as clusters  # noqa: E402
import harness  # noqa: E402  (e2e-tests/load, on the path through control_plane)
import kubewarden  # noqa: E402
import kyverno_controllers  # noqa: E402
from cluster import policy_for  # noqa: E402
from nodes import ZONE  # noqa: E402

SETUPS = ["none", "floor", "default", "kyverno", "mutating-policy", "in-kyverno", "in-kyverno-mpol"]
# Rows whose webhook is Kyverno's admission controller, with the document it runs.
KYVERNO_SETUPS = {"in-kyverno": "kyverno", "in-kyverno-mpol": "mutating-policy"}
LABELS = {"none": "no webhook", "floor": "floor policy", "default": "default settings",
          "kyverno": "Kyverno `mutate-pod-binding`", "mutating-policy": "README's MutatingPolicy",
          "in-kyverno": "Kyverno `mutate-pod-binding` in Kyverno",
          "in-kyverno-mpol": "README's MutatingPolicy in Kyverno",
          "default-every-pod": "default settings, webhook on every Pod creation"}


def settings_of(setup):
    if setup == "kyverno":
        return clusters.e2e_case("kyverno_mutate_pod_binding")["settings"]
    if setup == "mutating-policy":
        return clusters.e2e_case("cel_mutate_pod_binding")["settings"]
    return {}


def kyverno_document(setup):
    """What a Kyverno user installs for a Kyverno row: Kyverno's
    mutate-pod-binding sample as Kyverno publishes it (a ClusterPolicy without
    failurePolicy, background off), or the README's MutatingPolicy."""
    if KYVERNO_SETUPS[setup] == "mutating-policy":
        return copy.deepcopy(settings_of("mutating-policy"))
    return {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": "mutate-pod-binding"},
            "spec": {"background": False, "rules": copy.deepcopy(settings_of("kyverno")["rules"])}}


def bench_policy(setup):
    policy = policy_for(f"bench-{setup}", settings_of(setup), "unused")
    if setup == "default-every-pod":
        # The example without its match condition: the webhook takes every
        # Pod creation too (`--setups default,default-every-pod`).
        policy["spec"].pop("matchConditions", None)
    # Held to the namespaces labelled for this setup (matchExpressions: the
    # controller drops matchLabels).
    policy["spec"]["namespaceSelector"]["matchExpressions"][-1] = {
        "key": "bench-setup", "operator": "In", "values": [setup]}
    return policy


class Connection:
    """One keep-alive HTTPS connection per thread to kube-apiserver."""

    local = threading.local()

    def __init__(self, plane):
        self.host, self.port = plane.server.replace("https://", "").split(":")
        self.context = plane.admin.context

    def send(self, method, path, body, content_type="application/json"):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPSConnection(self.host, int(self.port), context=self.context,
                                                                 timeout=60)
        conn.request(method, path, json.dumps(body), {"Content-Type": content_type})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:300]}")

    def post(self, path, body):
        self.send("POST", path, body)

    def patch(self, path, body):
        self.send("PATCH", path, body, "application/merge-patch+json")


def watch_bindings(plane, namespace, expected, bound, stop, ready, prefix="p"):
    """Records the monotonic time each Pod of `namespace` whose name starts
    with `prefix` is first seen with a nodeName. The watch starts from the
    namespace's current resourceVersion (no replay of existing Pods) and
    resumes from the last event when the API server closes it (it closes
    watchers that read too slowly)."""
    host, port = plane.server.replace("https://", "").split(":")
    listed = plane.admin.get(f"/api/v1/namespaces/{namespace}/pods?limit=1")
    version = listed["metadata"]["resourceVersion"]
    first = True
    while len(bound) < expected and not stop.is_set():
        conn = http.client.HTTPSConnection(host, int(port), context=plane.admin.context, timeout=300)
        conn.request("GET", f"/api/v1/namespaces/{namespace}/pods?watch=1&resourceVersion={version}")
        resp = conn.getresponse()
        if first:
            ready.set()
            first = False
        for event in clusters.watch_events(resp, stop):
            obj = event.get("object", {})
            if event.get("type") == "ERROR":
                stop.set()
                break
            version = obj.get("metadata", {}).get("resourceVersion", version)
            name = obj.get("metadata", {}).get("name", "")
            if obj.get("spec", {}).get("nodeName") and name not in bound and name.startswith(prefix):
                bound[name] = (time.monotonic(), ZONE in obj["metadata"].get("annotations", {}))
            if len(bound) >= expected:
                break
        conn.close()


RELEASE_LABEL = "example.com/bench-round"


class PeakRss:
    """The highest resident set size of a process while the block runs,
    sampled from /proc every 50 ms (VmHWM is the whole life's peak)."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0, threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def rss(self):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def sample(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(0.05)

    def __enter__(self):
        if self.pid:
            self.thread.start()
        return self

    def __exit__(self, *_):
        self.stop.set()
        if self.pid:
            self.thread.join()


def one_round(cluster, connection, setup, index, pods, threads, single, kyverno=None):
    """Creates `pods` Pods that select a Node label no Node has yet (each
    creation passes the webhook's `pods` CREATE rule), then gives every Node
    that label at once and times the scheduler binding them all (each binding
    passes the webhook's `pods/binding` rule). `kyverno`: Kyverno's
    controllers, when they run beside policy-server."""
    namespace = f"bench-{setup}-{index}"
    labels = {"bench-setup": setup}
    extra = kyverno.processes if kyverno else []
    server = cluster.policy_server.process
    if setup in KYVERNO_SETUPS:
        labels[kyverno_controllers.SIDE_LABEL] = "kyverno"
        server = kyverno.admission
    cluster.ensure_namespace(namespace, labels=labels)
    with PeakRss(server.pid if server and setup != "none" else None) as peak:
        result = burst(cluster, connection, setup, index, namespace, pods, threads, single, extra)
    result["peak_rss_mib"] = peak.peak / 2**20
    cluster.admin.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
    cluster.admin.delete(f"/api/v1/namespaces/{namespace}")
    # The next row starts on a quiet control plane: the namespace controller
    # deleting 1,000 Pods (and their events) would otherwise run into it.
    clusters.wait_until(lambda: not cluster.admin.exists(f"/api/v1/namespaces/{namespace}"), 180,
                        f"namespace {namespace} deleted")
    return result


def burst(cluster, connection, setup, index, namespace, pods, threads, single, extra):
    spec = clusters.pod_spec(node_selector={RELEASE_LABEL: namespace})

    def create(i):
        connection.post(f"/api/v1/namespaces/{namespace}/pods", clusters.pod(f"p{i}", spec))

    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(pods)))
    created_per_second = pods / (time.monotonic() - t0)

    bound, stop, ready = {}, threading.Event(), threading.Event()
    watcher = threading.Thread(target=watch_bindings, args=(cluster.plane, namespace, pods, bound, stop, ready))
    watcher.start()
    ready.wait(10)
    time.sleep(1)  # every Pod has been tried once and waits as unschedulable

    def release(node):
        connection.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {RELEASE_LABEL: namespace}}})

    cpu_before = cpu_seconds(cluster, extra)
    released = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(release, [n for n in cluster.nodes if n != "node-bare"]))
    watcher.join(timeout=300)
    stop.set()
    cpu = {name: (after - cpu_before.get(name, 0.0)) * 1000 / pods for name, after in cpu_seconds(cluster, extra).items()}
    listed = [p for p in cluster.pods(namespace) if p["spec"].get("nodeName")]
    time.sleep(2)  # the API server and the scheduler settle after the burst
    alone = one_at_a_time(cluster, connection, namespace, single)
    latencies = sorted(t - released for t, _ in bound.values())
    with_zone = sum(1 for _, zoned in bound.values() if zoned)
    last = max((t for t, _ in bound.values()), default=time.monotonic())
    result = {"setup": setup, "round": index, "pods": pods, "bound": len(bound), "bound_listed": len(listed),
              "with_zone": with_zone,
              "created_per_second": created_per_second, "seconds": last - released,
              "per_second": len(bound) / (last - released),
              "p50_ms": 1000 * percentile(latencies, 50), "p99_ms": 1000 * percentile(latencies, 99),
              "cpu_ms_per_pod": cpu, "alone_ms": alone}
    return result


def one_at_a_time(cluster, connection, namespace, count):
    """Milliseconds from sending each of `count` Pods, one after another, to
    seeing it bound: a Pod's own wait, without a queue in front of it."""
    bound, stop, ready = {}, threading.Event(), threading.Event()
    watcher = threading.Thread(target=watch_bindings,
                               args=(cluster.plane, namespace, count, bound, stop, ready, "alone-"))
    watcher.start()
    ready.wait(10)
    times = []
    for i in range(count):
        name = f"alone-{i}"
        t0 = time.monotonic()
        connection.post(f"/api/v1/namespaces/{namespace}/pods", clusters.pod(name, clusters.pod_spec()))
        deadline = t0 + 30
        while name not in bound and time.monotonic() < deadline:
            time.sleep(0.001)
        if name in bound:
            times.append(1000 * (bound[name][0] - t0))
    stop.set()
    watcher.join(timeout=10)
    return sorted(times)


def cpu_seconds(cluster, extra=()):
    """CPU seconds (user and system) each component (and each of `extra`,
    processes) has used so far."""
    found = {}
    processes = [(os.path.basename(p.args[0]), p.pid) for p in [*cluster.plane.processes, *extra]]
    if cluster.policy_server.process:
        processes.append(("policy-server", cluster.policy_server.process.pid))
    for name, pid in processes:
        try:
            found[name] = harness.cpu_seconds(pid)
        except (OSError, IndexError, ValueError):
            pass
    return found


def percentile(values, p):
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = clusters.ROOT
    parser.add_argument("--policy", default=os.path.join(root, "annotated-policy.wasm"))
    parser.add_argument("--floor", default=os.path.join(root, "annotated-floor.wasm"))
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8, help="concurrent Pod creations")
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma-separated; 'none' is always run")
    parser.add_argument("--alone", type=int, default=40, help="Pods sent one at a time after each burst")
    parser.add_argument("--json", help="write every round's figures here")
    args = parser.parse_args()
    SETUPS[:] = ["none"] + [s for s in args.setups.split(",") if s and s != "none"]
    missing = [t for t in ("go", "policy-server", "openssl") if not shutil.which(t)]
    if missing or not os.path.exists(args.policy) or not os.path.exists(args.floor):
        print(f"cluster bench: SKIPPED ({', '.join(missing) or 'annotated modules missing (needs kwctl)'})")
        return 0
    kyverno_bin = None
    if any(s in KYVERNO_SETUPS for s in SETUPS):
        kyverno_bin = kyverno_controllers.build()
    work = tempfile.mkdtemp(prefix="cluster-bench-")
    cluster = clusters.Cluster(work, node_count=args.nodes, scheduler_qps=5000)
    kyverno = kyverno_controllers.KyvernoControllers(cluster, kyverno_bin) if kyverno_bin else None
    results = []
    try:
        versions = cluster.versions()
        if kyverno:
            versions.update({f"Kyverno {name}": v for name, v in kyverno.versions().items()})
        for component, version in versions.items():
            print(f"{component:32} {version}")
        cluster.start()
        if kyverno:
            kyverno.start(kyverno_controllers.module_dir())
        policies = {s: bench_policy(s) for s in SETUPS if s not in ("none", *KYVERNO_SETUPS)}
        entries = {}
        for setup, policy in policies.items():
            entries[kubewarden.unique_name(policy)] = kubewarden.policies_entry(
                policy, args.floor if setup == "floor" else args.policy)
        if not cluster.policy_server.start(entries):
            print("policy-server did not become ready")
            return 1
        cluster.install_webhooks(list(policies.values()))
        connection = Connection(cluster.plane)
        # A warm-up round of the default settings: connections, caches, JIT-free wasm instances.
        one_round(cluster, connection, "default", 0, min(100, args.pods), args.threads, 5)
        for setup in SETUPS:
            if setup in KYVERNO_SETUPS:
                # Kyverno's warm-up: the document compiled, its client and caches.
                with kyverno_controllers.installed(cluster.admin, kyverno_document(setup)):
                    one_round(cluster, connection, setup, 0, min(100, args.pods), args.threads, 5, kyverno)
        for r in range(1, args.rounds + 1):
            order = SETUPS[r % len(SETUPS):] + SETUPS[:r % len(SETUPS)]
            for setup in order:
                if setup in KYVERNO_SETUPS:
                    # Installed in Kyverno for its own rows only: Kyverno's
                    # policies apply in every namespace its webhooks see.
                    with kyverno_controllers.installed(cluster.admin, kyverno_document(setup)):
                        result = one_round(cluster, connection, setup, r, args.pods, args.threads, args.alone,
                                           kyverno)
                else:
                    result = one_round(cluster, connection, setup, r, args.pods, args.threads, args.alone, kyverno)
                results.append(result)
                print(f"round {r} {setup:16} created at {result['created_per_second']:.0f}/s; "
                      f"{result['bound']}/{result['pods']} bound ({result['bound_listed']} listed) "
                      f"({result['with_zone']} with the zone) in {result['seconds']:.2f} s: "
                      f"{result['per_second']:.0f}/s, p50 {result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms")
                sys.stdout.flush()
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        if kyverno:
            kyverno.stop()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    print_table(results, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    problems = regressions(results)
    for problem in problems:
        print(f"cluster bench: FAILED: {problem}")
    return 1 if problems else 0


# The rows of this policy, and the least share of the floor policy's rate each
# must bind at, paired by round: the floor only reads the Node and writes a
# fixed patch, so a policy row below it is this policy's own cost.
POLICY_SETUPS = ("default", "kyverno", "mutating-policy", "default-every-pod")
LEAST_VS_FLOOR = 0.95


def regressions(results):
    """What makes the bench fail: a row of this policy (or the floor) that
    left a bound Pod without the zone annotation, or a row of this policy
    binding below LEAST_VS_FLOOR of the floor's rate (median of the rounds'
    ratios)."""
    problems = []
    floors = {r["round"]: r["per_second"] for r in results if r["setup"] == "floor"}
    for setup in ("floor", *POLICY_SETUPS):
        rows = [r for r in results if r["setup"] == setup]
        missing = sum(r["bound"] - r["with_zone"] for r in rows)
        if missing:
            problems.append(f"{setup}: {missing} Pods bound without the zone annotation")
        ratios = [r["per_second"] / floors[r["round"]] for r in rows
                  if setup != "floor" and r["round"] in floors]
        ratio = statistics.median(ratios) if ratios else None
        if ratio is not None and ratio < LEAST_VS_FLOOR:
            problems.append(f"{setup}: {ratio:.2f}x the floor policy's Pods bound a second "
                            f"(paired by round; at least {LEAST_VS_FLOOR}x)")
    return problems


def print_table(results, args):
    base = [r for r in results if r["setup"] == "none"]
    base_rate = statistics.median(r["per_second"] for r in base)
    base_p99 = statistics.median(r["p99_ms"] for r in base)
    base_created = statistics.median(r["created_per_second"] for r in base)
    print(f"\n{args.pods} Pods released at once over {args.nodes} Nodes, {args.rounds} rounds each, medians:")
    print("| setup | Pods bound/s | vs no webhook | p50 ms | p99 ms | p99 added ms | bound with the zone "
          "| Pods created/s (vs no webhook) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    components = ["kube-apiserver", "etcd", "kube-scheduler", "policy-server"]
    if any(s in KYVERNO_SETUPS for s in SETUPS):
        components += ["kyverno", "background-controller"]
    cpu_rows = []
    for setup in SETUPS:
        rows = [r for r in results if r["setup"] == setup]
        cpu_rows.append((setup, [statistics.median(r["cpu_ms_per_pod"].get(c, 0.0) for r in rows)
                                 for c in components], max(r["peak_rss_mib"] for r in rows)))
        rate = statistics.median(r["per_second"] for r in rows)
        p50 = statistics.median(r["p50_ms"] for r in rows)
        p99 = statistics.median(r["p99_ms"] for r in rows)
        zoned = sum(r["with_zone"] for r in rows)
        total = sum(r["pods"] for r in rows)
        created = statistics.median(r["created_per_second"] for r in rows)
        print(f"| {setup} | {rate:.0f} | {rate / base_rate:.2f}x | {p50:.0f} | {p99:.0f} | "
              f"{p99 - base_p99:+.0f} | {zoned}/{total} | {created:.0f} ({created / base_created:.2f}x) |")

    alone = {setup: sorted(t for r in results if r["setup"] == setup for t in r["alone_ms"]) for setup in SETUPS}
    print(f"\nOne Pod at a time ({args.alone} a round), from sending it to seeing it bound, all rounds:")
    print("| setup | p50 ms | p99 ms | p50 added ms | p99 added ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for setup in SETUPS:
        p50, p99 = percentile(alone[setup], 50), percentile(alone[setup], 99)
        print(f"| {setup} | {p50:.1f} | {p99:.1f} | {p50 - percentile(alone['none'], 50):+.1f} | "
              f"{p99 - percentile(alone['none'], 99):+.1f} |")

    print("\nCPU milliseconds per Pod while the Pods are bound, medians; the webhook server's peak RSS over the rounds:")
    print("| setup | " + " | ".join(components) + " | webhook server peak RSS MiB |")
    print("| --- |" + " ---: |" * (len(components) + 1))
    for setup, values, peak in cpu_rows:
        print(f"| {setup} | " + " | ".join(f"{v:.2f}" for v in values) + f" | {peak:.0f} |")
    print_kyverno_comparison(results)


def print_kyverno_comparison(results):
    """This policy against Kyverno's admission controller doing the same job:
    each document's row here over its row in Kyverno, paired by round."""
    for ours, theirs in (("kyverno", "in-kyverno"), ("mutating-policy", "in-kyverno-mpol")):
        pairs = [(a, b) for a in results if a["setup"] == ours
                 for b in results if b["setup"] == theirs and b["round"] == a["round"]]
        if not pairs:
            continue
        ratios = sorted(a["per_second"] / b["per_second"] for a, b in pairs)
        p99 = [statistics.median(r[i]["p99_ms"] for r in pairs) for i in (0, 1)]
        rss = [max(r[i]["peak_rss_mib"] for r in pairs) for i in (0, 1)]
        what = "Kyverno's mutate-pod-binding" if ours == "kyverno" else "the README's MutatingPolicy"
        line = (f"this policy vs Kyverno's admission controller: {statistics.median(ratios):.2f}x Pods bound a second "
                f"({what}; paired by round, {ratios[0]:.2f}x to {ratios[-1]:.2f}x); p99 wait {p99[0]:.0f} ms vs "
                f"{p99[1]:.0f} ms; webhook server peak RSS {rss[0]:.0f} MiB vs {rss[1]:.0f} MiB")
        print(("\n" if ours == "kyverno" else "") + line)


if __name__ == "__main__":
    sys.exit(main())
