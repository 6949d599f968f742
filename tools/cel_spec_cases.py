#!/usr/bin/env python3
"""Writes the cases of cel-spec's simple conformance tests as the JSON list
the ignored test `cel_spec_simple_tests` (src/testing/cel_spec_conformance.rs)
reads; docs/cel.md ("Measured against cel-spec") gives the figures:

    python3 tools/cel_spec_cases.py <cel-spec checkout>/tests/simple/testdata > cases.json
    CEL_SPEC_CASES=cases.json cargo test --lib spec_conformance -- --ignored --nocapture

Each case is {file, section, name, expr} and one of:
  expected       the result written as a CEL literal (the test evaluates it
                 the way it evaluates `expr`); a test with no result expects
                 `true`, as simple.proto defines;
  error: true    the test expects an evaluation error (any one);
  skip: reason   the test needs what the harness does not give: a type
                 environment, variable bindings or a container; a protobuf
                 message; or a result no literal writes (a type, such as
                 google.protobuf.Timestamp; an infinity or NaN).
`disable_check: true` is kept: the harness counts a refusal by the type
check apart when cel-go's own check is off.

Eight files are left out: every test in them needs protobuf messages or a
type environment (dynamic, enums, namespace, proto2, proto2_ext, proto3,
type_deduction, wrappers). The other 22 include unknowns, which has no
tests. Standard library only; the textproto reader knows just what these
files use.
"""

import json
import math
import re
import sys
from pathlib import Path

EXCLUDED = {
    "dynamic", "enums", "namespace", "proto2", "proto2_ext", "proto3",
    "type_deduction", "wrappers",
}

TOKEN = re.compile(
    r"""\s+|\#[^\n]*
      |(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      |(?P<ext>\[[^\]]*\])
      |(?P<punct>[{}<>:,;])
      |(?P<word>[-+\w.]+)""",
    re.X,
)

SIMPLE_ESCAPES = {
    "a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11,
    "\\": 92, "'": 39, '"': 34, "?": 63,
}


def unescape(body):
    """A text-format string's bytes (protobuf text format's escapes)."""
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        c = body[i + 1]
        if c in SIMPLE_ESCAPES:
            out.append(SIMPLE_ESCAPES[c])
            i += 2
        elif c in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1:]).group()
            out.append(int(digits, 8) & 0xFF)
            i += 1 + len(digits)
        elif c in "xX":
            digits = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:]).group()
            out.append(int(digits, 16))
            i += 2 + len(digits)
        elif c in "uU":
            n = 4 if c == "u" else 8
            out += chr(int(body[i + 2:i + 2 + n], 16)).encode()
            i += 2 + n
        else:
            raise ValueError(f"unknown escape \\{c}")
    return bytes(out)


def tokens(text):
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"cannot read at {text[pos:pos + 30]!r}")
        pos = m.end()
        if m.lastgroup:
            yield m.lastgroup, m.group(m.lastgroup)
    yield "end", ""


class Reader:
    """Messages as dicts of field name to a list of values (every field as
    if repeated); a scalar is its token, a string its bytes. A bracketed
    name (an extension or an Any's type URL) is a field name; the list
    syntax `[a, b]` is not read, these files repeat the field instead."""

    def __init__(self, text):
        self.toks = list(tokens(text))
        self.i = 0

    def peek(self):
        return self.toks[self.i]

    def take(self):
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def message(self, close):
        fields = {}
        while self.peek()[1] != close:
            kind, name = self.take()
            if kind not in ("word", "ext"):
                raise ValueError(f"expected a field name, got {name!r}")
            if self.peek()[1] == ":":
                self.take()
            fields.setdefault(name, []).append(self.value())
            if self.peek()[1] in (",", ";"):
                self.take()
        self.take()
        return fields

    def value(self):
        kind, tok = self.take()
        if tok in ("{", "<"):
            return self.message("}" if tok == "{" else ">")
        if kind == "str":
            # Adjacent strings are one, as in C.
            data = unescape(tok[1:-1])
            while self.peek()[0] == "str":
                data += unescape(self.take()[1][1:-1])
            return data
        return tok


class Unwritable(Exception):
    """A value no CEL literal writes; its message is the skip's reason."""


def string_literal(data):
    out = []
    for ch in data.decode("utf-8"):
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def bytes_literal(data):
    return 'b"' + "".join(
        chr(b) if 32 <= b < 127 and chr(b) not in '\\"' else f"\\x{b:02x}"
        for b in data
    ) + '"'


def double_literal(tok):
    x = float(tok)
    if math.isinf(x) or math.isnan(x):
        raise Unwritable("an infinity or NaN")
    text = repr(x)
    # A CEL double literal needs a point or an exponent.
    return text if any(c in text for c in ".en") else text + ".0"


def literal(value):
    """A cel.expr.Value as a CEL literal."""
    [(kind, [v])] = value.items()
    if kind == "null_value":
        return "null"
    if kind == "bool_value":
        return v
    if kind == "int64_value":
        return str(int(v))
    if kind == "uint64_value":
        return f"{int(v)}u"
    if kind == "double_value":
        return double_literal(v)
    if kind == "string_value":
        return string_literal(v)
    if kind == "bytes_value":
        return bytes_literal(v)
    if kind == "list_value":
        return "[" + ", ".join(literal(x) for x in v.get("values", [])) + "]"
    if kind == "map_value":
        return "{" + ", ".join(
            f"{literal(e['key'][0])}: {literal(e['value'][0])}"
            for e in v.get("entries", [])
        ) + "}"
    if kind == "type_value":
        raise Unwritable("a type")
    if kind == "object_value":
        raise Unwritable("a protobuf message")
    raise Unwritable(kind)


# The harness has no protobuf types: an expression naming one (a message
# literal, a wrapper, a well-known type) cannot run in it.
PROTOBUF = re.compile(r"google\.protobuf\.|cel\.expr\.conformance\.|TestAllTypes")


def case(file, section, test):
    def text(field):
        return test.get(field, [b""])[0].decode("utf-8")

    out = {"file": file, "section": section, "name": text("name"), "expr": text("expr")}
    if test.get("disable_check") == ["true"]:
        out["disable_check"] = True
    needs = [f for f in ("type_env", "bindings", "container") if f in test]
    if needs:
        out["skip"] = "needs " + ", ".join(needs)
    elif PROTOBUF.search(out["expr"]):
        out["skip"] = "a protobuf message"
    elif "eval_error" in test or "any_eval_errors" in test:
        out["error"] = True
    elif "value" in test:
        try:
            out["expected"] = literal(test["value"][0])
        except Unwritable as reason:
            out["skip"] = str(reason)
    elif any(f in test for f in ("typed_result", "unknown", "any_unknowns")):
        out["skip"] = "a result the harness does not check"
    else:
        out["expected"] = "true"
    return out


def main(testdata):
    cases = []
    for path in sorted(Path(testdata).glob("*.textproto")):
        if path.stem in EXCLUDED:
            continue
        top = Reader(path.read_text(encoding="utf-8")).message("")
        for section in top.get("section", []):
            name = section["name"][0].decode("utf-8")
            for test in section.get("test", []):
                cases.append(case(path.stem, name, test))
    json.dump(cases, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
