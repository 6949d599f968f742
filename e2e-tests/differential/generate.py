"""Seeded case generators for `make differential`, from grammars of what
docs/cel.md says the policy supports: typed CEL expressions (literals of
every type, arithmetic at the edges, strings with escapes and Unicode, lists
and maps, optionals, macros and two-variable comprehensions, Kubernetes'
libraries, variables, errors), objects (Pods, Deployments, Nodes, Bindings
with random metadata, containers, env and ports), and MutatingAdmissionPolicy
mutations (ApplyConfigurations over the built-in schema, JSON Patch lists).

Every case is a dict the judges read; `Gen(seed)` gives the same cases for the
same seed."""

import json
import random

INT_EDGES = ["0", "1", "-1", "2", "7", "9223372036854775807", "-9223372036854775807 - 1",
             "4611686018427387904", "-4611686018427387904", "1000000007"]
UINT_EDGES = ["0u", "1u", "2u", "18446744073709551615u", "9223372036854775808u", "10u"]
DOUBLE_EDGES = ["0.0", "1.5", "-2.25", "1e308", "-1e308", "1e-300", "0.1", "3.0", "-0.0", "2.5e3"]
STRING_PIECES = ["a", "abc", "Hello", "zone-a", "us-east-1", "", " x ", "a,b,c", "k=v", "ü", "日本",
                 "\u00e9t\u00e9", "😀", "\\n", "\\t", "\\\\", "\\\"", "\\'", "\\u00e9", "\\x41",
                 "\\101", "MiXeD", "123", "-42", "3.5", "true", "a.b.c", "/path/x"]
REGEXES = ["^a", "b+", "[0-9]+", "^$", "(x|y)z", ".*", "\\\\d{2}", "[a-z]+-[0-9]"]
LABEL_KEYS = ["app", "tier", "team", "topology.kubernetes.io/zone", "example.com/owner", "env", "x"]
LABEL_VALUES = ["web", "db", "a", "prod", "us-east-1a", "", "v1", "blue"]
IMAGES = ["nginx", "nginx:1.27", "registry.example.com/team/app:v2", "busybox@sha256:" + "a" * 64,
          "ghcr.io/org/tool:latest"]


# Expressions over a MutatingAdmissionPolicy's ConfigMap parameters.
PARAMS_READS = ["params.data.team", "params.data[?'tier'].orValue('none')", "'team-' + params.data.team",
                "params.data['tier']"]

# The share of a policy judge's cases drawn from the unrestricted pools below,
# which hold inputs the API server refuses (label values and keys, values of
# the wrong type for their field, a field given twice, a renamed object);
# every other case draws only inputs both sides could accept.
UNRESTRICTED_SHARE = 0.06


