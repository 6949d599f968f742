"""`make kyverno-judge`: Kyverno's own admission controller as the judge of this policy.

Kyverno v1.19.1's admission controller and background controller (built from the Go module proxy,
kyverno_controllers.py) run out of cluster against the real control plane of `make cluster-test`.
Each document (a ClusterPolicy, Policy or MutatingPolicy) is judged on two sides, in two namespaces:
- Kyverno's side: the document is created in the cluster, and once Kyverno reports it Ready and its
  webhook configuration covers the document's kinds, the workloads are created in the document's
  Kyverno namespace; what the API server stored (or its refusal) is read back; the document is deleted.
- This policy's side: every document that loads is one ClusterAdmissionPolicy-equivalent entry of one
  policy-server (the document is its settings), with a webhook held to the document's own namespace.
Workloads: a Pod created unplaced and bound by the real scheduler (a refused Binding leaves it
pending), and a Deployment created as a dry run when the document may act on Deployments.

The documents: the ClusterPolicy/Policy/MutatingPolicy settings of e2e-tests/cases.json (a `policies`
list gives one case per document; bare `rules` are a ClusterPolicy with failurePolicy Ignore), the
whole ClusterPolicy and MutatingPolicy YAML blocks of README.md and docs/*.md, and ClusterPolicies from
e2e-tests/differential/generate.py (fixed seed), half of them with one more rule that errors in
Kyverno (an unresolved variable), half of each half with failurePolicy Ignore.

Prints a line per document, `kyverno-judge: N documents, A alike, E explained, U unexplained`, the
count per class and the time per phase; exit 1 unless U is 0.
"""
import argparse
import copy
import glob
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "differential"))

import cluster as clusters  # noqa: E402
import cluster_test  # noqa: E402
import control_plane  # noqa: E402
import kubewarden  # noqa: E402
import kyverno_controllers  # noqa: E402
import map_judge  # noqa: E402
from generate import KyvernoGen  # noqa: E402

ROOT = clusters.ROOT

# The differences the judge may call explained, each with the docs/kyverno.md sentence it relies on.
# A difference is put in a class only after checking Kyverno's answer (decision and object) as well
# as this policy's.
EXPLAINED = {
    "Kyverno's label check in map order": (
        "docs/kyverno.md, \"What stays different\": \"Kyverno checks a strategic merge patch's `metadata` or its "
        "`spec.template.metadata` for string labels, whichever Go's map iteration reaches first (so the same "
        "policy is refused or not from run to run); here both are checked.\" Checked: a rule's "
        "patchStrategicMerge has both `metadata` and `spec`, a label or annotation value that is not a string is "
        "in one of them, this policy refused the document at load with that check's message, and Kyverno took "
        "it."),
    "refused at load": (
        "docs/kyverno.md, \"Differences that remain\": \"Expressions and patches are checked when "
        "policy-server loads the policy, so mistakes Kyverno reports at admission are reported at load time "
        "here.\" Checked: Kyverno took the document and then refused every workload it applies to (Fail) or "
        "stored it exactly as without the document (Ignore)."),
    "invalid label or annotation": (
        "docs/kyverno.md, \"What stays different\": \"Kyverno's engine answers with the object as its "
        "patches leave it, unstructured; the API server then decodes and validates it. A label or annotation "
        "it would refuse (a number, a map, an invalid key or value) fails the rule here, and failurePolicy "
        "decides\". Checked: the API server (not Kyverno) refused Kyverno's side for its labels or "
        "annotations, and this policy (under Ignore) stored the object exactly as without the document."),
    "object identity": (
        "docs/kyverno.md, \"Differences that remain\": \"Whatever a rule says, the answer never replaces or "
        "removes the object, never changes its kind, apiVersion, metadata.name or metadata.namespace, and never "
        "changes a Binding's target: a rule whose result would is not applied, and failurePolicy decides.\" "
        "Checked: Kyverno's side stored the object under another name, or the API server itself (no webhook) "
        "refused Kyverno's patched Binding for its target; this policy's webhook refused the request (Fail) or "
        "this policy stored it exactly as without the document (Ignore)."),
}

EXPLAINED.update({
    "needs a background controller": (
        "docs/kyverno.md, support table: `mutate.targets` other than the Pod being bound is refused at load "
        "(\"needs a background controller\"). Checked: the document has such targets, and Kyverno took it and "
        "admitted every workload (its background controller then changes the targets)."),
    "Binding metadata copied unchecked": (
        "docs/kyverno.md, \"What stays different\": \"on a Binding, whose labels and annotations the API server "
        "copies onto the Pod unchecked (so Kyverno's webhook gives the Pod the invalid key), it is left out with a "
        "warning, and the Pod stays valid\". Checked: Kyverno's Pod carries a key that is not a valid label key, "
        "and this policy's Pod is Kyverno's without those keys (Ignore), or was refused (Fail), or the document "
        "was refused at load for that key."),
    "mutateExisting on pods/binding": (
        "docs/kyverno.md, \"Where this departs from Kyverno's webhook\": Kyverno 1.19.1's background controller "
        "cannot map `pods/binding` to a kind and leaves the Pod as it was; here the Pod gets the change through "
        "the Binding. Checked: the document is a MutatingPolicy with mutateExisting on pods/binding, Kyverno's Pod "
        "is the Pod stored without the document, and this policy's differs from it."),
})

LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def valid_label_key(key):
    prefix, _, name = key.rpartition("/")
    return bool(LABEL_NAME.match(name)) and (not prefix or (len(prefix) <= 253 and bool(DNS_SUBDOMAIN.match(prefix))))


def invalid_keys(obj):
    """The label and annotation keys of a stored object that are not valid label keys."""
    meta = (obj or {}).get("metadata") or {}
    return {(section, key) for section in ("labels", "annotations") for key in (meta.get(section) or {})
            if not valid_label_key(key)}


def without_keys(obj, keys):
    obj = copy.deepcopy(obj)
    for section, key in keys:
        (obj["metadata"].get(section) or {}).pop(key, None)
        if obj["metadata"].get(section) == {}:
            del obj["metadata"][section]
    return obj


def label_check_in_map_order(doc):
    """A rule whose patchStrategicMerge holds both `metadata` and `spec`, with a label or annotation value that
    is not a string under `metadata` or `spec.template.metadata`: Kyverno's policy validation checks only the
    one of the two its map iteration reaches first."""
    for rule in doc["spec"].get("rules") or []:
        patch = (rule.get("mutate") or {}).get("patchStrategicMerge")
        if not isinstance(patch, dict) or "metadata" not in patch or "spec" not in patch:
            continue
        template = ((patch.get("spec") or {}).get("template") or {}) if isinstance(patch.get("spec"), dict) else {}
        for meta in (patch.get("metadata"), template.get("metadata") if isinstance(template, dict) else None):
            if not isinstance(meta, dict):
                continue
            for field in ("labels", "annotations"):
                values = meta.get(field)
                if isinstance(values, dict) and any(not isinstance(v, str) for v in values.values()):
                    return True
    return False


def has_other_targets(doc):
    return any((rule.get("mutate") or {}).get("targets") for rule in (doc.get("spec") or {}).get("rules") or [])


def mutate_existing_on_bindings(doc):
    spec = doc.get("spec") or {}
    enabled = ((spec.get("evaluation") or {}).get("mutateExisting") or {}).get("enabled")
    rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
    return doc.get("kind", "").endswith("MutatingPolicy") and bool(enabled) and \
        any("pods/binding" in (r.get("resources") or []) for r in rules)


KINDS_TO_RESOURCES = {"Pod": ["pods"], "Pod/binding": ["pods/binding"], "Deployment": ["deployments"],
                      "Pod/*": ["pods/binding"], "*": ["pods", "pods/binding", "deployments"],
                      "*/*": ["pods", "pods/binding", "deployments"]}
JUDGED = ("pods", "pods/binding", "deployments")
KYVERNO_KINDS = ("ClusterPolicy", "Policy", "MutatingPolicy", "NamespacedMutatingPolicy")


# ---- documents ----------------------------------------------------------------------------------

class Case:
    def __init__(self, name, doc, pod=None, deployment=None):
        self.name = name
        self.doc = doc
        self.pod = pod  # the Pod workload (None: the judge's fixed Pod)
        self.deployment = deployment
        self.resources = resources_of(doc)
        self.index = None


def kinds_of(doc):
    kinds = []
    for rule in doc.get("spec", {}).get("rules") or []:
        for block in ("match", "exclude"):
            match = rule.get(block) or {}
            if block == "exclude":
                continue
            filters = [match] + list(match.get("any") or []) + list(match.get("all") or [])
            for f in filters:
                kinds += (f.get("resources") or {}).get("kinds") or []
    short = []
    for kind in kinds:
        parts = kind.split("/")
        # group/version/Kind[/sub], version/Kind[/sub], Kind[/sub]
        while len(parts) > 1 and parts[0][:1].islower() and parts[0] != "*":
            parts = parts[1:]
        short.append("/".join(parts))
    return short


def resources_of(doc):
    """The judged resources a document may act on (its webhook rules here)."""
    found = set()
    if doc["kind"] in ("ClusterPolicy", "Policy"):
        for kind in kinds_of(doc):
            found.update(KINDS_TO_RESOURCES.get(kind, []))
        if "pods" in found:
            found.add("deployments")  # autogen; a Deployment both leave alone tests that too
    else:
        for rule in doc.get("spec", {}).get("matchConstraints", {}).get("resourceRules") or []:
            for resource in rule.get("resources") or []:
                if resource in ("*", "*/*"):
                    found.update(JUDGED)
                elif resource == "pods/*":
                    found.add("pods/binding")
                elif resource in JUDGED:
                    found.add(resource)
        if "pods" in found:
            found.add("deployments")
    return sorted(found)


