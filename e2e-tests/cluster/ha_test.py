"""`make ha-test`: the policy in two policy-server replicas while Pods are
being scheduled, and what a replica killed, a rolling replacement and a
restart of etcd, kube-apiserver or kube-scheduler do to those Pods.

The control plane is make cluster-test's. The replicas are policy-server 1.35
processes on test hosts of their own (test_hosts.py: network namespaces on a
bridge of this machine), behind the `policy-server-default` Service that
kubewarden-controller writes; the webhook names that Service, and
kube-apiserver (`--enable-aggregator-routing`) sends each call to a ready
endpoint of its EndpointSlice, picked at random. No kubelet runs the
replicas: this script plays the kubelet and the EndpointSlice controller for
them, as they behave for the Deployment the controller writes (its readiness
probe: HTTP /readiness every 10 s; a container that dies is noticed within
the kubelet's 1 s relist, marked not ready and started again at once; a
Pod deleted is marked terminating and sent SIGTERM at the same moment, then
SIGKILL after its 30 s grace period).

Each scenario is a burst of at least --pods Pods, created at --rate a second
in a namespace of its own, scheduled by the real scheduler onto the cluster
test's Nodes, with one fault played during it. It ends with `N Pods without
metadata` (bound without the Node's zone and region annotations), the Pods
bound, the longest wait from creation to binding and the timeline of the
fault. Every webhook and policy failurePolicy pair goes through the replica
faults; the control plane faults run under the recommended configuration.
The test fails when a scenario under the recommended configuration leaves a
Pod unbound or without its metadata, or when a scenario under another pair
leaves a Pod unbound.

Needs root (network namespaces), Go, policy-server and openssl; SKIPPED otherwise.
"""
import argparse
import copy
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster as clusters  # noqa: E402
import control_plane  # noqa: E402
import kubewarden  # noqa: E402
import test_hosts  # noqa: E402

SERVICE = "policy-server-default"
SLICE = f"{SERVICE}-replicas"
PROBE_PERIOD = 10  # the readiness probe's default periodSeconds
RELIST_PERIOD = 1  # how soon the kubelet sees a container that died
GRACE_PERIOD = 30  # the Pod's default terminationGracePeriodSeconds
PAIRS = [("Ignore", "Ignore"), ("Ignore", "Fail"), ("Fail", "Ignore"), ("Fail", "Fail")]


def recommended_setup():
    """The recommended configuration, as examples/dedicated-policy-server.yaml
    gives it: its ClusterAdmissionPolicy, the (webhook, policy) failurePolicy
    pair it sets, and its PolicyServer's replicas and workers."""
    docs = clusters.example("dedicated-policy-server.yaml")
    server = next(d for d in docs if d["kind"] == "PolicyServer")
    policy = next(d for d in docs if d["kind"] == "ClusterAdmissionPolicy")
    spec = policy["spec"]
    pair = (spec.get("failurePolicy", "Fail"), spec["settings"].get("failurePolicy", "Ignore"))
    env = {e["name"]: e.get("value") for e in server["spec"].get("env", [])}
    return policy, pair, int(server["spec"].get("replicas", 1)), int(env.get("KUBEWARDEN_WORKERS", 4))


BASE, RECOMMENDED, REPLICAS, WORKERS = recommended_setup()
# The Node labels the example copies onto Pods as annotations.
WANTED = [entry["label"] for entry in BASE["spec"]["settings"]["copy"]]


class Timeline:
    def __init__(self):
        self.t0 = time.monotonic()
        self.events = []
        self.lock = threading.Lock()

    def restart(self):
        with self.lock:
            self.t0 = time.monotonic()
            self.events = []

    def note(self, text):
        with self.lock:
            self.events.append((time.monotonic() - self.t0, text))


