"""A running cluster for the cluster tests and the benchmark: the control
plane, the Nodes, policy-server's ServiceAccount bound by examples/rbac.yaml
as given, and helpers to create workloads and wait for the scheduler.
"""
import copy
import json
import os
import shutil
import time

import yaml

import control_plane
import kubewarden
import nodes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def example(name):
    with open(os.path.join(ROOT, "examples", name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


BASE_POLICY = example("cluster-admission-policy.yaml")[0]


def policy_for(name, settings, namespace, rules=None, resources=None, webhook_failure=None):
    """The example ClusterAdmissionPolicy with other settings, held to `namespace`."""
    policy = copy.deepcopy(BASE_POLICY)
    policy["metadata"]["name"] = name
    spec = policy["spec"]
    spec["settings"] = settings
    if rules is not None:
        spec["rules"] = rules
        # The example's match condition is about its own rules (Bindings and
        # placed Pods); settings on other requests go without it, as the
        # recipes do.
        spec.pop("matchConditions", None)
    if resources is not None:
        spec["contextAwareResources"] = resources
    if webhook_failure is not None:
        spec["failurePolicy"] = webhook_failure
    spec["namespaceSelector"]["matchExpressions"].append(
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]})
    return policy


def e2e_case(name):
    """An e2e case of e2e-tests/cases.json: the settings the docs show, run by `make test`."""
    with open(os.path.join(ROOT, "e2e-tests", "cases.json")) as f:
        for case in json.load(f):
            if case["name"] == name:
                return case
    raise KeyError(f"no e2e case {name}")


class Cluster:
    def __init__(self, work, node_count=4, scheduler_qps=None, node_list=None, apiserver_args=(), apiserver_ips=()):
        """`node_list`: the Nodes to register instead of the fixture's
        `node_count` (none when empty); `apiserver_args`: more kube-apiserver
        flags; `apiserver_ips`: where test hosts reach it (control_plane)."""
        self.work = work
        self.scheduler_qps = scheduler_qps
        self.plane = control_plane.ControlPlane(control_plane.build_binaries(), work)
        self.node_count = node_count
        self.node_list = node_list
        self.apiserver_args = apiserver_args
        self.apiserver_ips = apiserver_ips
        self.policy_server = None

    def versions(self):
        found = self.plane.versions()
        found["policy-server"] = control_plane.version_of("policy-server", "--version")
        return found

    def start(self):
        self.plane.start(scheduler_qps=self.scheduler_qps, apiserver_args=self.apiserver_args,
                         apiserver_ips=self.apiserver_ips)
        self.admin = self.plane.admin
        self.nodes = {}
        for node in self.node_list if self.node_list is not None else nodes.fixture_nodes(self.node_count):
            created = nodes.register(self.admin, node)
            self.nodes[created["metadata"]["name"]] = created
        # policy-server's identity: the ServiceAccount examples/rbac.yaml binds,
        # with a token from the TokenRequest API (what its Pod would mount).
        self.ensure_namespace(kubewarden.KUBEWARDEN_NAMESPACE)
        self.admin.create(f"/api/v1/namespaces/{kubewarden.KUBEWARDEN_NAMESPACE}/serviceaccounts",
                          {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "policy-server"}})
        self.rbac = example("rbac.yaml")
        for obj in self.rbac:
            self.admin.apply(obj)
        self.policy_server_token = token = self.admin.create(
            f"/api/v1/namespaces/{kubewarden.KUBEWARDEN_NAMESPACE}/serviceaccounts/policy-server/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": 86400}})["status"]["token"]
        self.policy_server_kubeconfig = control_plane.kubeconfig(
            os.path.join(self.work, "policy-server.kubeconfig"), self.plane.server, self.plane.pki.ca_cert,
            token=token)
        self.policy_server = kubewarden.PolicyServer(self.work, self.plane.pki, self.policy_server_kubeconfig)

    def stop(self):
        if self.policy_server:
            self.policy_server.stop()
        self.plane.stop()

    def finish(self, keep=False):
        """Stops every process, and removes the work folder unless `keep`."""
        self.stop()
        if keep:
            print(f"work folder kept: {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    def ensure_namespace(self, name, labels=None):
        try:
            self.admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": name, "labels": labels or {}}})
        except control_plane.ApiError as e:
            if e.status != 409:
                raise
        wait_default_service_account(self.admin, name)

    def install_webhooks(self, policies):
        for policy in policies:
            self.admin.apply(kubewarden.mutating_webhook_configuration(
                policy, self.policy_server.url, self.policy_server.ca_bundle))
        # The API server picks a new configuration up from its informer.
        time.sleep(2)

    def pod(self, namespace, name):
        return self.admin.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def pods(self, namespace, selector=None):
        path = f"/api/v1/namespaces/{namespace}/pods"
        if selector:
            path += f"?labelSelector={selector}"
        return self.admin.get(path)["items"]

    def events(self, namespace, name=None):
        """`reason: message` of the events in `namespace`, about `name` only when given."""
        path = f"/api/v1/namespaces/{namespace}/events"
        if name:
            path += f"?fieldSelector=involvedObject.name%3D{name}"
        found = []
        for event in self.admin.get(path)["items"]:
            line = f"{event.get('reason')}: {event.get('message')}"
            found.append(line if name else f"{event['involvedObject'].get('name')}: {line}")
        return found


def watch_events(resp, stop):
    """The events of a watch response (one JSON object a line) until it ends
    or `stop` is set."""
    buffer = b""
    while not stop.is_set():
        chunk = resp.read1(65536)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)


def wait_default_service_account(admin, namespace):
    """The ServiceAccount admission plugin refuses Pods until the
    service-account controller has made the namespace's `default`."""
    wait_until(lambda: admin.exists(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"), 60,
               f"ServiceAccount default in {namespace}")


def wait_until(check, seconds, what, interval=0.2):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what}: not after {seconds} s")


def pod_spec(tolerate_bare=False, node_selector=None):
    spec = {"containers": [{"name": "app", "image": "registry.example.com/app:1.0",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
            "terminationGracePeriodSeconds": 0}
    if tolerate_bare:
        spec["tolerations"] = [dict(nodes.BARE_TAINT, operator="Equal")]
    if node_selector:
        spec["nodeSelector"] = node_selector
    return spec


def deployment(name, replicas):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec()}}}


def pod(name, spec=None, labels=None):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": copy.deepcopy(spec) if spec else pod_spec()}
