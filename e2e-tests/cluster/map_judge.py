"""Kubernetes' own MutatingAdmissionPolicy as the judge of this policy's.

Each case is one MutatingAdmissionPolicy document. The API server runs it
in-process (with a MutatingAdmissionPolicyBinding held to one namespace), and
this policy runs the same document as its settings, as the webhook of a
second namespace. The same Pod is created in both; the objects the API server
stores (or its refusals) are compared.

The cases: every MutatingAdmissionPolicy of the e2e cases that loads, the
parameters example of docs/cel.md, cases written here over Pods and Bindings
(ApplyConfiguration merges of maps and associative lists, atomic fields,
JSONPatch operations, escapes, failed tests, match conditions,
failurePolicy), and the inputs of kubernetes/apiserver's own patch tables
(patchtables/) over Deployments, created as dry runs.
"""
import copy
import json
import os
import re
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import cluster as clusters
import control_plane

MAP = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy"}
PODS = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
BINDINGS = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/binding"]}]


def document(name, rules, mutations, **spec):
    doc = copy.deepcopy(MAP)
    doc["metadata"] = {"name": name}
    doc["spec"] = {"matchConstraints": {"resourceRules": rules}, "mutations": mutations,
                   "reinvocationPolicy": "Never", **spec}
    return doc


def apply_configuration(expression):
    return {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}


def json_patch(expression):
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}