class Replicas:
    """policy-server replicas on test hosts, and the EndpointSlice that says
    which are ready, kept as the kubelet and the EndpointSlice controller
    would keep it (see the module's comment)."""

    def __init__(self, cluster, network, policies, timeline):
        self.cluster = cluster
        self.network = network
        self.policies = policies
        self.timeline = timeline
        self.members = []  # dicts: server, ready, terminating, next_probe
        self.next_host = 0
        self.lock = threading.Lock()
        # One write of the EndpointSlice at a time, each from the state when it
        # starts: the probing thread and a rolling update both publish, and an
        # older state written last would stay until the next change.
        self.publishing = threading.Lock()
        self.stopping = threading.Event()
        self.kubeconfig = control_plane.kubeconfig(
            os.path.join(cluster.work, "replica.kubeconfig"),
            cluster.plane.server.replace("127.0.0.1", network.gateway), cluster.plane.pki.ca_cert,
            token=cluster.policy_server_token)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def service(self):
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": SERVICE, "namespace": kubewarden.KUBEWARDEN_NAMESPACE},
                "spec": {"ports": [{"name": "policy-server", "port": kubewarden.SERVICE_PORT,
                                    "targetPort": kubewarden.LISTEN_PORT}]}}

    def add(self, wait=True):
        """A new replica on a new test host; with `wait`, returns once it is
        ready in the EndpointSlice."""
        host = self.network.host(self.next_host)
        self.next_host += 1
        service = f"{SERVICE}.{kubewarden.KUBEWARDEN_NAMESPACE}.svc"
        names = [service, f"{service}.cluster.local"]
        server = kubewarden.PolicyServer(self.cluster.work, self.cluster.plane.pki, self.kubeconfig, workers=WORKERS,
                                         host=host, name=f"replica-{host.address.rsplit('.', 1)[1]}", dns=names)
        server.start(self.policies, wait=False)
        member = {"server": server, "ready": False, "terminating": False, "next_probe": time.monotonic()}
        with self.lock:
            self.members.append(member)
        self.timeline.note(f"{server.name} started")
        if wait:
            self.wait_ready(member)
        return member

    def wait_ready(self, member, seconds=180):
        clusters.wait_until(lambda: member["ready"], seconds, f"{member['server'].name} ready")

    def start(self, count):
        self.cluster.admin.apply(self.service())
        self.publish()
        self.thread.start()
        for _ in range(count):
            self.add(wait=False)
        for member in list(self.members):
            self.wait_ready(member)

    def publish(self):
        """The EndpointSlice as it stands (a failed write is tried again on the next tick)."""
        with self.publishing:
            return self._publish()

    def _publish(self):
        with self.lock:
            endpoints = [{"addresses": [m["server"].address],
                          "conditions": {"ready": m["ready"] and not m["terminating"],
                                         "serving": m["ready"], "terminating": m["terminating"]}}
                         for m in self.members]
        body = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": SLICE, "namespace": kubewarden.KUBEWARDEN_NAMESPACE,
                             "labels": {"kubernetes.io/service-name": SERVICE,
                                        "endpointslice.kubernetes.io/managed-by": "ha-test.node-metadata-policy"}},
                "addressType": "IPv4",
                "ports": [{"name": "policy-server", "port": kubewarden.LISTEN_PORT, "protocol": "TCP"}],
                "endpoints": endpoints}
        try:
            self.cluster.admin.apply(body)
            return True
        except (OSError, control_plane.ApiError):
            return False

    def run(self):
        dirty = False
        while not self.stopping.is_set():
            now = time.monotonic()
            for member in list(self.members):
                server = member["server"]
                if member["terminating"]:
                    continue
                if server.process.poll() is not None:
                    # The kubelet: the container died; not ready, started again.
                    self.timeline.note(f"{server.name} seen dead: not ready, restarted")
                    member["ready"] = False
                    dirty = True
                    server.start(self.policies, wait=False)
                    member["next_probe"] = now + PROBE_PERIOD
                elif now >= member["next_probe"]:
                    member["next_probe"] += PROBE_PERIOD
                    ready = server.ready()
                    if ready != member["ready"]:
                        member["ready"] = ready
                        dirty = True
                        self.timeline.note(f"{server.name} {'ready' if ready else 'not ready'} (probe)")
            if dirty:
                dirty = not self.publish()
            self.stopping.wait(RELIST_PERIOD)

    def kill(self, member):
        self.timeline.note(f"{member['server'].name} SIGKILL")
        member["server"].process.kill()

    def replace(self, old):
        """One step of a rolling update (maxSurge 1, maxUnavailable 0): a new
        replica, and once it is ready, the old one terminating and sent
        SIGTERM at the same moment, SIGKILL after the grace period."""
        self.add(wait=True)
        old["terminating"] = True
        self.publish()
        server = old["server"]
        self.timeline.note(f"{server.name} terminating: SIGTERM")
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=GRACE_PERIOD)
            self.timeline.note(f"{server.name} exited ({server.process.returncode})")
        except subprocess.TimeoutExpired:
            server.process.kill()
            self.timeline.note(f"{server.name} SIGKILL after the grace period")
        with self.lock:
            self.members.remove(old)
        self.publish()

    def stop(self):
        self.stopping.set()
        for member in self.members:
            member["server"].stop()


