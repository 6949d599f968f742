"""A real Kubernetes control plane on loopback for the cluster tests: etcd,
kube-apiserver (TLS, RBAC, a client certificate per component),
kube-scheduler and kube-controller-manager, built by build.sh from the Go
module proxy. No kubelet: Nodes are objects created through the API, Pods are
bound by the real scheduler and never run.
"""
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "load"))
from harness import free_port, stop  # noqa: E402  (the load tests' process helpers)


def die_with_parent():
    """For Popen's preexec_fn: the child is killed if this process dies first,
    even by SIGKILL, so that no component outlives a test run (SIGKILL: a
    kube-apiserver that lost etcd does not finish a graceful shutdown)."""
    import ctypes
    import signal
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def build_binaries():
    """The folder holding etcd, kube-apiserver, kube-scheduler and
    kube-controller-manager (built on first use, then reused)."""
    out = subprocess.run([os.path.join(HERE, "build.sh")], check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout.strip().splitlines()[-1]


class Pki:
    """A throwaway CA and the certificates signed by it (openssl)."""

    def __init__(self, folder):
        self.folder = folder
        self.ca_cert = os.path.join(folder, "ca.crt")
        self.ca_key = os.path.join(folder, "ca.key")
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", self.ca_key, "-out", self.ca_cert, "-days", "2", "-subj", "/CN=cluster-test-ca")

    def _openssl(self, *args):
        subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def issue(self, name, subject, server=False, ips=(), dns=()):
        """(cert, key) for a client (subject /CN=user/O=group) or a server on
        loopback, on `ips` and by the names `dns`."""
        cert, key, csr = (os.path.join(self.folder, f"{name}.{ext}") for ext in ("crt", "key", "csr"))
        ext = os.path.join(self.folder, f"{name}.ext")
        with open(ext, "w") as f:
            if server:
                names = ",".join(["IP:127.0.0.1", "DNS:localhost", *(f"IP:{ip}" for ip in ips),
                                  *(f"DNS:{name}" for name in dns)])
                f.write(f"subjectAltName={names}\nextendedKeyUsage=serverAuth\n")
            else:
                f.write("extendedKeyUsage=clientAuth\n")
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", key, "-out", csr, "-subj", subject)
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key,
                      "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext)
        return cert, key

    def service_account_keys(self):
        key, pub = os.path.join(self.folder, "sa.key"), os.path.join(self.folder, "sa.pub")
        self._openssl("genrsa", "-out", key, "2048")
        self._openssl("rsa", "-in", key, "-pubout", "-out", pub)
        return key, pub


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


class Client:
    """JSON over HTTPS to kube-apiserver with a client certificate or a token."""

    def __init__(self, server, ca_cert, cert=None, token=None):
        self.server = server
        self.context = ssl.create_default_context(cafile=ca_cert)
        if cert:
            self.context.load_cert_chain(*cert)
        self.token = token

    def request(self, method, path, body=None, content_type="application/json", timeout=30):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=timeout) as resp:
                text = resp.read().decode()
                return json.loads(text) if text.strip().startswith(("{", "[")) else text
        except urllib.error.HTTPError as e:
            raise ApiError(e.code, e.read().decode(errors="replace")) from None

    def get(self, path):
        return self.request("GET", path)

    def exists(self, path):
        """Whether the object at `path` is there (a 404 says it is not)."""
        try:
            self.get(path)
            return True
        except ApiError as e:
            if e.status == 404:
                return False
            raise

    def create(self, path, obj):
        return self.request("POST", path, obj)

    def delete(self, path):
        try:
            return self.request("DELETE", path)
        except ApiError as e:
            if e.status != 404:
                raise

    def merge_patch(self, path, patch):
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def apply(self, obj):
        """Create the object, or replace it if it exists (kubectl apply for these tests)."""
        path = collection_path(obj)
        try:
            return self.create(path, obj)
        except ApiError as e:
            if e.status != 409:
                raise
        name = obj["metadata"]["name"]
        current = self.get(f"{path}/{name}")
        obj = dict(obj, metadata=dict(obj["metadata"], resourceVersion=current["metadata"]["resourceVersion"]))
        return self.request("PUT", f"{path}/{name}", obj)


