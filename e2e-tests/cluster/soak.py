"""`make soak`: the policy in policy-server 1.35 as the webhook of make
cluster-test's control plane for --minutes (30), Pods created and deleted at
a steady rate the whole time, with the default settings and with Kyverno's
mutate-pod-binding sample (each in a namespace of its own, --rate Pods a
second each, every Pod deleted --lifetime seconds after it was created).

Prints a line a minute (Pods created and bound, errors, Pods without their
metadata, p99 wait from creation to binding, RSS of policy-server and
kube-apiserver) and fails unless, over the whole run: no error (a refused or
failed request, a scheduler event other than Scheduled, a Pod not bound
within 30 s), no Pod without the metadata its settings write, the RSS of
policy-server and of kube-apiserver at the end within 10 % of their level
after the first 5 minutes, and no minute's p99 wait after the first 5 above
twice the median minute's p99 plus 20 ms. Not in `make test` (it takes the
time it measures). SKIPPED without Go, policy-server or openssl.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster as clusters  # noqa: E402
import cluster_bench  # noqa: E402
import cluster_test  # noqa: E402
import kubewarden  # noqa: E402
from ha_test import Burst, Timeline  # noqa: E402

# (namespace, settings, what its Pods must carry: cluster_test's expectations)
SETUPS = [("soak-default", {}, cluster_test.zone_region_annotations),
          ("soak-kyverno", clusters.e2e_case("kyverno_mutate_pod_binding")["settings"],
           cluster_test.kyverno_zone_or_empty)]
WARM_UP_MINUTES = 5


class Stream:
    """Pods created at `rate` a second in one namespace, each deleted
    `lifetime` seconds later; creation and binding times through a Burst's
    watch, and every failed request counted."""

    def __init__(self, cluster, namespace, rate, lifetime, timeline):
        self.burst = Burst(cluster, namespace, 0, rate, timeline)
        self.cluster, self.namespace, self.rate, self.lifetime = cluster, namespace, rate, lifetime
        self.errors = []
        self.stop = threading.Event()

    def run(self, seconds):
        watcher = threading.Thread(target=self.burst.watch, daemon=True)
        watcher.start()
        conn = self.burst.connection()
        start = time.monotonic()
        i = 0
        deleted = 0
        spec = clusters.pod_spec()
        while time.monotonic() - start < seconds and not self.stop.is_set():
            name = f"s{i}"
            if not self.request(conn, "POST", f"/api/v1/namespaces/{self.namespace}/pods",
                                clusters.pod(name, spec)):
                conn.close()
                conn = self.burst.connection()
            self.burst.created[name] = time.monotonic()
            i += 1
            while deleted < i and self.burst.created[f"s{deleted}"] < time.monotonic() - self.lifetime:
                path = f"/api/v1/namespaces/{self.namespace}/pods/s{deleted}?gracePeriodSeconds=0"
                if not self.request(conn, "DELETE", path, None):
                    conn.close()
                    conn = self.burst.connection()
                deleted += 1
            delay = start + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        conn.close()
        time.sleep(30)  # the last Pods' bindings
        self.burst.stop.set()

    def request(self, conn, method, path, body):
        try:
            conn.request(method, path, json.dumps(body) if body is not None else None,
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status >= 300:
                self.errors.append(f"{method} {path}: {resp.status} {data[:200]!r}")
            return True
        except (OSError, http.client.HTTPException) as e:
            self.errors.append(f"{method} {path}: {e}")
            return False


def minute_rows(streams, samples, t0, minutes):
    rows = []
    for m in range(minutes):
        lo, hi = t0 + 60 * m, t0 + 60 * (m + 1)
        waits, created, bound = [], 0, 0
        for stream in streams:
            # Copies: the streams' threads go on adding while this reads.
            created_at, bound_at = dict(stream.burst.created), dict(stream.burst.bound)
            for name, at in created_at.items():
                if lo <= at < hi:
                    created += 1
                    if name in bound_at:
                        bound += 1
                        waits.append(bound_at[name] - at)
        waits.sort()
        sample = next((s for s in samples if s["minute"] == m + 1), {})
        rows.append({"minute": m + 1, "created": created, "bound": bound,
                     "p99_ms": round(1000 * cluster_bench.percentile(waits, 99), 1) if waits else None,
                     "policy_server_mib": sample.get("policy_server_mib"),
                     "kube_apiserver_mib": sample.get("kube_apiserver_mib")})
    return rows


def metadata_problems(cluster, streams):
    """Pods bound without what their settings write, read at binding from the watch."""
    problems = []
    for (namespace, _, expect), stream in zip(SETUPS, streams):
        for name, pod in dict(stream.burst.placed).items():
            node = cluster.nodes.get(pod["spec"]["nodeName"])
            want_a, want_l = expect(pod, node)
            found = cluster_test.metadata_problems(pod, want_a, want_l)
            if found:
                problems.append(f"{namespace}/{name}: {'; '.join(found)}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=os.path.join(clusters.ROOT, "annotated-policy.wasm"))
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--rate", type=float, default=5, help="Pods created a second in each namespace")
    parser.add_argument("--lifetime", type=float, default=60, help="seconds from a Pod's creation to its deletion")
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--report", help="write the minutes and the checks as JSON here")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each line as it comes, also into a log
    missing = [tool for tool in ("go", "policy-server", "openssl") if not shutil.which(tool)]
    if missing or not os.path.exists(args.policy):
        print(f"soak: SKIPPED ({', '.join(missing) or args.policy + ' missing'})")
        return 0
    work = tempfile.mkdtemp(prefix="soak-")
    # Each Pod leaves a Scheduled event, which the API server keeps for
    # --event-ttl (1 h by default): with 4 minutes, its memory can settle
    # within the run instead of growing with events for an hour.
    cluster = clusters.Cluster(work, node_count=args.nodes, apiserver_args=["--event-ttl=4m"])
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    failures = []
    try:
        for component, version in cluster.versions().items():
            print(f"{component:24} {version}")
        cluster.start()
        policies = [clusters.policy_for(ns, settings, ns) for ns, settings, _ in SETUPS]
        if not cluster.policy_server.start({kubewarden.unique_name(p): kubewarden.policies_entry(p, args.policy)
                                            for p in policies}):
            raise RuntimeError(f"policy-server did not start:\n{clusters.control_plane.tail(cluster.policy_server.log_path)}")
        cluster.install_webhooks(policies)
        for ns, _, _ in SETUPS:
            cluster.ensure_namespace(ns)
        timeline = Timeline()
        streams = [Stream(cluster, ns, args.rate, args.lifetime, timeline) for ns, _, _ in SETUPS]
        seconds = 60 * args.minutes
        threads = [threading.Thread(target=s.run, args=(seconds,), daemon=True) for s in streams]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        pids = {"policy_server_mib": cluster.policy_server.process.pid,
                "kube_apiserver_mib": cluster.plane.process("kube-apiserver").pid}
        samples = []
        unusual = {}
        for minute in range(1, args.minutes + 1):
            time.sleep(max(0.0, t0 + 60 * minute - time.monotonic()))
            sample = {"minute": minute}
            for key, pid in pids.items():
                sample[key] = round(cluster_bench.PeakRss(pid).rss() / 2**20, 1)
            samples.append(sample)
            for ns, _, _ in SETUPS:  # events live 4 minutes: collected as they come
                for event in cluster.admin.get(f"/api/v1/namespaces/{ns}/events")["items"]:
                    if event.get("reason") != "Scheduled":
                        unusual[event["metadata"]["name"]] = (
                            f"{ns}: {event['involvedObject'].get('name')}: {event.get('reason')}: "
                            f"{event.get('message', '')[:200]}")
            row = minute_rows(streams, samples, t0, minute)[-1]
            errors = sum(len(s.errors) for s in streams)
            print(f"minute {minute:3}: {row['created']} created, {row['bound']} bound, p99 {row['p99_ms']} ms, "
                  f"policy-server {sample['policy_server_mib']} MiB, kube-apiserver {sample['kube_apiserver_mib']} "
                  f"MiB, {errors} errors so far", flush=True)
        for t in threads:
            t.join()
        rows = minute_rows(streams, samples, t0, args.minutes)
        failures += [e for s in streams for e in s.errors][:20]
        failures += [f"event {e}" for e in list(unusual.values())[:10]]
        for s, (ns, _, _) in zip(streams, SETUPS):
            unbound = [n for n in s.burst.created if n not in s.burst.bound]
            if unbound:
                failures.append(f"{ns}: {len(unbound)} Pods not bound within 30 s, e.g. {unbound[:3]}")
        problems = metadata_problems(cluster, streams)
        print(f"{len(problems)} Pods without metadata")
        failures += problems[:10]
        warm = next(r for r in rows if r["minute"] == min(WARM_UP_MINUTES, args.minutes))
        last = rows[-1]
        for key in ("policy_server_mib", "kube_apiserver_mib"):
            if last[key] > 1.1 * warm[key] or last[key] < 0.9 * warm[key]:
                failures.append(f"{key}: {last[key]} at the end, {warm[key]} after {warm['minute']} minutes "
                                "(more than 10 % apart)")
        steady = [r["p99_ms"] for r in rows if r["minute"] > WARM_UP_MINUTES and r["p99_ms"] is not None]
        if steady:
            limit = 2 * statistics.median(steady) + 20
            over = [r for r in rows if r["minute"] > WARM_UP_MINUTES and (r["p99_ms"] or 0) > limit]
            failures += [f"minute {r['minute']}: p99 {r['p99_ms']} ms above {limit:.1f} ms" for r in over]
        total = sum(len(s.burst.created) for s in streams)
        print(f"soak: {args.minutes} minutes, {total} Pods created and deleted, "
              f"{sum(len(s.errors) for s in streams)} request errors, {len(unusual)} events other than Scheduled, "
              f"{len(problems)} Pods without metadata; "
              f"RSS policy-server {warm['policy_server_mib']} -> {last['policy_server_mib']} MiB, "
              f"kube-apiserver {warm['kube_apiserver_mib']} -> {last['kube_apiserver_mib']} MiB "
              f"(minute {warm['minute']} -> {last['minute']}); p99 per minute after minute {WARM_UP_MINUTES}: "
              f"median {statistics.median(steady) if steady else None} ms, max {max(steady, default=None)} ms")
        if args.report:
            with open(args.report, "w") as f:
                json.dump({"minutes": rows, "failures": failures}, f, indent=1)
    except KeyboardInterrupt:
        failures.append("interrupted")
    except Exception:
        traceback.print_exc()
        failures.append("the run did not complete")
    finally:
        cluster.finish()
    for failure in failures:
        print(f"FAIL  {failure}")
    print(f"soak: {'passed' if not failures else 'FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