class Burst:
    """Pods created at `rate` a second in `namespace` until the fault is over
    and at least `count` exist; every Pod's creation and binding times, on
    this client's clock."""

    def __init__(self, cluster, namespace, count, rate, timeline):
        self.cluster, self.namespace, self.count, self.rate = cluster, namespace, count, rate
        self.timeline = timeline
        self.created, self.bound = {}, {}
        self.placed = {}  # each Pod as the watch first saw it bound
        self.fault_done = threading.Event()
        self.stop = threading.Event()
        self.host, self.port = cluster.plane.server.replace("https://", "").split(":")
        self.context = cluster.admin.context

    def connection(self, timeout=10):
        return http.client.HTTPSConnection(self.host, int(self.port), context=self.context, timeout=timeout)

    def create_all(self):
        conn = self.connection()
        spec = clusters.pod_spec()
        i = 0
        start = time.monotonic()
        while not (self.fault_done.is_set() and i >= self.count):
            name = f"p{i}"
            while True:  # the API server or etcd may be down: again until created
                try:
                    conn.request("POST", f"/api/v1/namespaces/{self.namespace}/pods",
                                 json.dumps(clusters.pod(name, spec)), {"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    resp.read()
                    if resp.status < 300 or resp.status == 409:
                        break
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = self.connection()
                time.sleep(0.2)
            self.created[name] = time.monotonic()
            i += 1
            delay = start + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        conn.close()

    def watch(self):
        """Binding times from a watch; when it breaks (the API server
        restarts), a list catches up on what it missed."""
        version = None
        while not self.stop.is_set():
            try:
                if version is None:
                    listed = self.cluster.admin.get(f"/api/v1/namespaces/{self.namespace}/pods")
                    for pod in listed["items"]:
                        self.record(pod)
                    version = listed["metadata"]["resourceVersion"]
                conn = self.connection(timeout=300)
                conn.request("GET", f"/api/v1/namespaces/{self.namespace}/pods?watch=1&resourceVersion={version}"
                                    "&allowWatchBookmarks=true")
                resp = conn.getresponse()
                if resp.status != 200:
                    conn.close()
                    version = None
                    continue
                for event in clusters.watch_events(resp, self.stop):
                    if event.get("type") == "ERROR":
                        version = None
                        break
                    obj = event.get("object", {})
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    self.record(obj)
                conn.close()
            except (OSError, http.client.HTTPException, control_plane.ApiError, ValueError):
                version = None
                time.sleep(0.5)

    def record(self, pod):
        name = pod.get("metadata", {}).get("name", "")
        if pod.get("spec", {}).get("nodeName") and name not in self.bound:
            self.bound[name] = time.monotonic()
            self.placed[name] = pod

    def run(self, fault, settle=120):
        """Plays `fault()` during the burst; returns once every Pod created is
        bound, or `settle` seconds after the last was created. The namespace
        exists already."""
        watcher = threading.Thread(target=self.watch, daemon=True)
        watcher.start()
        creator = threading.Thread(target=self.create_all, daemon=True)
        self.timeline.restart()
        creator.start()
        try:
            fault()
        finally:
            self.fault_done.set()
            creator.join()
        self.timeline.note(f"{len(self.created)} Pods created")
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline and any(name not in self.bound for name in self.created):
            time.sleep(0.2)
        self.stop.set()
        self.timeline.note(f"{sum(1 for n in self.created if n in self.bound)} bound")


def outcome(cluster, burst, nodes):
    """What the API server holds at the end: Pods bound, bound without the
    Node labels the example copies, never bound; the longest wait, and the
    longest time without a binding while Pods waited."""
    pods = {p["metadata"]["name"]: p for p in cluster.pods(burst.namespace)}
    bound = [p for p in pods.values() if p["spec"].get("nodeName")]
    without = []
    for pod in bound:
        labels = nodes[pod["spec"]["nodeName"]]["metadata"].get("labels", {})
        annotations = pod["metadata"].get("annotations", {})
        if any(annotations.get(key) != labels.get(key) for key in WANTED if key in labels):
            without.append(pod["metadata"]["name"])
    waits = [burst.bound[n] - burst.created[n] for n in burst.created if n in burst.bound]
    times = sorted(burst.bound[n] for n in burst.created if n in burst.bound)
    gaps = [(b - a, a) for a, b in zip(times, times[1:])]
    pause, pause_at = max(gaps, default=(0, burst.timeline.t0))
    refused = [e for e in cluster.events(burst.namespace) if ": Scheduled:" not in e]
    return {"created": len(burst.created), "bound": len(bound), "without_metadata": len(without),
            "unbound": len(burst.created) - len(bound), "longest_wait_s": round(max(waits, default=0), 2),
            "longest_pause_s": round(pause, 2), "pause_from_s": round(pause_at - burst.timeline.t0, 1),
            "binding_refusal_events": len(refused), "refusal_example": refused[0][:500] if refused else ""}


class Run:
    def __init__(self, cluster, replicas, timeline, args):
        self.cluster, self.replicas, self.timeline, self.args = cluster, replicas, timeline, args
        self.results = []
        self.failed = 0
        self.index = 0

    def scenario(self, title, pair, fault):
        self.index += 1
        namespace = f"ha-{self.index}-{pair[0].lower()}-{pair[1].lower()}"
        burst = Burst(self.cluster, namespace, self.args.pods, self.args.rate, self.timeline)
        self.cluster.ensure_namespace(namespace, labels={"ha-pair": f"{pair[0]}-{pair[1]}"})
        burst.run(fault)
        found = outcome(self.cluster, burst, self.cluster.nodes)
        found.update(scenario=title, webhook=pair[0], policy=pair[1],
                     timeline=[f"{t:6.1f} s  {text}" for t, text in self.timeline.events])
        self.results.append(found)
        recommended = pair == RECOMMENDED
        ok = found["unbound"] == 0 and (found["without_metadata"] == 0 or not recommended)
        self.failed += 0 if ok else 1
        print(f"\n== {title}, webhook {pair[0]}, policy {pair[1]}{' (recommended)' if recommended else ''}: "
              f"{'ok' if ok else 'FAILED'}")
        for line in found["timeline"]:
            print(f"   {line}")
        print(f"   {found['created']} Pods created, {found['bound']} bound, longest wait {found['longest_wait_s']} s, "
              f"longest time without a binding {found['longest_pause_s']} s (from {found['pause_from_s']} s), "
              f"{found['binding_refusal_events']} scheduler events other than Scheduled")
        if found["refusal_example"]:
            print(f"   e.g. {found['refusal_example']}")
        print(f"{found['without_metadata']} Pods without metadata")
        self.cluster.admin.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
        self.cluster.admin.delete(f"/api/v1/namespaces/{namespace}")
        # The next burst finds the Nodes' room free and a quiet control plane.
        clusters.wait_until(lambda: not self.cluster.admin.exists(f"/api/v1/namespaces/{namespace}"), 180,
                            f"namespace {namespace} deleted")
        return found

    def kill_each(self):
        time.sleep(3)
        for member in list(self.replicas.members):
            self.replicas.kill(member)
            clusters.wait_until(lambda: not member["ready"], 10, f"{member['server'].name} seen dead")
            self.replicas.wait_ready(member)
        time.sleep(3)

    def rolling(self):
        time.sleep(3)
        for old in list(self.replicas.members):
            self.replicas.replace(old)
        time.sleep(3)

    def control_plane(self, component):
        def fault():
            time.sleep(5)
            self.timeline.note(f"{component} SIGKILL")
            self.cluster.plane.kill(component)
            time.sleep(2)
            self.cluster.plane.restart(component)
            self.timeline.note(f"{component} started again")
            if component != "kube-scheduler":
                clusters.wait_until(lambda: self.ready(), 120, "kube-apiserver ready after the restart", 0.1)
                self.timeline.note("kube-apiserver /readyz ok")
            time.sleep(5)
        return fault

    def ready(self):
        try:
            return self.cluster.admin.get("/readyz") == "ok"
        except (OSError, control_plane.ApiError):
            return False


def install(cluster, pairs, module):
    """The recommended ClusterAdmissionPolicy once per failurePolicy pair,
    each held to the namespaces labelled with it; the webhooks name the Service."""
    policies, entries = [], {}
    for webhook_fp, policy_fp in pairs:
        policy = copy.deepcopy(BASE)
        policy["metadata"]["name"] = f"ha-{webhook_fp.lower()}-{policy_fp.lower()}"
        spec = policy["spec"]
        spec["failurePolicy"] = webhook_fp
        spec["settings"]["failurePolicy"] = policy_fp
        spec["namespaceSelector"]["matchExpressions"].append(
            {"key": "ha-pair", "operator": "In", "values": [f"{webhook_fp}-{policy_fp}"]})
        policies.append(policy)
        entries[kubewarden.unique_name(policy)] = kubewarden.policies_entry(policy, module)
    return policies, entries


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=os.path.join(clusters.ROOT, "annotated-policy.wasm"))
    parser.add_argument("--pods", type=int, default=1000, help="Pods a scenario creates at least")
    parser.add_argument("--nodes", type=int, default=40, help="Nodes (copies of the realistic Node)")
    parser.add_argument("--rate", type=float, default=40, help="Pods created a second")
    parser.add_argument("--pairs", default=",".join(f"{w}/{p}" for w, p in PAIRS),
                        help="webhook/policy failurePolicy pairs for the replica faults")
    parser.add_argument("--only", default="", help="comma-separated scenario kinds: kill, rolling, etcd, "
                                                   "kube-apiserver, kube-scheduler")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--report", help="write the results as JSON here")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each line as it comes, also into a log
    if os.geteuid() != 0:
        print("ha test: SKIPPED (network namespaces need root)")
        return 0
    missing = [tool for tool in ("go", "policy-server", "openssl", "ip") if not shutil.which(tool)]
    if missing or not os.path.exists(args.policy):
        print(f"ha test: SKIPPED ({', '.join(missing) or args.policy + ' missing'})")
        return 0
    pairs = [tuple(p.split("/")) for p in args.pairs.split(",")]
    only = set(filter(None, args.only.split(",")))
    wanted = lambda kind: not only or kind in only  # noqa: E731

    work = tempfile.mkdtemp(prefix="ha-test-")
    network = test_hosts.TestNetwork().open()
    # Room for a burst: a Node takes 58 Pods.
    cluster = clusters.Cluster(work, node_count=args.nodes, apiserver_args=["--enable-aggregator-routing=true"],
                               apiserver_ips=[network.gateway])
    timeline = Timeline()
    replicas = None
    run = None
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for component, version in cluster.versions().items():
            print(f"{component:24} {version}")
        cluster.start()
        policies, entries = install(cluster, sorted(set(pairs) | {RECOMMENDED}), args.policy)
        replicas = Replicas(cluster, network, entries, timeline)
        replicas.start(REPLICAS)
        for policy in policies:
            cluster.admin.apply(kubewarden.mutating_webhook_configuration(
                policy, None, replicas.members[0]["server"].ca_bundle, service=SERVICE))
        time.sleep(2)  # the API server's informer picks the webhooks up
        run = Run(cluster, replicas, timeline, args)
        for pair in pairs:
            if wanted("kill"):
                run.scenario("each replica killed in turn", pair, run.kill_each)
            if wanted("rolling"):
                run.scenario("rolling replacement", pair, run.rolling)
        for component in ("etcd", "kube-apiserver", "kube-scheduler"):
            if wanted(component):
                run.scenario(f"{component} killed and started again", RECOMMENDED, run.control_plane(component))
    except KeyboardInterrupt:
        print("interrupted")
        run = run or Run(cluster, replicas, timeline, args)
        run.failed += 1
    except Exception:
        traceback.print_exc()
        run = run or Run(cluster, replicas, timeline, args)
        run.failed += 1
        for name in ("kube-apiserver", "kube-scheduler"):
            print(f"--- {name} log tail\n{cluster.plane.log_tail(name, 10)}")
    finally:
        if replicas:
            replicas.stop()
        cluster.finish(args.keep)
        network.close()
    if args.report:
        with open(args.report, "w") as f:
            json.dump(run.results, f, indent=1)
    print(f"ha-test: {len(run.results) - run.failed} scenarios passed, {run.failed} failed")
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