# The resources these tests create, by kind: (API prefix, plural, namespaced).
RESOURCES = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Service": ("/api/v1", "services", True),
    "EndpointSlice": ("/apis/discovery.k8s.io/v1", "endpointslices", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "MutatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", False),
    "MutatingAdmissionPolicy": ("/apis/admissionregistration.k8s.io/v1", "mutatingadmissionpolicies", False),
    "MutatingAdmissionPolicyBinding": ("/apis/admissionregistration.k8s.io/v1",
                                       "mutatingadmissionpolicybindings", False),
}


def collection_path(obj, namespace=None):
    prefix, plural, namespaced = RESOURCES[obj["kind"]]
    if namespaced:
        ns = namespace or obj["metadata"].get("namespace", "default")
        return f"{prefix}/namespaces/{ns}/{plural}"
    return f"{prefix}/{plural}"


def kubeconfig(path, server, ca_cert, cert=None, token=None):
    user = {"client-certificate": cert[0], "client-key": cert[1]} if cert else {"token": token}
    config = {"apiVersion": "v1", "kind": "Config",
              "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority": ca_cert}}],
              "users": [{"name": "test", "user": user}],
              "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
              "current-context": "test"}
    with open(path, "w") as f:
        json.dump(config, f)  # JSON is YAML
    return path