class Gen:
    def __init__(self, seed, unrestricted_share=None):
        """`unrestricted_share`: each case (start_case) draws whether it uses
        the unrestricted pools; None keeps them for every case (the Kyverno
        judge's generated ClusterPolicies)."""
        self.r = random.Random(seed)
        self.unrestricted_share = unrestricted_share
        self.unrestricted = True
        self.params = None

    def start_case(self):
        if self.unrestricted_share is not None:
            self.unrestricted = self.chance(self.unrestricted_share)
        return self.unrestricted

    def pool(self, valid, unrestricted):
        """The pool a draw picks from: the same number of draws either way,
        so that a generator without a share gives the cases it always gave."""
        return unrestricted if self.unrestricted else valid

    def pick(self, items):
        return self.r.choice(items)

    def chance(self, p):
        return self.r.random() < p

    # ---- objects --------------------------------------------------------

    def labels(self, n=None):
        n = self.r.randint(0, 4) if n is None else n
        return {self.pick(LABEL_KEYS): self.pick(LABEL_VALUES) for _ in range(n)}

    def container(self, i):
        c = {"name": f"c{i}", "image": self.pick(IMAGES)}
        if self.chance(0.5):
            c["env"] = [{"name": f"E{j}", "value": self.pick(LABEL_VALUES)} for j in range(self.r.randint(1, 3))]
        if self.chance(0.4):
            # Distinct ports: the API server refuses a Pod that repeats one.
            ports = self.r.sample([80, 443, 8080, 9090], self.r.randint(1, 2))
            c["ports"] = [{"containerPort": port, "protocol": "TCP", "name": f"p{j}"} for j, port in enumerate(ports)]
        if self.chance(0.3):
            c["resources"] = {"requests": {"cpu": self.pick(["100m", "1", "250m"]),
                                           "memory": self.pick(["64Mi", "1Gi", "512M"])}}
        return c

    def pod_spec(self):
        spec = {"containers": [self.container(i) for i in range(self.r.randint(1, 3))]}
        if self.chance(0.3):
            spec["nodeSelector"] = self.labels(1)
        if self.chance(0.3):
            spec["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
        return spec

    def metadata(self, name, namespace=True):
        meta = {"name": name}
        if namespace:
            meta["namespace"] = self.pick(["default", "team-a"])
        if self.chance(0.8):
            meta["labels"] = self.labels()
        if self.chance(0.6):
            meta["annotations"] = self.labels()
        return meta

    def pod(self):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": self.metadata("pod-" + str(self.r.randint(0, 99))),
                "spec": self.pod_spec()}

    def deployment(self):
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": self.metadata("web"),
                "spec": {"replicas": self.r.randint(1, 5), "selector": {"matchLabels": {"app": "web"}},
                         "template": {"metadata": {"labels": {"app": "web"}}, "spec": self.pod_spec()}}}

    def node(self):
        labels = self.labels()
        labels["topology.kubernetes.io/zone"] = self.pick(["us-east-1a", "eu-west-1b"])
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": labels},
                "spec": {"podCIDR": "10.244.1.0/24"},
                "status": {"capacity": {"cpu": "4", "memory": "16Gi"}}}

    def binding(self):
        return {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": "pod-1", "namespace": "default"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}

    def subject(self):
        kind = self.pick(["pod", "pod", "deployment", "node", "binding"])
        obj = getattr(self, kind)()
        resource = {"pod": ("", "v1", "pods", ""), "deployment": ("apps", "v1", "deployments", ""),
                    "node": ("", "v1", "nodes", ""), "binding": ("", "v1", "pods", "binding")}[kind]
        return kind, obj, resource

    # ---- CEL expressions -------------------------------------------------

    def string_lit(self):
        body = "".join(self.pick(STRING_PIECES) for _ in range(self.r.randint(0, 2)))
        style = self.r.randint(0, 9)
        if style == 0:
            return "r'" + body.replace("\\", "") .replace("'", "") + "'"
        if style == 1:
            return '"""' + body.replace('"', "") + '"""'
        if style < 5:
            return '"' + body.replace('"', "").replace("\\\"", "") + '"'
        return "'" + body.replace("'", "").replace("\\'", "") + "'"

    def expr(self, t, d):
        """An expression of CEL type `t` (int, uint, double, string, bool,
        bytes, list, map, duration, timestamp, dyn), at most `d` deep."""
        if d <= 0 or self.chance(0.25):
            return self.leaf(t)
        f = getattr(self, "e_" + t)
        return f(d - 1)

    def ordered_list(self, d, kinds=("int", "uint", "double", "string", "bool", "bytes", "duration", "timestamp")):
        """A list for Kubernetes' lists functions: of one of `kinds` (at
        times emptied by a filter, where `sum()` is the zero of the declared
        type), of `dyn` items of any of them, or of the object's maps."""
        form = self.r.random()
        if form < 0.25:
            return "[" + ", ".join(f"dyn({self.expr(self.pick(list(kinds)), d)})"
                                   for _ in range(self.pick([1, 2, 3]))) + "]"
        if form < 0.3:
            return self.pick(["[object.spec]", "object.spec.containers", "[dyn(null)]", "[[1], [2]]"])
        t = self.pick(list(kinds))
        items = f"[{self.expr(t, d)}, {self.expr(t, d)}, {self.expr(t, d)}]"
        return f"{items}.filter(x, false)" if self.chance(0.2) else items

    def quantity(self):
        """A quantity, at times a sum or difference, written in the forms
        apimachinery holds as an int64 or as a decimal."""
        text = lambda: self.pick(["1", "1.0", "1000m", "1.5Gi", "1Gi", "1.5k", "1e3", "0", "-2", "8Ei",
                                  "1234567890123456789", "9223372036854775807", "0.5", "500m", "2Ki"])
        q = f"quantity('{text()}')"
        if self.chance(0.4):
            q += f".{self.pick(['add', 'sub'])}({self.pick([f'quantity({chr(39)}{text()}{chr(39)})', '1', '-1', '1000'])})"
        return q

    def leaf(self, t):
        return {
            "int": lambda: self.pick(INT_EDGES + [str(self.r.randint(-1000, 1000))]),
            "uint": lambda: self.pick(UINT_EDGES + [f"{self.r.randint(0, 1000)}u"]),
            "double": lambda: self.pick(DOUBLE_EDGES),
            "string": self.string_lit,
            "bool": lambda: self.pick(["true", "false"]),
            "bytes": lambda: self.pick(["b'abc'", "b''", "b'\\xff\\x00'", "b'\u00e9'"]),
            "list": lambda: self.pick(["[1, 2, 3]", "[]", "['a', 'b']", "[3, 1, 2, 1]"]),
            "map": lambda: self.pick(["{'a': 1, 'b': 2}", "{}", "{'x': 'y'}", "{1: 'one', 2: 'two'}"]),
            "duration": lambda: f"duration('{self.pick(['1h', '30m', '1h30m', '-2s', '1.5s', '0s', '100ms', '2562047h'])}')",
            "timestamp": lambda: f"timestamp('{self.pick(['2024-01-01T00:00:00Z', '2023-06-15T12:30:45.123Z', '1970-01-01T00:00:00Z', '2024-02-29T23:59:59+02:00', '9999-12-31T23:59:59Z'])}')",
            "dyn": lambda: self.pick(["object.metadata.name", "object.kind", "request.operation",
                                      "object.apiVersion", "1", "'s'", "null", "[1, 'a']"]),
        }[t]()

    def e_int(self, d):
        x = lambda: self.expr("int", d)
        return self.pick([
            lambda: f"{x()} + {x()}", lambda: f"{x()} - {x()}", lambda: f"{x()} * {x()}",
            lambda: f"{x()} / {x()}", lambda: f"{x()} % {x()}", lambda: f"-({x()})",
            lambda: f"size({self.expr('string', d)})", lambda: f"size({self.expr('list', d)})",
            lambda: f"int({self.expr('double', d)})", lambda: f"int({self.expr('uint', d)})",
            lambda: f"int('{self.pick(['42', '-7', '9223372036854775808', 'x', ' 1'])}')",
            lambda: f"({self.expr('bool', d)} ? {x()} : {x()})",
            lambda: f"[{x()}, {x()}][{self.pick(['0', '1', '2', '-1'])}]",
            lambda: f"{self.expr('string', d)}.indexOf({self.expr('string', d)})",
            lambda: f"{self.expr('string', d)}.lastIndexOf({self.expr('string', d)})",
            lambda: f"math.greatest({x()}, {x()})", lambda: f"math.least([{x()}, {x()}, {x()}])",
            lambda: f"math.abs({x()})", lambda: f"math.sign({x()})",
            lambda: f"math.bitAnd({x()}, {x()})", lambda: f"math.bitShiftLeft({x()}, {self.pick(['1', '63', '64', '-1'])})",
            lambda: f"size(object.metadata.?labels.orValue({{}}))",
            lambda: f"{self.quantity()}.asInteger()", lambda: f"sign({self.quantity()})",
            lambda: f"{self.expr('string', d)}.findAll('[a-z0-9]', {self.pick(['-1', '0', '1', '2'])}).size()",
            lambda: f"{self.expr('list', d)}.size()",
            lambda: f"{self.expr('duration', d)}.getHours()",
            lambda: f"{self.expr('timestamp', d)}.getFullYear()",
            lambda: f"{self.expr('timestamp', d)}.getDayOfWeek({self.pick(['', chr(39) + 'America/New_York' + chr(39)])})".replace("()", "()"),
            lambda: f"{self.expr('list', d)}.map(x, 1).size()",
            lambda: f"[1, 2, 3].filter(x, x > {x()}).size()",
            lambda: f"lists.range({self.pick(['0', '3', '5'])}).sum()" if self.chance(0.5) else f"[{x()}, {x()}].sum()",
            lambda: f"quantity('{self.pick(['1Gi', '500m', '2', '1e3'])}').compareTo(quantity('1'))",
            lambda: f"semver('{self.pick(['1.2.3', '2.0.0-rc.1', '0.1.0'])}').major()",
            lambda: f"object.metadata.name.size()",
        ])()

    def e_uint(self, d):
        x = lambda: self.expr("uint", d)
        return self.pick([
            lambda: f"{x()} + {x()}", lambda: f"{x()} - {x()}", lambda: f"{x()} * {x()}",
            lambda: f"{x()} / {x()}", lambda: f"{x()} % {x()}",
            lambda: f"uint({self.expr('int', d)})", lambda: f"uint({self.expr('double', d)})",
            lambda: f"uint('{self.pick(['42', '-1', '18446744073709551616'])}')",
            lambda: f"({self.expr('bool', d)} ? {x()} : {x()})",
        ])()

    def e_double(self, d):
        x = lambda: self.expr("double", d)
        return self.pick([
            lambda: f"{x()} + {x()}", lambda: f"{x()} - {x()}", lambda: f"{x()} * {x()}",
            lambda: f"{x()} / {x()}", lambda: f"-({x()})",
            lambda: f"double({self.expr('int', d)})", lambda: f"double({self.expr('uint', d)})",
            lambda: f"double('{self.pick(['1.5', '-0', 'NaN', 'inf', '1e400', 'x'])}')",
            lambda: f"math.ceil({x()})", lambda: f"math.floor({x()})", lambda: f"math.round({x()})",
            lambda: f"math.trunc({x()})", lambda: f"math.abs({x()})", lambda: f"math.sqrt({x()})",
            lambda: f"quantity('{self.pick(['1Gi', '500m', '1.5'])}').asApproximateFloat()",
        ])()

    def e_string(self, d):
        s = lambda: self.expr("string", d)
        i = lambda: self.pick(["0", "1", "2", "-1", "10"])
        return self.pick([
            lambda: f"{s()} + {s()}", lambda: f"{s()}.lowerAscii()", lambda: f"{s()}.upperAscii()",
            lambda: f"{s()}.replace({s()}, {s()})", lambda: f"{s()}.replace({s()}, {s()}, {i()})",
            lambda: f"{s()}.substring({i()})", lambda: f"{s()}.substring({i()}, {i()})",
            lambda: f"{s()}.trim()", lambda: f"{s()}.charAt({i()})", lambda: f"{s()}.reverse()",
            lambda: f"string({self.ordered_list(d)}.{self.pick(['min', 'max', 'sum'])}())",
            lambda: f"{s()}.split({s()}).join('|')", lambda: f"{s()}.split({s()}, {i()}).join()",
            lambda: f"string({self.expr('int', d)})", lambda: f"string({self.expr('uint', d)})",
            lambda: f"string({self.expr('double', d)})", lambda: f"string({self.expr('bool', d)})",
            lambda: f"string({self.expr('bytes', d)})", lambda: f"string({self.expr('duration', d)})",
            lambda: f"string({self.expr('timestamp', d)})",
            lambda: f"strings.quote({s()})",
            lambda: f"'%s-%d'.format([{s()}, {self.expr('int', d)}])",
            lambda: f"'%.2f|%x|%o|%b'.format([{self.expr('double', d)}, {self.expr('int', d)}, 8, 5])",
            lambda: f"'%s'.format([{self.expr(self.pick(['list', 'map', 'bool', 'uint', 'duration', 'timestamp', 'bytes', 'double']), d)}])",
            lambda: f"({self.expr('bool', d)} ? {s()} : {s()})",
            lambda: f"object.metadata.name", lambda: f"object.metadata.?namespace.orValue('none')",
            lambda: f"object.metadata.?labels[?'{self.pick(LABEL_KEYS)}'].orValue('-')",
            lambda: f"object.metadata.labels['{self.pick(LABEL_KEYS)}']",
            lambda: f"request.operation", lambda: f"request.userInfo.username",
            lambda: f"request.resource.resource", lambda: f"request.?subResource.orValue('')",
            lambda: f"['b', 'a', {s()}].sort().join(',')", lambda: f"{s()}.find('[0-9]+')",
            lambda: f"{s()}.findAll('[a-z]').join()",
            lambda: f"string(ip('{self.pick(['10.0.0.1', '::1', '2001:db8::68', '192.168.0.1'])}'))",
            lambda: f"string(cidr('{self.pick(['10.0.0.0/8', '192.168.1.0/24', '2001:db8::/32'])}').ip())",
            lambda: f"url('{self.pick(['https://example.com:8080/a/b?x=1', 'http://[::1]/p', 'https://u@h/'])}').getHost()",
            lambda: f"url('{self.pick(['https://example.com:8080/a/b?x=1', 'http://h/p'])}').getEscapedPath()",
            lambda: f"{self.expr('list', d)}.map(x, string(x)).join('/')" if self.chance(0.3) else "object.kind",
            lambda: f"base64.encode({self.expr('bytes', d)})",
            lambda: f"string(base64.decode('{self.pick(['aGVsbG8=', 'eA==', '!!'])}'))",
            lambda: f"{s()}.trim()",
        ])()

    def e_bool(self, d):
        def cmp():
            t = self.pick(["int", "uint", "double", "string", "bool", "bytes", "duration", "timestamp"])
            return f"{self.expr(t, d)} {self.pick(['==', '!=', '<', '<=', '>', '>='])} {self.expr(t, d)}"

        def mixed():
            a, b = self.pick(["int", "uint", "double"]), self.pick(["int", "uint", "double"])
            return f"dyn({self.expr(a, d)}) {self.pick(['==', '!=', '<', '>='])} dyn({self.expr(b, d)})"

        b = lambda: self.expr("bool", d)
        s = lambda: self.expr("string", d)
        return self.pick([
            cmp, cmp, mixed, lambda: f"{b()} && {b()}", lambda: f"{b()} || {b()}", lambda: f"!{b()}",
            lambda: f"{s()}.startsWith({s()})", lambda: f"{s()}.endsWith({s()})", lambda: f"{s()}.contains({s()})",
            lambda: f"{s()}.matches('{self.pick(REGEXES)}')",
            lambda: f"{self.expr('int', d)} in {self.expr('list', d)}",
            lambda: f"'{self.pick(LABEL_KEYS)}' in object.metadata.?labels.orValue({{}})",
            lambda: f"has(object.metadata.labels)", lambda: f"has(object.spec)",
            lambda: f"has(object.metadata.annotations) && '{self.pick(LABEL_KEYS)}' in object.metadata.annotations",
            lambda: f"{self.expr('list', d)}.all(x, x != {self.expr('int', d)})",
            lambda: f"{self.expr('list', d)}.exists(x, x == 1)",
            lambda: f"{self.expr('list', d)}.exists_one(x, x == 1)",
            lambda: f"{self.expr('map', d)}.all(k, v, k != '' || v != null)" if self.chance(0.5) else
                    f"{self.expr('map', d)}.exists(k, k == 'a')",
            lambda: f"sets.contains({self.expr('list', d)}, {self.expr('list', d)})",
            lambda: f"sets.intersects([1, 2], {self.expr('list', d)})",
            lambda: f"sets.equivalent([1, 2, 2], {self.expr('list', d)})",
            lambda: f"{self.expr('list', d)}.isSorted()", lambda: f"{self.ordered_list(d)}.isSorted()",
            lambda: f"type({self.ordered_list(d, ('int', 'uint', 'double', 'duration'))}.sum()) == {self.pick(['int', 'uint', 'double', 'type(duration(' + chr(39) + '0s' + chr(39) + '))'])}",
            lambda: f"ip('{self.pick(['10.0.0.1', '::1', '127.0.0.1', 'fe80::1'])}').{self.pick(['isLoopback', 'isGlobalUnicast', 'isUnspecified', 'isLinkLocalUnicast'])}()",
            lambda: f"cidr('{self.pick(['10.0.0.0/8', '192.168.0.0/16'])}').containsIP('{self.pick(['10.1.2.3', '192.168.5.5', '8.8.8.8'])}')",
            lambda: f"isIP('{self.pick(['10.0.0.1', '1.2.3', '::g', '::1'])}')", lambda: f"isCIDR('{self.pick(['10.0.0.0/8', '10.0.0.1/33'])}')",
            lambda: f"isURL('{self.pick(['https://a/b', 'not a url', '/rel'])}')",
            lambda: f"isQuantity('{self.pick(['1Gi', '1.5x', '500m', '-1'])}')",
            lambda: f"isSemver('{self.pick(['1.2.3', 'v1.2.3', '1.2'])}')",
            lambda: f"quantity('{self.pick(['1Gi', '500m'])}').isGreaterThan(quantity('{self.pick(['1G', '1'])}'))",
            lambda: f"{self.quantity()}.isInteger()",
            lambda: f"semver('1.2.3').isLessThan(semver('{self.pick(['1.10.0', '1.2.3', '0.9.9'])}'))",
            lambda: f"optional.of(1).hasValue()", lambda: f"object.metadata.?labels.hasValue()",
            lambda: f"format.dns1123Label().validate('{self.pick(['abc', 'Abc', 'a-b', '-x'])}').hasValue()",
            lambda: f"{self.expr('map', d)}.exists_one(k, k == 'b')",
            lambda: f"type({self.expr(self.pick(['int', 'string', 'double', 'list']), d)}) == {self.pick(['int', 'string', 'double', 'list', 'uint'])}",
        ])()

    def e_bytes(self, d):
        return self.pick([
            lambda: f"bytes({self.expr('string', d)})", lambda: f"{self.expr('bytes', d)} + {self.expr('bytes', d)}",
            lambda: f"base64.decode('{self.pick(['aGk=', 'AA=='])}')",
        ])()

    def e_list(self, d):
        e = lambda: self.expr("int", d)
        l = lambda: self.expr("list", d)
        return self.pick([
            lambda: f"[{e()}, {e()}]", lambda: f"{l()} + {l()}", lambda: f"{l()}.map(x, x * 2)",
            lambda: f"{l()}.filter(x, x % 2 == 0)", lambda: f"{l()}.map(x, x > 1, x - 1)",
            lambda: f"{l()}.sort()", lambda: f"{l()}.distinct()", lambda: f"{l()}.reverse()",
            lambda: f"{l()}.slice({self.pick(['0', '1'])}, {self.pick(['1', '2', '5'])})",
            lambda: f"[{l()}, {l()}].flatten()", lambda: f"lists.range({self.pick(['0', '4', '-1'])})",
            lambda: f"[{l()}, [{l()}]].flatten({self.pick(['1', '2', e()])})",
            lambda: f"{l()}.sortBy(x, {self.pick(['-x', 'x % 3', '10 / x', 'dyn(10 / x)'])})",
            lambda: f"{l()}.transformList(i, v, v + i)", lambda: f"{l()}.transformList(i, v, i > 0, v)",
            lambda: f"[{self.string_lit()}, {self.string_lit()}].sortBy(s, s.size())",
            lambda: f"object.metadata.?labels.orValue({{}}).map(k, k).sort()",
            lambda: f"[?{self.pick(['optional.none()', 'optional.of(5)'])}, {e()}]",
            lambda: f"{self.expr('map', d)}.map(k, k)" if self.chance(0.2) else f"[{e()}]",
        ])()

    def e_map(self, d):
        e = lambda: self.expr("int", d)
        m = lambda: self.expr("map", d)
        return self.pick([
            lambda: f"{{{self.string_lit()}: {e()}, {self.string_lit()}: {e()}}}",
            lambda: f"{m()}.transformMap(k, v, v)", lambda: f"{self.expr('list', d)}.transformMapEntry(i, v, {{string(i): v}})",
            lambda: f"{self.expr('list', d)}.transformMap(i, v, v * 2)",
            lambda: f"object.metadata.?labels.orValue({{}})", lambda: f"{{'a': {e()}, ?'b': optional.none()}}",
            lambda: f"{{'a': {e()}, ?'b': optional.of({e()})}}",
        ])()

    def e_duration(self, d):
        return self.pick([
            lambda: f"{self.expr('duration', d)} + {self.expr('duration', d)}",
            lambda: f"{self.expr('duration', d)} - {self.expr('duration', d)}",
            lambda: f"{self.expr('timestamp', d)} - {self.expr('timestamp', d)}",
            lambda: f"duration('{self.pick(['1h2m3s', '-1.5h', '1d', '1us', '1ns', 'x'])}')",
        ])()

    def e_timestamp(self, d):
        return self.pick([
            lambda: f"{self.expr('timestamp', d)} + {self.expr('duration', d)}",
            lambda: f"{self.expr('timestamp', d)} - {self.expr('duration', d)}",
            lambda: f"timestamp({self.pick(['0', '1700000000', '-62135596800', '253402300800'])})",
            lambda: f"timestamp('{self.pick(['2024-13-01T00:00:00Z', '2024-01-01', '2024-01-01T00:00:00.5Z'])}')",
        ])()

    def e_dyn(self, d):
        t = self.pick(["int", "uint", "double", "string", "bool", "list", "map", "bytes", "duration", "timestamp"])
        return self.pick([
            lambda: self.expr(t, d),
            lambda: f"{self.expr('map', d)}[{self.string_lit()}]",
            lambda: f"{self.expr('map', d)}[?{self.string_lit()}].orValue(0)",
            lambda: f"object.spec.containers.map(c, c.name)" if self.chance(0.5) else "object.metadata",
            lambda: f"object.spec.?containers.orValue([]).map(c, c.?image.orValue(''))",
            lambda: f"object.?spec.?template.?spec.?containers.orValue([]).size()",
            lambda: f"object.?target.?name.orValue('')",
            lambda: f"variables.{self.pick(['a', 'b'])}",
            lambda: f"cel.bind(x, {self.expr(t, d)}, [x, x])",
            lambda: f"namespaceObject.metadata.?labels.orValue({{}})",
            lambda: f"{self.expr(t, d)} == {self.expr(t, d)}",
        ])()

    def cel_case(self, i):
        kind, obj, (group, version, resource, sub) = self.subject()
        variables = []
        if self.chance(0.4):
            variables = [{"name": "a", "expression": self.expr(self.pick(["int", "string", "list"]), 2)},
                         {"name": "b", "expression": "variables.a"}]
        t = self.pick(["int", "uint", "double", "string", "bool", "bytes", "list", "map", "duration",
                       "timestamp", "dyn", "bool", "string", "int"])
        expression = self.costly() if self.chance(0.01) else self.expr(t, self.r.randint(1, 4))
        case = {"id": f"cel-{i}", "op": "cel", "expression": expression,
                "variables": variables, "object": obj,
                "resource": {"group": group, "version": version, "resource": resource},
                "subResource": sub, "operation": "CREATE",
                "namespace": {"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": obj["metadata"].get("namespace", "default"),
                                           "labels": self.labels()}}}
        if kind == "node":
            case["namespace"] = None
        return case

    def costly(self):
        """An expression whose cost in cel-go's runtime cost model is near
        Kubernetes' limit of 1,000,000 (some above it), or large."""
        r = self.r.randint
        check = "authorizer.group('').resource('pods').namespace('default').check('{}').allowed()"
        checks = [check.format(verb) for verb in ["get", "list", "watch"][:r(2, 3)]]
        # Nested loops, not one long one: kube-apiserver's cost tracking takes
        # seconds over 70,000 steps of one comprehension (14 s for a filter).
        return self.pick([
            f"lists.range({r(240, 270)}).map(x, lists.range({r(240, 270)}).map(y, x * y)).size()",
            f"lists.range({r(1100, 1500)}).map(x, lists.range(70).filter(y, y % 2 == 0)).size()",
            f"sets.contains(lists.range({r(950, 1050)}), lists.range(1000))",
            f"lists.range({r(690, 720)}).sort().size()",
            f"lists.range({r(690, 720)}).distinct().size()",
            f"lists.range({r(50, 120)}).map(x, lists.range({r(50, 120)}).map(y, x * y)).size()",
            f"lists.range({r(1000, 8000)}).map(x, 'abcdefghij').join('').size()",
            f"lists.range({r(100, 2000)}).map(x, string(x)).join(',').contains('99')",
            f"lists.range({r(1000, 8000)}).map(x, x).sum()",
            f"lists.range({r(1000, 8000)}).filter(x, x % 7 == 0).exists_one(x, x == 49)",
            f"[{', '.join(checks)}].size()",
        ])

    # ---- MutatingAdmissionPolicy mutations ------------------------------

    def apply_configuration(self, kind):
        meta_parts = []
        if self.chance(0.7):
            meta_parts.append(f"labels: {{{self.string_lit_key()}: {self.value_string(label=True)}}}")
        if self.chance(0.6):
            meta_parts.append(f"annotations: {{{self.string_lit_key()}: {self.value_string(label=False)}}}")
        if self.chance(0.1) and self.unrestricted:
            meta_parts.append("labels: {'a': 1}")  # a type error, and labels given twice
        meta = f"metadata: Object.metadata{{{', '.join(meta_parts)}}}"
        parts = [meta]
        spec_fields = []
        if kind == "pod" and self.chance(0.5):
            c = self.pick(["c0", "c1", "new"])
            fields = self.pick([
                "image: " + self.pick(["'nginx:2'", "object.spec.containers[0].image + '-x'"]),
                "env: [Object.spec.containers.env{name: 'ZONE', value: 'z'}]",
                "ports: [Object.spec.containers.ports{containerPort: 8443, protocol: 'TCP'}]",
                "args: ['--a', '--b']",
                "resources: Object.spec.containers.resources{limits: {'cpu': '1'}}",
            ])
            spec_fields.append(f"containers: [Object.spec.containers{{name: '{c}', {fields}}}]")
        if kind == "pod" and self.chance(0.2):
            spec_fields.append("nodeSelector: {'disk': 'ssd'}" if self.chance(0.5)
                               else "tolerations: [Object.spec.tolerations{key: 't', operator: 'Exists'}]")
        if kind == "deployment" and self.chance(0.5):
            spec_fields.append(self.pick([
                "replicas: 3",
                "template: Object.spec.template{metadata: Object.spec.template.metadata{labels: {'x': 'y'}}}",
                "selector: Object.spec.selector{matchLabels: {'k': 'v'}}",
            ]))
        if self.unrestricted:
            # Each field in an Object of its own: `spec` given twice when
            # there are two.
            parts += [f"spec: Object.spec{{{field}}}" for field in spec_fields]
        elif spec_fields:
            parts.append(f"spec: Object.spec{{{', '.join(spec_fields)}}}")
        if self.chance(0.05) and self.unrestricted:
            parts.append("spec: Object.spec.wrong{}")
        return "Object{" + ", ".join(parts) + "}"

    def string_lit_key(self):
        return repr(self.pick(LABEL_KEYS + ["new-key", "example.com/added"]))

    def value_string(self, label):
        """A string expression for a label (label=True) or an annotation; with
        `params` (a ConfigMap) declared, half of them read it."""
        values = ["'v'", "'zone-' + object.metadata.name", "object.metadata.?labels[?'app'].orValue('none')",
                  "string(size(object.metadata.?labels.orValue({})))", "''", "'ü'",
                  "object.metadata.labels['missing']"]
        if self.params is not None and self.chance(0.5):
            return self.pick(PARAMS_READS)
        return self.pick(self.pool([v for v in values if v != "'ü'"] if label else values, values))

    def json_patch(self, kind):
        ops = []
        for n in range(self.r.randint(1, 3)):
            key = self.pick(LABEL_KEYS + ["new"]).replace("~", "~0").replace("/", "~1")
            op = self.pick(["add", "add", "replace", "remove", "test", "copy", "move"])
            paths = [f"'/metadata/labels/{key}'", f"'/metadata/annotations/{key}'",
                     "'/metadata/labels'", "'/spec/containers/0/image'", "'/spec/containers/-'",
                     "'/spec/containers/5/name'", "'/metadata/missing/x'",
                     "'/spec/replicas'" if kind == "deployment" else "'/metadata/name'",
                     "'/metadata/annotations/' + jsonpatch.escapeKey('a/b~c')"]
            # Without the rename and the annotation key the API server refuses.
            valid_paths = paths[:7] + (["'/spec/replicas'"] if kind == "deployment" else []) + [
                "'/metadata/annotations/' + jsonpatch.escapeKey('example.com/a-b')"]
            path = self.pick(self.pool(valid_paths, paths))
            values = ["'v'", "{'a': 'b'}", "1", "object.metadata.name", "'x'"]
            # A value of the field's type: a map of labels, a container, a count, or a string.
            typed = {"'/metadata/labels'": ["{'a': 'b'}", "{}"],
                     "'/spec/containers/-'": [f"{{'name': 'added-{n}', 'image': 'nginx'}}",
                                              f"{{'name': 'added-{n}', 'image': string(object.spec.containers[0].image)}}"],
                     "'/spec/replicas'": ["1", "3"]}
            value = self.pick(self.pool(typed.get(path, ["'v'", "object.metadata.name", "'x'"]), values))
            if op in ("copy", "move") and not self.unrestricted and path in typed:
                # Only strings are copied or moved to an annotation.
                path = f"'/metadata/labels/{key}'"
            if op in ("add", "replace", "test"):
                ops.append(f"JSONPatch{{op: '{op}', path: {path}, value: {value}}}")
            elif op == "remove":
                ops.append(f"JSONPatch{{op: 'remove', path: {path}}}")
            else:
                ops.append(f"JSONPatch{{op: '{op}', from: {path}, path: '/metadata/annotations/moved'}}")
        if self.chance(0.2):
            return f"has(object.metadata.labels) ? [{', '.join(ops)}] : []"
        return "[" + ", ".join(ops) + "]"

    def map_case(self, i):
        unrestricted = self.start_case()
        kind = self.pick(["pod", "pod", "deployment", "node"])
        obj = getattr(self, kind)()
        # A binding's parameters: here inline beside the document. Without
        # paramKind (the unrestricted pool) an expression that reads `params`
        # is refused by both.
        self.params = self.params_configmap() if self.chance(0.25) else None
        group, resource = {"pod": ("", "pods"), "deployment": ("apps", "deployments"), "node": ("", "nodes")}[kind]
        mutations = []
        for _ in range(self.r.randint(1, 3)):
            if self.chance(0.55):
                mutations.append({"patchType": "ApplyConfiguration",
                                  "applyConfiguration": {"expression": self.apply_configuration(kind)}})
            else:
                mutations.append({"patchType": "JSONPatch", "jsonPatch": {"expression": self.json_patch(kind)}})
        spec = {"matchConstraints": {"resourceRules": [{"apiGroups": [group], "apiVersions": ["v1"],
                                                        "operations": ["CREATE"], "resources": [resource]}]},
                "failurePolicy": self.pick(["Fail", "Ignore"]), "reinvocationPolicy": "Never",
                "mutations": mutations}
        if self.chance(0.3):
            spec["matchConditions"] = [{"name": "m", "expression": self.pick([
                "has(object.metadata.labels)", "object.metadata.name.startsWith('pod-1')", "true",
                "object.metadata.labels['app'] == 'web'"])}]
        if self.chance(0.3):
            spec["variables"] = [{"name": "a", "expression": "object.metadata.name"}]
        policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
                  "metadata": {"name": "differential"}, "spec": spec}
        case = {"id": f"map-{i}", "op": "mutate", "policy": policy, "object": obj,
                "resource": {"group": group, "version": "v1", "resource": resource}, "operation": "CREATE",
                "unrestricted": unrestricted}
        if self.params is not None:
            if not (unrestricted and self.chance(0.3)):
                spec["paramKind"] = {"apiVersion": "v1", "kind": "ConfigMap"}
                case["params"] = self.params
            self.params = None
        return case

    def params_configmap(self):
        data = {"team": self.pick(["web", "platform", "data"])}
        if self.chance(0.5):
            data["tier"] = self.pick(["gold", "silver"])
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "params", "namespace": "default"},
                "data": data}


