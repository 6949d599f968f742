#!/usr/bin/env python3
"""Writes src/cel/patch/apply_schema.bin: Kubernetes' structural schema of the
built-in kinds, which ApplyConfiguration merges by (src/cel/patch/apply_schema.rs
reads it).

Input: client-go's applyconfigurations/internal/internal.go, the schema
client-go's apply configurations are generated with (the same field lists,
list types, list keys and atomic markers the API server's OpenAPI carries).
client-go has no apply configuration for v1 Binding, the kind this policy
mutates most; its two fields are added below from the API reference.

    python3 tools/apply-schema.py path/to/client-go/applyconfigurations/internal/internal.go

The blob, little-endian:
  u16 bucket count B, then B x u16: offset of each bucket's chain of kinds (0: none)
  chains: entries [u8 key length][key "apiVersion/Kind"][u16 type], ended by a 0 byte;
          the bucket is FNV-1a 32 of the key, modulo B
  types, referred to by u16: 0 string, 1 numeric, 2 boolean, 3 any scalar
          (Quantity, IntOrString, Time), 4 anything, atomic, 5 anything, maps
          merged by key; otherwise the offset of a record:
    struct: 1, flags (1 = atomic), field count, then per field
            [u8 name length][name][u16 type]
    map:    2, flags (1 = atomic), u16 element type
    list:   3, kind (0 atomic, 1 set, 2 map by keys), u16 element type, key count,
            then per key [u8 length][name][u8 length][default value, a string]
"""

import json
import re
import struct
import sys
from collections import deque

import yaml

