#!/usr/bin/env python3
"""Seeds the fuzz corpus (fuzz/corpus/evaluate) with generated policies of
every kind the policy takes, over generated admission requests, so that the
fuzzer starts from inputs that load and run rather than from bytes it must
first shape into a policy.

Kinds of seed (each a settings document, a request and a host answer):

  map    Kubernetes MutatingAdmissionPolicy documents: variables and
         matchConditions are generated CEL expressions, mutations generated
         ApplyConfigurations and JSON Patch lists (some with generated CEL
         values), sometimes with paramKind and inline params;
  mpol   Kyverno MutatingPolicy and NamespacedMutatingPolicy documents: the
         same, plus Kyverno's CEL libraries (resource.Get/List, image, json,
         yaml, hash, regex, time...), autogen, auditAnnotations, a
         mutate-existing policy on the Pod being bound;
  cpol   Kyverno ClusterPolicy rules (under `rules`, as a whole ClusterPolicy
         or a namespaced Policy): match/exclude, context (variable, apiCall,
         configMap), preconditions with every operator, patchStrategicMerge
         with every anchor, patchesJson6902, foreach with either patch (nested
         too, with order), `{{ }}` variables with JMESPath and Kyverno's
         functions;
  mixed  several documents of those kinds under `policies`, with a
         PolicyException now and then, and the short form's `copy` beside
         rules;
  judged the cases `make differential`'s policy judges draw (generate.py's
         map_cases, mpol_cases and cpol_cases, a third each: parameters,
         PolicyExceptions, host reads, Kyverno's libraries), as the wasm host
         is given them, the host answering with one of the case's resources.

Requests are Pods (placed or not), Bindings, Deployments and Nodes, CREATE
or UPDATE. The host answer (what every Node, resource or ConfigMap read
returns) is a Node, a ConfigMap, a Namespace, a list, a hybrid of them, or a
host error.

The CEL grammar and the objects are e2e-tests/differential/generate.py's
(imported, not copied); the ClusterPolicy grammar is here. The input layout is
src/testing/fuzzing.rs's: `request \\0 settings \\0 host answer`. A seed's file is
`seed-<kind>-<first 16 hex digits of its SHA-1>` (libFuzzer names the inputs it
adds by their whole SHA-1), so a re-run with the same seed and counts writes
the same files and adds none; `--prune` removes the `seed-<kind>-*` files of
the kinds generated that this run did not produce (after a grammar changed).

Usage: python3 fuzz/seed_corpus.py [--seed 1] [--out fuzz/corpus/evaluate]
                                   [--map N] [--mpol N] [--cpol N] [--mixed N]
                                   [--prune] [--dry-run]
"""

import argparse
import copy
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "e2e-tests", "differential"))
import generate  # noqa: E402

# make fuzz runs with -max_len=16384: libFuzzer truncates longer inputs. Seeds
# stay well under it, leaving the fuzzer room to insert.
MAX_SEED = 8192
DEFAULT_COUNTS = {"map": 600, "mpol": 600, "cpol": 1050, "mixed": 250, "judged": 900}

# ---- JMESPath for `{{ }}` -------------------------------------------------

# Paths into the request that exist for every kind of object generated here
# (a missing key fails the rule, which is worth seeding too, but rarely).
JMES_STRING = [
    "request.object.metadata.name", "request.namespace", "request.operation",
    "request.object.metadata.namespace || 'none'", "request.object.kind",
    "request.userInfo.username", "request.object.metadata.labels.app || 'none'",
    "request.object.metadata.labels.\"topology.kubernetes.io/zone\" || ''",
    "request.object.metadata.annotations.\"example.com/owner\" || 'nobody'",
    "serviceAccountName", "serviceAccountNamespace", "request.name || ''",
    "request.object.target.name || ''", "request.object.spec.nodeName || ''",
    "request.object.metadata.missing",
]
JMES_NUMBER = ["length(request.object.metadata.labels || `{}`)", "`3`", "`0`", "`-1`", "`2.5`",
               "length(request.object.spec.containers || `[]`)", "length(request.object.metadata.name)"]
JMES_LIST = ["request.object.spec.containers[].name || `[]`", "split(request.object.metadata.name, '-')",
             "keys(request.object.metadata.labels || `{}`)", "`[\"a\", \"b\"]`",
             "items(request.object.metadata.labels || `{}`, 'key', 'value')[].key",
             "request.object.spec.containers[?image != null].image || `[]`"]
TIMES = ["'2024-01-01T00:00:00Z'", "'2023-06-15T12:30:45+02:00'", "time_now_utc()", "time_now()"]
KYVERNO_FUNCTIONS = [
    "to_upper({s})", "to_lower({s})", "split({s}, '-')[0]", "join('-', split({s}, '-'))",
    "join('.', {l})", "length({s})", "to_string(length({l}))", "truncate({s}, `5`)",
    "truncate({s}, `0`)", "regex_replace_all('[0-9]+', {s}, 'N')",
    "regex_replace_all('^(\\\\w+)-(.*)$', {s}, '$2-$1')", "regex_replace_all_literal('-', {s}, '_')",
    "regex_match('^pod-[0-9]+$', {s})", "replace({s}, '-', '.', `1`)", "replace_all({s}, 'a', 'b')",
    "trim({s}, ' -')", "trim_prefix({s}, 'pod-')", "equal_fold({s}, 'POD')", "compare({s}, 'm')",
    "pattern_match('pod-*', {s})", "base64_encode({s})", "base64_decode(base64_encode({s}))",
    "to_string(add({n}, {n}))", "add('1Gi', '512Mi')", "to_string(subtract({n}, `1`))",
    "to_string(multiply({n}, `2`))", "divide('1h', '30m')", "to_string(modulo(`7`, {n}))",
    "sum([`1`, `2`, {n}])", "round(`2.567`, `1`)", "to_string(sum(`[1.5, 2]`))",
    "semver_compare('1.2.3', '>=1.0.0 <2.0.0')", "semver_compare('v2.0.0', '1.2.3 || 2.0.0')",
    "label_match(`{{\"app\": \"web\"}}`, request.object.metadata.labels || `{{}}`)",
    "lookup(request.object.metadata.labels || `{{}}`, 'app') || 'none'", "lookup(`[\"x\", \"y\"]`, `1`)",
    "object_from_lists(`[\"a\", \"b\"]`, `[\"1\", \"2\"]`).a", "parse_json('{{\"a\": [1, 2]}}').a[1]",
    "parse_yaml('a: {{b: c}}').a.b", "time_add({t}, '1h30m')", "time_after({t}, {t})",
    "time_before({t}, '2030-01-01T00:00:00Z')", "time_between({t}, '2020-01-01T00:00:00Z', {t})",
    "time_diff({t}, {t})", "time_since('', {t}, '')", "time_truncate({t}, '1h')", "time_utc({t})",
    "time_to_cron({t})", "time_parse('2006-01-02', '2024-05-01')",
    "time_parse('Mon Jan 2 15:04:05 MST 2006', 'Tue Mar 5 10:00:00 UTC 2024')", "time_now_utc()",
    "items(request.object.metadata.labels || `{{}}`, 'k', 'v')[0].k || ''", "not_null({s}, 'x')",
    "starts_with({s}, 'pod')", "contains({l}, 'c0')", "max_by(`[{{\"a\": 1}}, {{\"a\": 3}}]`, &a).a",
    "sort({l})", "reverse({s})", "abs(`-3`)", "to_number('42')", "merge(`{{\"a\": 1}}`, `{{\"b\": 2}}`).b",
    "random('[0-9]{{4}}')", "sha256({s})",  # not here: refused at load, naming the function
]


