"""Kyverno's chainsaw tests on the real cluster: `make kyverno-conformance`
plays the plan the simulation wrote (`kyverno-conformance --plan FILE`, one
entry per chainsaw test: the simulation's verdict and the test's operations)
against a real control plane (control_plane.py) with policy-server 1.35 as
the webhook, and prints both verdicts side by side.

What is decided by the simulation's code, once, and only played here: the
settings the policy documents applied so far become (policies.rs), whether
they are refused, and where a test stops being playable (a script, a Kyverno
controller's object, a policy that mutates existing resources). Everything
else is the real API server's: the namespace and defaults of each object,
admission (every webhook request goes to policy-server, whose answer the API
server applies), the scheduler's Bindings, what is read back for an assert.

The cluster is set up as the simulated one is (the plan's `cluster`): its
one Node, `kind-control-plane`, with the same labels, registered Ready; the
Namespaces `default`, `kube-system` and `kyverno`; the admission user
`kubernetes-admin` (group `system:masters`), as in the kind clusters Kyverno's
tests run on. Each test gets a fresh namespace for the simulation's
`chainsaw-conformance`, and its created objects are deleted after it (Pods
with grace 0: there is no kubelet, whose one part the simulation plays,
`status.phase: Running`, the runner plays too), the Node's metadata put back;
a Namespace a later test creates again is waited for.

Policy-server holds one policy per distinct settings of the whole plan
(loading them is one start, 3.3 s for 150 on 2 cores, instead of one per
test); a step that applies a policy points the one MutatingWebhookConfiguration
(what kubewarden-controller writes for a ClusterAdmissionPolicy with rules
`*` and `pods/binding`, CREATE and UPDATE, failurePolicy Fail, kube-system,
kube-public and kube-node-lease left out) at the policy with the settings it
makes. A refusal is checked by starting policy-server with the refused
settings alone: it must refuse to start.

Usage: chainsaw_real.py --policy annotated-policy.wasm --plan PLAN.json
[--only SUBSTRING] [--report OUT.json] [--keep]. SKIPPED (exit 0) without Go,
policy-server or openssl.
"""
import argparse
import copy
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster as clusters  # noqa: E402
import control_plane  # noqa: E402
import kubewarden  # noqa: E402
import nodes  # noqa: E402
from control_plane import ApiError  # noqa: E402

# Seconds, as chainsaw's defaults scaled to a loopback cluster: an apply is
# retried (chainsaw retries until its timeout; a Namespace's ServiceAccount
# may not be there yet), an assert and an error wait for the cluster to get
# there (the scheduler binds asynchronously).
APPLY_SECONDS = 5
ASSERT_SECONDS = 10
ERROR_SECONDS = 5
DELETE_SECONDS = 60
# The API server sees a changed MutatingWebhookConfiguration through an informer.
SWITCH_SECONDS = 1
WEBHOOK = "chainsaw-conformance"
# The simulation's name for a Pod's service account token volume (api_server.rs).
SIMULATED_TOKEN_VOLUME = "kube-api-access-x7k2q"
LEFT_OUT = ["kube-system", "kube-public", "kube-node-lease"]
RULES = [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*", "pods/binding"],
          "operations": ["CREATE", "UPDATE"]}]