# ---- what a case means to the policy -----------------------------------

def admission_request(case):
    """The AdmissionRequest kube-apiserver sends for the case (the judges
    build theirs from the same fields)."""
    obj = case["object"]
    api_version = obj.get("apiVersion", "")
    group, _, version = api_version.rpartition("/")
    kind = {"group": group, "version": version, "kind": obj.get("kind", "")}
    meta = obj.get("metadata", {})
    operation = case.get("operation", "CREATE")
    request = {"uid": "", "kind": kind, "resource": case["resource"], "requestKind": kind,
               "requestResource": case["resource"], "name": meta.get("name", ""),
               "namespace": meta.get("namespace", ""), "operation": operation,
               "userInfo": {"username": "system:kube-scheduler", "groups": ["system:authenticated"]},
               "object": obj, "oldObject": case.get("oldObject"), "dryRun": False,
               "options": {"apiVersion": "meta.k8s.io/v1",
                           "kind": "UpdateOptions" if operation == "UPDATE" else "CreateOptions"}}
    if case.get("subResource"):
        request["subResource"] = request["requestSubResource"] = case["subResource"]
    return request


def settings_of(case):
    """The policy's settings for a case: its document, with a binding's
    parameters inline beside it, and beside it under `policies` the
    PolicyExceptions that name it."""
    policy = case["policy"]
    if "params" in case:
        policy = dict(policy, params=case["params"])
    if case.get("exceptions"):
        return {"policies": [policy] + case["exceptions"]}
    return policy