def bare_rules_document(settings):
    # Bare rules run at admission only: no background scans.
    doc = {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": "bare-rules"},
           "spec": {"background": False, "rules": copy.deepcopy(settings["rules"]),
                    "failurePolicy": settings.get("failurePolicy", "Ignore")}}
    return doc


def e2e_documents():
    with open(os.path.join(ROOT, "e2e-tests", "cases.json")) as f:
        cases = json.load(f)
    found = []
    for case in cases:
        settings = case.get("settings")
        if not isinstance(settings, dict):
            continue
        if settings.get("kind") in KYVERNO_KINDS:
            found.append((f"e2e-{case['name']}", settings))
        elif isinstance(settings.get("policies"), list):
            for j, doc in enumerate(settings["policies"]):
                if isinstance(doc, dict) and doc.get("kind") in KYVERNO_KINDS:
                    found.append((f"e2e-{case['name']}[{j}]", doc))
        elif isinstance(settings.get("rules"), list) and "copy" not in settings:
            found.append((f"e2e-{case['name']}(rules)", bare_rules_document(settings)))
    return found


def docs_documents():
    """Whole ClusterPolicy/Policy/MutatingPolicy documents in README.md's and docs/*.md's yaml blocks,
    and those pasted whole as a ClusterAdmissionPolicy's settings there."""
    found = []
    for path in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        with open(path) as f:
            text = f.read()
        for n, block in enumerate(re.findall(r"```ya?ml\n(.*?)```", text, re.S)):
            try:
                docs = [d for d in yaml.safe_load_all(block) if d]
            except yaml.YAMLError:
                continue
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind") == "ClusterAdmissionPolicy":
                    doc = (doc.get("spec") or {}).get("settings")
                if (isinstance(doc, dict) and doc.get("kind") in KYVERNO_KINDS and isinstance(doc.get("spec"), dict)
                        and doc.get("metadata", {}).get("name")):
                    found.append((f"{os.path.relpath(path, ROOT)}#{n}-{doc['metadata']['name']}", doc))
    return found


# What would make either side reach beyond loopback: image registries, HTTP services.
OUTSIDE = re.compile(r'imageRegistry|"service"\s*:\s*\{|\bhttp\.|image\.|verifyImages|imageData|"images"')
ERROR_RULE_VALUE = "{{ request.object.metadata.nothing }}"


def workload_pod(g_pod):
    """A generated Pod made schedulable on node-1 (no namespace, no resource requests)."""
    pod = copy.deepcopy(g_pod)
    pod["metadata"].pop("namespace", None)
    spec = pod["spec"]
    spec["nodeSelector"] = {"kubernetes.io/hostname": "node-1"}
    spec["terminationGracePeriodSeconds"] = 0
    for c in spec["containers"]:
        c.pop("resources", None)
    return pod