# What kind's control-plane Node runs: its kubelet's limit, and room for any request.
NODE_CAPACITY = {"cpu": "64", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"}
# Kinds a test's controllers make: Pods are force-deleted before their
# Namespace, and these first (orphaning their Pods), so that nothing waits
# for a kubelet that is not there.
WORKLOADS = [("/apis/apps/v1", "deployments"), ("/apis/apps/v1", "statefulsets"), ("/apis/apps/v1", "daemonsets"),
             ("/apis/apps/v1", "replicasets"), ("/apis/batch/v1", "cronjobs"), ("/apis/batch/v1", "jobs"),
             ("/api/v1", "replicationcontrollers")]


def group_of(api_version):
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def message(error):
    """The API server's message of an error answer."""
    try:
        return json.loads(error.body).get("message") or error.body
    except (ValueError, AttributeError):
        return str(error)


def substitute(value, old, new):
    """`value` with every string equal to `old` replaced by `new`."""
    if isinstance(value, dict):
        return {k: substitute(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, old, new) for v in value]
    return new if value == old else value


def subset(actual, expected, path=""):
    """Chainsaw's comparison (e2e-tests/src/chainsaw/assert.rs): None when
    `actual` holds everything `expected` asks for, else the first path where
    it does not. A key in parentheses is a JMESPath expression."""
    import jmespath  # .ci/run installs it (PyPI); only this comparison needs it
    if isinstance(expected, dict):
        for key, want in expected.items():
            if key.startswith("(") and key.endswith(")"):
                expression = key[1:-1]
                at = f"{path}/({expression})"
                try:
                    got = jmespath.search(expression, actual)
                except Exception as e:  # jmespath's parse and type errors
                    return f"JMESPath ({expression}): {e}"
            elif key.startswith("~"):
                return f"{path}/{key}: chainsaw's `~` iteration is not supported"
            else:
                at = f"{path}/{key}"
                got = actual.get(key) if isinstance(actual, dict) else None
            if got is None and want is not None:
                return f"{at}: missing"
            difference = subset(got, want, at)
            if difference:
                return difference
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: not a list"
        if len(actual) != len(expected):
            return f"{path}: {len(actual)} elements, expected {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            difference = subset(a, e, f"{path}/{i}")
            if difference:
                return difference
        return None
    number = (int, float)
    if isinstance(expected, number) and not isinstance(expected, bool):
        if isinstance(actual, number) and not isinstance(actual, bool) and actual == expected:
            return None
    elif type(actual) is type(expected) and actual == expected:
        return None
    return f"{path}: {json.dumps(actual)}, expected {json.dumps(expected)}"


class Discovery:
    """The API server's resources: (apiVersion, kind) -> (path prefix, plural, namespaced)."""

    def __init__(self, client):
        self.client = client
        self.refresh()

    def refresh(self):
        found = {}

        def add(prefix, group_version, resources):
            for r in resources:
                if "/" not in r["name"]:
                    found[(group_version, r["kind"])] = (prefix, r["name"], r["namespaced"])

        add("/api/v1", "v1", self.client.get("/api/v1")["resources"])
        for group in self.client.get("/apis")["groups"]:
            for version in group["versions"]:
                gv = version["groupVersion"]
                try:
                    add(f"/apis/{gv}", gv, self.client.get(f"/apis/{gv}")["resources"])
                except ApiError:
                    pass  # an aggregated API that is not available
        self.resources = found

    def find(self, api_version, kind):
        if (api_version, kind) not in self.resources:
            self.refresh()  # a CRD a step created
        return self.resources.get((api_version, kind))

    def of_kind(self, kind):
        """(apiVersion, entry) of a kind named without its group (the core one first)."""
        matches = sorted((gv, e) for (gv, k), e in self.resources.items() if k == kind)
        return min(matches, key=lambda m: "/" in m[0], default=None)

    def readable(self):
        """Every kind, as a policy's contextAwareResources lists it."""
        return [{"apiVersion": gv, "kind": kind} for gv, kind in sorted(self.resources)]


class Verdict(Exception):
    def __init__(self, outcome, why):
        super().__init__(why)
        self.outcome = outcome
        self.why = why


class Runner:
    def __init__(self, cluster, client, discovery, policy, plan, work):
        self.cluster = cluster
        self.client = client
        self.discovery = discovery
        self.policy = policy
        self.work = work
        self.placeholder = plan["test_namespace"]
        self.node_name = next(o for o in plan["cluster"] if o["kind"] == "Node")["metadata"]["name"]
        self.node = client.get(f"/api/v1/nodes/{self.node_name}")
        # Kinds the plans apply as policy documents: an assert on one reads
        # the document the test applied (these kinds are not served here).
        self.policy_kinds = {(group_of(o["document"]["apiVersion"]), o["document"]["kind"])
                             for t in plan["tests"] for o in t["ops"] if o["op"] == "policy"}
        self.ids = {}
        self.current = None

    # --- policy-server -------------------------------------------------
    def policy_id(self, settings):
        return self.ids.setdefault(json.dumps(settings, sort_keys=True), f"cs-{len(self.ids)}")

    def admission_policy(self, pid, settings):
        return {"apiVersion": "policies.kubewarden.io/v1", "kind": "ClusterAdmissionPolicy",
                "metadata": {"name": pid},
                "spec": {"module": "file://" + self.policy, "mutating": True, "rules": RULES,
                         "failurePolicy": "Fail", "timeoutSeconds": 10, "backgroundAudit": False,
                         "namespaceSelector": {"matchExpressions": [
                             {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": LEFT_OUT}]},
                         "contextAwareResources": self.discovery.readable(), "settings": settings}}

    def start_policy_server(self, settings_list):
        entries = {}
        for settings in settings_list:
            policy = self.admission_policy(self.policy_id(settings), settings)
            entries[kubewarden.unique_name(policy)] = kubewarden.policies_entry(policy, self.policy)
        self.entries = entries
        return self.cluster.policy_server.start(entries)

    def refuses(self, settings, name):
        """policy-server's verdict on settings the simulation refused: its
        message when it refuses to start with them, None when it starts."""
        work = os.path.join(self.work, f"refused-{name}")
        os.makedirs(work, exist_ok=True)
        server = kubewarden.PolicyServer(work, self.cluster.plane.pki, self.cluster.policy_server_kubeconfig)
        policy = self.admission_policy("refused", settings)
        try:
            started = server.start({kubewarden.unique_name(policy): kubewarden.policies_entry(policy, self.policy)},
                                   ready_seconds=120)
        finally:
            server.stop()
        if started:
            return None
        log = control_plane.tail(server.log_path, 5).strip().splitlines()
        return next((line for line in log if "invalid" in line), log[-1] if log else "no log")

    def use(self, settings):
        """Points the webhook at the policy with `settings` (None: no webhook)."""
        path = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{WEBHOOK}"
        if settings is None:
            if self.current is not None:
                self.client.delete(path)
                time.sleep(SWITCH_SECONDS)
            self.current = None
            return
        pid = self.policy_id(settings)
        if pid == self.current:
            return
        config = kubewarden.mutating_webhook_configuration(self.admission_policy(pid, settings),
                                                          self.cluster.policy_server.url,
                                                          self.cluster.policy_server.ca_bundle)
        config["metadata"]["name"] = WEBHOOK
        self.cluster.admin.apply(config)
        time.sleep(SWITCH_SECONDS)
        self.current = pid

    # --- objects -------------------------------------------------------
    def locate(self, doc, namespace):
        """(collection path, object path or None, the document placed in its namespace)."""
        doc = copy.deepcopy(doc)
        api_version, kind = doc.get("apiVersion", ""), doc.get("kind", "")
        entry = self.discovery.find(api_version, kind)
        if entry is None:
            raise LookupError(f"{api_version} {kind} is not served by the API server")
        prefix, plural, namespaced = entry
        meta = doc.setdefault("metadata", {})
        if namespaced and not meta.get("namespace"):
            meta["namespace"] = namespace
        collection = f"{prefix}/{plural}"
        if namespaced and meta.get("namespace"):
            collection = f"{prefix}/namespaces/{meta['namespace']}/{plural}"
        path = f"{collection}/{meta['name']}" if meta.get("name") else None
        return collection, path, doc

    def read(self, doc, namespace):
        """Chainsaw's candidates for an expected document: the named object,
        or the objects of its kind (in its namespace, with its labels)."""
        collection, path, doc = self.locate(doc, namespace)
        if path:
            try:
                return [self.client.get(path)]
            except ApiError as e:
                if e.status == 404:
                    return []
                raise
        meta = doc["metadata"]
        query = {}
        if meta.get("labels"):
            query["labelSelector"] = ",".join(f"{k}={v}" for k, v in meta["labels"].items())
        listed = self.client.get(collection + ("?" + urllib.parse.urlencode(query) if query else ""))
        for item in listed["items"]:
            # A list's items carry no kind, as client-go's decoder sees it.
            item.setdefault("apiVersion", doc["apiVersion"])
            item.setdefault("kind", doc["kind"])
        return listed["items"]

    def write(self, verb, doc, namespace, state):
        collection, path, doc = self.locate(doc, namespace)
        current = None
        if verb != "create":
            try:
                current = self.client.get(path)
            except ApiError as e:
                if e.status != 404:
                    raise
        if current is None:
            if verb in ("update", "patch"):
                raise Verdict("fail", "does not exist")
            created = self.client.create(collection, doc)
            state["created"].append((path, doc["kind"], doc["metadata"].get("namespace")))
            return created
        doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if verb == "update":
            return self.client.request("PUT", path, doc)
        return self.client.merge_patch(path, doc)

    def delete(self, path, kind, wait=True):
        """Deletes the object; with `wait`, True once it is gone."""
        grace = "?gracePeriodSeconds=0" if kind == "Pod" else ""
        if kind == "Namespace":
            self.empty_namespace(path.rsplit("/", 1)[1])
        self.client.delete(path + grace)
        deadline = time.time() + DELETE_SECONDS
        while wait and time.time() < deadline:
            try:
                self.client.get(path)
            except ApiError as e:
                if e.status == 404:
                    return True
                raise
            if kind == "Namespace":
                self.empty_namespace(path.rsplit("/", 1)[1])
            time.sleep(0.5)
        return not wait

    def empty_namespace(self, name):
        """Deletes the namespace's workload controllers (orphaning their Pods)
        and its Pods with grace 0: no kubelet will ever confirm a Pod gone."""
        for prefix, plural in WORKLOADS:
            self.client.request("DELETE", f"{prefix}/namespaces/{name}/{plural}",
                                {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"})
        self.client.request("DELETE", f"/api/v1/namespaces/{name}/pods?gracePeriodSeconds=0")

    def restore_node(self):
        """The Node's labels, annotations and taints as the run began."""
        now = self.client.get(f"/api/v1/nodes/{self.node_name}")
        patch = {}
        for field in ("labels", "annotations"):
            before, after = self.node["metadata"].get(field, {}), now["metadata"].get(field, {})
            change = {k: None for k in after if k not in before}
            change.update({k: v for k, v in before.items() if after.get(k) != v})
            if change:
                patch.setdefault("metadata", {})[field] = change
        if now.get("spec", {}).get("taints") != self.node.get("spec", {}).get("taints"):
            patch["spec"] = {"taints": self.node.get("spec", {}).get("taints")}
        if patch:
            self.client.merge_patch(f"/api/v1/nodes/{self.node_name}", patch)

    # --- a test --------------------------------------------------------
    def run(self, test, namespace):
        # Kinds some step applied (and those the cluster starts with): an
        # assert on another kind waits for a controller, as in the simulation.
        state = {"created": [], "policies": [], "notes": [], "kinds": {"Node", "Namespace", "ServiceAccount"}}
        ops = substitute(test["ops"], self.placeholder, namespace)
        self.await_namespaces(ops)
        self.cluster.ensure_namespace(namespace)
        try:
            for op in ops:
                self.play(op, namespace, state)
            outcome, why = "pass", ""
            if test["simulation"]["outcome"] == "pass":
                objects = substitute(test.get("simulated_objects", []), self.placeholder, namespace)
                state["objects"] = self.compare_objects(objects, namespace)
        except Verdict as v:
            outcome, why = v.outcome, v.why
        except ApiError as e:
            outcome, why = "fail", f"the API server: HTTP {e.status}: {message(e)}"
        finally:
            self.cleanup(state, namespace)
        image = test.get("registry_image")
        if outcome == "fail" and image:
            # policy-server asked the registry, as it would in a cluster, and
            # this machine reaches none (the simulation has none either).
            outcome, why = "skipped", f"reads image {image} from its registry, which this machine cannot reach ({why})"
        return outcome, why, state["notes"], state.get("objects")

    def compare_objects(self, objects, namespace):
        """Each object the simulation ended the test with, against the real
        API server's: everything the simulation stored must be there (what
        the real server adds, its defaults and bookkeeping, is not compared).
        The differences, one per object."""
        # As an assert, the comparison waits for the cluster to get there
        # (the scheduler binds, the kubelet's part runs Pods).
        deadline = time.time() + ASSERT_SECONDS
        pending = list(objects)
        while True:
            self.kubelet()
            differences = {}
            for simulated in pending:
                meta = simulated.get("metadata", {})
                what = f"{simulated.get('kind')} " \
                       f"{meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta.get('name')}"
                try:
                    found = self.read(simulated, namespace)
                except LookupError:
                    continue
                if not found:
                    differences[what] = (simulated, "stored by the simulation, not in the real cluster")
                    continue
                real = found[0]
                # The token volume's name ends in five random characters.
                token = next((v["name"] for v in real.get("spec", {}).get("volumes", [])
                              if v.get("name", "").startswith("kube-api-access-")), None)
                expected = substitute(simulated, SIMULATED_TOKEN_VOLUME, token) if token else simulated
                difference = subset(real, expected)
                if difference:
                    differences[what] = (simulated, difference)
            pending = [simulated for simulated, _ in differences.values()]
            if not pending or time.time() > deadline:
                break
            time.sleep(0.5)
        return {"compared": len(objects), "differences": [f"{w}: {d}" for w, (_, d) in differences.items()]}

    def await_namespaces(self, ops):
        """Waits until a Namespace the test applies is no longer being
        deleted by an earlier test's cleanup (which does not wait for it)."""
        for op in ops:
            doc = op.get("document") or {}
            if op["op"] != "apply" or doc.get("kind") != "Namespace":
                continue
            path = f"/api/v1/namespaces/{doc['metadata']['name']}"
            try:
                if self.client.get(path)["metadata"].get("deletionTimestamp"):
                    self.delete(path, "Namespace")
            except ApiError as e:
                if e.status != 404:
                    raise

    def play(self, op, namespace, state):
        step = op.get("step")
        kind = op["op"]
        if kind == "stop":
            if op["outcome"] == "refused" and "settings" in op:
                refusal = self.refuses(op["settings"], f"{namespace}")
                if refusal is None:
                    raise Verdict("fail", f"policy-server loaded the settings the simulation refused ({op['why']})")
                raise Verdict("refused", f"policy-server refused to start: {refusal}")
            raise Verdict(op["outcome"], f"not played: {op['why']}")
        if kind == "policy":
            state["policies"].append(op["document"])
            if op.get("background"):
                self.background(op["background"], step, state)
            self.use(op["settings"])
        elif kind == "apply":
            self.apply(op, namespace, state)
        elif kind == "assert":
            for doc in op["documents"]:
                self.assert_(doc, namespace, step, state)
        elif kind == "error":
            for doc in op["documents"]:
                self.error(doc, namespace, step)
        elif kind == "delete":
            for doc in op["documents"]:
                try:
                    candidates = self.read(doc, namespace)
                except LookupError as e:
                    raise Verdict("fail", f"step {step} deletes: {e}")
                for found in candidates:
                    _, path, _ = self.locate(found, namespace)
                    if not self.delete(path, found["kind"]):
                        raise Verdict("fail", f"step {step}: {found['kind']} {path} not deleted")
        elif kind == "policy-ready":
            if self.current is None and not state["policies"]:
                raise Verdict("fail", f"step {step} waits for a policy, none is loaded")
        elif kind == "note":
            state["notes"].append(op["note"])
        # `sleep`: nothing to wait for beyond what asserts wait for.

    def background(self, background, step, state):
        """Kyverno's background controller as the simulation plays it (its
        rule, without targets, on every existing object of the kind), here
        as an UPDATE through the API server: an empty merge patch."""
        found = self.discovery.of_kind(background["kind"])
        if found is None:
            raise Verdict("fail", f"step {step}: no kind {background['kind']}")
        api_version, (prefix, plural, _) = found
        self.use(background["settings"])
        for item in self.client.get(f"{prefix}/{plural}")["items"]:
            meta = item["metadata"]
            where = f"{prefix}/namespaces/{meta['namespace']}/{plural}" if meta.get("namespace") else f"{prefix}/{plural}"
            self.client.merge_patch(f"{where}/{meta['name']}", {})
        state["notes"].append(f"step {step}: Kyverno's background controller played as an UPDATE of every "
                              f"{background['kind']} through the API server")

    def apply(self, op, namespace, state):
        doc, step = op["document"], op["step"]
        what = f"{doc.get('kind')} {doc.get('metadata', {}).get('name', '')}"
        state["kinds"].add(doc.get("kind"))
        deadline = time.time() + APPLY_SECONDS
        while True:
            try:
                self.write(op["verb"], doc, namespace, state)
                error = None
            except LookupError as e:
                raise Verdict("fail", f"step {step}: {what}: {e}")
            except Verdict as v:
                raise Verdict(v.outcome, f"step {step}: {what} {v.why}")
            except ApiError as e:
                error = message(e)
            if op["expect"] == "refusal":
                if error is None:
                    raise Verdict("fail", f"step {step} expects {what} to be refused; the API server admitted it")
                state["notes"].append(f"step {step}: {what} refused as expected: {error}")
                return
            if error is None:
                return
            if time.time() > deadline or "denied the request" in error:
                raise Verdict("fail", f"step {step}: {what} rejected: {error}")
            time.sleep(0.25)

    def assert_(self, doc, namespace, step, state):
        what = f"{doc.get('kind')} {doc.get('metadata', {}).get('name', '')}"
        group_kind = (group_of(doc.get("apiVersion", "")), doc.get("kind"))
        applied = [p for p in state["policies"] if (group_of(p.get("apiVersion", "")), p.get("kind")) == group_kind]
        if group_kind in self.policy_kinds and applied:
            # A policy document is the settings, not an object here; its
            # readiness is policy-server having loaded them.
            expected = {k: v for k, v in doc.items() if k != "status"}
            differences = [subset(dict(p, apiVersion=doc.get("apiVersion")), expected) for p in applied]
            if None in differences:
                return
            raise Verdict("fail", f"step {step} asserts {what}: {differences[0]}")
        deadline = time.time() + ASSERT_SECONDS
        difference = None
        while True:
            self.kubelet()
            try:
                candidates = self.read(doc, namespace)
            except LookupError as e:
                raise Verdict("skipped", f"step {step} asserts {what}: {e} (a Kyverno controller's kind)")
            for candidate in candidates:
                found = subset(candidate, doc)
                if found is None:
                    return
                difference = difference or found
            if time.time() > deadline:
                break
            time.sleep(0.25)
        if doc.get("kind") not in state["kinds"]:
            # As in the simulation: no step applies the kind, a controller
            # (Kyverno's, where nothing here matches) would make it.
            raise Verdict("skipped", f"step {step} asserts {what}, which a controller would create (no step "
                                     f"applies a {doc.get('kind')}): "
                                     f"{difference or 'none'} after {ASSERT_SECONDS} s")
        if difference:
            raise Verdict("fail", f"step {step} asserts {what}: {difference}")
        raise Verdict("fail", f"step {step} asserts {what}: not in the cluster")

    def kubelet(self):
        """The kubelet's part the simulation plays too: a Pod bound to the
        Node runs (`status.phase: Running`). Nothing else of its status."""
        pending = self.client.get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{self.node_name},"
                                  "status.phase%3DPending")["items"]
        for pod in pending:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            try:
                self.client.merge_patch(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                                        {"status": {"phase": "Running"}})
            except ApiError as e:
                if e.status not in (404, 409):
                    raise

    def error(self, doc, namespace, step):
        deadline = time.time() + ERROR_SECONDS
        while True:
            self.kubelet()
            try:
                candidates = self.read(doc, namespace)
            except LookupError:
                return  # nothing of a kind not served matches
            if not any(subset(c, doc) is None for c in candidates):
                return
            if time.time() > deadline:
                raise Verdict("fail", f"step {step}: error expects no {doc.get('kind')} "
                                      f"{doc.get('metadata', {}).get('name', '')} like this, one is in the cluster")
            time.sleep(0.25)

    def cleanup(self, state, namespace):
        self.use(None)
        for path, kind, _ in reversed(state["created"]):
            if path:
                self.delete(path, kind, wait=False)
        self.restore_node()
        self.delete(f"/api/v1/namespaces/{namespace}", "Namespace", wait=False)
        # Pods a deleted controller left terminating anywhere.
        for pod in self.client.get("/api/v1/pods")["items"]:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") and meta["namespace"] not in LEFT_OUT:
                self.client.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}?gracePeriodSeconds=0")


def conformance_node(simulated):
    """The simulation's Node with what the scheduler needs: Ready, room."""
    node = copy.deepcopy(simulated)
    status = copy.deepcopy(nodes.large_node()["status"])
    status["nodeInfo"].update(simulated.get("status", {}).get("nodeInfo", {}))
    status["capacity"].update(NODE_CAPACITY)
    status["allocatable"].update(NODE_CAPACITY)
    status.pop("images", None)
    node["status"] = status
    return node


def read_plans(paths):
    plan = {"tests": []}
    for path in paths:
        with open(path) as f:
            one = json.load(f)
        plan["cluster"], plan["test_namespace"] = one["cluster"], one["test_namespace"]
        plan["tests"] += one["tests"]
    return plan


def counts(results, column):
    found = {"pass": 0, "fail": 0, "refused": 0, "skipped": 0}
    for r in results:
        found[r[column]["outcome"]] += 1
    return found


def side_by_side(results):
    """Per group of tests (the first part of their path) and overall: the
    simulation's and the real cluster's counts. Returns how many verdicts
    differ."""
    groups = {}
    for r in results:
        groups.setdefault(r["test"].split("/")[0], []).append(r)
    header = f"{'tests':44} {'simulation p/f/r/s':>20} {'real cluster p/f/r/s':>22}"
    print("chainsaw side by side (pass/fail/refused/skipped):")
    print(header)
    for name, rs in sorted(groups.items()) + [("all", results)]:
        sim, real = counts(rs, "simulation"), counts(rs, "real")
        fmt = lambda c: "{pass}/{fail}/{refused}/{skipped}".format(**c)  # noqa: E731
        print(f"{name[:44]:44} {fmt(sim):>20} {fmt(real):>22}")
    compared = [r for r in results if r.get("objects")]
    differences = [(r["test"], d) for r in compared for d in r["objects"]["differences"]]
    print(f"objects compared where both passed: {sum(r['objects']['compared'] for r in compared)} "
          f"in {len(compared)} tests, {len(differences)} differ:")
    for test, difference in differences:
        print(f"  {test}: {difference}")
    differing = [r for r in results if r["simulation"]["outcome"] != r["real"]["outcome"]]
    print(f"where the verdicts differ ({len(differing)}):")
    for r in differing:
        print(f"  {r['test']}: simulation {r['simulation']['outcome']}"
              f"{' (' + r['simulation']['why'] + ')' if r['simulation']['why'] else ''}; "
              f"real cluster {r['real']['outcome']}{' (' + r['real']['why'] + ')' if r['real']['why'] else ''}")
    return len(differing)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=os.path.join(clusters.ROOT, "annotated-policy.wasm"))
    parser.add_argument("--plan", action="append", required=True, help="a plan kyverno-conformance wrote")
    parser.add_argument("--only", help="play only the tests whose path contains this")
    parser.add_argument("--report", help="write every verdict as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, certificates)")
    args = parser.parse_args()
    missing = [tool for tool in ("go", "policy-server", "openssl") if not shutil.which(tool)]
    if missing or not os.path.exists(args.policy):
        why = f"{', '.join(missing)} not on PATH" if missing else f"{args.policy} missing (needs kwctl)"
        print(f"chainsaw on the real cluster: SKIPPED ({why}); the simulation's verdicts above stand alone")
        return 0
    plan = read_plans(args.plan)
    tests = [t for t in plan["tests"] if not args.only or args.only in t["test"]]
    if not tests:
        print("chainsaw on the real cluster: no chainsaw test to play")
        return 0
    policy = os.path.abspath(args.policy)

    work = tempfile.mkdtemp(prefix="chainsaw-real-")
    simulated_node = next(o for o in plan["cluster"] if o["kind"] == "Node")
    cluster = clusters.Cluster(work, node_list=[conformance_node(simulated_node)], apiserver_args=[
        # Kyverno's tests apply MutatingAdmissionPolicyBindings in every version.
        "--runtime-config", "admissionregistration.k8s.io/v1alpha1=true,admissionregistration.k8s.io/v1beta1=true"])
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    results = []
    started_at = time.time()
    try:
        for component, version in cluster.versions().items():
            print(f"{component:24} {version}")
        cluster.start()
        # The Namespaces the simulated cluster has; the admission user of kind.
        for obj in plan["cluster"]:
            if obj["kind"] == "Namespace":
                cluster.ensure_namespace(obj["metadata"]["name"])
        admin = control_plane.Client(cluster.plane.server, cluster.plane.pki.ca_cert,
                                     cert=cluster.plane.pki.issue("kubernetes-admin",
                                                                  "/CN=kubernetes-admin/O=system:masters"))
        # Kyverno reads what its policies name; so may this policy here.
        cluster.admin.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                             "metadata": {"name": "chainsaw-conformance-read-all"},
                             "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]})
        cluster.admin.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                             "metadata": {"name": "chainsaw-conformance-read-all"},
                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                         "name": "chainsaw-conformance-read-all"},
                             "subjects": [{"kind": "ServiceAccount", "name": "policy-server",
                                           "namespace": kubewarden.KUBEWARDEN_NAMESPACE}]})
        discovery = Discovery(admin)
        runner = Runner(cluster, admin, discovery, policy, plan, work)
        namespaces = {t["test"]: f"chainsaw-{i:03d}" for i, t in enumerate(tests)}
        every = []
        for t in tests:
            for op in substitute(t["ops"], plan["test_namespace"], namespaces[t["test"]]):
                if op["op"] == "policy":
                    every += [op["settings"]] + ([op["background"]["settings"]] if op.get("background") else [])
        every = [s for s in every if s is not None]
        t0 = time.time()
        if not runner.start_policy_server(every):
            raise RuntimeError("policy-server did not start with the plan's settings:\n"
                               + control_plane.tail(cluster.policy_server.log_path, 20))
        print(f"policy-server ready with {len(runner.entries)} policies after {time.time() - t0:.1f} s")
        for t in tests:
            t0 = time.time()
            try:
                outcome, why, notes, objects = runner.run(t, namespaces[t["test"]])
            except Exception as e:  # the harness, not the test: say so and go on
                outcome, why, notes, objects = "fail", f"the runner: {e!r}", [], None
                traceback.print_exc()
            results.append({"test": t["test"], "simulation": t["simulation"],
                            "real": {"outcome": outcome, "why": why}, "notes": notes, "objects": objects,
                            "seconds": round(time.time() - t0, 1)})
            shown = "FAIL" if outcome == "fail" else outcome
            print(f"chainsaw-real {shown:8} {t['test']}{': ' + why if why else ''}")
            for note in notes:
                print(f"  note   {note}")
            for difference in (objects or {}).get("differences", []):
                print(f"  object {difference}")
            sys.stdout.flush()
    except KeyboardInterrupt:
        print("interrupted")
    except Exception:
        traceback.print_exc()
        for name in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
            print(f"--- {name} log tail\n{cluster.plane.log_tail(name, 10)}")
        print(f"--- policy-server log tail\n{control_plane.tail(cluster.policy_server.log_path, 10)}"
              if cluster.policy_server else "")
    finally:
        cluster.finish(args.keep)
    real = counts(results, "real")
    print("chainsaw-real summary: {pass} pass, {fail} fail, {refused} refused, {skipped} skipped".format(**real)
          + f" ({len(results)}{' of ' + str(len(tests)) if len(results) < len(tests) else ''} tests, "
            f"{time.time() - started_at:.0f} s)")
    differing = side_by_side(results)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(results, f, indent=1)
    # A verdict of the real cluster that is not the simulation's, or a test
    # not played (the run stopped), fails the run.
    if differing or len(results) < len(tests):
        print(f"chainsaw-real: FAILED ({differing} verdicts differ from the simulation's, "
              f"{len(tests) - len(results)} tests not played)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
