"""What kubewarden-controller 1.35 makes of a ClusterAdmissionPolicy, without
the controller: the policy-server policies-file entry and the
MutatingWebhookConfiguration, field by field. The mapping follows
kubewarden/kubewarden-controller at v1.35.0 (9462fe1):
- internal/controller/policy_subreconciler_webhook.go:110-177 (the webhook)
  and 193-219 (its namespaceSelector);
- internal/controller/policyserver_controller_configmap.go:91-111, 217-258
  (the policies.yml entry, keyed by the policy's unique name);
- api/policies/v1/clusteradmissionpolicy_types.go:218-220 (`clusterwide-<name>`)
  and policy_types.go:148-157 (timeoutSeconds defaults to 10).
A webhook here points at policy-server by URL (loopback) instead of through
the `policy-server-<name>` Service; everything else is as the controller writes it.
"""
import base64
import copy
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "load"))
from harness import free_port, wait_for  # noqa: E402

import control_plane  # noqa: E402

# The namespace policy-server is deployed in: the controller always keeps
# its webhooks out of it.
KUBEWARDEN_NAMESPACE = "kubewarden"


def unique_name(policy):
    return f"clusterwide-{policy['metadata']['name']}"


def policies_entry(policy, module_path):
    """The policies.yml entry the controller writes for a ClusterAdmissionPolicy
    (its `spec.module` replaced by the local annotated module)."""
    spec = policy["spec"]
    entry = {"namespacedName": {"Namespace": "", "Name": policy["metadata"]["name"]},
             "module": f"file://{os.path.abspath(module_path)}",
             "policyMode": spec.get("mode", "protect"),
             "allowedToMutate": bool(spec.get("mutating", False))}
    if spec.get("contextAwareResources"):
        entry["contextAwareResources"] = spec["contextAwareResources"]
    entry["settings"] = spec.get("settings")
    if spec.get("message"):
        entry["message"] = spec["message"]
    if spec.get("timeoutEvalSeconds") is not None:
        entry["timeoutEvalSeconds"] = spec["timeoutEvalSeconds"]
    entry["hostCapabilities"] = ["*"]  # every cluster-wide policy gets all of them
    return entry


def namespace_selector(spec):
    """The controller's selector: the Kubewarden namespace left out first, then
    only the policy's matchExpressions (its matchLabels are dropped)."""
    if spec.get("allowInsideAdmissionControllerNamespace"):
        return spec.get("namespaceSelector")
    expressions = [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [KUBEWARDEN_NAMESPACE]}]
    expressions += (spec.get("namespaceSelector") or {}).get("matchExpressions", [])
    return {"matchExpressions": expressions}


def mutating_webhook_configuration(policy, policy_server_url, ca_bundle_pem):
    spec = policy["spec"]
    name = unique_name(policy)
    webhook = {
        "name": f"{name}.kubewarden.admission",
        "clientConfig": {"url": f"{policy_server_url}/validate/{name}",
                         "caBundle": base64.b64encode(ca_bundle_pem).decode()},
        "rules": copy.deepcopy(spec.get("rules", [])),
        "namespaceSelector": namespace_selector(spec),
        "sideEffects": spec.get("sideEffects", "None"),
        "timeoutSeconds": spec.get("timeoutSeconds", 10),
        "admissionReviewVersions": ["v1"],
    }
    for field in ("failurePolicy", "matchPolicy", "objectSelector", "matchConditions"):
        if spec.get(field) is not None:
            webhook[field] = copy.deepcopy(spec[field])
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "kubewarden"},
                         "annotations": {"kubewardenPolicyName": policy["metadata"]["name"],
                                         "kubewardenPolicyNamespace": ""}},
            "webhooks": [webhook]}


class PolicyServer:
    """policy-server 1.35 over TLS on loopback, reading the cluster with `kubeconfig`."""

    def __init__(self, work, pki, kubeconfig, workers=2):
        self.work = work
        self.kubeconfig = kubeconfig
        self.workers = workers
        self.cert = pki.issue("policy-server", "/CN=policy-server", server=True)
        with open(pki.ca_cert, "rb") as f:
            self.ca_bundle = f.read()
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.process = None
        self.log_path = os.path.join(work, "policy-server.log")

    def start(self, policies, ready_seconds=180):
        """Starts policy-server with `policies` (id -> entry); True once ready."""
        self.stop()
        policies_file = os.path.join(self.work, "policies.yml")
        with open(policies_file, "w") as f:
            json.dump(policies, f)
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        env.update({"KUBECONFIG": self.kubeconfig, "NO_PROXY": "127.0.0.1,localhost", "RUST_BACKTRACE": "0"})
        for d in ("downloads", "sigstore"):
            os.makedirs(os.path.join(self.work, d), exist_ok=True)
        ready_port = free_port()
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(
            ["policy-server", "--policies", policies_file, "--addr", "127.0.0.1", "--port", str(self.port),
             "--readiness-probe-port", str(ready_port), "--workers", str(self.workers),
             "--cert-file", self.cert[0], "--key-file", self.cert[1],
             "--policies-download-dir", os.path.join(self.work, "downloads"),
             "--sigstore-cache-dir", os.path.join(self.work, "sigstore"), "--log-level", "warn"],
            env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, preexec_fn=control_plane.die_with_parent)
        return wait_for(f"http://127.0.0.1:{ready_port}/readiness", ready_seconds, self.process)

    def pause(self):
        """SIGSTOP: connections are still accepted by the kernel, never answered."""
        self.process.send_signal(subprocess.signal.SIGSTOP)

    def resume(self):
        self.process.send_signal(subprocess.signal.SIGCONT)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.resume()
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