class Seeds(generate.Gen):
    """generate.Gen's objects and CEL grammar, and the seeds' own parts."""

    def __init__(self, seed):
        super().__init__(seed)
        self.n = 0
        self.config_maps = set()

    # ---- requests and host answers ---------------------------------------

    def placed_pod(self):
        pod = self.pod()
        if self.chance(0.6):
            pod["spec"]["nodeName"] = self.pick(["node-1", "node-2", "ip-10-0-0-1.ec2.internal"])
        if self.chance(0.2):
            pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                   "name": "web-1", "uid": "u-1", "controller": True}]
        return pod

    def object_of(self, kind):
        if kind == "pod":
            return self.placed_pod()
        obj = getattr(self, kind)()
        if kind == "binding":
            obj["metadata"]["name"] = "pod-" + str(self.r.randint(0, 99))
            obj["target"]["name"] = self.pick(["node-1", "node-1", "node-2", ""])
            if self.chance(0.3):
                obj["metadata"]["annotations"] = self.labels(1)
        return obj

    def request(self, kind, obj=None):
        obj = obj if obj is not None else self.object_of(kind)
        group, version, gkind, resource, sub = {
            "pod": ("", "v1", "Pod", "pods", ""), "binding": ("", "v1", "Binding", "pods", "binding"),
            "deployment": ("apps", "v1", "Deployment", "deployments", ""),
            "node": ("", "v1", "Node", "nodes", "")}[kind]
        operation = "UPDATE" if kind != "binding" and self.chance(0.15) else "CREATE"
        req = {"uid": f"{self.r.getrandbits(64):016x}",
               "kind": {"group": group, "version": version, "kind": gkind},
               "resource": {"group": group, "version": version, "resource": resource},
               "requestKind": {"group": group, "version": version, "kind": gkind},
               "requestResource": {"group": group, "version": version, "resource": resource},
               "name": obj["metadata"]["name"], "operation": operation,
               "userInfo": self.user_info(kind), "object": obj, "oldObject": None, "dryRun": False,
               "options": {"kind": "UpdateOptions" if operation == "UPDATE" else "CreateOptions",
                           "apiVersion": "meta.k8s.io/v1"}}
        if sub:
            req["subResource"] = req["requestSubResource"] = sub
        if kind != "node":
            req["namespace"] = obj["metadata"].get("namespace", "default")
        if operation == "UPDATE":
            old = copy.deepcopy(obj)
            old["metadata"]["labels"] = self.labels()
            req["oldObject"] = old
        return req

    def user_info(self, kind):
        if kind == "binding" or self.chance(0.2):
            return {"username": "system:kube-scheduler", "groups": ["system:authenticated"]}
        return self.pick([
            {"username": "system:serviceaccount:default:deployer",
             "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]},
            {"username": "alice", "groups": ["dev", "system:authenticated"]},
            {"username": "system:serviceaccount:kube-system:replicaset-controller",
             "groups": ["system:serviceaccounts"], "uid": "u", "extra": {"k": ["v"]}},
        ])

    def host_node(self):
        node = self.node()
        labels = node["metadata"]["labels"]
        if self.chance(0.7):
            labels["topology.kubernetes.io/region"] = self.pick(["us-east-1", "eu-west-1"])
        if self.chance(0.5):
            labels["node.kubernetes.io/instance-type"] = self.pick(["m5.large", "t3.micro"])
        if self.chance(0.4):
            labels["rack.example.com/row"] = self.pick(["r1", "r2"])
        if self.chance(0.5):
            node["metadata"]["annotations"] = {"team.example.com/owner": self.pick(["web", "db"]),
                                               "node.alpha.kubernetes.io/ttl": "0"}
        return node

    def answer(self):
        """What every host read answers (src/testing/fuzzing.rs's ScriptedLookup)."""
        roll = self.r.random()
        if roll < 0.5:
            value = self.host_node()
        elif roll < 0.6:
            return "!" + self.pick(['nodes "node-1" not found', "not granted access to v1/Node",
                                    "the server is currently unable to handle the request"])
        elif roll < 0.72:
            value = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "cm", "namespace": "default", "labels": self.labels(1)},
                     "data": {"team": self.pick(["web", "db", ""]), "zone": "us-east-1a",
                              "registry": "mirror.example.com", "replicas": "3"}}
        elif roll < 0.8:
            value = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": "default", "labels": dict(self.labels(2), **{
                         "kubernetes.io/metadata.name": "default"})}}
        elif roll < 0.9:
            value = {"apiVersion": "v1", "kind": "List", "items": [self.host_node(), self.pod()]}
        elif roll < 0.97:
            value = self.host_node()  # a Node that also answers ConfigMap reads
            value["data"] = {"team": "web", "zone": "z"}
        else:
            return self.pick(["", "null", "{}", "[]", "{\"metadata\": 1}"])
        return json.dumps(value, separators=(",", ":"))

    # ---- CEL documents ----------------------------------------------------

    def cel_value(self, d=None):
        """A generated CEL string expression, for writing into metadata."""
        return self.expr("string", self.r.randint(1, 3) if d is None else d)

    def kyverno_cel(self, kind):
        """An expression in Kyverno's CEL libraries (MutatingPolicy only)."""
        target = "object.target.name" if kind == "binding" else "'node-1'"
        return self.pick([
            f"resource.Get('v1', 'nodes', '', {target}).metadata.?labels[?'topology.kubernetes.io/zone'].orValue('none')",
            f"string(resource.Get('v1', 'nodes', '', {target}).metadata.?labels.orValue({{}}).size())",
            "resource.Get('v1', 'configmaps', 'default', 'cm').?data[?'team'].orValue('')",
            "string(resource.List('v1', 'pods', 'default').?items.orValue([]).size())",
            "resource.Get('v1', 'namespaces', '', object.metadata.?namespace.orValue('default')).metadata.name",
            f"image('{self.pick(generate.IMAGES)}').registry()", "image('nginx').repository()",
            "string(isImage('not an image!'))", "parseImageReference('ghcr.io/a/b:1').tag()",
            "json.marshal({'a': [1, 2]})", "string(json.unmarshal('{\"n\": 1}').n)",
            "string(yaml.parse('a: b').a)", "parseServiceAccount(request.userInfo.username).Namespace",
            "hash.sha256(object.metadata.name)", "md5('')", "sha1(object.kind)",
            "regex.replace(object.metadata.name, '([a-z]+)-([0-9]+)', '\\\\2-\\\\1')",
            "regex.extract(object.metadata.name, '[0-9]+').orValue('')",
            "regex.extractAll('a1b22', '[0-9]+').join(',')", "string(math.round(10.125, 2))",
            "string(time.now().getFullYear())", "string(time.truncate(timestamp('2024-01-01T10:30:00Z'), duration('1h')))",
            "time.toCron(timestamp('2024-01-01T10:30:00Z'))",
            "string(base64.encode(gzip.compress('kyverno')).size() > 0)",
            "gzip.decompress(gzip.compress(object.kind))",
            "string(authorizer.group('').resource('pods').namespace('default').check('get').allowed())",
            "exceptions.?allowedValues.orValue([]).join(',')" if self.chance(0.2) else "object.kind",
            "string(namespaceObject.metadata.?labels.orValue({}).size())",
            "http.Get('http://example.com')",  # not here: refused at load
        ])

    def match_constraints(self, kind, group, resource):
        resources = {"binding": ["pods/binding"], "pod": ["pods"], "deployment": ["deployments"],
                     "node": ["nodes"]}[kind]
        if self.chance(0.15):
            resources = self.pick([["*"], ["*/*"], ["pods", "pods/binding"], ["pods/*"], ["*/binding"]])
        rule = {"apiGroups": [group] if self.chance(0.85) else ["*"],
                "apiVersions": ["v1"] if self.chance(0.85) else ["*"],
                "operations": self.pick([["CREATE"], ["CREATE", "UPDATE"], ["*"]] * 3 + [["UPDATE"]]),
                "resources": resources}
        if self.chance(0.05):
            rule["resourceNames"] = [self.pick(["pod-1", "web", "node-1"])]
        if self.chance(0.1):
            rule["scope"] = self.pick(["Namespaced", "Cluster", "*"])
        constraints = {"resourceRules": [rule]}
        if self.chance(0.08):
            constraints["objectSelector"] = self.label_selector()
        if self.chance(0.06):
            constraints["namespaceSelector"] = self.label_selector()
        if self.chance(0.1):
            constraints["excludeResourceRules"] = [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE"], "resources": ["nodes"]}]
        if self.chance(0.05):
            constraints["matchPolicy"] = self.pick(["Equivalent", "Exact"])
        return constraints

    def label_selector(self):
        selector = {}
        if self.chance(0.6):
            selector["matchLabels"] = self.labels(1)
        if self.chance(0.5):
            op = self.pick(["In", "NotIn", "Exists", "DoesNotExist"])
            req = {"key": self.pick(generate.LABEL_KEYS), "operator": op}
            if op in ("In", "NotIn"):
                req["values"] = [self.pick(generate.LABEL_VALUES) for _ in range(self.r.randint(1, 2))]
            selector["matchExpressions"] = [req]
        return selector

    def cel_mutation(self, kind, kyverno):
        value = lambda: self.kyverno_cel(kind) if kyverno and self.chance(0.4) else self.cel_value()
        roll = self.r.random()
        if roll < 0.3:
            return {"patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": self.apply_configuration(kind)}}
        if roll < 0.5:
            section = self.pick(["annotations", "annotations", "labels"])
            key = self.pick(["example.com/generated", "gen", "app", "topology.kubernetes.io/zone"])
            entries = f"'{key}': {value()}"
            if self.chance(0.3):
                entries += f", 'example.com/b': variables.b" if self.chance(0.5) else ", 'example.com/c': 'c'"
            expression = f"Object{{metadata: Object.metadata{{{section}: {{{entries}}}}}}}"
            if self.chance(0.15):
                expression = f"{self.expr('bool', 2)} ? {expression} : Object{{}}"
            return {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}
        if roll < 0.75:
            return {"patchType": "JSONPatch", "jsonPatch": {"expression": self.json_patch(kind)}}
        t = self.pick(["string", "string", "int", "list", "map", "bool", "dyn"])
        val = value() if t == "string" else self.expr(t, 2)
        path = self.pick(["'/metadata/annotations/example.com~1gen'", "'/metadata/labels/gen'",
                          "'/metadata/annotations'", "'/metadata/labels/' + jsonpatch.escapeKey('a/b')"])
        ops = [f"JSONPatch{{op: 'add', path: {path}, value: {val}}}"]
        if path == "'/metadata/annotations'":
            ops[0] = f"JSONPatch{{op: 'add', path: {path}, value: {{'example.com/gen': {value()}}}}}"
        elif self.chance(0.6):
            ops.insert(0, "JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}"
                       if "annotations" in path else "JSONPatch{op: 'add', path: '/metadata/labels', value: {}}")
        return {"patchType": "JSONPatch", "jsonPatch": {"expression": "[" + ", ".join(ops) + "]"}}

    def cel_document(self, flavour, kind):
        """A MutatingAdmissionPolicy ('map') or Kyverno (Namespaced)MutatingPolicy
        ('mpol') document for requests of `kind`."""
        kyverno = flavour == "mpol"
        group = "apps" if kind == "deployment" else ""
        resource = {"binding": "pods", "pod": "pods", "deployment": "deployments", "node": "nodes"}[kind]
        spec = {"matchConstraints": self.match_constraints(kind, group, resource)}
        if not kyverno or self.chance(0.3):
            spec["reinvocationPolicy"] = self.pick(["Never", "IfNeeded"])
        if self.chance(0.85):
            spec["failurePolicy"] = self.pick(["Fail", "Ignore", "Ignore"])
        a_type = self.pick(["int", "string", "list", "map", "bool"])
        b_forms = ["variables.a", self.cel_value(2)] + (["string(variables.a)"] if a_type in ("int", "string", "bool") else [])
        variables = [{"name": "a", "expression": self.expr(a_type, self.r.randint(1, 3))},
                     {"name": "b", "expression": self.pick(b_forms)}]
        if kyverno and self.chance(0.5):
            variables.append({"name": "k", "expression": self.kyverno_cel(kind)})
        if self.chance(0.85):
            spec["variables"] = variables
        else:
            spec["variables"] = []
        if self.chance(0.4):
            spec["matchConditions"] = [{"name": f"m{i}", "expression": self.pick([
                self.expr("bool", self.r.randint(0, 2)), "true", "has(object.metadata)",
                "object.metadata.name != ''"])} for i in range(self.r.randint(1, 2))]
        spec["mutations"] = [self.cel_mutation(kind, kyverno) for _ in range(self.r.randint(1, 3))]
        if not spec["variables"]:
            # variables.a/b are named by the grammar: keep the mutations that do not
            spec["mutations"] = [m for m in spec["mutations"] if "variables." not in json.dumps(m)] or [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": self.apply_configuration(kind)}}]
        doc = {"metadata": {"name": f"gen-{self.n}"}, "spec": spec}
        settings_extra = {}
        if kyverno:
            doc_kind = "NamespacedMutatingPolicy" if self.chance(0.25) else "MutatingPolicy"
            doc["apiVersion"] = "policies.kyverno.io/" + self.pick(["v1", "v1", "v1beta1", "v1alpha1"])
            doc["kind"] = doc_kind
            if doc_kind == "NamespacedMutatingPolicy":
                doc["metadata"]["namespace"] = self.pick(["default", "team-a"])
            if self.chance(0.2):
                spec["autogen"] = {"podControllers": {"controllers": self.pick(
                    [[], ["Deployment"], ["deployments", "StatefulSet"], ["CronJob", "Job", "DaemonSet"]])}}
            if self.chance(0.2):
                spec["auditAnnotations"] = [{"key": self.pick(["zone", "who"] * 5 + ["bad key!"]),
                                             "valueExpression": self.pick([self.cel_value(2), "null",
                                                                           self.kyverno_cel(kind)])}]
            if self.chance(0.1):
                spec["evaluation"] = {"admission": {"enabled": self.chance(0.8)}}
            if kind == "binding" and self.chance(0.15):
                spec["evaluation"] = {"mutateExisting": {"enabled": True}}
                spec["matchConstraints"] = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["CREATE"],
                                                               "resources": ["pods/binding"]}]}
                spec["targetMatchConstraints"] = {
                    "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                       "resources": ["pods"]}],
                    "expression": self.pick([
                        "resource.get('v1', 'pods', object.metadata.namespace, object.metadata.name)",
                        "resource.get('v1', 'pods', request.namespace, request.name)"])}
                if self.chance(0.5):
                    spec["targetMatchConditions"] = [{"name": "t", "expression": self.expr("bool", 1)}]
        else:
            doc["apiVersion"] = "admissionregistration.k8s.io/" + self.pick(["v1", "v1", "v1beta1", "v1alpha1"])
            doc["kind"] = "MutatingAdmissionPolicy"
            if self.chance(0.15):
                spec["paramKind"] = {"apiVersion": "v1", "kind": "ConfigMap"}
                settings_extra["params"] = {"data": {"team": self.pick(["web", "db"]), "zone": "z"}}
                spec["mutations"].append({"patchType": "ApplyConfiguration", "applyConfiguration": {
                    "expression": "Object{metadata: Object.metadata{annotations: {'team': params.data.team}}}"}})
        return doc, settings_extra

    def cel_seed(self, flavour):
        kind = self.pick(["pod", "pod", "binding", "binding", "deployment", "node"])
        doc, extra = self.cel_document(flavour, kind)
        settings = dict(doc, **extra)
        if "failurePolicy" not in doc["spec"] and self.chance(0.3):
            settings["failurePolicy"] = self.pick(["Fail", "Ignore"])
        return self.request(kind), settings

    # ---- ClusterPolicy rules ----------------------------------------------

    def jmes(self, kind="string"):
        s = lambda: self.pick(JMES_STRING)
        if kind == "string" and self.chance(0.5):
            return s()
        template = self.pick(KYVERNO_FUNCTIONS)
        return template.format(s=s(), n=self.pick(JMES_NUMBER), l=self.pick(JMES_LIST), t=self.pick(TIMES))

    def var(self, names=()):
        """A `{{ }}` variable, or text around one."""
        inner = self.jmes() if not names or self.chance(0.6) else self.name_ref(names)
        roll = self.r.random()
        if roll < 0.55:
            return "{{ " + inner + " }}"
        if roll < 0.8:
            return self.pick(["zone-", "x-", "", "a.b/"]) + "{{" + inner + "}}" + self.pick(["", "-suffix"])
        if roll < 0.9:
            return "{{ to_lower('{{ request.object.kind }}') }}"  # inner braces first
        return self.pick(["\\{{ not a variable }}", "{{@}}", "{{ element.name }}", "plain"])

    def rule_match(self, kind):
        kinds = {"pod": ["Pod", "v1/Pod", "Pod", "*"], "binding": ["Pod/binding", "Binding", "v1/Pod/binding", "*/binding"],
                 "deployment": ["Deployment", "apps/v1/Deployment", "Deploy*"], "node": ["Node", "*/*"]}[kind]
        res = {"kinds": [self.pick(kinds)]}
        if self.chance(0.15):
            res["kinds"].append(self.pick(["Pod", "Deployment", "StatefulSet", "Pod/binding"]))
        if self.chance(0.15):
            res["names"] = [self.pick(["pod-*", "web", "node-?", "*"])]
        if self.chance(0.1):
            res["namespaces"] = [self.pick(["default", "team-*", "kube-system"])]
        if self.chance(0.1):
            res["operations"] = self.pick([["CREATE"], ["CREATE", "UPDATE"], ["UPDATE"]])
        if self.chance(0.1):
            res["selector"] = self.label_selector()
        if self.chance(0.05):
            res["annotations"] = {"example.com/*": "?*"}
        if self.chance(0.05):
            res["namespaceSelector"] = self.label_selector()
        entry = {"resources": res}
        if self.chance(0.08):
            entry["subjects"] = [self.pick([{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "dev"},
                                            {"kind": "ServiceAccount", "name": "deployer", "namespace": "default"}])]
        if self.chance(0.04):
            entry["clusterRoles"] = ["cluster-admin"]
        form = self.r.random()
        if form < 0.6:
            return {"any": [entry]}
        if form < 0.85:
            return {"all": [entry]}
        return entry  # the older single form

    def context(self, kind):
        entries, names = [], []
        self.config_maps = set()
        for i in range(self.r.randint(0, 3)):
            name = f"c{i}"
            roll = self.r.random()
            if roll < 0.35:
                source = {"jmesPath": self.jmes(self.pick(["string", "string", "number"]))}
                if self.chance(0.5):
                    source["default"] = self.pick(["", "none", 0, {}])
                if self.chance(0.2):
                    source = {"value": self.pick([{"a": "b"}, ["x", "y"], "v", 3, "{{ request.namespace }}"])}
                entries.append({"name": name, "variable": source})
            elif roll < 0.7:
                node = "{{ request.object.target.name }}" if kind == "binding" else "{{ request.object.spec.nodeName || 'node-1' }}"
                call = self.pick([
                    {"urlPath": f"/api/v1/nodes/{node}", "jmesPath": self.pick(
                        ["metadata.labels", "metadata.labels.\"topology.kubernetes.io/zone\" || 'empty'",
                         "metadata.annotations || `{}`", "@"])},
                    {"urlPath": "/api/v1/namespaces/{{ request.namespace }}", "jmesPath": "metadata.labels"},
                    {"urlPath": "/api/v1/namespaces/{{ request.namespace }}/pods", "jmesPath": "items | length(@)"},
                    {"urlPath": "/apis/apps/v1/namespaces/default/deployments",
                     "jmesPath": "items[].metadata.name"},
                    {"urlPath": "/api/v1/nodes?labelSelector=kubernetes.io%2Fos%3Dlinux", "jmesPath": "items[0]"},
                    {"urlPath": "/api/v1/namespaces/default/configmaps/cm", "jmesPath": "@"},
                ])
                if self.chance(0.03):  # refused at load: no host capability answers these
                    call = self.pick([{"urlPath": "/version"}, {"urlPath": f"/api/v1/nodes/{node}", "method": "POST"}])
                call = dict(call)
                if self.chance(0.3):
                    call["default"] = self.pick(["", {}, "none"])
                entries.append({"name": name, "apiCall": call})
            elif roll < 0.9:
                self.config_maps.add(name)
                entries.append({"name": name, "configMap": {"name": self.pick(["cm", "{{ request.namespace }}-cfg"]),
                                                            "namespace": self.pick(["default", "kube-system"])}})
            else:
                entries.append({"name": name, "imageRegistry": {
                    "reference": self.pick(["{{ request.object.spec.containers[0].image }}", "nginx:1.27"]),
                    "jmesPath": self.pick(["resolvedImage", "manifest.config.digest", "configData.config.User"])}})
            names.append(name)
        return entries, names

    def name_ref(self, names):
        """A context entry named in a variable (a ConfigMap only through its
        .data and .metadata)."""
        name = self.pick(names)
        return name + self.pick([".data.team || ''", ".metadata.name"] if name in self.config_maps
                                else ["", "", " || 'x'", ".metadata.labels || `{}`", ".data.team || ''"])

    def condition(self, names, element=False):
        op = self.pick(["Equals", "NotEquals", "AnyIn", "AllIn", "AnyNotIn", "AllNotIn", "GreaterThan",
                        "GreaterThanOrEquals", "LessThan", "LessThanOrEquals", "Equals", "AnyIn", "equals",
                        "In", "NotIn"])  # the last two deprecated, still run
        key_source = ["{{ element.name }}", "{{ element.image }}", "{{ elementIndex }}"] if element else []
        key = self.pick(key_source + [
            "{{ request.object.metadata.name }}", "{{ request.operation }}",
            "{{ request.object.metadata.labels.app || '' }}", "{{ length(request.object.spec.containers || `[]`) }}",
            "{{ request.object.spec.nodeName || '' }}", "{{ request.object.metadata.annotations || `{}` }}",
            "{{ time_now_utc() }}", "{{ request.object.spec.replicas || `0` }}", "{{ request.object.target.name || '' }}",
            "500m", "1Gi", "1h", "5", "{{ " + self.jmes() + " }}"] + (["{{ " + self.name_ref(names) + " }}"] if names else []))
        value = self.pick([
            "", "web", "pod-*", "CREATE", ["CREATE", "UPDATE"], ["a", "b*"], 1, "2", 0, "1-10", "1!-10",
            "1024Mi", "30m", "2h", True, None, "{{ request.namespace }}", ["default", "team-?"], {"a": "b"},
            "2024-01-01T00:00:00Z", "*"])
        if key == "{{ request.operation }}" and self.chance(0.95):
            # Kyverno refuses values that are not operations (kept now and then)
            value = self.pick(["CREATE", "UPDATE", ["CREATE", "UPDATE"], "{{ request.operation }}"])
        cond = {"key": key, "operator": op, "value": value}
        if self.chance(0.1):
            cond["message"] = "why"
        return cond

    def preconditions(self, names, element=False):
        conds = lambda: [self.condition(names, element) for _ in range(self.r.randint(1, 3))]
        roll = self.r.random()
        if roll < 0.45:
            return {"all": conds()}
        if roll < 0.8:
            return {"any": conds()}
        if roll < 0.9:
            return {"any": conds(), "all": conds()}
        return conds()  # the older plain list

    def container_patch(self, names):
        """A list element of `containers` with anchors."""
        elem = {}
        roll = self.r.random()
        if roll < 0.3:
            elem["(name)"] = self.pick(["*", "c0", "c?", "new"])
        elif roll < 0.45:
            elem["(image)"] = self.pick(["*:latest", "nginx*", "!*@sha256:*", "*"])
        elif roll < 0.55:
            elem["<(image)"] = self.pick(["*nginx*", "busybox*"])
        elif roll < 0.65:
            elem["name"] = self.pick(["c0", "sidecar", "{{ request.object.metadata.name }}"])
        else:
            elem["(name)"] = "*"
        field = self.pick(["image", "+(imagePullPolicy)", "env", "securityContext", "resources", "=(name)",
                           "X(command)", "^(name)", "ports", "image"])
        if field == "image":
            elem["image"] = self.pick(["{{ regex_replace_all('^docker.io/', '{{@}}', 'mirror.example.com/') }}",
                                       "registry.example.com/{{@}}", "nginx:2", self.var(names)])
        elif field == "+(imagePullPolicy)":
            elem["+(imagePullPolicy)"] = self.pick(["IfNotPresent", "Always"])
        elif field == "env":
            elem["env"] = [{"name": "ZONE", "value": self.var(names)},
                           {"(name)": "E*", "value": "patched"}][: self.r.randint(1, 2)]
        elif field == "securityContext":
            elem["securityContext"] = {"+(runAsNonRoot)": True, "+(allowPrivilegeEscalation)": False,
                                       "(privileged)": True, "capabilities": {"drop": ["ALL"]}}
        elif field == "resources":
            elem["resources"] = {"+(limits)": {"cpu": "1", "memory": "{{ request.object.metadata.labels.mem || '1Gi' }}"}}
        elif field == "ports":
            elem["ports"] = [{"containerPort": 8080, "name": "http"}]
        else:
            elem[field] = self.pick(["x", ["sh"], {"a": 1}, "*"])
        return elem

    def strategic_merge(self, kind, names):
        """A patchStrategicMerge for objects of `kind`, with anchors."""
        meta = {}
        if self.chance(0.8):
            meta["annotations"] = {self.pick(["example.com/zone", "topology.kubernetes.io/zone", "owner", "x"]):
                                   self.var(names) for _ in range(self.r.randint(1, 2))}
        if self.chance(0.5):
            key = self.pick(["app", "+(app)", "tier", "+(team)", "example.com/{{ request.object.kind }}",
                             "=(app)", "X(app)", "^(app)", "(app)", "<(app)"])
            meta["labels"] = {key: self.pick(["web", self.var(names), ""])}
            if self.chance(0.03):
                meta["labels"][key] = self.pick([None, 3])  # not a string: refused at load, as Kyverno does
            if key.startswith(("(", "<(")):
                meta["labels"]["patched"] = "yes"
        if self.chance(0.03):
            meta["annotations"] = {"remove-me": None}  # not a string: refused at load
        patch = {"metadata": meta} if meta else {}
        if self.chance(0.2):
            patch["metadata"] = dict(meta, **{self.pick(["(labels)", "<(labels)", "+(labels)"]):
                                              self.pick([{"app": "web"}, {"app": "?*"}, {}])})
        spec_owner = None
        if kind == "pod":
            spec_owner = patch
        elif kind == "deployment":
            patch["spec"] = {"template": {}}
            if self.chance(0.3):
                patch["spec"]["+(replicas)"] = self.pick([2, "{{ request.object.spec.replicas || `1` }}"])
            spec_owner = patch["spec"]["template"]
            if self.chance(0.4):
                spec_owner["metadata"] = {"labels": {"+(tier)": "back"}}
        elif kind == "node" and self.chance(0.3):
            patch["spec"] = {"+(unschedulable)": False}
        elif kind == "binding" and self.chance(0.1):
            patch["target"] = {"name": "other-node"}  # refused by the gate: never a Binding to another Node
        if spec_owner is not None and self.chance(0.7):
            spec = {}
            if self.chance(0.8):
                spec["containers"] = [self.container_patch(names) for _ in range(self.r.randint(1, 2))]
            if self.chance(0.2):
                spec["volumes"] = [{"(hostPath)": {"(path)": "*docker.sock"}, "name": "removed"}] \
                    if self.chance(0.5) else [{"name": "cache", "emptyDir": {}}]
            if self.chance(0.2):
                spec[self.pick(["+(nodeSelector)", "nodeSelector", "(nodeSelector)"])] = {"disk": "ssd"}
            if self.chance(0.2):
                spec["tolerations"] = [{"key": "k", "operator": "Exists"}]
            if self.chance(0.15):
                spec["<(hostNetwork)"] = True
                spec["dnsPolicy"] = "ClusterFirstWithHostNet"
            if self.chance(0.1):
                spec["+(securityContext)"] = {"runAsUser": 1000}
            spec_owner["spec"] = spec
        return patch

    def json6902(self, kind, names, element=False):
        ops = []
        for _ in range(self.r.randint(1, 3)):
            op = self.pick(["add", "add", "add", "replace", "remove", "test", "copy", "move"])
            key = self.pick(["example.com~1zone", "app", "gen", "a~0b", "{{ request.object.kind }}"])
            path = self.pick([f"/metadata/annotations/{key}", f"/metadata/labels/{key}", "/metadata/annotations",
                              "/spec/containers/0/image", "/spec/containers/-1/env/-", "/spec/containers/-",
                              "/spec/template/metadata/labels/x", "/spec/replicas", "/metadata/name",
                              "/spec/containers/{{elementIndex}}/imagePullPolicy" if element else "/spec/nodeSelector/x",
                              "/metadata/missing/deep/x", "", "/"])
            entry = {"op": op, "path": path}
            if op in ("add", "replace", "test"):
                entry["value"] = self.pick([self.var(names), "v", {"example.com/x": "y"}, 3, ["a"],
                                            {"name": "E", "value": "v"}, None, True])
            if op in ("copy", "move"):
                entry["from"] = self.pick(["/metadata/labels/app", "/metadata/name", "/spec/containers/0"])
            ops.append(entry)
        if self.chance(0.5):
            return json.dumps(ops)
        lines = []
        for entry in ops:  # the YAML form Kyverno's docs write
            lines.append(f"- op: {entry['op']}")
            lines.append(f"  path: \"{entry['path']}\"")
            for k in ("from", "value"):
                if k in entry:
                    lines.append(f"  {k}: {json.dumps(entry[k])}")
        return "\n".join(lines) + "\n"

    def foreach(self, kind, names, depth=0):
        lists = {"pod": ["request.object.spec.containers", "request.object.spec.initContainers || `[]`",
                         "request.object.spec.containers[?image != null]"],
                 "deployment": ["request.object.spec.template.spec.containers"],
                 "binding": ["`[\"a\", \"b\"]`", "keys(request.object.metadata.annotations || `{}`)"],
                 "node": ["items(request.object.metadata.labels || `{}`, 'key', 'value')"]}[kind]
        each = {"list": self.pick(lists + ["split(request.object.metadata.name, '-')", "request.object.missing",
                                           "`[]`"])}
        if depth:
            each["list"] = self.pick(["element.env || `[]`", "element.ports || `[]`", "`[1, 2, 3]`"])
        if self.chance(0.3):
            each["context"] = [{"name": f"e{depth}", "variable": {"jmesPath": "element", "default": {}}}]
        if self.chance(0.3):
            each["preconditions"] = self.preconditions(names, element=True)
        if self.chance(0.3):
            each["order"] = self.pick(["Ascending", "Descending"] * 9 + ["Sideways"])
        elem_name = "{{ element.name }}" if depth == 0 else "{{ element0.name }}"
        if self.chance(0.55):
            if kind in ("pod", "deployment") and self.chance(0.8):
                container = {"name": elem_name}
                container[self.pick(["image", "+(imagePullPolicy)", "env"])] = self.pick([
                    "{{ regex_replace_all('^([^/]+\\.[^/]+/)?(.*)$', '{{ element.image }}', 'mirror.example.com/$2') }}",
                    "Always", [{"name": "INDEX", "value": "{{ elementIndex }}"}]])
                spec = {"containers": [container]}
                each["patchStrategicMerge"] = {"spec": {"template": {"spec": spec}}} if kind == "deployment" \
                    else {"spec": spec}
            else:
                each["patchStrategicMerge"] = {"metadata": {"annotations": {
                    "example.com/{{ elementIndex }}": "{{ to_string(element) }}"}}}
        else:
            each["patchesJson6902"] = self.json6902(kind, names, element=True)
        if depth < 2 and self.chance(0.15):
            each["foreach"] = [self.foreach(kind, names, depth + 1)]
            each.pop("patchStrategicMerge", None)
            each.pop("patchesJson6902", None)
        return each

    def rule(self, kind, i):
        ctx, names = self.context(kind)
        rule = {"name": f"rule-{i}", "match": self.rule_match(kind)}
        if ctx:
            rule["context"] = ctx
        if self.chance(0.1):
            rule["exclude"] = {"any": [{"resources": {"namespaces": ["kube-system"]}}]}
        if self.chance(0.45):
            rule["preconditions"] = self.preconditions(names)
        roll = self.r.random()
        if roll < 0.45:
            mutate = {"patchStrategicMerge": self.strategic_merge(kind, names)}
        elif roll < 0.65:
            mutate = {"patchesJson6902": self.json6902(kind, names)}
        elif roll < 0.93:
            mutate = {"foreach": [self.foreach(kind, names) for _ in range(self.r.randint(1, 2))]}
        elif kind == "binding":
            rule["match"] = {"any": [{"resources": {"kinds": ["Pod/binding"]}}]}
            mutate = {"targets": [{"apiVersion": "v1", "kind": "Pod", "name": "{{ request.object.metadata.name }}",
                                   "namespace": "{{ request.object.metadata.namespace }}"}],
                      "patchStrategicMerge": {"metadata": {"labels": {"foo": "{{ " + self.name_ref(names) + " }}" if names else "bar"}}}}
        else:
            mutate = {"patchStrategicMerge": {"metadata": {"labels": {
                "image-tag": "{{ images.containers.c0.tag || 'none' }}"}}}}
        rule["mutate"] = mutate
        if self.chance(0.01):
            rule["validate"] = {"pattern": {}}  # refused: this is a mutating policy
        return rule

    def cluster_policy(self, kind, forms=("rules", "rules", "ClusterPolicy", "ClusterPolicy", "Policy")):
        rules = [self.rule(kind, i) for i in range(self.r.randint(1, 3))]
        form = self.pick(list(forms))
        if form == "rules":
            settings = {"rules": rules}
            if self.chance(0.3):
                settings["copy"] = [{"label": "topology.kubernetes.io/zone"},
                                    {"label": "rack.example.com/*", "to": "both"}][: self.r.randint(1, 2)]
            if self.chance(0.3):
                settings["failurePolicy"] = self.pick(["Fail", "Ignore"])
            if self.chance(0.05):
                settings["resourceKinds"] = [{"group": "example.com", "resource": "widgets", "kind": "Widget",
                                              "namespaced": True}]
            return settings
        doc = {"apiVersion": "kyverno.io/v1", "kind": form, "metadata": {"name": f"gen-{self.n}"},
               "spec": {"rules": rules}}
        if form == "Policy":
            doc["metadata"]["namespace"] = self.pick(["default", "team-a"])
        if self.chance(0.3):
            doc["spec"]["failurePolicy"] = self.pick(["Fail", "Ignore"])
        if self.chance(0.2):
            doc["spec"]["background"] = False
        if self.chance(0.15):
            doc["metadata"]["annotations"] = {"pod-policies.kyverno.io/autogen-controllers":
                                              self.pick(["none", "Deployment", "Deployment,StatefulSet"])}
        return doc

    def cpol_seed(self):
        kind = self.pick(["pod", "pod", "binding", "binding", "deployment", "node"])
        return self.request(kind), self.cluster_policy(kind)

    # ---- several documents ------------------------------------------------

    def mixed_seed(self):
        kind = self.pick(["pod", "binding", "binding", "deployment"])
        docs = []
        for _ in range(self.r.randint(2, 3)):
            roll = self.r.random()
            if roll < 0.35:
                docs.append(self.cel_document("mpol", kind)[0])
            elif roll < 0.6:
                docs.append(self.cel_document("map", kind)[0])
            else:
                docs.append(self.cluster_policy(kind, forms=("ClusterPolicy", "Policy")))
            self.n += 1
        cel = [d for d in docs if d["apiVersion"].startswith("policies.kyverno.io")]
        if cel and self.chance(0.4):
            target = self.pick(cel)
            exception = {"apiVersion": "policies.kyverno.io/v1", "kind": "PolicyException",
                         "metadata": {"name": "exc"},
                         "spec": {"policyRefs": [{"name": target["metadata"]["name"], "kind": target["kind"]}]}}
            if self.chance(0.6):
                exception["spec"]["matchConditions"] = [{"name": "e", "expression": self.expr("bool", 1)}]
            docs.append(exception)
        settings = {"policies": docs}
        if self.chance(0.3):
            settings["failurePolicy"] = self.pick(["Fail", "Ignore"])
        return self.request(kind), settings