def cel_cases(n, seed):
    g = Gen(seed)
    return [g.cel_case(i) for i in range(n)]


def map_cases(n, seed):
    g = Gen(seed + 1, UNRESTRICTED_SHARE)
    return [g.map_case(i) for i in range(n)]


if __name__ == "__main__":
    import sys
    for case in cel_cases(int(sys.argv[1]) if len(sys.argv) > 1 else 5, 1):
        print(json.dumps(case))


# ---- Kyverno: MutatingPolicy and ClusterPolicy ------------------------------

KINDS = {"pod": ("", "v1", "pods", "Pod"), "deployment": ("apps", "v1", "deployments", "Deployment"),
         "node": ("", "v1", "nodes", "Node")}

# ClusterPolicy JMESPath over YAML 1.1 text (a JSON literal: `\n` is a newline).
JMES_YAML = [r'to_string(parse_yaml(`"a: yes\nn: 017\nb: [on, 0x1F]"`))',
             r'to_string(parse_yaml(`"1.5: y\ntrue: 1e3\nk: 12:30"`))',
             r'parse_yaml(`"off: x\nk: v"`).false']
JMES = ["to_upper(request.object.metadata.name)", "to_lower('AbC')", "length(request.object.metadata.name)",
        "join('-', ['a', request.object.metadata.name])", "split('a,b,c', ',')[1]",
        "truncate(request.object.metadata.name, `3`)", "request.object.metadata.labels.app || 'none'",
        "regex_replace_all('[0-9]+', request.object.metadata.name, 'N')", "base64_encode('ab')",
        "request.object.metadata.namespace", "request.operation", "to_string(`5`)",
        "request.object.spec.containers[0].image", "replace_all(request.object.metadata.name, '-', '_')",
        "trim(' x ', ' ')", "sum(`[1, 2]`)", "compare('a', 'b')", "lookup(`{\"k\": \"v\"}`, 'k')",
        "items(`{\"a\": 1}`, 'key', 'value')[0].key", "request.object.metadata.labels.missing"] + JMES_YAML