def written_cases():
    """(name, document, workload): the workload is `pod` (created unplaced, the
    mutation sees the Pod), `binding` (the same Pod, the mutation sees its
    Binding) or `placed` (created with spec.nodeName)."""
    ac, jp = apply_configuration, json_patch
    return [
        ("ac-labels-annotations-merge", document("c", PODS, [ac(
            'Object{metadata: Object.metadata{labels: {"team": "web", "app": "changed"}, '
            'annotations: {"example.com/a": "1"}}}')]), "pod"),
        ("ac-container-env-by-name", document("c", PODS, [ac(
            'Object{spec: Object.spec{containers: [Object.spec.containers{name: "app", '
            'env: [Object.spec.containers.env{name: "ZONE", value: "a"}]}]}}')]), "pod"),
        ("ac-new-container-appended", document("c", PODS, [ac(
            'Object{spec: Object.spec{containers: [Object.spec.containers{name: "sidecar", '
            'image: "registry.example.com/sidecar:1"}]}}')]), "pod"),
        ("ac-atomic-tolerations-refused", document("c", PODS, [ac(
            'Object{spec: Object.spec{tolerations: [Object.spec.tolerations{key: "k", operator: "Exists"}]}}')]),
         "pod"),
        ("ac-undeclared-field-refused", document("c", PODS, [ac(
            'Object{metadata: Object.metadata{label: {"a": "b"}}}')]), "pod"),
        ("ac-two-mutations-in-order", document("c", PODS, [
            ac('Object{metadata: Object.metadata{labels: {"step": "one"}}}'),
            ac('Object{metadata: Object.metadata{annotations: {"seen": object.metadata.labels["step"]}}}')]), "pod"),
        ("ac-match-condition-false", document("c", PODS, [ac(
            'Object{metadata: Object.metadata{labels: {"never": "set"}}}')],
            matchConditions=[{"name": "never", "expression": "object.metadata.name == 'nobody'"}]), "pod"),
        ("ac-variables", document("c", PODS, [ac(
            'Object{metadata: Object.metadata{annotations: {"count": string(variables.n)}}}')],
            variables=[{"name": "n", "expression": "size(object.spec.containers)"}]), "pod"),
        ("ac-runtime-error-ignore", document("c", PODS, [ac(
            'Object{metadata: Object.metadata{annotations: {"x": object.metadata.labels["missing"]}}}')],
            failurePolicy="Ignore"), "pod"),
        ("ac-runtime-error-fail", document("c", PODS, [ac(
            'Object{metadata: Object.metadata{annotations: {"x": object.metadata.labels["missing"]}}}')],
            failurePolicy="Fail"), "pod"),
        ("ac-binding-annotation-from-target", document("c", BINDINGS, [ac(
            'Object{metadata: Object.metadata{annotations: {"example.com/node": object.target.name}}}')]),
         "binding"),
        ("ac-binding-labels", document("c", BINDINGS, [ac(
            'Object{metadata: Object.metadata{labels: {"example.com/bound": "yes"}}}')]), "binding"),
        ("ac-placed-pod-node-label", document("c", PODS, [ac(
            'Object{metadata: Object.metadata{labels: {"example.com/node": object.spec.nodeName}}}')]), "placed"),
        ("jp-add-escaped-annotation", document("c", PODS, [jp(
            '[JSONPatch{op: "add", path: "/metadata/annotations", value: {}}, '
            'JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("example.com/a~b"), '
            'value: "v"}]')]), "pod"),
        ("jp-test-fails-leaves-object", document("c", PODS, [jp(
            '[JSONPatch{op: "test", path: "/metadata/name", value: "other"}, '
            'JSONPatch{op: "add", path: "/metadata/labels/x", value: "y"}]')]), "pod"),
        ("jp-test-holds", document("c", PODS, [jp(
            '[JSONPatch{op: "test", path: "/metadata/labels/app", value: "judge"}, '
            'JSONPatch{op: "add", path: "/metadata/labels/x", value: "y"}]')]), "pod"),
        ("jp-remove-missing-refused", document("c", PODS, [jp(
            '[JSONPatch{op: "remove", path: "/metadata/labels/missing"}]')]), "pod"),
        ("jp-replace-missing-member", document("c", PODS, [jp(
            '[JSONPatch{op: "replace", path: "/metadata/labels/missing", value: "set"}]')]), "pod"),
        ("jp-env-append", document("c", PODS, [jp(
            '[JSONPatch{op: "add", path: "/spec/containers/0/env", value: []}, '
            'JSONPatch{op: "add", path: "/spec/containers/0/env/-", value: {"name": "A", "value": "1"}}]')]), "pod"),
        ("jp-copy-and-move", document("c", PODS, [jp(
            '[JSONPatch{op: "copy", from: "/metadata/labels/app", path: "/metadata/labels/copied"}, '
            'JSONPatch{op: "move", from: "/metadata/labels/copied", path: "/metadata/labels/moved"}]')]), "pod"),
        ("jp-index-out-of-range", document("c", PODS, [jp(
            '[JSONPatch{op: "add", path: "/spec/containers/5/env", value: []}]')]), "pod"),
        ("jp-undeclared-field-refused", document("c", PODS, [jp(
            '[JSONPatch{op: "add", path: "/spec/nodeSelectorx", value: {"a": "b"}}]')]), "pod"),
        ("jp-binding-annotations", document("c", BINDINGS, [jp(
            '[JSONPatch{op: "add", path: "/metadata/annotations", value: {"example.com/zone-of": object.target.name}}]'
        )]), "binding"),
    ]


def e2e_cases():
    """The e2e cases' MutatingAdmissionPolicy documents that load."""
    with open(f"{clusters.ROOT}/e2e-tests/cases.json") as f:
        cases = json.load(f)
    found = []
    for case in cases:
        settings = case.get("settings")
        if not isinstance(settings, dict) or settings.get("kind") != "MutatingAdmissionPolicy":
            continue
        if "settings_invalid" in case.get("expect", {}):
            continue
        rules = settings["spec"]["matchConstraints"]["resourceRules"]
        workload = "binding" if any("pods/binding" in r.get("resources", []) for r in rules) else "pod"
        found.append((f"e2e-{case['name']}", settings, workload))
    return found


