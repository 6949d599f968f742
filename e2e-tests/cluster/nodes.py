"""Nodes for the cluster tests, registered through the API as a kubelet would
leave them: the realistic 19 KB Node of the load test (test_data/node-large.json)
as it is, copies of it in other zones and racks, and a Node without topology
labels. `Ready`, allocatable resources and no taints unless asked, so that the
real scheduler places Pods on them.
"""
import copy
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# The taint that keeps Pods off the Node without labels unless they ask for it.
BARE_TAINT = {"key": "example.com/bare", "value": "true", "effect": "NoSchedule"}


def large_node():
    with open(os.path.join(ROOT, "test_data", "node-large.json")) as f:
        return json.load(f)


def variant(template, name, zone, instance_type, row, slot, foo=None, team=None):
    node = copy.deepcopy(template)
    meta = node["metadata"]
    meta["name"] = name
    labels = meta["labels"]
    labels["kubernetes.io/hostname"] = name
    for key in (ZONE, "failure-domain.beta.kubernetes.io/zone", "topology.ebs.csi.aws.com/zone"):
        labels[key] = zone
    labels[INSTANCE_TYPE] = labels["beta.kubernetes.io/instance-type"] = instance_type
    labels["rack.example.com/row"], labels["rack.example.com/slot"] = row, slot
    if foo is not None:
        labels["foo"] = foo
    if team is not None:
        meta.setdefault("annotations", {})["team.example.com/team"] = team
        meta["annotations"]["team.example.com/owner"] = team
    return node


def bare_node(template, name="node-bare"):
    """A Node with the kubelet's own labels only, tainted so that only the Pods
    that tolerate it land there."""
    node = copy.deepcopy(template)
    node["metadata"] = {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                 "kubernetes.io/arch": "amd64"}}
    node["spec"] = {"taints": [BARE_TAINT]}
    return node


def fixture_nodes(count=4):
    """The large Node as it is, `count - 1` variants of it across three zones, and the bare Node."""
    template = large_node()
    nodes = [template]
    zones = ["us-east-2a", "us-east-2b", "us-east-2c"]
    types = ["m5.xlarge", "m6i.2xlarge", "c6i.4xlarge"]
    for i in range(count - 1):
        nodes.append(variant(template, f"node-{i + 1}", zones[i % 3], types[i % 3], str(i + 1), str(10 + i),
                             foo=("bar" if i % 2 == 0 else None), team=("payments" if i % 2 == 0 else None)))
    # The template's own foo label is absent: Kyverno's sample then writes 'empty'.
    nodes.append(bare_node(template))
    return nodes


def register(client, node):
    """POST the Node, then its status through the status subresource (the
    API server drops status on create), with a fresh heartbeat."""
    body = copy.deepcopy(node)
    status = body.pop("status", None) or copy.deepcopy(large_node()["status"])
    meta = body["metadata"]
    for field in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        meta.pop(field, None)
    created = client.create("/api/v1/nodes", body)
    status = copy.deepcopy(status)
    for condition in status.get("conditions", []):
        condition["lastHeartbeatTime"] = condition["lastTransitionTime"] = created["metadata"]["creationTimestamp"]
    status["addresses"] = [{"type": "Hostname", "address": meta["name"]}]
    node = client.merge_patch(f"/api/v1/nodes/{meta['name']}/status", {"status": status})
    # The TaintNodesByCondition admission plugin gives every new Node the
    # not-ready taint; the node-lifecycle controller would lift it once the
    # Node is Ready, but it does not run here (nothing renews Node leases).
    wanted = body.get("spec", {}).get("taints") or None
    if node.get("spec", {}).get("taints") != wanted:
        node = client.merge_patch(f"/api/v1/nodes/{meta['name']}", {"spec": {"taints": wanted}})
    return node