# Those that give a number, and those whose string a label value cannot be.
JMES_NUMBERS = ["length(request.object.metadata.name)", "sum(`[1, 2]`)", "compare('a', 'b')"]
JMES_NOT_LABELS = ["base64_encode('ab')", "request.object.spec.containers[0].image"] + JMES_YAML


# Kyverno's CEL libraries in a MutatingPolicy: expressions that give an
# annotation's value (a string). The unrestricted pool adds `http`, which this
# policy refuses at load.
KYVERNO_LIBRARY_STRINGS = [
    "string(json.unmarshal('{\"a\": 1, \"b\": [true, null]}').a)",
    "json.marshal({'name': object.metadata.name, 'n': dyn(2)})",
    "json.marshal(json.unmarshal('{\"n\": 2, \"s\": \"x\"}'))",
    "string(yaml.parse('a: [1, 2]\\nb: x').b)",
    "json.marshal(yaml.parse('k: v\\nn: 1.5'))",
    "hash.sha256(object.metadata.name)", "sha1('kyverno')", "hash.md5(object.metadata.name + '-x')",
    "string(math.round(10.125, 2))", "string(math.round(double(size(object.metadata.name)) / 3.0, 1))",
    "image('nginx:1.27').tag()", "image('registry.example.com/team/app:v2').registry()",
    "string(isImage('Not An Image!'))", "parseImageReference('busybox').repository()",
    "user.parseServiceAccount('system:serviceaccount:ns1:sa1').Name", "parseServiceAccount('alice').Namespace",
    "string(time.truncate(timestamp('2024-05-06T07:08:09Z'), duration('1h')))",
    "time.toCron(timestamp('2024-05-06T07:08:09Z'))",
    "regex.replace(object.metadata.name, '-', '_')", "base64.encode(bytes(object.metadata.name))",
    "gzip.decompress(gzip.compress(object.metadata.name))",
    "size(random('[a-z]{4}')) == 4 ? 'four' : 'other'",
]
KYVERNO_LIBRARY_REFUSED = ["string(http.Get('http://127.0.0.1:9/').status)"]