def docs_params_case():
    """docs/cel.md's parameters example: Kubernetes reads them from a ConfigMap
    through the binding's paramRef, this policy takes them inline."""
    doc = document("team", BINDINGS, [apply_configuration(
        'Object{metadata: Object.metadata{annotations: {"team": params.data.team}}}')],
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"})
    return ("docs-cel-params", doc, "binding", {"data": {"team": "web"}})


def document_cases():
    """Documents whose validity is the question: (name, document). Kubernetes
    decides by creating it (a dry run); this policy by loading it as settings."""
    ac = apply_configuration('Object{metadata: Object.metadata{labels: {"a": "b"}}}')
    missing_reinvocation = document("c", PODS, [ac])
    del missing_reinvocation["spec"]["reinvocationPolicy"]
    delete_rules = copy.deepcopy(PODS)
    delete_rules[0]["operations"] = ["DELETE"]
    return [
        ("valid", document("c", PODS, [ac])),
        ("no-reinvocation-policy", missing_reinvocation),
        ("bad-reinvocation-policy", document("c", PODS, [ac], reinvocationPolicy="Always")),
        ("no-mutations", document("c", PODS, [])),
        ("delete-operation", document("c", delete_rules, [ac])),
        ("no-resource-rules", document("c", [], [ac])),
        ("bad-failure-policy", document("c", PODS, [ac], failurePolicy="Sometimes")),
        ("expression-does-not-compile", document("c", PODS, [apply_configuration("Object{metadata: ")])),
        ("json-patch-without-expression", document("c", PODS, [{"patchType": "JSONPatch"}])),
        ("unknown-patch-type", document("c", PODS, [{"patchType": "StrategicMerge"}])),
    ]


DEPLOYMENTS = [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["deployments"]}]


def kubernetes_table_cases():
    """kubernetes/apiserver's patch tables (TestJSONPatch, TestApplyConfiguration),
    read by patchtables/ from the module go.mod requires: each expression as a
    MutatingAdmissionPolicy over Deployments, its object completed into one the
    API server validates (a name, a selector, a container with an image). The
    tables' expected objects are checked in-process by `make k8s-patch-tables`;
    here the API server's own result is the judge."""
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "cases.json")
        subprocess.run(["go", "run", "./patchtables", "-out", out], cwd=clusters.HERE, check=True)
        with open(out) as f:
            cases = json.load(f)
    found = []
    for case in cases:
        mutation = (json_patch if case["patchType"] == "JSONPatch" else apply_configuration)(case["expression"])
        stem = case["file"].removesuffix("_test.go").replace("_", "-")
        found.append((f"k8s-{stem}: {case['name']}", document("c", DEPLOYMENTS, [mutation]),
                      ("deployment", valid_deployment(case["object"]))))
    return found


def valid_deployment(obj):
    """The Deployment with what validation requires and the tables leave out;
    every field the tables set is kept."""
    d = copy.deepcopy(obj)
    d.pop("status", None)
    d.update(apiVersion="apps/v1", kind="Deployment")
    d["metadata"] = dict(d.get("metadata") or {}, name="judge")
    spec = d.setdefault("spec", {})
    if not spec.get("selector"):
        spec["selector"] = {"matchLabels": {"app": "judge"}}
    template = spec.setdefault("template", {})
    template["metadata"] = template.get("metadata") or {}
    template["metadata"]["labels"] = dict(template["metadata"].get("labels") or {},
                                          **spec["selector"].get("matchLabels", {}))
    pod_spec = template["spec"] = template.get("spec") or {}
    if not pod_spec.get("containers"):
        pod_spec["containers"] = [{"name": "app"}]
    for container in pod_spec["containers"] + (pod_spec.get("initContainers") or []):
        container.setdefault("image", "registry.example.com/app:1")
    return d


def kwctl_loads(policy, settings):
    """None when the module loads `settings`, else kwctl's refusal."""
    out = subprocess.run(
        ["kwctl", "run", "--settings-json", json.dumps(settings), "--request-path",
         os.path.join(clusters.ROOT, "test_data", "pod-without-node-name.json"), policy],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, RUST_BACKTRACE="0"))
    refusal = [line for line in out.stdout.splitlines() if "settings are not valid" in line]
    return refusal[0] if refusal else (None if out.returncode == 0 else out.stdout[-300:])