def encode(request, settings, answer):
    compact = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()
    return compact(request) + b"\0" + compact(settings) + b"\0" + answer.encode()


def judged_seeds(n, seed):
    """The policy judges' cases (a third each), as the wasm host is given
    them; the host answers every read with one of the case's resources, or
    with Seeds' answers where the case reads nothing."""
    g = Seeds(seed * 1000 + 4)
    third = -(-n // 3)
    cases = (generate.map_cases(third, seed) + generate.mpol_cases(third, seed)
             + generate.cpol_cases(third, seed))
    for case in cases[:n]:
        resources = case.get("resources")
        answer = json.dumps(g.pick(resources), separators=(",", ":")) if resources else g.answer()
        yield encode(generate.admission_request(case), generate.settings_of(case), answer)


def seeds(counts, seed):
    """(kind, bytes) for every seed, the same for the same seed and counts."""
    for data in judged_seeds(counts["judged"], seed):
        if len(data) <= MAX_SEED:
            yield "judged", data
    makers = {"map": lambda g: g.cel_seed("map"), "mpol": lambda g: g.cel_seed("mpol"),
              "cpol": lambda g: g.cpol_seed(), "mixed": lambda g: g.mixed_seed()}
    for offset, kind in enumerate(["map", "mpol", "cpol", "mixed"]):
        g = Seeds(seed * 1000 + offset)  # one stream per kind: changing one count leaves the others alone
        made = 0
        while made < counts[kind]:
            g.n += 1
            request, settings = makers[kind](g)
            data = encode(request, settings, g.answer())
            if len(data) > MAX_SEED:
                continue
            made += 1
            yield kind, data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=os.path.join(HERE, "corpus", "evaluate"))
    for kind, n in DEFAULT_COUNTS.items():
        parser.add_argument(f"--{kind}", type=int, default=n, help=f"seeds of kind {kind} (default {n})")
    parser.add_argument("--prune", action="store_true",
                        help="remove this script's earlier seeds of the kinds generated that this run did not produce")
    parser.add_argument("--dry-run", action="store_true", help="count and measure, write nothing")
    args = parser.parse_args()
    counts = {kind: getattr(args, kind) for kind in DEFAULT_COUNTS}
    os.makedirs(args.out, exist_ok=True)
    stats = {kind: [0, 0, 0] for kind in counts}  # written, already there, bytes
    produced = set()
    for kind, data in seeds(counts, args.seed):
        name = f"seed-{kind}-{hashlib.sha1(data).hexdigest()[:16]}"
        produced.add(name)
        path = os.path.join(args.out, name)
        stat = stats[kind]
        stat[2] += len(data)
        if os.path.exists(path):
            stat[1] += 1
            continue
        if not args.dry_run:
            with open(path, "wb") as f:
                f.write(data)
        stat[0] += 1
    stale = sorted(f for f in os.listdir(args.out)
                   if f.startswith(tuple(f"seed-{k}-" for k, n in counts.items() if n)) and f not in produced)
    if args.prune and not args.dry_run:
        for name in stale:
            os.remove(os.path.join(args.out, name))
    verb = "would write" if args.dry_run else "wrote"
    for kind, (written, present, size) in stats.items():
        print(f"{kind:6} {verb} {written:5} new, {present:5} already there, {size / 1024:7.0f} KiB")
    total = [sum(s[i] for s in stats.values()) for i in range(3)]
    print(f"total  {verb} {total[0]:5} new, {total[1]:5} already there, {total[2] / 1024:7.0f} KiB"
          f" in {os.path.relpath(args.out)}")
    if stale:
        print(f"{len(stale)} earlier seeds of these kinds not produced this time: "
              + ("removed" if args.prune and not args.dry_run else "kept (--prune removes them)"))


if __name__ == "__main__":
    main()
