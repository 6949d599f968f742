#!/usr/bin/env python3
"""Writes YAML texts with Kyverno's reading of each, as the JSON list the
ignored test `yaml_reads_as_kyverno_reads_it` (src/testing/yaml_conformance.rs)
reads; docs/kyverno.md ("YAML as Kyverno reads it") gives the figures:

    python3 tools/yaml_cases.py > yaml-cases.json
    YAML_CASES=yaml-cases.json cargo test --lib yaml_conformance -- --ignored --nocapture

Two pools: `written`, well-formed texts over YAML 1.1's plain scalars (as
values, keys, items, documents, with and without quotes and core tags) and
its anchors, merges, block scalars and documents; `mutated`, each of
MUTATED texts made by inserting, deleting or appending characters and texts
from the first pool (seeded: the same list every run). The reference is
Kyverno's oracle (`e2e-tests/oracle/kyverno`, `kyverno-oracle yaml`):
sigs.k8s.io/yaml's YAMLToJSON decoded as Go's `any`, {"value": ...} or
{"error": "..."}.
"""

import json
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTATED = 30000

SCALARS = [
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "oN",
    "yES", "true", "True", "TRUE", "tRUE", "false", "False", "null", "Null", "NULL", "nULL", "~", "",
    "0", "00", "007", "017", "08", "09", "0x1F", "0X1f", "0o17", "0O17", "0b101", "0B101", "-0b101", "0b-1",
    "0b+1", "+5", "-5", "+0x10", "-0x10", "1_000", "1__0", "_1", "1_", "0x", "0o", "0b",
    "1.5", "1.", "-1.", ".5", "-.5", "+.5", "1e3", "1E3", "1e+3", "1e-3", "1.5e3", ".5e3", "1e400", "-1e400",
    "1e-400", "2e308", "1.7976931348623157e308", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
    "+18446744073709551615", "9007199254740993", ".nan", ".NaN", ".NAN", ".inf", ".Inf", "+.inf", "-.inf",
    "-.INF", ".iNf", "inf", "nan", "NaN", "Infinity", "12:30", "1:20:30", "2001-12-14",
    "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "1.2.3", "1e", "e3", "1e3.5", "0.", "0.0",
    "-0", "-0.0", "+0", "0e0", "1_000.5", "1_0e1_0", "<<", "=", "-", "+", ".", "..", "0x_1", "0xg", "1,000",
    "$5", "5$", "'q'", '"dq"', "a b", "#x", "1 #c",
]

SHAPES = ["v: {s}", "{s}: v", "- {s}", "{s}", "v: '{s}'", "v: !!str {s}", "v: !!int {s}", "v: !!float {s}",
          "v: !!bool {s}", "v: !!null {s}", "[{s}]", "{{{s}: 1}}"]

STRUCTURES = [
    "a: 1\n---\nb: 2", "---\n...\n", "# c\n", "---", "a: &x 1\nb: *x", "a: &x [1]\nb: *x",
    "a: &x {p: 1}\nb: {<<: *x, q: 2}", "a: &x {p: 1}\nb: {q: 2, <<: *x}", "a: &x {p: 1}\nb: {p: 2, <<: *x}",
    "a: &x {p: 1}\nc: &y {p: 3, r: 4}\nb: {<<: [*x, *y]}", "b: {<<: {p: 1}}", "b: {<<: [1]}", "b: {<<: 1}",
    "b: {'<<': {p: 1}}", "b: {!!merge <<: {p: 1}}", "a: |\n  text\n  more\n", "a: >\n  folded\n  text\n",
    "a: |-\n  yes\n", "a: !!binary aGVsbG8=", "a: !!binary 'not base64'", "a: !foo 12", "a: ! 12",
    "a: !!timestamp 2001-12-14", "a: !!timestamp 12", "? [1, 2]\n: x", "? {a: 1}\n: x", "a: [1, 2",
    "a:\n  - b\n c: d", "a: b: c", "a: 1\na: 2", "[1, {a: 2}, [3]]", "key with spaces: yes",
    "a: \"\\u00e9\"", "a: 'it''s'", "a:\n  b:\n    c: off", "a: 0.1", "0.1: a", "100000: a", "1000000: a",
    "1e7: a", "0.0001: a", "0.00001: a", "-0.0: a", "1.23456789012: a", "1e39: a", "16777217: a",
    "a: *unknown", "a: &x [*x]", "a: 1 # comment\n", "%YAML 1.1\n---\na: yes", "a: 1\n---\n[",
    "---\n- a\n...\n---\n- b", "- ? a\n  : b", "a: 1\n b: 2", "a:\n- 1\n- 2", "{a: 1, b}", "[a, b, ]", '""',
    "''", 'a: ""', "'': 1", "a: -", "a: - b", "a: [-]", "a: ~\n~: b", "[1]\nb: 2", "v: -.INF\nv: x",
]


def written():
    return [shape.format(s=s) for s in SCALARS for shape in SHAPES] + STRUCTURES


def mutated(base):
    rng = random.Random(11)
    alphabet = list("abyn01.-+_:[]{},&*!'\"#|>\n \t<~?%eExX")
    texts = []
    for _ in range(MUTATED):
        text = rng.choice(base)
        for _ in range(rng.randint(1, 4)):
            choice, at = rng.random(), rng.randint(0, len(text))
            if choice < 0.4:
                text = text[:at] + rng.choice(alphabet) + text[at:]
            elif choice < 0.7:
                text = text[:at] + text[at + 1:]
            else:
                text = text + "\n" + rng.choice(base)
        texts.append(text)
    return texts


def main():
    oracle = subprocess.run([os.path.join(ROOT, "e2e-tests/oracle/kyverno/build.sh")],
                            capture_output=True, text=True, check=True).stdout.strip()
    base = written()
    cases = [("written", text) for text in base] + [("mutated", text) for text in mutated(base)]
    answers = subprocess.run([oracle, "yaml"], input="".join(json.dumps(t) + "\n" for _, t in cases),
                             capture_output=True, text=True, check=True).stdout.splitlines()
    if len(answers) != len(cases):
        sys.exit(f"the oracle answered {len(answers)} of {len(cases)} texts")
    json.dump([{"pool": pool, "text": text, "reference": json.loads(answer)}
               for (pool, text), answer in zip(cases, answers)], sys.stdout)


if __name__ == "__main__":
    main()