BUCKETS = 64
SCALARS = {"string": 0, "numeric": 1, "boolean": 2, "untyped": 3}
UNTYPED = {"__untyped_atomic_": 4, "__untyped_deduced_": 5}
# Kinds an admission request carries that have no apply configuration.
EXTRA = [
    {
        "name": "io.k8s.api.core.v1.Binding",
        "map": {
            "fields": [
                {"name": "apiVersion", "type": {"scalar": "string"}},
                {"name": "kind", "type": {"scalar": "string"}},
                {"name": "metadata", "type": {"namedType": "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}},
                {"name": "target", "type": {"namedType": "io.k8s.api.core.v1.ObjectReference"}},
            ]
        },
    }
]
# Hot kinds first, so that their records share the blob's first pages.
HOT = ["io.k8s.api.core.v1.Binding", "io.k8s.api.core.v1.Pod"]
SPECIAL_GROUPS = {
    "core": "",
    "apiserverinternal": "internal.apiserver.k8s.io",
    "flowcontrol": "flowcontrol.apiserver.k8s.io",
    "rbac": "rbac.authorization.k8s.io",
}
NO_DOT = {"apps", "autoscaling", "batch", "policy", "extensions"}


def group_of(package):
    if package in SPECIAL_GROUPS:
        return SPECIAL_GROUPS[package]
    if package in NO_DOT:
        return package
    return package + ".k8s.io"


def fnv1a(data):
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def main(path):
    source = open(path, encoding="utf-8").read()
    found = re.search(r"var schemaYAML = typed\.YAMLObject\(`(.*?)`\)", source, re.S)
    if not found:
        sys.exit("no schemaYAML in " + path)
    named = {t["name"]: t for t in yaml.safe_load(found.group(1))["types"]}
    for extra in EXTRA:
        named.setdefault(extra["name"], extra)

    # Types of the same structure (a kind's versions share most of theirs)
    # become one record: named types are split into classes until every
    # member of a class has the same fields, each of the same class.
    classes = {name: 0 for name in named}

    def outline(ty):
        if "namedType" in ty:
            return ("n", classes[ty["namedType"]], ty.get("elementRelationship"))
        if "list" in ty:
            body = ty["list"]
            return ("l", outline(body["elementType"]), body.get("elementRelationship"), tuple(body.get("keys", [])))
        if "map" in ty:
            body = ty["map"]
            element = outline(body["elementType"]) if "elementType" in body else None
            fields = tuple((f["name"], outline(f["type"]), f.get("default") if isinstance(f.get("default"), str) else None) for f in body.get("fields", []))
            return ("m", element, body.get("elementRelationship"), fields)
        return ("s", json.dumps(ty, sort_keys=True))

    while True:
        ids = {}
        refined = {name: ids.setdefault((classes[name], outline(dict(t, namedType=None) if False else {k: v for k, v in t.items() if k != "name"})), len(ids)) for name, t in named.items()}
        if len(ids) == len(set(classes.values())):
            break
        classes = refined
    representative = {}
    for name in sorted(named):
        representative.setdefault(classes[name], name)

    def canonical(ty):
        if "namedType" in ty:
            return dict(ty, namedType=representative[classes[ty["namedType"]]])
        if "list" in ty:
            return {"list": dict(ty["list"], elementType=canonical(ty["list"]["elementType"]))}
        if "map" in ty and "elementType" in ty["map"]:
            return {"map": dict(ty["map"], elementType=canonical(ty["map"]["elementType"]))}
        return ty

    # Each distinct shape becomes one record.
    def shape(ty):
        ty = canonical(ty)
        if "namedType" in ty:
            name = ty["namedType"]
            if name in UNTYPED:
                return ("ref", UNTYPED[name])
            target = named[name]
            if "scalar" in target:
                return ("ref", SCALARS[target["scalar"]])
            relationship = ty.get("elementRelationship")
            return ("named", name, relationship)
        if "scalar" in ty:
            return ("ref", SCALARS[ty["scalar"]])
        if "list" in ty:
            return ("list", json.dumps(ty["list"], sort_keys=True))
        if "map" in ty:
            return ("map", json.dumps(ty["map"], sort_keys=True))
        raise SystemExit("unknown type " + json.dumps(ty))

    records = {}  # shape -> bytes (filled later), in emission order
    order = []
    queue = deque()

    def want(ty):
        s = shape(ty)
        if s[0] != "ref" and s not in records:
            records[s] = None
            order.append(s)
            queue.append(s)
        return s

    roots = []
    for name in HOT + sorted(named):
        t = named[name]
        fields = {f["name"] for f in t.get("map", {}).get("fields", [])}
        if {"apiVersion", "kind", "metadata"} <= fields:
            package, version, kind = name.rsplit(".", 3)[-3:]
            key = f"{version}/{kind}" if group_of(package) == "" else f"{group_of(package)}/{version}/{kind}"
            if key not in (k for k, _ in roots):
                roots.append((key, want({"namedType": name})))

    def element_key_default(element, key):
        for f in named.get(element.get("namedType", ""), {}).get("map", {}).get("fields", []):
            if f["name"] == key and isinstance(f.get("default"), str):
                return f["default"]
        return ""

    bodies = {}
    while queue:
        s = queue.popleft()
        if s[0] == "named":
            t = named[s[1]]
            body = t["map"]
        else:
            body = json.loads(s[1])
        if s[0] == "list":
            element = body["elementType"]
            kind = {"atomic": 0, None: 0}.get(body.get("elementRelationship"))
            keys = body.get("keys", [])
            if body.get("elementRelationship") == "associative":
                kind = 2 if keys else 1
            bodies[s] = ("list", kind, want(element), [(k, element_key_default(element, k)) for k in keys])
            continue
        relationship = s[2] if s[0] == "named" and s[2] else body.get("elementRelationship")
        atomic = 1 if relationship == "atomic" else 0
        if "fields" in body:
            if "elementType" in body:
                raise SystemExit("both fields and elementType in " + str(s))
            bodies[s] = ("struct", atomic, [(f["name"], want(f["type"])) for f in body["fields"]])
        else:
            bodies[s] = ("map", atomic, want(body.get("elementType", {"namedType": "__untyped_deduced_"})))

    # Layout: bucket table, chains, then records in breadth-first order.
    chains = [[] for _ in range(BUCKETS)]
    for key, s in roots:
        chains[fnv1a(key.encode()) % BUCKETS].append((key, s))
    header = 2 + 2 * BUCKETS
    chain_bytes = []
    for chain in chains:
        size = sum(1 + len(k) + 2 for k, _ in chain) + 1 if chain else 0
        chain_bytes.append(size)
    offset = header + sum(chain_bytes)

    def record_size(s):
        b = bodies[s]
        if b[0] == "struct":
            return 3 + sum(1 + len(n) + 2 for n, _ in b[2])
        if b[0] == "map":
            return 4
        return 5 + sum(2 + len(k) + len(d) for k, d in b[3])

    where = {}
    for s in order:
        where[s] = offset
        offset += record_size(s)
    if offset > 0xFFFF:
        raise SystemExit(f"blob of {offset} bytes: offsets no longer fit in 16 bits")

    def ref(s):
        return s[1] if s[0] == "ref" else where[s]

    def small(text):
        data = text.encode()
        if len(data) > 255:
            raise SystemExit("name too long: " + text)
        return bytes([len(data)]) + data

    out = bytearray(struct.pack("<H", BUCKETS))
    position = header
    for chain, size in zip(chains, chain_bytes):
        out += struct.pack("<H", position if chain else 0)
        position += size
    for chain in chains:
        if chain:
            for key, s in chain:
                out += small(key) + struct.pack("<H", ref(s))
            out += b"\0"
    for s in order:
        b = bodies[s]
        if b[0] == "struct":
            if len(b[2]) > 255:
                raise SystemExit("too many fields in " + str(s))
            out += bytes([1, b[1], len(b[2])])
            for name, t in b[2]:
                out += small(name) + struct.pack("<H", ref(t))
        elif b[0] == "map":
            out += bytes([2, b[1]]) + struct.pack("<H", ref(b[2]))
        else:
            out += bytes([3, b[1]]) + struct.pack("<H", ref(b[2])) + bytes([len(b[3])])
            for key, default in b[3]:
                if len(key) > 63 or len(default) > 63:
                    raise SystemExit("list key over 63 bytes: " + key)
                out += small(key) + small(default)
    assert len(out) == offset, (len(out), offset)
    # Not padded here: src/cel/tables.rs pads the region it shares with the
    # time zones to whole pages.
    target = "src/cel/patch/apply_schema.bin"
    open(target, "wb").write(out)
    print(f"{target}: {len(out)} bytes, {len(roots)} kinds, {len(order)} records")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