# YAML as Kyverno reads it (sigs.k8s.io/yaml, YAML 1.1): keys and scalars
# whose meaning YAML 1.1 and 1.2 disagree on, or that are not text.
YAML_KEYS = ["k", "n", "y", "yes", "On", "NO", "1", "1.5", "017", "1e7", "true", "'n'", '"on"', "0x1F"]
YAML_SCALARS = ["v", "yes", "No", "on", "OFF", "y", "n", "~", "null", "", "017", "0x1F", "0o17", "0b101",
                "1_000", "09", "+5", "-0x10", "1.5", "1e3", ".5", "1.0", "'yes'", '"017"', "18446744073709551615",
                "2001-12-14", "12:30", "1e400", "[a, on, 08]", "{x: off, 2: y}", "!!str 017", "|\n  yes\n"]
# What JSON cannot hold: both sides fail.
YAML_SCALARS_FAILING = [".inf", "-.Inf", ".nan"]

# What a MutatingPolicy's host reads see: the cluster the case's `resources`
# give both sides (Kyverno's fake context provider and client, the wasm host's
# in-memory cluster). The second lacks team-a's ConfigMap.
READ_NODE = {"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": "node-a", "labels": {"topology.kubernetes.io/zone": "us-east-1a",
                                                       "topology.kubernetes.io/region": "us-east-1",
                                                       "node.kubernetes.io/instance-type": "m5.large"}}}


def read_configmap(namespace, team):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": namespace},
            "data": {"team": team, "tier": "gold"}}