def tail(path, lines=30):
    """The last `lines` lines of a log file, or nothing when there is none."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def version_of(binary, *args):
    out = subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "?"


class ControlPlane:
    """Starts etcd, kube-apiserver, kube-scheduler and kube-controller-manager
    in `work`; `stop()` ends them (every child, newest first)."""

    def __init__(self, bin_dir, work):
        self.bin = bin_dir
        self.work = work
        self.processes = []
        self.logs = {}
        self.commands = {}
        self.pki = Pki(work)
        self.server = None

    def binary(self, name):
        return os.path.join(self.bin, name)

    def versions(self):
        return {
            "etcd": version_of(self.binary("etcd"), "--version"),
            "kube-apiserver": version_of(self.binary("kube-apiserver"), "--version"),
            "kube-scheduler": version_of(self.binary("kube-scheduler"), "--version"),
            "kube-controller-manager": version_of(self.binary("kube-controller-manager"), "--version"),
        }

    def _start(self, name, args):
        log_path = os.path.join(self.work, f"{name}.log")
        log = open(log_path, "a")
        self.logs[name] = log_path
        self.commands[name] = args
        proc = subprocess.Popen([self.binary(name), *args], stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                preexec_fn=die_with_parent)
        self.processes.append(proc)
        return proc

    def process(self, name):
        return next((p for p in self.processes if os.path.basename(p.args[0]) == name), None)

    def kill(self, name):
        """SIGKILL to one component (etcd, kube-apiserver, kube-scheduler, ...)."""
        proc = self.process(name)
        proc.kill()
        proc.wait(timeout=30)
        self.processes.remove(proc)

    def restart(self, name):
        """The component started again with the same flags (etcd on the same data)."""
        return self._start(name, self.commands[name])

    def log_tail(self, name, lines=30):
        return tail(self.logs.get(name, ""), lines)

    def start(self, scheduler_qps=None, apiserver_args=(), apiserver_ips=(), kubelets=False):
        """`apiserver_ips`: addresses of this machine test hosts reach
        kube-apiserver at (it then listens on every address, with those in its
        certificate); `kubelets`: real kubelets keep their Nodes' leases, so
        the node-lifecycle controller runs (it lifts the not-ready taint)."""
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._start("etcd", [
            "--data-dir", os.path.join(self.work, "etcd"), "--name", "cluster-test",
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"cluster-test=http://127.0.0.1:{peer_port}",
            "--listen-metrics-urls", f"http://127.0.0.1:{free_port()}", "--log-level", "warn"])
        self._wait(lambda: urllib.request.urlopen(f"{etcd_url}/health", timeout=1).status == 200, "etcd", 30)

        serving = self.pki.issue("apiserver", "/CN=kube-apiserver", server=True, ips=apiserver_ips)
        bind = "0.0.0.0" if apiserver_ips else "127.0.0.1"
        self.admin_cert = self.pki.issue("admin", "/CN=cluster-admin/O=system:masters")
        sa_key, sa_pub = self.pki.service_account_keys()
        self.server = f"https://127.0.0.1:{api_port}"
        self._start("kube-apiserver", [
            "--etcd-servers", etcd_url, "--bind-address", bind, "--advertise-address", "127.0.0.1",
            "--secure-port", str(api_port),
            "--tls-cert-file", serving[0], "--tls-private-key-file", serving[1],
            "--client-ca-file", self.pki.ca_cert,
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", sa_pub, "--service-account-signing-key-file", sa_key,
            "--service-cluster-ip-range", "10.96.0.0/16",
            # As a production control plane: kubelets (where a test runs them)
            # are held to their own Node and its Pods.
            "--authorization-mode", "Node,RBAC",
            # The `kubernetes` Service's endpoints would have to name a
            # non-loopback address; nothing here reaches the API server through it.
            "--endpoint-reconciler-type", "none",
            # Both are on by default in 1.37; named so that the run says what it relies on.
            "--feature-gates", "PodTopologyLabelsAdmission=true",
            "--enable-admission-plugins",
            "NodeRestriction,PodTopologyLabels,MutatingAdmissionPolicy,MutatingAdmissionWebhook",
            "--profiling=false", "--v=1", *apiserver_args])
        self.admin = Client(self.server, self.pki.ca_cert, cert=self.admin_cert)
        self._wait(lambda: self.admin.get("/readyz") == "ok", "kube-apiserver", 120)

        scheduler_cert = self.pki.issue("scheduler", "/CN=system:kube-scheduler")
        scheduler_config = kubeconfig(os.path.join(self.work, "scheduler.kubeconfig"), self.server,
                                      self.pki.ca_cert, cert=scheduler_cert)
        if scheduler_qps:
            # The client limit as a KubeSchedulerConfiguration sets it (the
            # default is 50 requests a second, burst 100).
            config = os.path.join(self.work, "scheduler-config.yaml")
            with open(config, "w") as f:
                json.dump({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "clientConnection": {"kubeconfig": scheduler_config, "qps": scheduler_qps,
                                                "burst": scheduler_qps},
                           "leaderElection": {"leaderElect": False}}, f)
            scheduler_args = ["--config", config]
        else:
            scheduler_args = ["--kubeconfig", scheduler_config, "--leader-elect=false"]
        self._start("kube-scheduler", [
            *scheduler_args, "--bind-address", "127.0.0.1", "--secure-port", str(free_port()), "--v=1"])

        kcm_cert = self.pki.issue("controller-manager", "/CN=system:kube-controller-manager")
        kcm_config = kubeconfig(os.path.join(self.work, "controller-manager.kubeconfig"), self.server,
                                self.pki.ca_cert, cert=kcm_cert)
        self._start("kube-controller-manager", [
            "--kubeconfig", kcm_config, "--leader-elect=false",
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            # Without kubelets no one renews Node leases: the node-lifecycle
            # controller would mark every Node unreachable and taint it.
            "--controllers", "*" if kubelets else "*,-node-lifecycle-controller",
            "--service-account-private-key-file", sa_key, "--root-ca-file", self.pki.ca_cert,
            "--use-service-account-credentials=true", "--v=1"])
        # The service-account controller gives each namespace its `default`
        # ServiceAccount, which the ServiceAccount admission plugin waits for.
        self._wait(lambda: self.admin.get("/api/v1/namespaces/default/serviceaccounts/default"),
                   "kube-controller-manager", 60, ignore=(ApiError,))

    def _wait(self, ready, name, seconds, ignore=()):
        deadline = time.time() + seconds
        last = None
        while time.time() < deadline:
            for p in self.processes:
                if p.poll() is not None:
                    raise RuntimeError(f"{os.path.basename(p.args[0])} exited with {p.returncode}:\n"
                                       f"{self.log_tail(os.path.basename(p.args[0]))}")
            try:
                if ready():
                    return
            except (OSError, ApiError, *ignore) as e:
                last = e
            time.sleep(0.3)
        raise RuntimeError(f"{name} not ready after {seconds} s ({last}):\n{self.log_tail(name)}")

    def stop(self):
        stop(self.processes)
        self.processes.clear()
