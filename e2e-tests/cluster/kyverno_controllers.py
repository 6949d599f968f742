"""Kyverno's own admission controller and background controller (v1.19.1,
built from the Go module proxy by e2e-tests/oracle/kyverno/build-controllers.sh),
run OUT OF CLUSTER against a `cluster.Cluster` on loopback, for `make kyverno-judge`.

What a Helm install would set up, done here through the API:
- Kyverno's CRDs, from the module's `config/crds/kyverno` and `config/crds/policies.kyverno.io`;
- the `kyverno` namespace, the `kyverno` ConfigMap as charts/kyverno/values.yaml writes it (its
  resourceFilters, excludeGroups, updateRequestThreshold, ...) but WITHOUT `[Pod/binding,*,*]` and
  `[Binding,*,*]` (Kyverno's mutate-pod-binding sample says to remove them), and a `webhooks` key whose
  namespaceSelector holds Kyverno's webhooks to the namespaces labelled `SIDE_LABEL=kyverno`;
- the `kyverno-metrics` ConfigMap (empty);
- a client certificate per controller in group system:masters (no ServiceAccount, no RBAC to write).
Kyverno makes its own CA and serving certificate (Secrets in `kyverno`) and writes its own
(Mutating|Validating)WebhookConfigurations, pointing at https://127.0.0.1:<port> (`--serverIP`).
Both processes die with the test (PR_SET_PDEATHSIG); their logs are files in the work folder.
"""
import contextlib
import json
import os
import re
import subprocess
import time

import yaml

import control_plane

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.normpath(os.path.join(HERE, "..", "oracle", "kyverno"))
NAMESPACE = "kyverno"
# The label that puts a namespace in front of Kyverno's webhooks.
SIDE_LABEL = "node-metadata-policy.judge/side"
CA_SECRET = "kyverno-svc.kyverno.svc.kyverno-tls-ca"
TLS_SECRET = "kyverno-svc.kyverno.svc.kyverno-tls-pair"
RESOURCE_MWC = "kyverno-resource-mutating-webhook-cfg"
POLICY_VWC = "kyverno-policy-validating-webhook-cfg"
# Kyverno's docs for the mutate-pod-binding sample: remove these from the resource filters.
DROPPED_FILTERS = ("[Pod/binding,*,*]", "[Binding,*,*]")


def build():
    """The folder holding `kyverno` and `background-controller` (built on first use)."""
    out = subprocess.run([os.path.join(ORACLE, "build-controllers.sh")], check=True, stdout=subprocess.PIPE,
                         text=True)
    return out.stdout.strip().splitlines()[-1]


def module_dir():
    """Where the Go module cache holds github.com/kyverno/kyverno at the version go.mod requires."""
    out = subprocess.run(["go", "list", "-m", "-json", "github.com/kyverno/kyverno"], cwd=ORACLE, check=True,
                         stdout=subprocess.PIPE, text=True)
    info = json.loads(out.stdout)
    if not info.get("Dir"):
        subprocess.run(["go", "mod", "download", "github.com/kyverno/kyverno"], cwd=ORACLE, check=True)
        return module_dir()
    return info["Dir"]


def module_version(binary):
    """The Kyverno module version a binary was built from (`go version -m`), and its build's BuildVersion."""
    out = subprocess.run(["go", "version", "-m", binary], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout
    found = re.search(r"^\s*(?:dep|mod)\s+github\.com/kyverno/kyverno\s+(\S+)", out, re.M)
    return found.group(1) if found else "?"


_TEMPLATE_NAMES = {
    "kyverno.namespace": NAMESPACE, "kyverno.fullname": "kyverno",
    "kyverno.config.configMapName": "kyverno", "kyverno.config.metricsConfigMapName": "kyverno-metrics",
    "kyverno.admission-controller.serviceName": "kyverno-svc",
}


def _render(entry):
    """A values.yaml resourceFilters entry with the chart's template calls replaced by what a release
    named `kyverno` in namespace `kyverno` renders them to."""
    entry = re.sub(r'\{\{ if [^}]*\}\}\{\{[^}]*\}\}\{\{ else \}\}\{\{ template "kyverno.namespace" \. \}\}\{\{ end \}\}',
                   NAMESPACE, entry)

    def name(m):
        template = m.group(1)
        if template in _TEMPLATE_NAMES:
            return _TEMPLATE_NAMES[template]
        component, _, what = template.removeprefix("kyverno.").partition(".")
        return f"kyverno:{component}" if what == "roleName" else f"kyverno-{component}"
    return re.sub(r'\{\{ (?:template|include) "([^"]+)" \. \}\}', name, entry)


def init_config(module):
    """The `kyverno` ConfigMap's data as the chart writes it from values.yaml, resourceFilters without
    DROPPED_FILTERS, and Kyverno's webhooks held to namespaces labelled SIDE_LABEL=kyverno."""
    with open(os.path.join(module, "charts", "kyverno", "values.yaml")) as f:
        config = yaml.safe_load(f)["config"]
    filters = [f"[*/*,{NAMESPACE},*]"] + [_render(e) for e in config["resourceFilters"]]
    filters = [f for f in filters if f not in DROPPED_FILTERS]
    selector = {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [NAMESPACE]},
        *config["webhooks"]["namespaceSelector"]["matchExpressions"],
        {"key": SIDE_LABEL, "operator": "In", "values": ["kyverno"]}]}
    data = {
        "enableDefaultRegistryMutation": str(config["enableDefaultRegistryMutation"]).lower(),
        "defaultRegistry": config["defaultRegistry"],
        "generateSuccessEvents": str(config["generateSuccessEvents"]).lower(),
        "excludeGroups": ",".join(config["excludeGroups"]),
        "resourceFilters": "".join(filters),
        "updateRequestThreshold": str(config["updateRequestThreshold"]),
        "webhooks": json.dumps({"namespaceSelector": selector}),
        "webhookAnnotations": json.dumps(config["webhookAnnotations"]),
    }
    return data


