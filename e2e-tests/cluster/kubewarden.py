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
A webhook points at policy-server by URL (loopback), or, where policy-server
runs as replicas on test hosts (ha_test.py), through the
`policy-server-<name>` Service as the controller writes it; everything else
is as the controller writes it.
"""
import base64
import copy
import json
import os
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "load"))
from harness import free_port, wait_for  # noqa: E402

import control_plane  # noqa: E402

# The namespace policy-server is deployed in: the controller always keeps
# its webhooks out of it.
KUBEWARDEN_NAMESPACE = "kubewarden"
# The controller's Service port and policy-server's listening and readiness
# ports in its Pods (internal/constants).
SERVICE_PORT = 443
LISTEN_PORT = 8443
READINESS_PORT = 8081


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


def mutating_webhook_configuration(policy, policy_server_url, ca_bundle_pem, service=None):
    """`service`: the name of the Service in the Kubewarden namespace to call
    instead of `policy_server_url`."""
    spec = policy["spec"]
    name = unique_name(policy)
    if service:
        client = {"service": {"namespace": KUBEWARDEN_NAMESPACE, "name": service, "path": f"/validate/{name}",
                              "port": SERVICE_PORT}}
    else:
        client = {"url": f"{policy_server_url}/validate/{name}"}
    webhook = {
        "name": f"{name}.kubewarden.admission",
        "clientConfig": dict(client, caBundle=base64.b64encode(ca_bundle_pem).decode()),
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
    """policy-server 1.35 over TLS, reading the cluster with `kubeconfig`: on
    loopback, or on a test host (test_hosts.py) at the ports of its Pod, with
    `dns` (the Service's names) in its certificate."""

    def __init__(self, work, pki, kubeconfig, workers=2, host=None, name="policy-server", dns=()):
        self.work = work
        self.kubeconfig = kubeconfig
        self.workers = workers
        self.host = host
        self.name = name
        self.cert = pki.issue(name, f"/CN={name}", server=True, ips=[host.address] if host else (), dns=dns)
        with open(pki.ca_cert, "rb") as f:
            self.ca_bundle = f.read()
        self.address = host.address if host else "127.0.0.1"
        self.port = LISTEN_PORT if host else free_port()
        self.url = f"https://{self.address}:{self.port}"
        self.process = None
        self.log_path = os.path.join(work, f"{name}.log")

    def start(self, policies, ready_seconds=180, wait=True):
        """Starts policy-server with `policies` (id -> entry); True once
        ready (at once when not `wait`: see `ready()`)."""
        self.stop()
        policies_file = os.path.join(self.work, f"{self.name}-policies.yml")
        with open(policies_file, "w") as f:
            json.dump(policies, f)
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        env.update({"KUBECONFIG": self.kubeconfig, "NO_PROXY": "127.0.0.1,localhost", "RUST_BACKTRACE": "0"})
        folders = [os.path.join(self.work, f"{self.name}-{d}") for d in ("downloads", "sigstore")]
        for folder in folders:
            os.makedirs(folder, exist_ok=True)
        self.ready_port = READINESS_PORT if self.host else free_port()
        command = ["policy-server", "--policies", policies_file, "--addr", self.address, "--port", str(self.port),
                   "--readiness-probe-port", str(self.ready_port), "--workers", str(self.workers),
                   "--cert-file", self.cert[0], "--key-file", self.cert[1],
                   "--policies-download-dir", folders[0], "--sigstore-cache-dir", folders[1], "--log-level", "warn"]
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(
            self.host.command(command) if self.host else command,
            env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, preexec_fn=control_plane.die_with_parent)
        if not wait:
            return True
        return wait_for(self.readiness_url(), ready_seconds, self.process)

    def readiness_url(self):
        return f"http://{self.address}:{self.ready_port}/readiness"

    def ready(self):
        """One readiness probe as the kubelet sends it (1 s timeout)."""
        if not self.process or self.process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(self.readiness_url(), timeout=1) as resp:
                return 200 <= resp.status < 400
        except OSError:
            return False

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
