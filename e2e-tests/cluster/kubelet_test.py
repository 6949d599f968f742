"""`make kubelet-test`: the policy's whole path, to a running container. The
control plane of `make cluster-test` with policy-server as the webhook
(default settings) and one real Node: kubelet (built with the control plane
by build.sh) with Debian's containerd and runc, running an image made
here (oci_image.py: busybox-static, imported with `ctr`, no registry). A Pod
whose container echoes its zone from the downward API
(`metadata.annotations['topology.kubernetes.io/zone']`, which only the policy
writes) runs there, and its log is read through the API server, which reaches
the kubelet at a test host's address: kubelet runs in a network namespace of
its own on a bridge the test makes (test_hosts.py; kubelet refuses a loopback
address). As in production, kube-apiserver authorizes kubelet with the Node
authorizer and NodeRestriction, and kubelet authorizes the API server's
requests (logs) through the API server (Webhook mode).

Everything started is stopped on exit, failure and Ctrl-C: containers,
containerd's shims, mounts and cgroups left by the run are removed too (not
when this process is killed with SIGKILL: containerd and kubelet die with it,
the shims and their containers stay). SKIPPED (exit 0) when not root, or when
go, containerd, runc, ctr, busybox-static, policy-server, openssl, ip or nsenter is missing.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster as clusters  # noqa: E402
import control_plane  # noqa: E402
import kubewarden  # noqa: E402
import oci_image  # noqa: E402
import test_hosts  # noqa: E402
from control_plane import free_port  # noqa: E402
from nodes import REGION, ZONE  # noqa: E402

NODE = "kubelet-node"
NODE_ZONE, NODE_REGION = "kubelet-zone-1a", "kubelet-region-1"
IMAGE, PAUSE = "localhost/busybox:static", "localhost/pause:busybox"
NAMESPACE = "zone-reader"
CGROUP_ROOT = "/sys/fs/cgroup"
# Folders outside the work folder that cannot be moved into it: kubelet's
# device-plugin socket folder (/var/lib/kubelet/device-plugins) and
# containerd 1.6's shim sockets (/run/containerd/s). Removed after the run
# when it made them.
FIXED_FOLDERS = ("/var/lib/kubelet", "/run/containerd")
CNI_PLUGINS = "/usr/lib/cni"  # Debian's containernetworking-plugins


def cgroups():
    """The cgroups directly under each hierarchy's root (kubelet and runc
    make theirs there: kubepods, k8s.io)."""
    found = set()
    for hierarchy in os.listdir(CGROUP_ROOT):
        top = os.path.join(CGROUP_ROOT, hierarchy)
        if os.path.isdir(top) and not os.path.islink(top):
            found.update(os.path.join(top, d) for d in os.listdir(top) if os.path.isdir(os.path.join(top, d)))
    return found


def mounts_under(folder):
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == folder or p.startswith(folder + "/")]


class Node:
    """containerd and kubelet in `work`, registering the Node NODE with the
    API server as system:node:NODE."""

    def __init__(self, work, plane, ip, netns=None, apiserver_host=None, cni_network=None, images=(),
                 kubelet_config=None):
        """`ip`: the Node's address (kubelet refuses a loopback one), in the
        network namespace `netns` (a test host's, where kubelet then runs) or
        on this machine; `apiserver_host`: where kubelet reaches the API
        server from there; `cni_network`: a CNI network configuration list
        (Debian's plugins run it) instead of the host's network for every
        Pod; `images`: more (name, image archive) to import; `kubelet_config`:
        more KubeletConfiguration fields."""
        self.work = work
        self.plane = plane
        self.processes = []
        self.containerd = self.kubelet = None
        self.logs = {}
        self.socket = os.path.join(work, "containerd.sock")
        self.cgroups_before = cgroups()
        self.new_folders = [d for d in FIXED_FOLDERS if not os.path.exists(d)]
        pki = plane.pki
        self.client_cert = pki.issue("kubelet", f"/CN=system:node:{NODE}/O=system:nodes")
        self.ip = ip
        self.netns = netns
        self.apiserver_host = apiserver_host
        self.cni_network = cni_network
        self.images = images
        self.kubelet_config = kubelet_config or {}
        self.serving_cert = pki.issue("kubelet-serving", f"/CN={NODE}", server=True, ips=[self.ip])
        self.apiserver_client = pki.issue("apiserver-kubelet-client", "/CN=kube-apiserver-kubelet-client")

    def apiserver_args(self):
        """What kube-apiserver needs for this Node: a verified connection to
        the kubelet (logs), as the client the kubelet asks it to authorize.
        (The control plane runs the Node authorizer and NodeRestriction for
        the kubelet's own identity.)"""
        return ["--kubelet-client-certificate", self.apiserver_client[0],
                "--kubelet-client-key", self.apiserver_client[1],
                "--kubelet-certificate-authority", self.plane.pki.ca_cert,
                "--kubelet-preferred-address-types", "InternalIP"]

    def _start(self, name, args):
        log_path = os.path.join(self.work, f"{name}.log")
        self.logs[name] = log_path
        log = open(log_path, "w")
        proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                preexec_fn=control_plane.die_with_parent)
        proc.name = name
        self.processes.append(proc)
        return proc

    def ctr(self, *args, check=True):
        return subprocess.run(["ctr", "--address", self.socket, "--namespace", "k8s.io", *args], check=check,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30).stdout

    def start_containerd(self):
        config = os.path.join(self.work, "containerd.toml")
        state = os.path.join(self.work, "containerd")
        with open(config, "w") as f:
            f.write(f"""version = 2
root = "{state}/root"
state = "{state}/state"
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  # No registry is reachable: the Pod sandbox is this image, made here.
  sandbox_image = "{PAUSE}"
  # Lowering a process's oom_score_adj needs CAP_SYS_RESOURCE, which this
  # machine's root lacks: runc failed on the sandbox's -998 ("failed to update
  # /proc/self/oom_score_adj: Permission denied"). Clamped to containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{self.work}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_PLUGINS if self.cni_network else self.work + '/cni/bin'}"
    conf_dir = "{self.work}/cni/net.d"
""")
        if self.cni_network:
            os.makedirs(os.path.join(self.work, "cni", "net.d"), exist_ok=True)
            with open(os.path.join(self.work, "cni", "net.d", "10-pods.conflist"), "w") as f:
                json.dump(self.cni_network, f)
        self.containerd = self._start("containerd", ["containerd", "--config", config])
        self.wait(lambda: os.path.exists(self.socket) and self.ctr("version"), "containerd", 30)
        for name, command in ((IMAGE, ["/bin/sh"]), (PAUSE, ["/bin/sleep", "2147483647"])):
            archive = oci_image.write(os.path.join(self.work, name.split("/")[-1] + ".tar"), name, command)
            self.ctr("images", "import", archive)
        for name, archive in self.images:
            self.ctr("images", "import", archive)

    def grant_apiserver(self):
        """RBAC for the API server's client of the kubelet (logs, exec):
        Kubernetes' own role for it, bound as kubeadm binds it."""
        self.plane.admin.apply({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "kube-apiserver-kubelet-client"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "system:kubelet-api-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": "kube-apiserver-kubelet-client"}]})

    def start_kubelet(self):
        self.grant_apiserver()
        server = self.plane.server.replace("127.0.0.1", self.apiserver_host or "127.0.0.1")
        kubeconfig = control_plane.kubeconfig(os.path.join(self.work, "kubelet.kubeconfig"), server,
                                              self.plane.pki.ca_cert, cert=self.client_cert)
        root = os.path.join(self.work, "kubelet")
        self.port = free_port()
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            # kubelet 1.35 and later refuse cgroup v1 unless told; this machine has only v1.
            "failCgroupV1": False, "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "address": self.ip, "port": self.port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
            "tlsCertFile": self.serving_cert[0], "tlsPrivateKeyFile": self.serving_cert[1],
            # Clients with this run's certificates or a token; each request
            # authorized by the API server (SubjectAccessReview), as in production.
            "authentication": {"x509": {"clientCAFile": self.plane.pki.ca_cert},
                               "anonymous": {"enabled": False}, "webhook": {"enabled": True}},
            "authorization": {"mode": "Webhook"},
            "failSwapOn": False,
            # A test machine's disk may be fuller than a Node's default eviction
            # thresholds (nodefs 10 %, imagefs 15 % free): kubelet would evict the
            # test's Pods and taint the Node with disk-pressure. "0%" turns a
            # threshold off; 100 turns image garbage collection off (it could
            # remove an image imported for a Pod not started yet).
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "0%", "nodefs.inodesFree": "0%",
                             "imagefs.available": "0%", "imagefs.inodesFree": "0%"},
            "imageGCHighThresholdPercent": 100,
            "podLogsDir": os.path.join(self.work, "pod-logs"),
            "volumePluginDir": os.path.join(self.work, "volume-plugins"),
            **self.kubelet_config,
        }
        config_path = os.path.join(self.work, "kubelet.yaml")
        with open(config_path, "w") as f:
            json.dump(config, f)
        # In a test host's network namespace only: same mounts, same cgroups.
        netns = ["nsenter", f"--net=/run/netns/{self.netns}"] if self.netns else []
        self.kubelet = self._start("kubelet", [
            *netns, self.plane.binary("kubelet"), "--config", config_path, "--kubeconfig", kubeconfig,
            "--root-dir", root, "--hostname-override", NODE, "--node-ip", self.ip,
            "--node-labels", f"{ZONE}={NODE_ZONE},{REGION}={NODE_REGION}", "--v=1"])

    def wait(self, ready, name, seconds):
        """Until ready() is true; fails at once if containerd or kubelet exits."""
        deadline = time.time() + seconds
        last = None
        while time.time() < deadline:
            for p in self.processes:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.name} exited with {p.returncode}:\n{self.log_tail(p.name)}")
            try:
                if ready():
                    return
            except (OSError, subprocess.CalledProcessError, control_plane.ApiError) as e:
                last = e
            time.sleep(0.3)
        raise RuntimeError(f"{name} not ready after {seconds} s ({last}):\n{self.log_tail(name)}")

    def log_tail(self, name, lines=30):
        return control_plane.tail(self.logs.get(os.path.basename(name), ""), lines)

    def stop(self):
        """kubelet first (it would restart what is stopped under it), then every
        container through containerd, containerd, and what outlives it: the
        shims (they are not containerd's children once started), the mounts
        under the work folder, the cgroups and FIXED_FOLDERS made during the run."""
        if self.kubelet:
            control_plane.stop([self.kubelet])
        if self.containerd and self.containerd.poll() is None:
            try:
                for task in self.ctr("tasks", "ls", "-q").split():
                    self.ctr("tasks", "kill", "-a", "-s", "SIGKILL", task, check=False)
                    self.ctr("tasks", "delete", "-f", task, check=False)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                print(f"containers not all stopped through containerd: {e}")
        control_plane.stop(self.processes)
        self.processes.clear()
        for pid in self._shims():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for point in reversed(mounts_under(self.work)):
            subprocess.run(["umount", "--lazy", point], stderr=subprocess.DEVNULL)
        for group in sorted(cgroups() - self.cgroups_before):
            for parent, dirs, _ in sorted(os.walk(group, topdown=False), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(parent)
                except OSError as e:
                    print(f"cgroup {parent} not removed: {e}")
        for folder in self.new_folders:
            shutil.rmtree(folder, ignore_errors=True)

    def _shims(self):
        """The processes whose command line names this run's containerd (the
        shims), their children (the containers' first processes) first."""
        shims, parent = [], {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if self.socket.encode() in f.read():
                        shims.append(int(pid))
                with open(f"/proc/{pid}/stat") as f:
                    parent[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
        return [pid for pid, ppid in parent.items() if ppid in shims] + shims


def arguments(doc):
    """The options of the tests that run a kubelet."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--policy", default=os.path.join(clusters.ROOT, "annotated-policy.wasm"))
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, configuration)")
    return parser.parse_args()


def why_not(policy, tools, files):
    """Why a test that runs a kubelet cannot run here (None when it can):
    `tools` on PATH, `files` ({package: path}), root, the module."""
    missing = [tool for tool in tools if not shutil.which(tool)]
    missing += [package for package, path in files.items() if not os.path.exists(path)]
    return f"{', '.join(missing)} missing" if missing else "needs root" if os.geteuid() != 0 else \
        f"{policy} missing (needs kwctl)" if not os.path.exists(policy) else None


def zone_pod():
    """The Pod of the issue: its container echoes the annotation the policy
    writes, read through the downward API."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "zone-reader"},
            "spec": {"containers": [{
                "name": "reader", "image": IMAGE, "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", 'echo "zone=$ZONE"'],
                "env": [{"name": "ZONE", "valueFrom": {"fieldRef": {
                    "fieldPath": f"metadata.annotations['{ZONE}']"}}}]}],
                # No CNI plugin here; the host network needs none.
                "hostNetwork": True,
                # The Node stays NotReady without a CNI plugin (and nothing lifts
                # the not-ready taint): the Pod tolerates it.
                "tolerations": [{"operator": "Exists"}],
                # Nothing to mount: no service-account token volume to clean up.
                "automountServiceAccountToken": False, "enableServiceLinks": False,
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 0}}


def run(cluster, node, policy):
    print(f"{'kubelet':24} {control_plane.version_of(cluster.plane.binary('kubelet'), '--version')}")
    print(f"{'containerd':24} {control_plane.version_of('containerd', '--version')}")
    print(f"{'runc':24} {control_plane.version_of('runc', '--version')}")
    started = time.time()
    cluster.start()
    node.start_containerd()
    node.start_kubelet()
    node.wait(lambda: cluster.admin.get(f"/api/v1/nodes/{NODE}"), "kubelet (Node registered)", 60)
    print(f"Node {NODE} registered by its kubelet after {time.time() - started:.1f} s")

    cluster.ensure_namespace(NAMESPACE)
    example = clusters.example("cluster-admission-policy.yaml")[0]
    example["spec"]["settings"] = {}  # default settings: zone and region as annotations
    if not cluster.policy_server.start({kubewarden.unique_name(example): kubewarden.policies_entry(example, policy)}):
        raise RuntimeError(f"policy-server not ready:\n{control_plane.tail(cluster.policy_server.log_path, 20)}")
    cluster.install_webhooks([example])

    pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
    cluster.admin.create(pods, zone_pod())
    done = clusters.wait_until(
        lambda: (lambda p: p if p.get("status", {}).get("phase") in ("Succeeded", "Failed") else None)(
            cluster.pod(NAMESPACE, "zone-reader")), 120, "the Pod ran to completion")
    annotations = done["metadata"].get("annotations", {})
    log = cluster.admin.request("GET", f"{pods}/zone-reader/log")
    print(f"Pod on {done['spec'].get('nodeName')}, phase {done['status']['phase']}, "
          f"zone annotation {annotations.get(ZONE)!r}, log (through the API server): {log.strip()!r}")
    print(f"Pod finished {time.time() - started:.1f} s after the start")
    ok = done["status"]["phase"] == "Succeeded" and annotations.get(ZONE) == NODE_ZONE \
        and log.strip() == f"zone={NODE_ZONE}"
    return ok


def main():
    args = arguments(__doc__)
    why = why_not(args.policy, ("go", "containerd", "runc", "ctr", "policy-server", "openssl", "ip", "nsenter"),
                  {"busybox-static": oci_image.BUSYBOX})
    if why:
        print(f"kubelet test: SKIPPED ({why})")
        return 0
    started = time.time()
    work = tempfile.mkdtemp(prefix="kubelet-test-")
    # The Node's address: a test host's (a network namespace on a bridge of
    # this machine), where kubelet runs; kube-apiserver is reached at the bridge.
    network = test_hosts.TestNetwork().open()
    host = network.host(1)
    # No fixture Nodes: the kubelet's Node is the only one, so the scheduler picks it.
    cluster = clusters.Cluster(work, node_list=[], apiserver_ips=(network.gateway,))
    node = Node(work, cluster.plane, host.address, netns=host.namespace, apiserver_host=network.gateway)
    cluster.apiserver_args = node.apiserver_args()
    ok = False
    # Ctrl-C and SIGTERM stop every process through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        ok = run(cluster, node, args.policy)
    except KeyboardInterrupt:
        print("interrupted")
    except Exception:
        traceback.print_exc()
        for name in ("containerd", "kubelet"):
            print(f"--- {name} log tail\n{node.log_tail(name, 15)}")
    finally:
        node.stop()
        cluster.finish(args.keep)
        network.close()
    print(f"kubelet-test: {'passed' if ok else 'FAILED'} in {time.time() - started:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
