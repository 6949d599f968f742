"""`make kubewarden-test`: the policy installed as a user installs it, on the
whole Kubewarden stack. A real control plane (Node,RBAC authorization,
NodeRestriction), one kubelet with containerd, runc and Debian's CNI bridge
plugin (every Pod has an address of its own on the bridge `nmpkw0`, made by
the test on this machine, 10.214.0.0/24), and kube-proxy (nftables) so that
Pods reach the API server through the `kubernetes` Service as in any
cluster. Kubewarden as its Helm charts install it (kubewarden_stack.py):
the CRDs, kubewarden-controller v1.35.0 (built by
e2e-tests/kubewarden/build-controller.sh) running as a Pod, its RBAC and
webhooks; policy-server 1.35.0 runs as the Pods the controller's Deployment
makes, from an image packed here under the name the PolicyServer gives
(ghcr.io/kubewarden/policy-server:v1.35.0; imported into containerd, never
pulled). The module is pushed with kwctl to docker-registry on the bridge
address and signed with cosign and a key made for the run; the
PolicyServer requires that key.

Then README's Quick start runs, line by line, as a user's shell would run it
(kubectl built here from the control plane's Kubernetes release). The test's
only changes are to copies of the examples: the module reference names the
local registry, and the PolicyServer lists that registry in
`insecureSources` (plain HTTP) and names the verification ConfigMaps. What
must hold: the controller marks the policy active, the Pod the README
applies is bound by the real scheduler with its Node's zone (read back
through the API server and from the container's log), through the webhook
the controller wrote (a Service reference). Then the upgrade and the
refusals (unsigned module, module altered after signing, settings the
policy refuses), each timed, with the Pods created meanwhile counted.

SKIPPED (exit 0) when not root, when a tool is missing, or when there is no
git copy of kubewarden/kubewarden-controller to build the controller from.
"""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oci"))
sys.path.insert(0, os.path.join(HERE, "..", "signature"))

import cluster as clusters  # noqa: E402
import control_plane  # noqa: E402
import kubelet_test  # noqa: E402
import kubewarden  # noqa: E402
import kubewarden_stack as stack  # noqa: E402
import oci_image  # noqa: E402
import registry as registries  # noqa: E402
import signature_test  # noqa: E402
from control_plane import free_port  # noqa: E402
import nodes  # noqa: E402
from nodes import ZONE  # noqa: E402

BRIDGE, SUBNET = "nmpkw0", "10.214.0"
GATEWAY = f"{SUBNET}.1"  # this machine on the bridge: the Node's address, the registry's
KUBERNETES_SERVICE_IP = "10.96.0.1"  # the first address of the control plane's service range
KUBEWARDEN_BUILD = os.path.join(HERE, "..", "kubewarden")
REPOSITORY = "policies/node-metadata-policy"
POLICY = "node-metadata"  # examples/dedicated-policy-server.yaml's PolicyServer and policy
FAR_LABEL = "example.com/no-kubelet"
BURST_NAMESPACE = "burst"
CA_CERTIFICATES = "/etc/ssl/certs/ca-certificates.crt"
BUSYBOX_IMAGE = "docker.io/library/busybox:1.36"  # examples/pod-reading-node-metadata.yaml's image


def conditions(status):
    """{type: status} of an object's `status.conditions`."""
    return {c["type"]: c["status"] for c in (status or {}).get("conditions") or []}


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def build(script):
    """The folder a build script prints last; None when it exits 3 (nothing to build from)."""
    out = subprocess.run([os.path.join(KUBEWARDEN_BUILD, script)], stdout=subprocess.PIPE, text=True)
    if out.returncode == 3:
        return None
    out.check_returncode()
    return out.stdout.strip().splitlines()[-1]