def generated_documents(count, seed):
    """`count` ClusterPolicies of KyvernoGen.cpol over Pods and Deployments, with a generated workload
    each: the first half with one more rule that errors in Kyverno; in each half, every other document
    with failurePolicy Ignore (alternately as spec.failurePolicy and spec.webhookConfiguration)."""
    g = KyvernoGen(seed)
    found = []
    half = count // 2
    for i in range(count):
        kind = "pod" if i % 2 == 0 else "deployment"
        doc = g.cpol(kind)
        erroring = i < half
        j = i if erroring else i - half
        ignore = j < half // 2
        if erroring:
            Kind = "Pod" if kind == "pod" else "Deployment"
            doc["spec"]["rules"].append({
                "name": "unresolved", "match": {"any": [{"resources": {"kinds": [Kind]}}]},
                "mutate": {"patchStrategicMerge": {"metadata": {"annotations": {
                    "judge.example.com/unresolved": ERROR_RULE_VALUE}}}}})
        if ignore:
            if (j // 2) % 2 == 0:
                doc["spec"]["failurePolicy"] = "Ignore"
            else:
                doc["spec"]["webhookConfiguration"] = {"failurePolicy": "Ignore"}
        label = f"gen-{i:03d}-{kind}{'-error' if erroring else ''}{'-ignore' if ignore else '-fail'}"
        deployment = g.deployment()
        deployment["metadata"].pop("namespace", None)
        for c in deployment["spec"]["template"]["spec"]["containers"]:
            c.pop("resources", None)
        deployment["spec"]["template"]["spec"].pop("nodeSelector", None)
        found.append(Case(label, doc, pod=workload_pod(g.pod()), deployment=deployment))
    return found


def all_cases(generated, seed):
    cases, seen, duplicates, skipped = [], {}, [], []
    for name, doc in e2e_documents() + docs_documents():
        cases.append(Case(name, copy.deepcopy(doc)))
    cases += generated_documents(generated, seed)
    kept = []
    for case in cases:
        key = json.dumps({k: v for k, v in case.doc.items() if k != "metadata"}, sort_keys=True) + \
            json.dumps({k: v for k, v in case.doc.get("metadata", {}).items() if k not in ("name",)}, sort_keys=True)
        if key in seen and case.pod is None:
            duplicates.append((case.name, seen[key]))
            continue
        if OUTSIDE.search(json.dumps(case.doc)):
            skipped.append((case.name, "it reads an image registry or calls an HTTP service: the judge's traffic "
                                       "stays on 127.0.0.1"))
            continue
        if not case.resources:
            what = (f"its kinds {kinds_of(case.doc)}" if kinds_of(case.doc) else
                    "its rules name no kinds" if case.doc["kind"] in ("ClusterPolicy", "Policy")
                    else "its resourceRules")
            skipped.append((case.name, f"{what}: the judge has no workload for them (it creates Pods, Bindings "
                                       "and Deployments)"))
            continue
        seen[key] = case.name
        kept.append(case)
    for i, case in enumerate(kept):
        case.index = i
    return kept, duplicates, skipped


# ---- the two sides ------------------------------------------------------------------------------

def side_document(case, namespace):
    """The document as one side gets it: a unique name, and a namespaced kind in the side's namespace."""
    doc = copy.deepcopy(case.doc)
    meta = doc.setdefault("metadata", {})
    meta["name"] = f"kj-{case.index}"
    if doc["kind"] in ("Policy", "NamespacedMutatingPolicy"):
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    return doc


def namespaces(case):
    return f"kj-k-{case.index}", f"kj-o-{case.index}", f"kj-b-{case.index}"


def reads(doc):
    """contextAwareResources the document needs: what its context or CEL reads."""
    text = json.dumps(doc)
    found = []
    if re.search(r"nodes|Node", text):
        found.append({"apiVersion": "v1", "kind": "Node"})
    if re.search(r"configMap|configmaps|ConfigMap", text):
        found.append({"apiVersion": "v1", "kind": "ConfigMap"})
    if re.search(r"namespaceSelector|/namespaces/[^/{]*\"|\"namespaces\"|Namespace", text):
        found.append({"apiVersion": "v1", "kind": "Namespace"})
    if re.search(r"/pods|\"pods\"", text):
        found.append({"apiVersion": "v1", "kind": "Pod"})
    if re.search(r"\"(roles|clusterRoles)\"", text):
        # Matching by roles reads the requester's RoleBindings and ClusterRoleBindings (docs/kyverno.md).
        found += [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding"},
                  {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding"}]
    return found


def our_policy(case):
    _, ours_ns, _ = namespaces(case)
    rules = [{"apiGroups": ["apps" if r == "deployments" else ""], "apiVersions": ["v1"], "resources": [r],
              "operations": ["CREATE"]} for r in case.resources]
    settings = side_document(case, ours_ns)
    return clusters.policy_for(f"kj-{case.index}", settings, ours_ns, rules=rules, resources=reads(case.doc))


def fixed_pod():
    spec = clusters.pod_spec()
    spec["nodeSelector"] = {"kubernetes.io/hostname": "node-1"}
    return clusters.pod("judge", spec, labels={"app": "judge"})


def fixed_deployment():
    return clusters.deployment("judge", 1)


def pod_metadata(pod):
    meta = pod.get("metadata") or {}
    return {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}}


def has_targets(doc):
    """Kyverno's mutate-existing: rules with mutate.targets, or a MutatingPolicy's mutateExisting."""
    return any((r.get("mutate") or {}).get("targets") for r in doc["spec"].get("rules") or []) or \
        bool(((doc["spec"].get("evaluation") or {}).get("mutateExisting") or {}).get("enabled"))


class Sides:
    def __init__(self, cluster, bind_seconds=20):
        self.cluster = cluster
        self.admin = cluster.admin
        self.bind_seconds = bind_seconds
        # Mutate-existing documents: {namespace: seconds from the Pod's binding until its labels or
        # annotations changed (None: no change within 30 s)}, and {namespace: the Pod's metadata when first
        # seen bound}.
        self.label_delays = {}
        self.bound_metadata = {}

    def workloads(self, case, namespace, settle=None):
        """{workload: (outcome, value)}: outcome stored / refused / pending."""
        out = {}
        if {"pods", "pods/binding"} & set(case.resources):
            out["pod"] = self.pod(namespace, case.pod or fixed_pod(), settle)
        if "deployments" in case.resources:
            out["deployment"] = self.deployment(namespace, case.deployment or fixed_deployment())
        return out

    def pod(self, namespace, body, settle=None):
        try:
            created = self.admin.create(f"/api/v1/namespaces/{namespace}/pods", body)
        except control_plane.ApiError as e:
            return "refused", map_judge.refusal(e)
        name = created["metadata"]["name"]  # a webhook may have renamed it
        deadline = time.time() + self.bind_seconds
        result = None
        while time.time() < deadline:
            pod = self.cluster.pod(namespace, name)
            if pod["spec"].get("nodeName"):
                result = ("stored", pod)
                self.bound_metadata[namespace] = pod_metadata(pod)
                if settle:
                    self.label_delays[namespace] = self.metadata_change(namespace, name, pod)
                break
            refused = [e for e in self.cluster.events(namespace, name)
                       if "denied" in e or "rejected" in e or "Binding" in e or "Bind plugin" in e]
            if refused:
                result = ("pending", refused[-1])
                break
            time.sleep(0.2)
        if result is None:
            result = ("pending", f"not bound in {self.bind_seconds} s")
        if settle and result[0] == "stored":
            settle()
            result = ("stored", self.cluster.pod(namespace, name))
        self.admin.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                           {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
        return result

    def metadata_change(self, namespace, name, bound, seconds=30):
        """Seconds from `bound` (the Pod first seen bound) until its labels or annotations change; None when
        they have not changed in `seconds`. (Kyverno's UpdateRequest can be written after a first look finds
        none, so an empty queue is no sign that nothing is coming.)"""
        start = time.time()
        while time.time() < start + seconds:
            if pod_metadata(self.cluster.pod(namespace, name)) != pod_metadata(bound):
                return time.time() - start
            time.sleep(0.05)
        return None

    def deployment(self, namespace, body):
        try:
            return "stored", self.admin.create(f"/apis/apps/v1/namespaces/{namespace}/deployments?dryRun=All", body)
        except control_plane.ApiError as e:
            return "refused", map_judge.refusal(e)


class KyvernoSide:
    def __init__(self, cluster, sides):
        self.cluster = cluster
        self.admin = cluster.admin
        self.sides = sides

    def covered(self, resources):
        """The resources some Kyverno webhook (mutating or validating) is registered for."""
        have = set()
        base = "/apis/admissionregistration.k8s.io/v1"
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            for cfg in self.admin.get(f"{base}/{kind}?labelSelector=webhook.kyverno.io%2Fmanaged-by%3Dkyverno")["items"]:
                if cfg["metadata"]["name"] in (kyverno_controllers.POLICY_VWC, "kyverno-policy-mutating-webhook-cfg"):
                    continue
                for webhook in cfg.get("webhooks") or []:
                    for rule in webhook.get("rules") or []:
                        for r in rule.get("resources") or []:
                            have.add(r)
        if "*" in have or "*/*" in have:
            return True
        return all(r in have for r in resources)

    def judge(self, case):
        """(document outcome, workloads, notes): outcome None when Kyverno took the document."""
        k_ns, _, _ = namespaces(case)
        doc = side_document(case, k_ns)
        path = kyverno_controllers.policy_path(doc, k_ns)
        notes = []
        try:
            self.admin.create(path, doc)
        except control_plane.ApiError as e:
            return map_judge.refusal(e), {}, notes
        item = f"{path}/{doc['metadata']['name']}"
        obj = None
        try:
            obj = kyverno_controllers.wait(lambda: kyverno_controllers.policy_ready(self.admin, doc, item), 60, f"{case.name} Ready", interval=0.2)
        except TimeoutError:
            notes.append(f"not Ready after 60 s: {json.dumps(self.admin.get(item).get('status'))[:300]}")
        # The kinds Kyverno registers: the document's, and autogen's when it made autogen rules.
        needed = [r for r in case.resources if r != "deployments"]
        kinds = kinds_of(case.doc)
        autogen = bool(((obj or {}).get("status") or {}).get("autogen", {}).get("rules"))
        if "Deployment" in kinds or autogen or (doc["kind"].endswith("MutatingPolicy") and
                                                "deployments" in json.dumps(doc)):
            needed.append("deployments")
        if doc["kind"].endswith("MutatingPolicy") or any(
                r.get("mutate", {}).get("patchStrategicMerge") or r.get("mutate", {}).get("patchesJson6902")
                or r.get("mutate", {}).get("foreach") or r.get("mutate", {}).get("targets")
                for r in doc["spec"].get("rules") or []):
            try:
                kyverno_controllers.wait(lambda: self.covered(needed), 30, f"{case.name} webhooks", interval=0.3)
            except TimeoutError:
                notes.append(f"Kyverno's webhooks do not cover {needed} after 30 s")
        # The API server picks the updated webhook configuration up from its
        # informer, and Kyverno's webhook the policy from its own: 1.5 s was
        # short under CI's load (a Binding policy was then applied in one run
        # and not in another, and once left a difference unexplained).
        time.sleep(4.0)
        out = self.sides.workloads(case, k_ns, settle=(lambda: self.settle_background()) if has_targets(doc) else None)
        self.admin.delete(item)
        kyverno_controllers.wait(lambda: not self.admin.exists(item), 60, f"{case.name} deleted")
        return None, out, notes

    def settle_background(self):
        """mutate.targets: the background controller applies Kyverno's UpdateRequests after admission."""
        time.sleep(1.0)
        path = f"/apis/kyverno.io/v2/namespaces/{kyverno_controllers.NAMESPACE}/updaterequests"
        try:
            kyverno_controllers.wait(lambda: not self.admin.get(path)["items"], 30, "UpdateRequests processed")
        except TimeoutError:
            pass
        time.sleep(0.5)



# ---- comparison ---------------------------------------------------------------------------------

def normalized(obj, case):
    """map_judge.normalized, and each side's namespace replaced by one placeholder."""
    text = json.dumps(obj)
    for ns in namespaces(case):
        text = text.replace(ns, "<namespace>")
    return map_judge.normalized(json.loads(text))


def describe(outcome, value, case):
    if outcome == "stored":
        return "stored"
    return f"{outcome}: {str(value)[:900]}"


def compare(case, kyv, ours):
    """(same, detail) over the workloads of both sides."""
    details = []
    same = True
    for w in sorted(set(kyv) | set(ours)):
        k_out, k_val = kyv.get(w, ("missing", None))
        o_out, o_val = ours.get(w, ("missing", None))
        if k_out == "stored" and o_out == "stored":
            a, b = normalized(k_val, case), normalized(o_val, case)
            if a != b:
                same = False
                details.append(f"{w}: both stored, differing at {json.dumps(map_judge.diff(a, b, reference='kyverno'))[:1500]}")
        elif k_out != o_out:
            same = False
            details.append(f"{w}: Kyverno {describe(k_out, k_val, case)} | this policy {describe(o_out, o_val, case)}")
    return same, "; ".join(details)


def summary(workload, result):
    """`pod stored (annotations a, b; labels c)`: what the stored object carries, for the reader."""
    outcome, value = result
    if outcome != "stored":
        return f"{workload} {outcome}"
    meta = value.get("metadata", {})
    parts = [f"{what} {', '.join(sorted(meta.get(what) or {}))}" for what in ("annotations", "labels")
             if meta.get(what)]
    return f"{workload} stored" + (f" ({'; '.join(parts)})" if parts else "")


def failure_policy(doc):
    spec = doc.get("spec") or {}
    return ((spec.get("webhookConfiguration") or {}).get("failurePolicy") or spec.get("failurePolicy") or "Fail")


INVALID_METADATA = re.compile(r"metadata\.(labels|annotations)|ObjectMeta\.metadata\.(labels|annotations)")


def binding_metadata_unchecked(case, kyv, ours, ours_doc, baseline):
    """Kyverno's Pod got keys that are not valid label keys through its Binding; this policy kept them out."""
    k_out, k_val = kyv.get("pod", ("missing", None))
    if k_out != "stored" or "pods/binding" not in case.resources:
        return False
    bad = invalid_keys(k_val)
    if not bad:
        return False
    if ours_doc:
        return "not a valid key" in str(ours_doc)
    o_out, o_val = ours.get("pod", ("missing", None))
    if o_out == "stored":
        if normalized(o_val, case) == normalized(without_keys(k_val, bad), case):
            return True
        base = baseline()
        return failure_policy(case.doc) == "Ignore" and "pod" in base and base["pod"][0] == "stored" and \
            normalized(o_val, case) == normalized(base["pod"][1], case)
    return failure_policy(case.doc) == "Fail" and o_out in ("refused", "pending")


def alike(case, kyv, ours, workload):
    k_out, k_val = kyv.get(workload, ("missing", None))
    o_out, o_val = ours.get(workload, ("missing", None))
    return k_out == o_out and (k_out != "stored" or normalized(k_val, case) == normalized(o_val, case))


def explain(case, kyv_doc, kyv, ours_doc, ours, baseline):
    """The EXPLAINED class of a difference, checked on both sides' answers, or None."""
    if not kyv_doc and binding_metadata_unchecked(case, kyv, ours, ours_doc, baseline) and \
            (ours_doc or all(w == "pod" or alike(case, kyv, ours, w) for w in set(kyv) | set(ours))):
        return "Binding metadata copied unchecked"
    if ours_doc and not kyv_doc and "labels and annotations supports only string values" in ours_doc \
            and label_check_in_map_order(case.doc):
        return "Kyverno's label check in map order"
    if ours_doc and not kyv_doc and has_other_targets(case.doc):
        if kyv and all(out == "stored" for out, _ in kyv.values()):
            return "needs a background controller"
        return None
    if not kyv_doc and not ours_doc and mutate_existing_on_bindings(case.doc):
        base = baseline()
        k_out, k_val = kyv.get("pod", ("missing", None))
        o_out, o_val = ours.get("pod", ("missing", None))
        if k_out == o_out == "stored" and "pod" in base and base["pod"][0] == "stored" \
                and normalized(k_val, case) == normalized(base["pod"][1], case) \
                and normalized(o_val, case) != normalized(k_val, case):
            return "mutateExisting on pods/binding"
        return None
    if ours_doc and not kyv_doc:
        # Kyverno took it; this policy refused it at load.
        base = baseline()
        for w, (out, val) in kyv.items():
            if out in ("refused", "pending"):
                if "kyverno" not in str(val).lower() and "denied" not in str(val):
                    return None  # refused by something else than Kyverno's webhook
                continue
            if failure_policy(case.doc) != "Ignore" or w not in base or base[w][0] != "stored" \
                    or normalized(val, case) != normalized(base[w][1], case):
                return None
        return "refused at load"
    if kyv_doc or ours_doc:
        return None
    base = None
    found = None
    for w in sorted(set(kyv) | set(ours)):
        k_out, k_val = kyv.get(w, ("missing", None))
        o_out, o_val = ours.get(w, ("missing", None))
        if k_out == o_out and (k_out != "stored" or normalized(k_val, case) == normalized(o_val, case)):
            continue
        # Kyverno's patch made the API server refuse the object for its metadata; this policy failed the
        # rule and (Ignore) stored the object as without the document.
        if k_out in ("refused", "pending") and o_out == "stored" and failure_policy(case.doc) == "Ignore" \
                and INVALID_METADATA.search(str(k_val)) and "denied the request" not in str(k_val):
            base = base or baseline()
            if w in base and base[w][0] == "stored" and normalized(o_val, case) == normalized(base[w][1], case):
                found = found or "invalid label or annotation"
                continue
        # Kyverno's patch renamed the object or took the Binding's target away; this policy did not apply it.
        requested = ((case.pod or fixed_pod()) if w == "pod" else (case.deployment or fixed_deployment()))
        renamed = k_out == "stored" and k_val["metadata"]["name"] != requested["metadata"]["name"]
        target_gone = k_out in ("refused", "pending") and "target" in str(k_val) and "admission webhook" not in str(k_val)
        if renamed or target_gone:
            if failure_policy(case.doc) == "Fail" and o_out in ("refused", "pending") and "admission webhook" in str(o_val):
                found = found or "object identity"
                continue
            if failure_policy(case.doc) == "Ignore" and o_out == "stored":
                base = base or baseline()
                if w in base and base[w][0] == "stored" and normalized(o_val, case) == normalized(base[w][1], case):
                    found = found or "object identity"
                    continue
        return None
    return found


# ---- main ---------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=os.path.join(ROOT, "annotated-policy.wasm"))
    parser.add_argument("--generated", type=int, default=100, help="generated ClusterPolicies (at least 100)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", help="judge only the documents whose name contains this")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, certificates)")
    args = parser.parse_args()
    missing = [tool for tool in ("go", "kwctl", "policy-server", "openssl") if not shutil.which(tool)]
    if missing or not os.path.exists(args.policy):
        why = f"{', '.join(missing)} not on PATH" if missing else f"{args.policy} missing (needs kwctl)"
        print(f"kyverno-judge: SKIPPED ({why})")
        return 0

    timings = {}
    t0 = time.time()

    def phase(name, start):
        timings[name] = time.time() - start
        print(f"[{name}: {timings[name]:.1f} s]")
        sys.stdout.flush()

    start = time.time()
    kyverno_bin = kyverno_controllers.build()
    module = kyverno_controllers.module_dir()
    phase("Kyverno binaries (build or cache)", start)

    cases, duplicates, skipped = all_cases(args.generated, args.seed)
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    print(f"{len(cases)} documents to judge; {len(duplicates)} duplicates left out (same document as another); "
          f"{len(skipped)} skipped")
    for name, why in skipped:
        print(f"  skipped {name}: {why}")

    work = tempfile.mkdtemp(prefix="kyverno-judge-")
    cluster = clusters.Cluster(work)
    controllers = None
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    unexplained = 1
    try:
        for component, version in cluster.versions().items():
            print(f"{component:24} {version}")
        controllers = kyverno_controllers.KyvernoControllers(cluster, kyverno_bin)
        for component, version in controllers.versions().items():
            print(f"kyverno {component:16} github.com/kyverno/kyverno {version} ({kyverno_bin})")
        start = time.time()
        cluster.start()
        phase("control plane", start)

        start = time.time()
        controllers.start(module)
        phase("Kyverno startup (CRDs, ConfigMaps, both controllers, webhooks)", start)

        start = time.time()
        with ThreadPoolExecutor(4) as pool:
            loads = list(pool.map(lambda c: map_judge.kwctl_loads(args.policy, side_document(c, namespaces(c)[1])),
                                  cases))
        ours_refused = {c.index: why for c, why in zip(cases, loads) if why}
        phase(f"kwctl load checks ({len(cases)} documents, {len(ours_refused)} refused)", start)

        start = time.time()
        for c in cases:
            k_ns, o_ns, _ = namespaces(c)
            cluster.ensure_namespace(k_ns, {kyverno_controllers.SIDE_LABEL: "kyverno"})
            cluster.ensure_namespace(o_ns, {kyverno_controllers.SIDE_LABEL: "policy"})
        for obj in cluster_test.pod_reader_rbac(["pods", "configmaps", "namespaces"]):
            cluster.admin.apply(obj)
        # What matching by roles reads, as docs/kyverno.md tells users to grant it.
        role_readers = cluster_test.pod_reader_rbac(["rolebindings", "clusterrolebindings"])
        role_readers[0]["rules"][0]["apiGroups"] = ["rbac.authorization.k8s.io"]
        for obj in role_readers:
            cluster.admin.apply(obj)
        policies = [our_policy(c) for c in cases if c.index not in ours_refused]
        entries = {kubewarden.unique_name(p): kubewarden.policies_entry(p, args.policy) for p in policies}
        if policies and not cluster.policy_server.start(entries, ready_seconds=900):
            raise RuntimeError(f"policy-server did not start:\n{control_plane.tail(cluster.policy_server.log_path)}")
        cluster.install_webhooks(policies)
        phase(f"namespaces and policy-server with {len(policies)} policies", start)

        sides = Sides(cluster)
        kyverno = KyvernoSide(cluster, sides)

        def run_ours(c):
            if c.index in ours_refused:
                return {}
            return sides.workloads(c, namespaces(c)[1])

        start = time.time()
        pool = ThreadPoolExecutor(2)
        try:
            ours_futures = {c.index: pool.submit(run_ours, c) for c in cases}
            kyv_results = {}
            for c in cases:
                controllers.check_alive()
                kyv_results[c.index] = kyverno.judge(c)
            ours_results = {i: f.result(timeout=600) for i, f in ours_futures.items()}
        finally:
            # An interrupted run does not wait for this policy's side to finish.
            pool.shutdown(wait=False, cancel_futures=True)
        phase("both sides' workloads (Kyverno's documents one at a time; this policy's beside them)", start)

        start = time.time()
        alike = explained = 0
        classes = {}
        findings = []
        for c in cases:
            kyv_doc, kyv, notes = kyv_results[c.index]
            ours_doc = ours_refused.get(c.index)
            ours = ours_results[c.index]

            def baseline(c=c):
                ns = namespaces(c)[2]
                cluster.ensure_namespace(ns)
                return sides.workloads(c, ns)
            note = f" [{'; '.join(notes)}]" if notes else ""
            if kyv_doc and ours_doc:
                alike += 1
                print(f"{c.name}: alike (both refuse the document){note}")
                continue
            if not kyv_doc and not ours_doc:
                same, detail = compare(c, kyv, ours)
                if same:
                    alike += 1
                    print(f"{c.name}: alike ({'; '.join(summary(w, o) for w, o in sorted(kyv.items()))}){note}")
                    continue
            else:
                detail = (f"Kyverno {'refuses the document: ' + kyv_doc[:900] if kyv_doc else 'takes the document'}"
                          f" | this policy {'refuses it at load: ' + ours_doc[:900] if ours_doc else 'loads it'}")
                if kyv:
                    detail += " | at admission Kyverno: " + "; ".join(
                        f"{w} {describe(o, v, c)}" for w, (o, v) in sorted(kyv.items()))
                if ours:
                    detail += " | at admission this policy: " + "; ".join(
                        f"{w} {describe(o, v, c)}" for w, (o, v) in sorted(ours.items()))
            cls = explain(c, kyv_doc, kyv, ours_doc, ours, baseline)
            if cls:
                explained += 1
                classes[cls] = classes.get(cls, 0) + 1
                print(f"{c.name}: explained ({cls}){note} -- {detail[:600]}")
            else:
                findings.append((c, detail))
                print(f"{c.name}: DIFFERENT {detail}{note}")
        phase("comparison", start)
        print("mutate-existing: how long after a Pod's binding its labels or annotations changed (Kyverno: its "
              "background controller; this policy: in the answer to the Binding, so before the Pod is seen bound)")
        for c in cases:
            k_ns, o_ns, _ = namespaces(c)
            if k_ns not in sides.label_delays:
                continue
            delay = sides.label_delays[k_ns]
            kyv_text = f"{delay:.2f} s" if delay is not None else "no change within 30 s"
            final = (kyv_results[c.index][1].get("pod") or (None, None))[1]
            at_bind = sides.bound_metadata.get(o_ns)
            if at_bind is None:
                ours_text = "no Pod bound"
            elif isinstance(final, dict) and at_bind == pod_metadata(final):
                ours_text = "0 s: on the Pod when it was bound, as Kyverno's Pod ended"
            else:
                ours_text = "on the Pod when it was bound" if at_bind != sides.bound_metadata.get(k_ns) else \
                    "no change"
            print(f"  {c.name}: Kyverno {kyv_text}; this policy {ours_text}")
        unexplained = len(findings)
        print(f"kyverno-judge: {len(cases)} documents, {alike} alike, {explained} explained, {unexplained} unexplained")
        for cls, n in sorted(classes.items()):
            print(f"  explained ({cls}): {n} -- {EXPLAINED[cls]}")
        print(f"  skipped: {len(skipped)} (no Pod, Binding or Deployment for their kinds); "
              f"duplicates left out: {len(duplicates)}")
    except KeyboardInterrupt:
        print("interrupted")
    except Exception:
        traceback.print_exc()
        if controllers:
            print(controllers.log_tails(40))
        for name in ("kube-apiserver", "kube-scheduler"):
            print(f"--- {name} log tail\n{cluster.plane.log_tail(name, 10)}")
        print(f"--- policy-server log tail\n{control_plane.tail(cluster.policy_server.log_path, 20)}"
              if cluster.policy_server else "")
    finally:
        if controllers:
            controllers.stop()
        cluster.finish(args.keep)
    timings["total"] = time.time() - t0
    print("timings: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
