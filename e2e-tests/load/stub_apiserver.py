#!/usr/bin/env python3
"""A stub Kubernetes API server for the load test, on loopback, plain HTTP.

Serves discovery for the core group and GET of the objects in the fixture
files given on the command line (by kind and name; Nodes and other cluster
objects without a namespace), 404 with a Status like the API server's for
anything else, and counts requests per path: GET /stub/counts returns them
as JSON, POST /stub/reset clears them.

With --any-node TEMPLATE.json it also serves every Node name asked for, as a
copy of the template under that name (so a run can read thousands of distinct
Nodes). POST /stub/fault {"mode": ..., "seconds": ..., "prefix": ...} makes
Node reads (those whose name starts with prefix; all when it is empty)
misbehave as a real API server can; stub_faults.py says how. Every wait is
bounded by its seconds.

Usage: stub_apiserver.py [--any-node TEMPLATE.json] PORT FIXTURE.json...
"""
import copy
import json
import sys
import threading

import stub_faults
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PLURALS = {"Node": "nodes", "Namespace": "namespaces", "Pod": "pods", "ConfigMap": "configmaps"}
NAMESPACED = {"Pod", "ConfigMap"}

objects = {}
counts = {}
lock = threading.Lock()
template = None  # the --any-node Node
fault = {"mode": "ok"}


def core_resources():
    resources = []
    for kind, plural in PLURALS.items():
        resources.append({
            "name": plural, "singularName": kind.lower(), "namespaced": kind in NAMESPACED,
            "kind": kind, "verbs": ["get", "list", "watch"],
        })
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": resources}


def path_for(obj):
    kind = obj["kind"]
    meta = obj["metadata"]
    plural = PLURALS[kind]
    if kind in NAMESPACED:
        return f"/api/v1/namespaces/{meta['namespace']}/{plural}/{meta['name']}"
    return f"/api/v1/{plural}/{meta['name']}"


def not_found(path):
    parts = path.strip("/").split("/")
    name = parts[-1] if parts else ""
    kind = parts[-2] if len(parts) > 1 else ""
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'{kind} "{name}" not found', "reason": "NotFound",
        "details": {"name": name, "kind": kind}, "code": 404,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the body waits
    # for the client's delayed ACK (40 ms a read on Linux).
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def send_json(self, code, body, headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def node(self, path):
        """The Node at path, or None."""
        if path in objects:
            return objects[path]
        if template is not None and path.startswith("/api/v1/nodes/"):
            obj = copy.deepcopy(template)
            obj["metadata"]["name"] = path.rsplit("/", 1)[1]
            return obj
        return None

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/stub/counts":
            with lock:
                return self.send_json(200, dict(counts))
        with lock:
            counts[path] = counts.get(path, 0) + 1
        if path == "/version":
            return self.send_json(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0"})
        if path == "/api":
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": []})
        if path == "/apis":
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if path == "/api/v1":
            return self.send_json(200, core_resources())
        obj = self.node(path)
        if path.startswith("/api/v1/nodes/"):
            with lock:
                current = dict(fault)
            name = path.rsplit("/", 1)[1]
            if current["mode"] != "ok" and name.startswith(current.get("prefix", "")):
                return stub_faults.answer(self, current, obj, path)
        if obj is not None:
            return self.send_json(200, obj)
        return self.send_json(404, not_found(path))

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path == "/stub/fault":
            with lock:
                fault.clear()
                fault.update(json.loads(body or b'{"mode": "ok"}'))
                stub_faults.reset()
            return self.send_json(200, {})
        if self.path == "/stub/reset":
            with lock:
                counts.clear()
            return self.send_json(200, {})
        return self.send_json(405, {"kind": "Status", "code": 405})


def main():
    global template
    args = sys.argv[1:]
    if args[:1] == ["--any-node"]:
        with open(args[1]) as f:
            template = json.load(f)
        args = args[2:]
    port = int(args[0])
    for fixture in args[1:]:
        with open(fixture) as f:
            obj = json.load(f)
        objects[path_for(obj)] = obj
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