def judge_documents(admin, policy, checks):
    """Kubernetes' API validation of a MutatingAdmissionPolicy against this
    policy's load-time checks of the same document."""
    differences = []
    for name, doc in document_cases():
        doc = copy.deepcopy(doc)
        doc["metadata"] = {"name": f"judge-document-{name}"}
        try:
            admin.request("POST", "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies?dryRun=All", doc)
            k8s = None
        except control_plane.ApiError as e:
            k8s = json.loads(e.body).get("message", e.body) if e.status == 422 else str(e)
        ours = kwctl_loads(policy, doc)
        same = (k8s is None) == (ours is None)
        detail = f"Kubernetes: {k8s or 'accepted'} | this policy: {ours or 'loads it'}"
        print(f"      document {name}: {detail}")
        if not same:
            differences.append((f"document {name}", detail))
        checks.check(f"MutatingAdmissionPolicy judge: document {name} is "
                     f"{'refused' if k8s else 'accepted'} by both", same, detail)
    return differences


def normalized(pod):
    """The Pod without what differs between any two creations: identity,
    timestamps, field managers, and the random suffix of the service-account
    token volume."""
    meta = {k: v for k, v in pod["metadata"].items()
            if k not in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "namespace", "generation")}
    text = re.sub(r"kube-api-access-[a-z0-9]{5}", "kube-api-access-*", json.dumps(pod["spec"]))
    return {"metadata": meta, "spec": json.loads(text)}


def our_settings(case):
    """This policy's settings for a case: the document, with the parameters
    inline where Kubernetes reads them through the binding's paramRef."""
    _, doc, _, params = case
    settings = copy.deepcopy(doc)
    if params:
        settings["params"] = params
    return settings