def crds(module):
    found = []
    for folder in ("kyverno", "policies.kyverno.io"):
        path = os.path.join(module, "config", "crds", folder)
        for name in sorted(os.listdir(path)):
            if name.endswith(".yaml"):
                with open(os.path.join(path, name)) as f:
                    found += [d for d in yaml.safe_load_all(f) if d]
    return found


class KyvernoControllers:
    """Kyverno's admission controller and background controller against `cluster`."""

    def __init__(self, cluster, bin_dir):
        self.cluster = cluster
        self.bin = bin_dir
        self.work = os.path.join(cluster.work, "kyverno")
        os.makedirs(self.work, exist_ok=True)
        self.processes = []
        self.logs = {}
        self.webhook_port = control_plane.free_port()

    @property
    def admin(self):
        return self.cluster.admin

    @property
    def admission(self):
        """The admission controller's process: Kyverno's webhook server."""
        return next((p for p in self.processes if os.path.basename(p.args[0]) == "kyverno"), None)

    def versions(self):
        return {name: module_version(os.path.join(self.bin, name)) for name in ("kyverno", "background-controller")}

    def install(self, module):
        """CRDs, namespace, ConfigMaps: what the chart installs beside the Deployments."""
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        names = []
        for crd in crds(module):
            try:
                self.admin.create(base, crd)
            except control_plane.ApiError as e:
                if e.status != 409:
                    raise
            names.append(crd["metadata"]["name"])

        def established():
            for name in names:
                conditions = self.admin.get(f"{base}/{name}").get("status", {}).get("conditions", [])
                if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                    return False
            return True
        wait(established, 60, "Kyverno's CRDs established")
        self.cluster.ensure_namespace(NAMESPACE)
        self.config = init_config(module)
        for name, data in (("kyverno", self.config), ("kyverno-metrics", {})):
            self.admin.apply({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": name, "namespace": NAMESPACE}, "data": data})

    def _kubeconfig(self, name):
        cert = self.cluster.plane.pki.issue(name, f"/CN={name}/O=system:masters")
        return control_plane.kubeconfig(os.path.join(self.work, f"{name}.kubeconfig"), self.cluster.plane.server,
                                        self.cluster.plane.pki.ca_cert, cert=cert)

    def _start(self, name, args, env):
        log_path = os.path.join(self.work, f"{name}.log")
        self.logs[name] = log_path
        log = open(log_path, "w")
        full_env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        full_env.update(NO_PROXY="127.0.0.1,localhost", KYVERNO_NAMESPACE=NAMESPACE, KYVERNO_SVC="kyverno-svc",
                        INIT_CONFIG="kyverno", METRICS_CONFIG="kyverno-metrics", **env)
        proc = subprocess.Popen([os.path.join(self.bin, name), *args], stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, env=full_env, preexec_fn=control_plane.die_with_parent)
        self.processes.append(proc)
        return proc

    def start(self, module, ready_seconds=180):
        """Installs what Kyverno needs, starts both controllers and waits until Kyverno has written its
        webhook configurations and serves its webhook."""
        self.install(module)
        common = ["--metricsHost=127.0.0.1", "--controllerRuntimeMetricsAddress=0", "--enableReporting=validate",
                  "--loggingFormat=text"]
        self._start("kyverno", [
            f"--kubeconfig={self._kubeconfig('kyverno-admission')}",
            f"--serverIP=127.0.0.1:{self.webhook_port}", "--webhookServerHost=127.0.0.1",
            f"--webhookServerPort={self.webhook_port}",
            f"--caSecretName={CA_SECRET}", f"--tlsSecretName={TLS_SECRET}",
            "--admissionReports=false", "--generateValidatingAdmissionPolicy=false",
            f"--metricsPort={control_plane.free_port()}", *common],
            {"KYVERNO_SERVICEACCOUNT_NAME": "kyverno-admission-controller",
             "KYVERNO_DEPLOYMENT": "kyverno-admission-controller", "KYVERNO_POD_NAME": "kyverno-admission-local"})
        self._start("background-controller", [
            f"--kubeconfig={self._kubeconfig('kyverno-background')}",
            f"--metricsPort={control_plane.free_port()}", *common],
            {"KYVERNO_SERVICEACCOUNT_NAME": "kyverno-background-controller",
             "KYVERNO_DEPLOYMENT": "kyverno-background-controller",
             "KYVERNO_POD_NAME": "kyverno-background-local", "BACKGROUND_SCAN_INTERVAL": "1h"})
        base = "/apis/admissionregistration.k8s.io/v1"

        def ready():
            self.check_alive()
            if not self.admin.exists(f"{base}/validatingwebhookconfigurations/{POLICY_VWC}"):
                return False
            if not self.admin.exists(f"{base}/mutatingwebhookconfigurations/{RESOURCE_MWC}"):
                return False
            try:  # the webhook server answers (its liveness endpoint, over Kyverno's own TLS)
                import ssl
                import urllib.request
                context = ssl._create_unverified_context()
                with urllib.request.urlopen(f"https://127.0.0.1:{self.webhook_port}/health/liveness",
                                            context=context, timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        wait(ready, ready_seconds, "Kyverno's webhook configurations and webhook server",
             on_timeout=lambda: self.log_tails())
        # The API server picks new webhook configurations up from its informer.
        time.sleep(1.5)


    def check_alive(self):
        for p in self.processes:
            if p.poll() is not None:
                name = os.path.basename(p.args[0])
                raise RuntimeError(f"{name} exited with {p.returncode}:\n{control_plane.tail(self.logs[name], 40)}")

    def log_tails(self, lines=25):
        return "\n".join(f"--- {name} log tail\n{control_plane.tail(path, lines)}" for name, path in self.logs.items())

    def stop(self):
        control_plane.stop(self.processes)
        self.processes.clear()
        # With --serverIP Kyverno leaves its webhook configurations behind on shutdown.
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            try:
                self.admin.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{kind}"
                                   "?labelSelector=webhook.kyverno.io%2Fmanaged-by%3Dkyverno", timeout=10)
            except (control_plane.ApiError, OSError):
                pass


def policy_path(doc, namespace=None):
    """The API path of a Kyverno policy document's collection."""
    group, version = doc["apiVersion"].split("/")
    plural = {"ClusterPolicy": "clusterpolicies", "Policy": "policies", "MutatingPolicy": "mutatingpolicies",
              "NamespacedMutatingPolicy": "namespacedmutatingpolicies"}[doc["kind"]]
    if doc["kind"] in ("Policy", "NamespacedMutatingPolicy"):
        return f"/apis/{group}/{version}/namespaces/{namespace}/{plural}"
    return f"/apis/{group}/{version}/{plural}"


def policy_ready(admin, doc, path):
    """The policy as stored, once Kyverno reports it ready (None before)."""
    obj = admin.get(path)
    status = obj.get("status") or {}
    if doc["kind"] in ("ClusterPolicy", "Policy"):
        ok = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    else:
        ok = bool((status.get("conditionStatus") or {}).get("ready"))
    return obj if ok else None


@contextlib.contextmanager
def installed(admin, doc, seconds=60):
    """A cluster-wide Kyverno policy, created and ready for the block, then
    deleted and gone (with the time the API server needs to see Kyverno's
    webhook configuration change)."""
    path = policy_path(doc)
    item = f"{path}/{doc['metadata']['name']}"
    admin.create(path, doc)
    try:
        wait(lambda: policy_ready(admin, doc, item), seconds, f"{doc['kind']} {doc['metadata']['name']} Ready")
        time.sleep(1.5)
        yield
    finally:
        admin.delete(item)
        wait(lambda: not admin.exists(item), seconds, f"{doc['kind']} {doc['metadata']['name']} deleted")


def wait(check, seconds, what, interval=0.25, on_timeout=None):
    deadline = time.time() + seconds
    last = None
    while time.time() < deadline:
        try:
            value = check()
            if value:
                return value
        except (control_plane.ApiError, OSError) as e:
            last = e
        time.sleep(interval)
    raise TimeoutError(f"{what}: not after {seconds} s ({last})" + (f"\n{on_timeout()}" if on_timeout else ""))