def cni_network(work):
    """The Pods' network: Debian's bridge plugin on BRIDGE (the test made it,
    with GATEWAY), addresses from host-local kept in the work folder."""
    return {"cniVersion": "0.4.0", "name": "nmp-pods", "plugins": [
        {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
         "ipam": {"type": "host-local", "dataDir": os.path.join(work, "cni", "ipam"),
                  "ranges": [[{"subnet": f"{SUBNET}.0/24", "rangeStart": f"{SUBNET}.10",
                               "gateway": GATEWAY}]],
                  "routes": [{"dst": "0.0.0.0/0"}]}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}


class Stack:
    """Every process and network object of the run; `stop()` removes them."""

    def __init__(self, work, bins):
        self.work = work
        self.bins = bins
        self.processes = []
        self.plane = control_plane.ControlPlane(control_plane.build_binaries(), work)
        images = [(name, oci_image.write(os.path.join(work, f"{label}.tar"), name, command, files=files, user=user))
                  for label, name, command, files, user in self.image_specs()]
        # No DNS server is reachable here: Pods get one that refuses at once
        # (loopback in their own network namespace) rather than the host's,
        # which would let policy-server's lookup of Sigstore's TUF repository
        # time out (50 s per start, measured) before it gives up on it.
        resolv_conf = os.path.join(work, "resolv.conf")
        with open(resolv_conf, "w") as f:
            f.write("nameserver 127.0.0.1\n")
        self.node = kubelet_test.Node(work, self.plane, ip=GATEWAY, cni_network=cni_network(work), images=images,
                                      kubelet_config={"resolvConf": resolv_conf})
        self.kubectl_env = None

    def image_specs(self):
        policy_server = shutil.which("policy-server")
        libraries = {path: path for path in oci_image.shared_libraries(policy_server)}
        return [
            # policy-server's release image runs /policy-server as 65533 (its
            # Dockerfile), on distroless/static, which has the CA certificates
            # (its HTTP client will not start without).
            ("policy-server", stack.POLICY_SERVER_IMAGE, ["/policy-server"],
             {"/policy-server": policy_server, **libraries, CA_CERTIFICATES: CA_CERTIFICATES}, "65533:65533"),
            # kubewarden-controller's runs /controller as 65532 (distroless nonroot).
            ("controller", stack.CONTROLLER_IMAGE, ["/controller"],
             {"/controller": os.path.join(self.bins["controller"], "controller")}, "65532:65532"),
            ("busybox", BUSYBOX_IMAGE, ["/bin/sh"], None, None),
        ]

    @staticmethod
    def pod_netns():
        """The network namespaces containerd made for Pods (CNI names them cni-...)."""
        return {line.split()[0] for line in ip("netns", "list", check=False).stdout.splitlines()
                if line.startswith("cni-")}

    def remove_pod_netns(self):
        """Pod network namespaces (and so their veths) that containerd did not
        tear down: containers are killed at the end, not stopped by kubelet."""
        for name in self.pod_netns():
            ip("netns", "del", name, check=False)

    def start(self):
        # What a killed run left (no other test here runs Pods on a CNI network).
        self.remove_pod_netns()
        ip("link", "del", BRIDGE, check=False)
        ip("link", "add", BRIDGE, "type", "bridge")
        ip("addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")
        self.plane.start(kubelets=True, apiserver_ips=(GATEWAY, KUBERNETES_SERVICE_IP), apiserver_args=[
            *self.node.apiserver_args(),
            "--enable-admission-plugins", "NodeRestriction",
            # The `kubernetes` Service's endpoint: the address Pods reach it at.
            "--advertise-address", GATEWAY, "--endpoint-reconciler-type", "lease"])
        self.admin = self.plane.admin
        self.start_kube_proxy()
        self.registry = registries.Registry(self.work, self.processes, address=GATEWAY)
        if not self.registry.start():
            raise RuntimeError(f"docker-registry did not start:\n{control_plane.tail(self.registry.log)}")
        self.node.start_containerd()
        self.node.start_kubelet()
        clusters.wait_until(lambda: self.node_ready(), 90, f"Node {kubelet_test.NODE} Ready")
        self.kubectl_env = dict(os.environ, KUBECONFIG=control_plane.kubeconfig(
            os.path.join(self.work, "admin.kubeconfig"), self.plane.server, self.plane.pki.ca_cert,
            cert=self.plane.admin_cert), PATH=f"{self.bins['kubectl']}:{os.environ['PATH']}")

    def node_ready(self):
        try:
            node = self.admin.get(f"/api/v1/nodes/{kubelet_test.NODE}")
        except control_plane.ApiError:
            return False
        return conditions(node.get("status")).get("Ready") == "True"

    def start_kube_proxy(self):
        cert = self.plane.pki.issue("kube-proxy", "/CN=system:kube-proxy")
        kubeconfig = control_plane.kubeconfig(os.path.join(self.work, "kube-proxy.kubeconfig"), self.plane.server,
                                              self.plane.pki.ca_cert, cert=cert)
        log = open(os.path.join(self.work, "kube-proxy.log"), "w")
        self.processes.append(subprocess.Popen([
            os.path.join(self.bins["kubectl"], "kube-proxy"), "--kubeconfig", kubeconfig,
            "--proxy-mode", "nftables", "--cluster-cidr", f"{SUBNET}.0/24",
            "--hostname-override", kubelet_test.NODE, "--nodeport-addresses", f"{GATEWAY}/32",
            "--metrics-bind-address", f"127.0.0.1:{free_port()}",
            "--healthz-bind-address", f"127.0.0.1:{free_port()}",
            # Leave this machine's conntrack limits alone.
            "--conntrack-max-per-core", "0", "--v=1"], stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            preexec_fn=control_plane.die_with_parent))

    def kubectl(self, *args, input=None, check=True, timeout=120):
        out = subprocess.run(["kubectl", *args], input=input, capture_output=True, text=True, env=self.kubectl_env,
                             timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()[-1500:]}")
        return out.stdout

    def apply_objects(self, objects, verb="apply"):
        return self.kubectl(verb, "-f", "-", input=yaml.safe_dump_all(objects))

    def stop(self):
        self.node.stop()
        control_plane.stop(self.processes)
        self.plane.stop()
        # kube-proxy's tables, which it leaves when stopped.
        for family in ("ip", "ip6"):
            subprocess.run(["nft", "delete", "table", family, "kube-proxy"], stderr=subprocess.DEVNULL)
        self.remove_pod_netns()
        ip("link", "del", BRIDGE, check=False)


def doc_commands(path, heading):
    """The commands of the shell block under `heading` in the doc at `path`."""
    with open(os.path.join(clusters.ROOT, path)) as f:
        text = f.read()
    section = text.split(heading + "\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def user_examples(work, reg):
    """A copy of examples/ with the test's changes (see the docstring)."""
    folder = os.path.join(work, "user", "examples")
    shutil.copytree(os.path.join(clusters.ROOT, "examples"), folder)
    path = os.path.join(folder, "dedicated-policy-server.yaml")
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for doc in docs:
        if doc["kind"] == "PolicyServer":
            doc["spec"]["insecureSources"] = [reg.host]
        else:
            doc["spec"]["module"] = reg.uri(REPOSITORY, "v0.1.0")
    with open(path, "w") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)
    return os.path.dirname(folder)


class Checks:
    def __init__(self):
        self.failed = 0

    def case(self, ok, line, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'}  {line}" + (f"\n      {detail}" if detail and not ok else ""), flush=True)
        self.failed += 0 if ok else 1
        return ok


def policy_status(kw):
    try:
        policy = kw.admin.get(f"/apis/policies.kubewarden.io/v1/clusteradmissionpolicies/{POLICY}")
    except control_plane.ApiError:
        return {}
    return policy.get("status", {})


def install_kubewarden(kw):
    started = time.time()
    kw.apply_objects(stack.crds(os.path.join(kw.bins["controller"], "crds")), verb="create")
    clusters.wait_until(lambda: all(
        conditions(crd.get("status")).get("Established") == "True"
        for crd in kw.admin.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]),
        60, "CRDs established")
    kw.kubectl("create", "namespace", stack.NAMESPACE)
    clusters.wait_default_service_account(kw.admin, stack.NAMESPACE)
    kw.apply_objects(stack.controller(kw.work) + stack.defaults_rbac())
    kw.kubectl("rollout", "status", "-n", stack.NAMESPACE, f"deployment/{stack.RELEASE}", "--timeout=60s",
               timeout=200)
    print(f"kubewarden-controller running as a Pod, Ready after {time.time() - started:.1f} s", flush=True)


def diagnose(kw):
    """What a user would look at: Pods, events, the policy's status, logs."""
    if kw.kubectl_env:
        for args in (("get", "pods", "-A", "-o", "wide"), ("get", "events", "-A", "--sort-by=.lastTimestamp"),
                     ("get", "clusteradmissionpolicies,policyservers", "-o", "yaml"),
                     ("logs", "-n", stack.NAMESPACE, f"deployment/{stack.RELEASE}", "--tail=20"),
                     ("logs", "-n", stack.NAMESPACE, "-l", f"kubewarden/policy-server={POLICY}", "--tail=20")):
            out = subprocess.run(["kubectl", *args], capture_output=True, text=True, env=kw.kubectl_env, timeout=30)
            print(f"--- kubectl {' '.join(args)}\n{(out.stdout + out.stderr)[-4000:]}")
    for name in ("containerd", "kubelet"):
        print(f"--- {name} log tail\n{kw.node.log_tail(name, 15)}")


def main():
    args = kubelet_test.arguments(__doc__)
    why = kubelet_test.why_not(
        args.policy, ("go", "containerd", "runc", "ctr", "policy-server", "kwctl", "docker-registry", "openssl", "nft",
                      "ip"),
        {"busybox-static": oci_image.BUSYBOX, "ca-certificates": CA_CERTIFICATES,
         "containernetworking-plugins": f"{kubelet_test.CNI_PLUGINS}/bridge"})
    if why:
        print(f"kubewarden test: SKIPPED ({why})")
        return 0
    started = time.time()
    controller = build("build-controller.sh")
    if controller is None:
        print("kubewarden test: SKIPPED (no git copy of kubewarden/kubewarden-controller v1.35.0 to build the "
              "controller from; set KUBEWARDEN_CONTROLLER_GIT)")
        return 0
    bins = {"controller": controller, "kubectl": build("build.sh"), "cosign": signature_test.build_cosign()}
    print(f"built or reused in {time.time() - started:.1f} s", flush=True)
    work = tempfile.mkdtemp(prefix="kubewarden-test-")
    kw = Stack(work, bins)
    checks = Checks()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        run(kw, checks, args.policy)
    except KeyboardInterrupt:
        print("interrupted")
        checks.failed += 1
    except Exception:
        traceback.print_exc()
        checks.failed += 1
        diagnose(kw)
    finally:
        kw.stop()
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"kubewarden-test: {'passed' if not checks.failed else 'FAILED'} in {time.time() - started:.1f} s")
    return 1 if checks.failed else 0


def run_lines(kw, checks, lines, folder, what):
    """Each shell line as a user's shell runs it; stops at the first failure."""
    for line in lines:
        began = time.time()
        out = subprocess.run(["bash", "-c", line], cwd=folder, capture_output=True, text=True, env=kw.kubectl_env,
                             timeout=400)
        print(f"$ {line}\n{out.stdout.strip()}" + (f"\n{out.stderr.strip()}" if out.returncode else "")
              + f"\n  ({time.time() - began:.1f} s, exit {out.returncode})", flush=True)
        if not checks.case(out.returncode == 0, f"{what}: {line}", out.stderr[-800:]):
            raise RuntimeError(f"{what} stopped")


def register_far_nodes(kw, count=3):
    """Nodes with no kubelet (API objects, as make cluster-test registers
    them) for the bursts' Pods: bound by the scheduler, never run. Tainted,
    so that nothing else (policy-server's Pods) is placed there."""
    template = nodes.large_node()
    zones = ("far-zone-a", "far-zone-b", "far-zone-c")
    for i in range(count):
        node = nodes.variant(template, f"far-node-{i}", zones[i % 3], "m5.xlarge", str(i), str(i))
        node["metadata"]["labels"][FAR_LABEL] = "true"
        node["spec"] = {"taints": [{"key": FAR_LABEL, "value": "true", "effect": "NoSchedule"}]}
        # Room for every burst's Pods (the template's 58 would fill up).
        for field in ("capacity", "allocatable"):
            node["status"][field]["pods"] = "1000"
        nodes.register(kw.admin, node)
    return set(zones)


class Burst(threading.Thread):
    """Pods created at `rate` a second in NAMESPACE until stopped, each
    placed by the scheduler on a far Node (the webhook sees their Bindings)."""

    def __init__(self, kw, label, rate=3):
        super().__init__(daemon=True)
        self.kw, self.label, self.rate = kw, label, rate
        self.stopping = threading.Event()
        self.created, self.errors = [], []

    def run(self):
        path = f"/api/v1/namespaces/{BURST_NAMESPACE}/pods"
        began = time.time()
        while not self.stopping.is_set():
            name = f"{self.label}-{len(self.created)}"
            spec = clusters.pod_spec(node_selector={FAR_LABEL: "true"})
            spec["tolerations"] = [{"operator": "Exists"}]  # far Nodes turn unreachable: no kubelet
            try:
                self.kw.admin.create(path, clusters.pod(name, spec, labels={"burst": self.label}))
                self.created.append(name)
            except (OSError, control_plane.ApiError) as e:
                self.errors.append(str(e)[:200])
            time.sleep(max(0.0, began + len(self.created) / self.rate - time.time()))

    def finish(self, zones):
        """Stops, waits up to 60 s for every Pod to be bound; returns a summary line and the count without metadata."""
        self.stopping.set()
        self.join()
        deadline = time.time() + 60
        while True:
            pods = self.kw.admin.get(f"/api/v1/namespaces/{BURST_NAMESPACE}/pods?labelSelector=burst%3D{self.label}")
            pods = pods["items"]
            bound = [p for p in pods if p["spec"].get("nodeName")]
            if len(bound) == len(pods) or time.time() > deadline:
                break
            time.sleep(1)
        without = [p["metadata"]["name"] for p in bound if p["metadata"].get("annotations", {}).get(ZONE) not in zones]
        line = (f"{len(pods)} Pods created meanwhile, {len(bound)} bound, {len(without)} without metadata, "
                f"{len(self.errors)} creation errors")
        if len(bound) < len(pods):
            line += f" (NOT BOUND after 60 s: {len(pods) - len(bound)})"
        # Room on the far Nodes for the next burst (no kubelet: removed at once).
        self.kw.admin.request("DELETE", f"/api/v1/namespaces/{BURST_NAMESPACE}/pods?labelSelector=burst%3D"
                              f"{self.label}&gracePeriodSeconds=0")
        return line, len(without) + len(pods) - len(bound) + len(self.errors)


def rollout_state(kw):
    """(deployment done, policy active and up to date, policy-server Pods) now."""
    name = f"policy-server-{POLICY}"
    try:
        deployment = kw.admin.get(f"/apis/apps/v1/namespaces/{stack.NAMESPACE}/deployments/{name}")
    except control_plane.ApiError:
        return False, False, []
    spec, status = deployment["spec"], deployment.get("status", {})
    done = status.get("observedGeneration") == deployment["metadata"]["generation"] and all(
        status.get(k) == spec["replicas"] for k in ("updatedReplicas", "readyReplicas", "availableReplicas")) \
        and status.get("replicas") == spec["replicas"]
    policy = policy_status(kw)
    active = policy.get("policyStatus") == "active" and all(
        conditions(policy).get(c) == "True" for c in ("PolicyActive", "PolicyUniquelyReachable",
                                               "PolicyServerConfigurationUpToDate"))
    pods = kw.admin.get(f"/api/v1/namespaces/{stack.NAMESPACE}/pods?labelSelector=kubewarden%2Fpolicy-server%3D"
                        f"{POLICY}")["items"]
    return done, active, pods


def restarted_pod(pods, before):
    """A policy-server Pod not among `before` (names) whose container has failed."""
    for pod in pods:
        if pod["metadata"]["name"] in before:
            continue
        for container in pod.get("status", {}).get("containerStatuses") or []:
            waiting = container.get("state", {}).get("waiting", {}).get("reason")
            if container.get("restartCount", 0) >= 1 or waiting == "CrashLoopBackOff":
                return pod["metadata"]["name"]
    return None


def patch_policy(kw, spec):
    return lambda: kw.kubectl("patch", "clusteradmissionpolicy", POLICY, "--type", "merge",
                              "-p", json.dumps({"spec": spec}))


def change(kw, checks, zones, what, action, expect_refused, seconds=300):
    """`action` (a change of the policy or its PolicyServer) during a burst
    of Pods; timed until the rollout completes and the policy is active, or,
    when `expect_refused`, until a new policy-server Pod has failed (the old
    ones keep serving). Returns the burst's Pods without metadata."""
    burst = Burst(kw, re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-")[:30])
    burst.start()
    time.sleep(3)
    before = {pod["metadata"]["name"] for pod in rollout_state(kw)[2]}
    began = time.time()
    action()
    seen, failed_pod, done, active = {}, None, False, False
    while time.time() - began < seconds:
        done, active, pods = rollout_state(kw)
        if not done and "rollout started" not in seen:
            seen["rollout started"] = time.time() - began
        if expect_refused:
            failed_pod = restarted_pod(pods, before)
            if failed_pod:
                seen["a new policy-server Pod failed"] = time.time() - began
                break
        elif "rollout started" in seen and done and active:
            # Twice in a row: the controller reconciles the policy more than once.
            if "done once" in seen:
                seen["rolled out, policy active"] = seen.pop("done once")
                break
            seen["done once"] = time.time() - began
        else:
            seen.pop("done once", None)
        time.sleep(0.5)
    time.sleep(2)
    line, without = burst.finish(zones)
    timeline = ", ".join(f"{k} at {v:.1f} s" for k, v in seen.items()) or "nothing changed"
    status = policy_status(kw)
    print(f"{what}: {timeline}; policy {status.get('policyStatus')} "
          f"(conditions {json.dumps(conditions(status), sort_keys=True)}); {line}", flush=True)
    if expect_refused:
        reason = ""
        if failed_pod:
            log = kw.kubectl("logs", "-n", stack.NAMESPACE, failed_pod, "--previous", check=False) or \
                kw.kubectl("logs", "-n", stack.NAMESPACE, failed_pod, check=False)
            lines = [line for line in log.splitlines() if line.strip()]
            reason = next((line for line in reversed(lines) if " ERROR " in line or line.startswith("Error")),
                          lines[-1] if lines else "")
        ready = sum(1 for pod in rollout_state(kw)[2] if conditions(pod.get("status")).get("Ready") == "True")
        checks.case(failed_pod is not None and without == 0 and ready >= 2,
                    f"{what}: refused by the new policy-server Pod ({reason.strip()[-300:]}); {ready} Pods of the "
                    f"previous version still Ready and serving, {without} Pods without metadata", line)
    else:
        checks.case(done and active and without == 0, f"{what}: rolled out, {without} Pods without metadata or unbound",
                    f"deployment done {done}, policy active {active}; {line}")
    return without


def stand_in_agrees(kw, checks, folder):
    """kubewarden.py, which the other cluster tests use instead of the
    controller, checked against what the controller wrote for the same
    policy: the webhook's fields and the policies-file entry."""
    with open(os.path.join(folder, "examples", "dedicated-policy-server.yaml")) as f:
        policy = next(d for d in yaml.safe_load_all(f) if d and d["kind"] == "ClusterAdmissionPolicy")
    ca = kw.admin.get(f"/api/v1/namespaces/{stack.NAMESPACE}/secrets/kubewarden-ca")["data"]["ca.crt"]
    ours = kubewarden.mutating_webhook_configuration(policy, None, base64.b64decode(ca),
                                                     service=f"policy-server-{POLICY}")
    real = kw.admin.get(f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
                        f"{kubewarden.unique_name(policy)}")
    differences = []
    for field, value in ours["webhooks"][0].items():
        theirs = real["webhooks"][0].get(field)
        if field == "rules":  # the API server adds each rule's default scope
            theirs = [{k: v for k, v in rule.items() if k != "scope"} for rule in theirs or []]
        if theirs != value:
            differences.append(f"webhook {field}: controller {json.dumps(theirs)}, kubewarden.py {json.dumps(value)}")
    config = kw.admin.get(f"/api/v1/namespaces/{stack.NAMESPACE}/configmaps/policy-server-{POLICY}")
    theirs = json.loads(config["data"]["policies.yml"]).get(kubewarden.unique_name(policy), {})
    entry = kubewarden.policies_entry(policy, "module.wasm")
    entry["module"] = policy["spec"]["module"]
    for field in sorted(set(entry) | set(theirs)):
        if entry.get(field) != theirs.get(field):
            differences.append(f"policies.yml {field}: controller {json.dumps(theirs.get(field))}, "
                               f"kubewarden.py {json.dumps(entry.get(field))}")
    checks.case(not differences, "kubewarden.py (the other cluster tests' stand-in) writes the webhook and the "
                "policies-file entry the controller wrote", "; ".join(differences)[:1500])


def run(kw, checks, module):
    kw.start()
    install_kubewarden(kw)
    reg = kw.registry
    signer = signature_test.Signer(kw.bins["cosign"], reg, kw.work)
    # Two releases, as release.yml publishes them: pushed, then signed.
    for tag, path in (("v0.1.0", module), ("v0.2.0", signature_test.variant(module, kw.work, "v0.2.0"))):
        reg.kwctl("push", "--sources-path", reg.sources, path, reg.uri(REPOSITORY, tag))
        signer.sign(f"{reg.host}/{REPOSITORY}:{tag}")
    # Never signed; and signed, then replaced under the same tag.
    reg.kwctl("push", "--sources-path", reg.sources, signature_test.variant(module, kw.work, "unsigned"),
              reg.uri(REPOSITORY, "unsigned"))
    reg.kwctl("push", "--sources-path", reg.sources, module, reg.uri(REPOSITORY, "altered"))
    signer.sign(f"{reg.host}/{REPOSITORY}:altered")
    reg.kwctl("push", "--sources-path", reg.sources, signature_test.variant(module, kw.work, "altered"),
              reg.uri(REPOSITORY, "altered"))

    folder = user_examples(kw.work, reg)
    run_lines(kw, checks, doc_commands("README.md", "## Quick start"), folder, "Quick start")
    status = policy_status(kw)
    checks.case(status.get("policyStatus") == "active", f"policy {POLICY} active", json.dumps(status)[:800])
    pod = kw.admin.get("/api/v1/namespaces/default/pods/zone-aware")
    zone = pod["metadata"].get("annotations", {}).get(ZONE)
    checks.case(zone == kubelet_test.NODE_ZONE and pod["spec"].get("nodeName") == kubelet_test.NODE,
                f"Pod zone-aware bound to {pod['spec'].get('nodeName')} with zone {zone!r}", json.dumps(pod)[:800])
    webhook = kw.admin.get(f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/clusterwide-{POLICY}")
    service = webhook["webhooks"][0]["clientConfig"].get("service", {})
    checks.case(service.get("name") == f"policy-server-{POLICY}",
                f"the webhook kubewarden-controller wrote calls Service {service.get('namespace')}/"
                f"{service.get('name')}, path {service.get('path')}", json.dumps(webhook)[:800])

    stand_in_agrees(kw, checks, folder)
    zones = register_far_nodes(kw)
    kw.kubectl("create", "namespace", BURST_NAMESPACE)
    clusters.wait_default_service_account(kw.admin, BURST_NAMESPACE)
    # Require the signature: what docs/operations.md tells users to run.
    with open(os.path.join(folder, "verification.yml"), "w") as f:
        f.write(open(signature_test.verification_config(kw.work, signer.public_key)).read())
    shutil.copy(signature_test.trust_config(kw.work), os.path.join(folder, "sigstore-trust-config.json"))
    change(kw, checks, zones, "require the signature (v0.1.0 is signed)", lambda: run_lines(
        kw, checks, doc_commands("docs/operations.md", "### Requiring the signature"), folder, "Require"), False)
    change(kw, checks, zones, "upgrade to v0.2.0 (signed)", patch_policy(kw, {"module": reg.uri(REPOSITORY, "v0.2.0")}),
           False)
    # Each refused change replaces the one before (the Deployment drops the
    # failing ReplicaSet); one rollback at the end.
    for tag in ("unsigned", "altered"):
        change(kw, checks, zones, f"{tag} module", patch_policy(kw, {"module": reg.uri(REPOSITORY, tag)}), True)
    settings = clusters.example("dedicated-policy-server.yaml")[1]["spec"]["settings"]
    change(kw, checks, zones, "v0.2.0 with settings the policy refuses",
           patch_policy(kw, {"module": reg.uri(REPOSITORY, "v0.2.0"), "settings": {"copy": "zone"}}), True)
    change(kw, checks, zones, "roll back (the settings as before)", patch_policy(kw, {"settings": settings}), False)

    # docs/operations.md, "My Pod has no zone", step 5: without the RBAC
    # grant the Binding is admitted without the metadata; policy-server's log
    # names the Pod and the cause (the scheduler, which gets the warning, logs nothing).
    kw.kubectl("delete", "-f", os.path.join(folder, "examples", "rbac.yaml"))
    time.sleep(6)  # policy-server keeps a Node's answer 5 s
    spec = clusters.pod_spec(node_selector={FAR_LABEL: "true"})
    spec["tolerations"] = [{"operator": "Exists"}]
    kw.admin.create(f"/api/v1/namespaces/{BURST_NAMESPACE}/pods", clusters.pod("no-access", spec))
    pod = clusters.wait_until(lambda: (lambda p: p if p["spec"].get("nodeName") else None)(
        kw.admin.get(f"/api/v1/namespaces/{BURST_NAMESPACE}/pods/no-access")), 60, "Pod no-access bound")
    log = kw.kubectl("-n", stack.NAMESPACE, "logs", "-l", f"kubewarden/policy-server={POLICY}", "--tail=-1",
                     "--prefix")
    line = next((line for line in log.splitlines() if 'name="no-access"' in line and "forbidden" in line), None)
    with open(kw.plane.logs["kube-scheduler"], errors="replace") as f:
        scheduler = sum(1 for line in f if "node-metadata-policy:" in line)
    checks.case(ZONE not in pod["metadata"].get("annotations", {}) and line is not None,
                "no RBAC grant: Pod bound without the zone; policy-server's log: "
                f"{(line or '')[line.find('error=') if line else 0:][:200]}; "
                f"kube-scheduler's log: {scheduler} lines with the warning", json.dumps(pod["metadata"])[:500])

if __name__ == "__main__":
    sys.exit(main())