class Judge:
    def __init__(self, cluster, policy):
        self.cluster = cluster
        self.cases = []
        for name, doc, workload in e2e_cases() + written_cases() + kubernetes_table_cases():
            self.cases.append((name, doc, workload, None))
        self.cases.append(docs_params_case())
        self.refused = {}  # case index -> the API server's refusal of the document
        # Case index -> this policy's refusal of the document as settings,
        # from kwctl: such a policy would keep policy-server from starting.
        with ThreadPoolExecutor(4) as pool:
            loads = list(pool.map(lambda case: kwctl_loads(policy, our_settings(case)), self.cases))
        self.ours_refused = {i: why for i, why in enumerate(loads) if why}

    def namespaces(self, index):
        return f"map-k8s-{index}", f"map-ours-{index}"

    def policies(self):
        """This policy's side: a ClusterAdmissionPolicy per case."""
        found = []
        for i, case in enumerate(self.cases):
            if i in self.ours_refused:
                continue
            rules = case[1]["spec"]["matchConstraints"]["resourceRules"]
            found.append(clusters.policy_for(f"judge-{i}", our_settings(case), self.namespaces(i)[1], rules=rules))
        return found

    def install(self):
        """Kubernetes' side: each document and its binding, held to its namespace."""
        admin = self.cluster.admin
        for i, (name, doc, workload, params) in enumerate(self.cases):
            k8s_ns, ours_ns = self.namespaces(i)
            self.cluster.ensure_namespace(k8s_ns)
            self.cluster.ensure_namespace(ours_ns)
            doc = copy.deepcopy(doc)
            doc["metadata"] = {"name": f"judge-{i}"}
            try:
                admin.apply(doc)
            except control_plane.ApiError as e:
                self.refused[i] = json.loads(e.body).get("message", e.body) if e.status == 422 else str(e)
                continue
            binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
                       "metadata": {"name": f"judge-{i}"},
                       "spec": {"policyName": f"judge-{i}", "matchResources": {"namespaceSelector": {
                           "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                 "values": [k8s_ns]}]}}}}
            if params:
                admin.apply({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "params", "namespace": k8s_ns}, "data": params["data"]})
                binding["spec"]["paramRef"] = {"name": "params", "namespace": k8s_ns,
                                               "parameterNotFoundAction": "Deny"}
            admin.apply(binding)

    def run_one(self, namespace, workload):
        """What the API server keeps of the Pod (or Deployment, as a dry run):
        ('stored', object) or ('refused', message)."""
        if isinstance(workload, tuple):
            _, deployment = workload
            try:
                return "stored", self.cluster.admin.create(
                    f"/apis/apps/v1/namespaces/{namespace}/deployments?dryRun=All", deployment)
            except control_plane.ApiError as e:
                return "refused", refusal(e)
        spec = clusters.pod_spec()
        if workload == "placed":
            spec["nodeName"] = "node-1"
        elif workload == "binding":
            # On the same Node on both sides: the PodTopologyLabels plugin
            # gives the Pod its Node's zone.
            spec["nodeSelector"] = {"kubernetes.io/hostname": "node-1"}
        body = clusters.pod("judge", spec, labels={"app": "judge"})
        try:
            created = self.cluster.admin.create(f"/api/v1/namespaces/{namespace}/pods", body)
        except control_plane.ApiError as e:
            return "refused", refusal(e)
        if workload != "binding":
            return "stored", created
        deadline = time.time() + 15
        while time.time() < deadline:
            pod = self.cluster.pod(namespace, "judge")
            if pod["spec"].get("nodeName"):
                return "stored", pod
            time.sleep(0.2)
        refused = [e for e in self.cluster.events(namespace, "judge") if "denied" in e or "rejected" in e
                   or "Binding" in e]
        return "pending", "; ".join(refused[-1:]) or "not bound in 15 s"

    def run(self, checks):
        differences = []
        tally = {}
        for i, (name, doc, workload, params) in enumerate(self.cases):
            k8s_ns, ours_ns = self.namespaces(i)
            kind = workload[0] if isinstance(workload, tuple) else workload
            title = f"MutatingAdmissionPolicy judge: {name} ({kind})"
            if i in self.refused or i in self.ours_refused:
                same, explained, detail = self.judge_refusal(i, workload)
                outcome = "explained" if explained else "refused alike" if same else "differ"
            else:
                same, detail, outcome = self.judge_admission(k8s_ns, ours_ns, workload)
            print(f"      {name}: {detail}")
            tally[outcome] = tally.get(outcome, 0) + 1
            if not same:
                differences.append((name, detail))
            checks.check(title, same, detail)
        print(f"      {len(self.cases)} cases: " + ", ".join(f"{n} {what}" for what, n in sorted(tally.items())))
        return differences

    def judge_refusal(self, i, workload):
        """A document refused by either side: (same, explained, detail). The
        API server creating a policy this policy refuses at load is the
        difference docs/cel.md explains ("Refused at load where kube-apiserver
        refuses at admission") when every request it matches is refused."""
        k8s_doc = (f"refuses the document: {self.refused[i][:300]}" if i in self.refused
                   else "accepts the document")
        ours = (f"refuses it at load: {self.ours_refused[i][:300]}" if i in self.ours_refused else "loads it")
        detail = f"the API server {k8s_doc} | this policy {ours}"
        if i in self.refused:
            return i in self.ours_refused, False, detail
        k8s_outcome, k8s_value = self.run_one(self.namespaces(i)[0], workload)
        detail += f" | at admission the API server {k8s_outcome}: {str(k8s_value)[:300]}"
        explained = k8s_outcome == "refused"
        return explained, explained, ("explained (docs/cel.md): " if explained else "") + detail

    def judge_admission(self, k8s_ns, ours_ns, workload):
        """Both sides took the document: (same, detail, outcome) of the same object."""
        k8s_outcome, k8s_value = self.run_one(k8s_ns, workload)
        ours_outcome, ours_value = self.run_one(ours_ns, workload)
        if k8s_outcome == "stored" and ours_outcome == "stored":
            a, b = normalized(k8s_value), normalized(ours_value)
            same = a == b
            detail = "stored alike" if same else f"stored, but Kubernetes {json.dumps(diff(a, b))}"
            return same, detail, "stored alike" if same else "differ"
        same = k8s_outcome == ours_outcome
        detail = (f"Kubernetes {k8s_outcome}: {str(k8s_value)[:300]} | this policy {ours_outcome}: "
                  f"{str(ours_value)[:300]}")
        return same, detail, f"{k8s_outcome} alike" if same else "differ"


def refusal(error):
    """The API server's message in a refusal."""
    try:
        return json.loads(error.body).get("message", error.body)
    except ValueError:
        return error.body


def diff(a, b, path="", reference="kubernetes"):
    """The paths where a (the reference) and b (this policy) differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = {}
        for k in sorted(set(a) | set(b)):
            out.update(diff(a.get(k), b.get(k), f"{path}/{k}", reference))
        return out
    return {} if a == b else {path: {reference: a, "policy": b}}