READ_CLUSTERS = [[READ_NODE, read_configmap("default", "platform"), read_configmap("team-a", "data")],
                 [READ_NODE, read_configmap("default", "platform")]]

# A variable `r` read through `resource`, and an annotation value over it.
MPOL_READS = [
    ("resource.Get('v1', 'nodes', '', 'node-a')",
     "variables.r.metadata.labels[?'topology.kubernetes.io/zone'].orValue('none')"),
    ("resource.get('v1', 'nodes', '', 'node-a').metadata.labels", "variables.r['node.kubernetes.io/instance-type']"),
    ("resource.Get('v1', 'nodes', '', 'node-gone')", "string(variables.r.metadata.name)"),
    ("resource.Get('v1', 'configmaps', object.metadata.namespace, 'cm')", "variables.r.data.team"),
    ("resource.List('v1', 'configmaps', 'default')", "string(size(variables.r.items))"),
    # Kyverno refuses a comprehension over what a read gives (its type is
    # google.protobuf.Any) unless made `dyn`.
    ("resource.List('v1', 'configmaps', object.metadata.namespace)",
     "variables.r.items.map(i, i.data.team).join(',')"),
    ("resource.List('v1', 'configmaps', object.metadata.namespace)",
     "dyn(variables.r.items).map(i, i.data.team).join(',')"),
]

# ClusterPolicy context entries over the same cluster: (entry, annotation value).
CPOL_READS = [
    ({"apiCall": {"urlPath": "/api/v1/nodes/node-a",
                  "jmesPath": "metadata.labels.\"topology.kubernetes.io/zone\""}}, "{{ r }}"),
    ({"apiCall": {"urlPath": "/api/v1/nodes/node-gone", "jmesPath": "metadata.name"}}, "{{ r }}"),
    ({"apiCall": {"urlPath": "/api/v1/nodes/node-gone", "jmesPath": "metadata.name", "default": "none"}}, "{{ r }}"),
    ({"apiCall": {"urlPath": "/api/v1/namespaces/{{ request.object.metadata.namespace }}/configmaps/cm",
                  "jmesPath": "data.team"}}, "team-{{ r }}"),
    ({"apiCall": {"urlPath": "/api/v1/namespaces/default/configmaps", "jmesPath": "items | length(@)"}},
     "n-{{ r }}"),
    ({"configMap": {"name": "cm", "namespace": "default"}}, "{{ r.data.team }}"),
    ({"configMap": {"name": "cm", "namespace": "{{ request.object.metadata.namespace }}"}}, "{{ r.data.tier }}"),
]


