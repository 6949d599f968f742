"""How the stub API server misbehaves on a Node read, one mode at a time.

Modes (fault["mode"]):
  delay      answer normally after fault["seconds"]
  hang       accept and send nothing for fault["seconds"], then close
  500        InternalError Status
  429        TooManyRequests Status with Retry-After: 1
  403        Forbidden Status, as the API server words a missing RBAC grant
  reset      headers and half the body, then a TCP reset
  malformed  200 with a body that is not JSON
  huge       200 with the Node carrying 1 MB of annotations
  gone       404 NotFound (the Node was deleted)
  flap       every other read answers 500
A server that is down (connection refused) is the stub not running at all.
"""
import json
import socket
import struct
import threading
import time

_flap = {"n": 0}
_flap_lock = threading.Lock()


def reset():
    with _flap_lock:
        _flap["n"] = 0


def status(code, reason, message, name):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": {"name": name, "kind": "nodes"}, "code": code}


def answer(handler, fault, node, path):
    mode = fault["mode"]
    name = path.rsplit("/", 1)[1]
    if mode == "flap":
        with _flap_lock:
            _flap["n"] += 1
            failing = _flap["n"] % 2 == 0
        mode = "500" if failing else "ok"
    if mode == "delay":
        time.sleep(float(fault.get("seconds", 1)))
        mode = "ok"
    if mode == "ok":
        return handler.send_json(200, node)
    if mode == "hang":
        time.sleep(float(fault.get("seconds", 30)))
        handler.close_connection = True
        return None
    if mode == "500":
        return handler.send_json(500, status(500, "InternalError", "Internal error occurred: etcdserver: "
                                             "request timed out", name))
    if mode == "429":
        return handler.send_json(429, status(429, "TooManyRequests", "Too many requests, please try again "
                                             "later.", name), headers=[("Retry-After", "1")])
    if mode == "403":
        return handler.send_json(403, status(
            403, "Forbidden", f'nodes "{name}" is forbidden: User "system:serviceaccount:kubewarden:'
            f'policy-server-default" cannot get resource "nodes" in API group "" at the cluster scope', name))
    if mode == "gone":
        return handler.send_json(404, status(404, "NotFound", f'nodes "{name}" not found', name))
    if mode == "malformed":
        return handler.send_json(200, b'{"apiVersion": "v1", "kind": "Node", "metadata": {"name": ')
    if mode == "huge":
        node = dict(node, metadata=dict(node["metadata"]))
        node["metadata"]["annotations"] = dict(node["metadata"].get("annotations", {}),
                                               **{"example.com/blob": "x" * (1 << 20)})
        return handler.send_json(200, node)
    if mode == "reset":
        body = json.dumps(node).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body[: len(body) // 2])
        handler.wfile.flush()
        # SO_LINGER 0: close sends RST instead of FIN.
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        handler.connection.close()
        handler.close_connection = True
        return None
    raise ValueError(f"unknown fault mode {mode!r}")
