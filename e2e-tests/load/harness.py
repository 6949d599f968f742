"""What the scripts that run the policy in real policy-server share: free
loopback ports, waiting (always with a deadline), a kubeconfig for the stub
API server, the policies-file entry the Kubewarden controller writes for a
ClusterAdmissionPolicy, starting policy-server, and stopping every child.
"""
import json
import re
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
NODE = [{"apiVersion": "v1", "kind": "Node"}]


def data(path):
    return os.path.join(ROOT, "test_data", path)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url, seconds, process):
    """True once url answers 2xx; False when process exits or time runs out."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except Exception:
            time.sleep(0.2)
    return False


def review(request_file):
    with open(data(request_file)) as f:
        request = json.load(f)
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def post(url, body, timeout=10):
    req = urllib.request.Request(url, data=body.encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


def start_stub(processes, fixtures, extra=(), port=None):
    """stub_apiserver.py on port (a free one by default); its base URL, or None if it did not start."""
    port = port or free_port()
    processes.append(subprocess.Popen(
        [sys.executable, os.path.join(HERE, "stub_apiserver.py"), *extra, str(port), *fixtures]))
    url = f"http://127.0.0.1:{port}"
    return url if wait_for(f"{url}/stub/counts", 10, processes[-1]) else None


def write_kubeconfig(work, server):
    path = os.path.join(work, "kubeconfig")
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: stub, cluster: {{server: "{server}"}}}}]
users: [{{name: stub, user: {{token: stub}}}}]
contexts: [{{name: stub, context: {{cluster: stub, user: stub}}}}]
current-context: stub
""")
    return path


def entry(module, settings, mutating=True, resources=NODE):
    """A policies-file entry as the controller writes it for a ClusterAdmissionPolicy."""
    if "://" not in module:
        module = f"file://{os.path.abspath(module)}"
    return {"module": module, "policyMode": "protect", "allowedToMutate": mutating,
            "contextAwareResources": resources, "hostCapabilities": ["*"], "settings": settings}


def start_policy_server(processes, work, policies, server, extra_args=(), workers=2, ready_seconds=120):
    """policy-server for `policies` against the API server at `server`.

    Returns (base URL, Popen, log path), or (None, Popen, log path) when it
    did not become ready in time.
    """
    policies_file = os.path.join(work, "policies.yml")
    with open(policies_file, "w") as f:
        json.dump(policies, f)  # JSON is YAML
    port, ready_port = free_port(), free_port()
    # Its Kubernetes client refuses proxies, and everything here is loopback.
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update({"KUBECONFIG": write_kubeconfig(work, server), "NO_PROXY": "127.0.0.1,localhost"})
    for d in ("downloads", "sigstore"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    log_path = os.path.join(work, "policy-server.log")
    log = open(log_path, "w")
    proc = subprocess.Popen(
        ["policy-server", "--policies", policies_file, "--addr", "127.0.0.1", "--port", str(port),
         "--readiness-probe-port", str(ready_port), "--workers", str(workers),
         "--policies-download-dir", os.path.join(work, "downloads"),
         "--sigstore-cache-dir", os.path.join(work, "sigstore"), "--log-level", "warn", *extra_args],
        env=env, stdout=log, stderr=log)
    processes.append(proc)
    ready = wait_for(f"http://127.0.0.1:{ready_port}/readiness", ready_seconds, proc)
    return (f"http://127.0.0.1:{port}" if ready else None), proc, log_path


def stop(processes):
    """SIGTERM every child, newest first; SIGKILL what is still there after 10 s."""
    for p in reversed(processes):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def default_on_any_node(processes, work, policy):
    """A stub API server serving every Node name (copies of the realistic Node)
    and policy-server with `policy` under default settings as "default".
    Returns (stub URL, policy-server URL, Popen), or None if either did not start.
    """
    stub = start_stub(processes, [], extra=["--any-node", data("node-large.json")])
    if stub is None:
        return None
    base, server, _ = start_policy_server(processes, work, {"default": entry(policy, {})}, stub)
    return (stub, base, server) if base else None


def cpu_seconds(pid):
    """user + system CPU seconds the process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def node_reads(stub):
    """Node reads the stub API server has answered so far."""
    with urllib.request.urlopen(f"{stub}/stub/counts", timeout=5) as resp:
        return sum(n for p, n in json.load(resp).items() if p.startswith("/api/v1/nodes/"))