class KyvernoGen(Gen):
    def __init__(self, seed, unrestricted_share=None, host_reads=False):
        """`host_reads`: policies also read the cluster (`resources`), use
        Kyverno's libraries and come with PolicyExceptions; off, the
        generator draws what it always drew (the Kyverno judge's ClusterPolicies)."""
        super().__init__(seed, unrestricted_share)
        self.host_reads = host_reads
        self.resources = None
        self.exceptions = []

    def mpol(self, kind):
        group, version, resource, _ = KINDS[kind]
        mutations = []
        for _ in range(self.r.randint(1, 2)):
            if self.chance(0.6):
                mutations.append({"patchType": "ApplyConfiguration",
                                  "applyConfiguration": {"expression": self.apply_configuration(kind)}})
            else:
                mutations.append({"patchType": "JSONPatch", "jsonPatch": {"expression": self.json_patch(kind)}})
        spec = {"matchConstraints": {"resourceRules": [{"apiGroups": [group], "apiVersions": [version],
                                                        "operations": ["CREATE"], "resources": [resource]}]},
                "failurePolicy": "Ignore", "mutations": mutations}
        if self.chance(0.3):
            spec["matchConditions"] = [{"name": "m", "expression": self.pick([
                "has(object.metadata.labels)", "object.metadata.name.startsWith('pod-1')", "true"])}]
        if self.chance(0.3):
            spec["variables"] = [{"name": "a", "expression": "object.metadata.name"}]
        if self.host_reads:
            self.mpol_extensions(kind, spec)
        return {"apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy",
                "metadata": {"name": "differential"}, "spec": spec}

    def mpol_extensions(self, kind, spec):
        def annotate(value):
            spec["mutations"].append({"patchType": "ApplyConfiguration", "applyConfiguration": {
                "expression": f"Object{{metadata: Object.metadata{{annotations: {{'example.com/v': {value}}}}}}}"}})
        if self.chance(0.3):
            spec["failurePolicy"] = "Fail"
        if self.chance(0.15):
            annotate(f"json.marshal(yaml.parse({json.dumps(self.yaml_text())}))")
        if self.chance(0.35):
            libraries = KYVERNO_LIBRARY_STRINGS + (["image(object.spec.containers[0].image).repository()"]
                                                   if kind == "pod" else [])
            annotate(self.pick(self.pool(libraries, libraries + KYVERNO_LIBRARY_REFUSED)))
        if self.chance(0.25):
            # An expression of the CEL judge's grammar, as Kyverno's cel-go
            # checks and runs it (its environment, its optimizer).
            t = self.pick(["int", "uint", "double", "string", "bool", "bytes", "duration", "timestamp"])
            annotate(f"string({self.expr(t, self.r.randint(1, 3))})")
        if self.chance(0.3):
            variable, value = self.pick(MPOL_READS)
            spec.setdefault("variables", []).append({"name": "r", "expression": variable})
            annotate(value)
            self.resources = self.pick(READ_CLUSTERS)
        if self.chance(0.15):
            conditions = self.pick([[], [{"name": "e", "expression": "object.metadata.name.startsWith('pod-1')"}],
                                    [{"name": "e", "expression": "has(object.metadata.labels)"}],
                                    [{"name": "e", "expression": "object.metadata.labels['app'] == 'web'"}]])
            # v1beta1: Kyverno 1.19.1's CLI loader, which the judge loads
            # through, knows no other version (its cluster's CRD serves v1 too).
            self.exceptions = [{"apiVersion": "policies.kyverno.io/v1beta1", "kind": "PolicyException",
                                "metadata": {"name": "skip", "namespace": "default"},
                                "spec": {"policyRefs": [{"name": "differential", "kind": "MutatingPolicy"}],
                                         "matchConditions": conditions}}]

    def yaml_text(self):
        """A YAML mapping of one to three entries from the YAML 1.1 pools."""
        entries = []
        for _ in range(self.r.randint(1, 3)):
            value = self.pick(self.pool(YAML_SCALARS, YAML_SCALARS + YAML_SCALARS_FAILING))
            entries.append(f"{self.pick(YAML_KEYS)}: {value}")
        return "\n".join(entries)

    def value(self, label):
        """A value for a label (label=True) or an annotation: the valid pool
        leaves out numbers, booleans, and for a label the strings a label
        value cannot be (an image reference, base64's `=`, a leading `-`)."""
        jmes = self.pick(self.pool([j for j in JMES if j not in (JMES_NUMBERS + (JMES_NOT_LABELS if label else []))],
                                   JMES))
        values = ["v", "{{ " + jmes + " }}", "x-{{ request.object.metadata.name }}", "",
                  "{{ request.object.metadata.labels.app }}", 3, True]
        return self.pick(self.pool(values[:5], values))

    def anchored_metadata(self, label):
        key = self.pick(LABEL_KEYS + ["new"])
        # `=(key)` and `X(key)` are validate anchors: a mutation writes them
        # as keys, which the API server refuses. The valid pool has the
        # conditional anchor `(key)` beside a key it then sets instead.
        anchor = self.pick(self.pool(["", "", "+", "(", "(", "^"], ["", "", "+", "=", "X", "^"]))
        if anchor == "(":
            return {f"({key})": self.pick(LABEL_VALUES + ["?*"]), self.pick(LABEL_KEYS): self.value(label)}
        if anchor in ("=", "X", "^"):
            return {f"{anchor}({key})": self.pick(LABEL_VALUES)} if anchor != "^" else {"labels": {f"^({key})": "*"}}
        return {(f"+({key})" if anchor == "+" else key): self.value(label)}

    def strategic_merge(self, kind):
        field = self.pick(["labels", "annotations"])
        patch = {"metadata": {field: self.anchored_metadata(field == "labels")}}
        if self.chance(0.3):
            patch["metadata"] = {"(name)": self.pick(["pod-*", "?eb", "*"]), **patch["metadata"]}
        if kind == "pod" and self.chance(0.5):
            name, field = self.pick(["c0", "c*", "*"]), self.pick(["image", "+(imagePullPolicy)"])
            values = ["nginx:2", "IfNotPresent", "{{ request.object.metadata.name }}"]
            # An image, or one of the pull policies the API server knows.
            valid = ["nginx:2", "{{ request.object.metadata.name }}"] if field == "image" else ["IfNotPresent", "Always"]
            container = {"(name)": name, field: self.pick(self.pool(valid, values))}
            if self.chance(0.3):
                container = {"(image)": "*nginx*", "imagePullPolicy": "Always"}
            patch["spec"] = {"containers": [container]}
        if kind == "pod" and self.chance(0.2):
            patch["spec"] = {"<(nodeSelector)": {"disk": "*"}, "tolerations": [{"key": "k", "operator": "Exists"}]}
        return patch

    def rule(self, kind, i):
        _, _, _, Kind = KINDS[kind]
        rule = {"name": f"r{i}", "match": {"any": [{"resources": {"kinds": [Kind]}}]}}
        if self.chance(0.3):
            op = self.pick(["Equals", "NotEquals", "In", "AnyIn", "AnyNotIn", "GreaterThan", "Equals"])
            rule["preconditions"] = {self.pick(["all", "any"]): [{
                "key": "{{ " + self.pick(JMES) + " }}", "operator": op,
                "value": self.pick(["default", ["default", "team-a"], 1, "CREATE", "*"])}]}
        shape = self.r.randint(0, 3)
        if shape == 0:
            rule["mutate"] = {"patchStrategicMerge": self.strategic_merge(kind)}
        elif shape == 1:
            ops = []
            for _ in range(self.r.randint(1, 3)):
                key = self.pick(LABEL_KEYS + ["new"]).replace("~", "~0").replace("/", "~1")
                op = self.pick(["add", "replace", "remove"])
                path = self.pick([f"/metadata/labels/{key}", f"/metadata/annotations/{key}",
                                  "/spec/containers/0/image" if kind == "pod" else "/metadata/labels/x"])
                if op == "remove":
                    ops.append({"op": op, "path": path})
                elif path == "/spec/containers/0/image" and not self.unrestricted:
                    ops.append({"op": op, "path": path,
                                "value": self.pick(["nginx:2", "{{ request.object.metadata.name }}"])})
                else:
                    ops.append({"op": op, "path": path, "value": self.value(path.startswith("/metadata/labels/"))})
            rule["mutate"] = {"patchesJson6902": json.dumps(ops)}
        elif shape == 2 and kind == "pod":
            rule["mutate"] = {"foreach": [{"list": "request.object.spec.containers", "patchStrategicMerge": {
                "spec": {"containers": [{"(name)": "{{ element.name }}",
                                         "image": self.pick(["{{ element.image }}-x", "busybox", "{{ to_upper(element.name) }}"])}]}}}]}
        elif shape == 2:
            # A key with a `/` is two levels of a JSON pointer unless escaped
            # (~1), which the valid pool does.
            key = "{{ element.k }}" if self.unrestricted else "{{ replace_all(element.k, '/', '~1') }}"
            rule["mutate"] = {"foreach": [{"list": "request.object.metadata.labels | items(@, 'k', 'v')",
                                           "patchesJson6902": json.dumps([{"op": "add",
                                                                            "path": f"/metadata/annotations/{key}",
                                                                            "value": "{{ element.v }}"}])}]}
        else:
            jmes = self.pick(self.pool([j for j in JMES if j not in JMES_NUMBERS], JMES))
            rule["context"] = [{"name": "n", "variable": {"jmesPath": jmes, "default": "d"}}]
            rule["mutate"] = {"patchStrategicMerge": {"metadata": {"annotations": {"ctx": "{{ n }}"}}}}
        if self.host_reads and self.chance(0.3):
            entry, value = self.pick(CPOL_READS)
            rule.setdefault("context", []).insert(0, dict({"name": "r"}, **json.loads(json.dumps(entry))))
            rule["mutate"] = {"patchStrategicMerge": {"metadata": {"annotations": {"example.com/read": value}}}}
            self.resources = self.pick(READ_CLUSTERS)
        return rule

    def cpol(self, kind):
        return {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": "differential"},
                "spec": {"rules": [self.rule(kind, i) for i in range(self.r.randint(1, 2))]}}


def kyverno_cases(n, seed, make_policy, prefix, pool=None):
    """Cases over a pool of distinct policies (each new MutatingPolicy costs
    Kyverno a compile of a second): case i runs policy i % pool over a new
    object. A policy drawn twice is drawn again, so the pool holds `pool`
    different ones (the grammar has many more)."""
    g = KyvernoGen(seed, UNRESTRICTED_SHARE, host_reads=True)
    policies, seen = [], set()
    target = min(n, pool or n)
    for _ in range(10 * target):
        if len(policies) == target:
            break
        unrestricted = g.start_case()
        kind = g.pick(["pod", "pod", "deployment", "node"])
        g.resources, g.exceptions = None, []
        policy = make_policy(g, kind)
        text = json.dumps(policy, sort_keys=True)
        if text in seen:
            continue
        seen.add(text)
        policies.append((kind, policy, unrestricted, g.resources, g.exceptions))
    cases = []
    for i in range(n):
        kind, policy, unrestricted, resources, exceptions = policies[i % len(policies)]
        obj = getattr(g, kind)()
        group, version, resource, _ = KINDS[kind]
        case = {"id": f"{prefix}-{i}", "policy": policy, "object": obj,
                "resource": {"group": group, "version": version, "resource": resource},
                "operation": "CREATE", "unrestricted": unrestricted}
        if resources:
            case["resources"] = resources
        if exceptions:
            case["exceptions"] = exceptions
        cases.append(case)
    return cases


def mpol_cases(n, seed):
    # 300 distinct policies, and one more for each 50 cases past 15,000
    # (2,000 in 100,000 cases).
    return kyverno_cases(n, seed + 2, KyvernoGen.mpol, "mpol", pool=max(300, n // 50))


def cpol_cases(n, seed):
    return kyverno_cases(n, seed + 3, KyvernoGen.cpol, "cpol")
