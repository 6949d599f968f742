"""`make differential`: generated cases through the reference implementations
(the judges) and through the policy, compared answer by answer.

Judges: `cel` (k8s.io/apiserver's CEL environment, through
e2e-tests/oracle/kubernetes, against the policy's evaluation run three ways:
as shipped, with the direct evaluator off, and with the subset parser off too)
and `mutating-admission-policy` (the same oracle's patchers against policy.wasm
in the wasm host). Differences are shrunk to a minimal case and printed; those
docs/cel.md lists under "Differences that remain" are counted as explained.

Usage: run.py --cases N --seed S --policy policy.wasm [--judges cel,map]"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate  # noqa: E402
import explained  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATHS = ["shipped", "crate_evaluator", "crate_parser"]


# A judge's process must answer all its cases within this many seconds, plus
# SECONDS_PER_CASE for each: a hang fails the run instead of stalling it.
BASE_SECONDS, SECONDS_PER_CASE = 600, 0.5
# Each side also answers "timeout" for a case that takes longer than
# DIFFERENTIAL_CASE_SECONDS (20 s unless set), and goes on with the next.
# Outcomes that never agree with anything and fail the run:
CRASHES = {"crash", "timeout"}


def as_line(case):
    """A case as one JSON line, in UTF-8 rather than `\\u` escapes: Kyverno's
    CLI loader reads a policy's JSON as YAML, whose `\\u` escapes cannot be
    the surrogate pairs JSON writes a character past U+FFFF as (an emoji in
    an expression), where a user's YAML or JSON reaches Kyverno's webhook
    decoded. A string no UTF-8 can hold (a lone surrogate) keeps its escape."""
    text = json.dumps(case, ensure_ascii=False)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(case)


def run_lines(command, cases, env=None):
    """Feeds cases (JSON lines) to `command`, returns its answers by id. A
    process that fails or outlasts its time limit fails the run."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for case in cases:
            f.write(as_line(case) + "\n")
        path = f.name
    try:
        limit = BASE_SECONDS + SECONDS_PER_CASE * len(cases)
        with open(path) as stdin:
            try:
                out = subprocess.run(command, stdin=stdin, capture_output=True, text=True, env=env, cwd=ROOT,
                                     timeout=limit)
            except subprocess.TimeoutExpired:
                raise SystemExit(f"{command[0]}: no answers to {len(cases)} cases within {limit:.0f} s")
        if out.returncode != 0:
            raise SystemExit(f"{command[0]} failed ({out.returncode}):\n{out.stderr[-3000:]}")
        answers = {}
        for line in out.stdout.splitlines():
            answer = json.loads(line)
            answers[answer.get("id")] = answer
        return answers
    finally:
        os.unlink(path)


def oracle(cases):
    binary = subprocess.run([os.path.join(ROOT, "e2e-tests/oracle/kubernetes/build.sh")],
                            capture_output=True, text=True, check=True).stdout.strip()
    return run_lines([binary], cases)


def policy_cel(cases):
    """The policy's CEL evaluation, by the crate's ignored test (native)."""
    with tempfile.TemporaryDirectory() as tmp:
        cases_path, answers_path = os.path.join(tmp, "cases.jsonl"), os.path.join(tmp, "answers.jsonl")
        with open(cases_path, "w") as f:
            for case in cases:
                f.write(json.dumps(dict(case, request=generate.admission_request(case))) + "\n")
        env = dict(os.environ, DIFFERENTIAL_CASES=cases_path, DIFFERENTIAL_ANSWERS=answers_path)
        out = subprocess.run(["cargo", "test", "--quiet", "--lib", "--", "--ignored", "--exact",
                              "testing::cel_differential::differential_cel"],
                             cwd=ROOT, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"the policy's CEL harness failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        answers = {}
        with open(answers_path) as f:
            for line in f:
                answer = json.loads(line)
                answers[answer["id"]] = answer["paths"]
        return answers


def policy_wasm(cases, wasm):
    """MutatingAdmissionPolicy cases through policy.wasm in the wasm host."""
    command = ["cargo", "run", "--quiet", "-p", "policy-host", "--profile", "host", "--bin", "differential", "--",
               wasm]
    return run_lines(command, cases)


# ---- comparison -----------------------------------------------------------

def normal(value):
    """A typed value in the form both sides are compared in."""
    if isinstance(value, dict):
        if "double" in value and isinstance(value["double"], (int, float)):
            return {"double": float(value["double"])}
        if "map" in value:
            entries = sorted(([normal(k), normal(v)] for k, v in value["map"]),
                             key=lambda e: json.dumps(e[0], sort_keys=True))
            return {"map": entries}
        if "opaque" in value:
            # Library values (IP, CIDR, Quantity, Semver, URL): compared by
            # type; expressions compare their contents through functions.
            return {"opaque": value["opaque"]}
        return {k: normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


def as_json(value):
    """A typed value as JSON holds it: what the direct evaluator answers."""
    if not isinstance(value, dict):
        return value
    if "list" in value:
        return [as_json(v) for v in value["list"]]
    if "map" in value:
        return {json.dumps(as_json(k)): as_json(v) for k, v in value["map"]}
    for number in ("int", "uint"):
        if number in value:
            return int(value[number])
    if "double" in value:
        return float(value["double"]) if isinstance(value["double"], (int, float)) else value["double"]
    return value


def verdict(answer, in_json=False):
    """(class, value): class is value, compile_error, eval_error."""
    status = answer.get("status")
    if status == "value":
        value = normal(answer.get("value"))
        return "value", as_json(value) if in_json else value
    return status, None


def compare_cel(case, reference, ours):
    """A list of (path, kind, detail) differences for one CEL case."""
    diffs = []
    for path in PATHS:
        mine = ours.get(path, {})
        in_json = bool(mine.get("json"))
        ref_class, ref_value = verdict(reference, in_json)
        my_class, my_value = verdict(mine, in_json)
        if (ref_class, ref_value) != (my_class, my_value):
            diffs.append((path, f"{ref_class}->{my_class}", {"reference": reference, "policy": mine}))
        # Where both give a value, what it cost in cel-go's runtime cost
        # model, on the paths that count every expression's cost.
        elif ref_class == "value" and "cost" in mine and mine["cost"] != reference.get("cost"):
            diffs.append((path, "cost", {"reference": reference.get("cost"), "policy": mine["cost"]}))
    return diffs


def shrink(case, smaller, still_differs):
    """The case made smaller while it still differs: the first of
    `smaller(best)` that still differs is kept, until none does."""
    best = case
    changed = True
    while changed:
        changed = False
        for candidate in smaller(best):
            if still_differs(candidate):
                best, changed = candidate, True
                break
    return best


def subexpressions(text):
    """The bracketed and comma-separated parts of an expression."""
    parts, stack = [], []
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            stack.append(i)
        elif ch in ")]}" and stack:
            start = stack.pop()
            inner = text[start + 1:i]
            parts.append(inner)
            depth, piece, q = 0, "", None
            for c in inner:
                if q:
                    piece += c
                    if c == q:
                        q = None
                    continue
                if c in "'\"":
                    q = c
                if c in "([{":
                    depth += 1
                if c in ")]}":
                    depth -= 1
                if c == "," and depth == 0:
                    parts.append(piece.strip())
                    piece = ""
                else:
                    piece += c
            parts.append(piece.strip())
    seen, out = set(), []
    for p in sorted(parts, key=len):
        if p and p != text and p not in seen:
            seen.add(p)
            out.append(p)
    return out


def smaller_cel(case):
    """Smaller CEL cases: the variables dropped, then the expression's
    bracketed parts tried in its place."""
    if case.get("variables") and "variables." not in case["expression"]:
        yield dict(case, variables=[])
    for part in subexpressions(case["expression"]):
        yield dict(case, expression=part)


def as_served(cases):
    """Each case's object as the API server would hold it (decoded into its
    type and encoded back: empty maps and lists left out, for one): both
    sides see that."""
    answers = oracle([{"id": c["id"], "op": "normalize", "object": c["object"]} for c in cases]
                     + [{"id": c["id"] + "#namespace", "op": "normalize", "object": c["namespace"]}
                        for c in cases if c.get("namespace")])
    served = []
    for case in cases:
        answer = answers.get(case["id"], {})
        if answer.get("status") == "timeout":
            raise SystemExit(f"{case['id']}: the Kubernetes judge did not decode its object in time ({answer})")
        if answer.get("status") == "normalized":
            namespace = answers.get(case["id"] + "#namespace", {})
            if namespace.get("status") == "normalized":
                case = dict(case, namespace=namespace["object"])
            served.append(dict(case, object=answer["object"]))
    return served


class Tally:
    """A judge's count: the agreements, and the differences by kind (the
    words of the explanation, or "unexplained" and how the answers part)."""

    def __init__(self, judge):
        self.judge, self.started = judge, time.time()
        self.cases = self.agreements = self.unexplained = 0
        self.kinds = {}
        # Cases drawn from the unrestricted pools, and of the others those
        # whose reference object the API server refuses anyway.
        self.unrestricted = self.refused = 0

    def share(self, case, refused):
        if case.get("unrestricted"):
            self.unrestricted += 1
        elif refused:
            self.refused += 1

    def agree(self):
        self.cases += 1
        self.agreements += 1

    def differ(self, reason, how, item):
        self.cases += 1
        self.kinds.setdefault(reason or f"unexplained {how}", []).append(item)
        self.unexplained += not reason

    def crash(self, how, item):
        """A crash, trap, panic or malformed answer on either side: never an
        agreement, never explained."""
        self.differ(None, f"crash {how}", item)

    def result(self):
        return {"judge": self.judge, "cases": self.cases, "agreements": self.agreements,
                "differences": self.cases - self.agreements, "unexplained": self.unexplained,
                "unrestricted": self.unrestricted, "refused": self.refused,
                "seconds": time.time() - self.started}


# cel-go visits a map's entries in Go's random order: an expression whose
# value, or what it costs (a comprehension that stops at the first entry it
# is looking for), depends on that order has more than one answer there.
ORDER_REPEATS = 40
VARIES = ("cel-go's own answer or its cost varies from run to run (the order Go visits a map's entries in), "
          "and this policy's answers are among its answers")


def reference_varies(case, mine):
    """Whether cel-go, asked the case again ORDER_REPEATS times, gives more
    than one answer (value and cost), and each of this policy's answers is
    one of them (its cost too, on the paths that count it)."""
    again = oracle([dict(case, id=f"{case['id']}#{k}") for k in range(ORDER_REPEATS)])

    def answer_key(answer, in_json, with_cost):
        cost = answer.get("cost") if with_cost and answer.get("status") == "value" else None
        return json.dumps([verdict(answer, in_json), cost], sort_keys=True)

    if len({answer_key(answer, False, True) for answer in again.values()}) < 2:
        return False
    for path in PATHS:
        answer = mine.get(path, {})
        in_json, with_cost = bool(answer.get("json")), "cost" in answer
        if answer_key(answer, in_json, with_cost) not in {answer_key(a, in_json, with_cost) for a in again.values()}:
            return False
    return True


def run_cel(n, seed, report):
    return run_cel_cases(as_served(generate.cel_cases(n, seed)), report)


def run_cel_cases(cases, report):
    tally = Tally("cel")
    reference = oracle(cases)
    ours = policy_cel(cases)
    costs = []
    for case in cases:
        ref, mine = reference[case["id"]], ours[case["id"]]
        if ref.get("status") == "value" and "cost" in mine.get("crate_evaluator", {}):
            costs.append(ref.get("cost") or 0)
        statuses = {ref.get("status")} | {answer.get("status") for answer in mine.values()}
        if statuses - {"value", "eval_error", "compile_error", "not_reached"} or not mine:
            tally.crash("/".join(sorted(map(str, statuses))), case)
            continue
        diffs = compare_cel(case, ref, mine)
        if diffs:
            # Asked first: a value or a count that depends on the order is
            # not counted higher, nor otherwise explained, by chance.
            if all(kind in ("value->value", "cost") for _, kind, _ in diffs) and reference_varies(case, mine):
                reason = VARIES
            else:
                reason = explained.cel(case, ref, mine)
            tally.differ(reason, diffs[0][1], case)
        else:
            tally.agree()
    for key, items in sorted(tally.kinds.items()):
        report(f"  {len(items):6d}  {key}")
        if not key.startswith("unexplained"):
            variables = "; ".join(f"{v['name']} = {v['expression']}" for v in items[0].get("variables") or [])
            report(f"          e.g. {items[0]['id']}: {items[0]['expression'][:200]!r}"
                   + (f" (variables: {variables[:200]})" if variables else ""))
            continue
        for case in items[:3]:
            small = shrink(case, smaller_cel, lambda c: run_cel_cases([dict(c, id="shrink")], lambda _: None)["unexplained"] > 0)
            ref = oracle([dict(small, id="s")])["s"]
            mine = policy_cel([dict(small, id="s")])["s"]
            report(f"          {case['id']}: {small['expression']!r}"
                   + (f" variables={small['variables']}" if small.get("variables") else ""))
            report(f"            cel-go: {json.dumps(ref)[:300]}")
            for path in PATHS:
                report(f"            {path}: {json.dumps(mine[path])[:300]}")
    result = tally.result()
    result["costs"] = {"compared": len(costs), "above 100,000": sum(c > 100_000 for c in costs),
                       "largest": max(costs, default=0)}
    return result


def smaller_policies(case):
    """The case with one mutation or one rule fewer."""
    spec = case["policy"]["spec"]
    for field in ("mutations", "rules"):
        items = spec.get(field) or []
        for i in range(len(items)) if len(items) > 1 else []:
            policy = json.loads(json.dumps(case["policy"]))
            del policy["spec"][field][i]
            yield dict(case, policy=policy)


def report_kinds(kinds, reference_name, report, still_differs):
    """Each kind of difference with its count; three cases of each kind
    nobody has explained, shrunk to the fewest mutations or rules that still
    differ, with the fields where the objects part."""
    for key, items in sorted(kinds.items()):
        report(f"  {len(items):6d}  {key}")
        if not key.startswith("unexplained"):
            case, ref, mine = items[0][:3]
            report(f"          e.g. {case['id']}: {json.dumps(case['policy']['spec'])[:200]}")
            report(f"            {reference_name}: {json.dumps(ref)[:160]}; policy: {json.dumps(mine)[:160]}")
            continue
        for case, ref, mine, ref_object, my_object in items[:3]:
            small = shrink(case, smaller_policies, still_differs)
            if small is not case:
                report(f"          {case['id']} shrunk to: {json.dumps(small['policy']['spec'])[:700]}")
            report(f"          {case['id']}: {json.dumps(case['policy']['spec'])[:700]}")
            report(f"            object: {json.dumps(case['object'])[:300]}")
            report(f"            {reference_name}: {json.dumps(ref)[:500]}")
            report(f"            policy: {json.dumps(mine)[:500]}")
            for k in sorted(set(ref_object or {}) | set(my_object or {})) if ref_object and my_object else []:
                if ref_object.get(k) != my_object.get(k):
                    report(f"            {k}: {reference_name} {json.dumps(ref_object.get(k))[:300]}")
                    report(f"            {k}: policy {json.dumps(my_object.get(k))[:300]}")


# ---- MutatingAdmissionPolicy ------------------------------------------------

def map_outcome(reference):
    """What the API server does with the request: (verdict, object); a
    panic or an answer the judge does not give is a crash."""
    status = reference.get("status")
    if status == "timeout":
        return "timeout", None
    if status not in ("refused", "skipped", "error", "invalid", "patched"):
        return "crash", None
    if status == "refused":
        return "refused", None
    if status == "skipped":
        return "unchanged", None
    if status in ("error", "invalid"):
        return "rejected", None
    errors = reference.get("errors") or []
    failure = reference.get("_failurePolicy", "Fail")
    if errors and failure == "Fail":
        return "rejected", None
    return "admitted", reference.get("object")


def refused_by_api_server(cases, objects):
    """The ids of cases whose object in `objects` (by id; None where there is
    none) the API server would refuse: not decodable into its type, labels or
    annotations its validation refuses, or a name other than the request's."""
    held = {c["id"]: objects[c["id"]] for c in cases if objects.get(c["id"]) is not None}
    answers = oracle([{"id": i, "op": "normalize", "object": o} for i, o in held.items()])
    refused = set()
    for case in cases:
        obj = held.get(case["id"])
        if obj is None:
            continue
        answer = answers.get(case["id"], {})
        renamed = obj.get("metadata", {}).get("name") != case["object"].get("metadata", {}).get("name")
        if answer.get("status") != "normalized" or answer.get("errors") or renamed:
            refused.add(case["id"])
    return refused


def policy_requests(cases):
    """What the wasm host is given for each case: settings, the AdmissionRequest,
    and the objects its cluster holds for the policy's reads."""
    return [{"id": c["id"], "settings": generate.settings_of(c), "request": generate.admission_request(c),
             "resources": c.get("resources") or []} for c in cases]


def run_map(n, seed, wasm, report):
    return run_map_cases(as_served(generate.map_cases(n, seed)), wasm, report)


def run_map_cases(cases, wasm, report):
    tally = Tally("mutating-admission-policy")
    reference = oracle(cases)
    ours = policy_wasm(policy_requests(cases), wasm)
    # The policy's objects, decoded and encoded as the API server would.
    normalize = [{"id": c["id"], "op": "normalize", "object": ours[c["id"]].get("object")}
                 for c in cases if ours[c["id"]].get("object") is not None]
    normalized = oracle(normalize)
    originals = oracle([{"id": c["id"], "op": "normalize", "object": c["object"]} for c in cases])
    refused = refused_by_api_server(cases, {c["id"]: reference[c["id"]].get("object") for c in cases})
    refused |= {c["id"] for c in cases if reference[c["id"]].get("status") == "invalid"}
    for case in cases:
        tally.share(case, case["id"] in refused)
        ref = dict(reference[case["id"]], _failurePolicy=case["policy"]["spec"].get("failurePolicy", "Fail"))
        ref_verdict, ref_object = map_outcome(ref)
        mine = ours[case["id"]]
        if mine.get("timeout"):
            my_verdict, my_object = "timeout", None
        elif "host_error" in mine or "settings_valid" not in mine:
            my_verdict, my_object = "crash", None
        elif not mine["settings_valid"]:
            my_verdict, my_object = "refused", None
        elif not mine.get("accepted"):
            my_verdict, my_object = "rejected", None
        else:
            my_verdict = "admitted"
            n_answer = normalized.get(case["id"])
            my_object = n_answer.get("object") if n_answer and n_answer.get("status") == "normalized" else None
            if n_answer and n_answer.get("status") == "timeout":
                my_verdict = "timeout"
            elif n_answer and n_answer.get("status") != "normalized":
                my_verdict = "admitted-undecodable"
            elif n_answer and n_answer.get("errors"):
                # The API server validates what the webhook returned.
                my_verdict, my_object = "rejected", None
            if mine.get("object") is None:
                if originals[case["id"]].get("status") == "timeout":
                    my_verdict = "timeout"
                my_object = originals[case["id"]].get("object")
        if ref_verdict == "unchanged":
            ref_verdict, ref_object = "admitted", originals[case["id"]].get("object")
            if originals[case["id"]].get("status") == "timeout":
                ref_verdict = "timeout"
        if CRASHES & {ref_verdict, my_verdict}:
            tally.crash(f"{ref_verdict}->{my_verdict}", (case, ref, mine, ref_object, my_object))
        elif (ref_verdict, ref_object) == (my_verdict, my_object):
            tally.agree()
        else:
            tally.differ(explained.mutation(case, ref, mine), f"{ref_verdict}->{my_verdict}",
                         (case, ref, mine, ref_object, my_object))
    report_kinds(tally.kinds, "kube-apiserver", report,
                 lambda case: run_map_cases([case], wasm, lambda _: None)["unexplained"] > 0)
    return tally.result()


# ---- Kyverno: MutatingPolicy and ClusterPolicy ------------------------------

def kyverno_oracle(cases):
    binary = subprocess.run([os.path.join(ROOT, "e2e-tests/oracle/kyverno/build.sh")],
                            capture_output=True, text=True, check=True).stdout.strip()
    return run_lines([binary], cases)


def kyverno_outcome(case, answer):
    """What Kyverno's webhook makes of its engine's answer: a failed rule
    rejects the request under Fail and leaves it unchanged under Ignore (the
    policy's patches are dropped, those of its rules that applied too). An
    engine panic or an answer the oracle does not give is a crash."""
    status = answer.get("status")
    if status == "refused":
        return "refused", None
    if status == "error":
        if explained.failure_policy(case["policy"]) == "Ignore":
            return "admitted", case["object"]
        return "rejected", None
    if status == "patched":
        return "admitted", answer.get("object")
    if status in ("unchanged", "skipped"):
        return "admitted", case["object"]
    if status == "timeout":
        return "timeout", None
    return "crash", None


def policy_outcome(case, mine):
    """The policy's decision and object; a trap, a host error or a malformed
    answer is a crash. Warnings do not change the decision."""
    if mine.get("timeout"):
        return "timeout", None
    if "host_error" in mine or "settings_valid" not in mine:
        return "crash", None
    if not mine["settings_valid"]:
        return "refused", None
    if mine.get("accepted") is False:
        return "rejected", None
    if mine.get("accepted") is not True:
        return "crash", None
    return "admitted", mine.get("object") or case["object"]


def run_kyverno(judge, cases, wasm, report):
    """A Kyverno judge: each case through Kyverno's engine and policy.wasm."""
    tally = Tally(judge)
    # Kyverno's engine is given the user the policy's AdmissionRequest names
    # (the CLI's user info), so `request.userInfo` reads the same on both sides.
    reference = kyverno_oracle([{"id": c["id"], "policy": c["policy"], "policies": c.get("exceptions") or [],
                                 "resources": c.get("resources") or [], "resource": c["object"],
                                 "operation": c["operation"],
                                 "user_info": {"userInfo": generate.admission_request(c)["userInfo"]}}
                                for c in cases])
    ours = policy_wasm(policy_requests(cases), wasm)
    refused = refused_by_api_server(cases, {c["id"]: kyverno_outcome(c, reference[c["id"]])[1] for c in cases})
    for case in cases:
        tally.share(case, case["id"] in refused)
        ref, mine = reference[case["id"]], ours[case["id"]]
        ref_verdict, ref_object = kyverno_outcome(case, ref)
        my_verdict, my_object = policy_outcome(case, mine)
        if CRASHES & {ref_verdict, my_verdict}:
            tally.crash(f"{ref_verdict}->{my_verdict}", (case, ref, mine, ref_object, my_object))
        elif (ref_verdict, ref_object) == (my_verdict, my_object):
            tally.agree()
        else:
            tally.differ(explained.kyverno(case, ref, mine), f"{ref_verdict}->{my_verdict}",
                         (case, ref, mine, ref_object, my_object))
    report_kinds(tally.kinds, "kyverno", report,
                 lambda case: run_kyverno(judge, [case], wasm, lambda _: None)["unexplained"] > 0)
    return tally.result()


def percent(part, whole):
    return f"{100 * part / whole:.1f} %" if whole else "-"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policy", default=os.path.join(ROOT, "policy.wasm"))
    parser.add_argument("--judges", default="cel,map,mpol,cpol")
    args = parser.parse_args()
    results = []
    for judge in args.judges.split(","):
        print(f"{judge}: {args.cases} cases, seed {args.seed}", flush=True)
        if judge == "cel":
            results.append(run_cel(args.cases, args.seed, lambda line: print(line, flush=True)))
        elif judge == "map":
            results.append(run_map(args.cases, args.seed, args.policy, lambda line: print(line, flush=True)))
        elif judge == "mpol":
            results.append(run_kyverno("mutating-policy", generate.mpol_cases(args.cases, args.seed), args.policy,
                                       lambda line: print(line, flush=True)))
        elif judge == "cpol":
            results.append(run_kyverno("cluster-policy", generate.cpol_cases(args.cases, args.seed), args.policy,
                                       lambda line: print(line, flush=True)))
        else:
            raise SystemExit(f"unknown judge {judge}")
    for r in results:
        print(f"{r['judge']}: {r['cases']} cases, {r['agreements']} agreements ({percent(r['agreements'], r['cases'])}),"
              f" {r['differences']} differences, {r['unexplained']} unexplained ({r['seconds']:.0f} s)")
        if "costs" in r:
            costs = r["costs"]
            print(f"  runtime cost (cel-go's model) compared where both give a value: {costs['compared']} cases,"
                  f" {costs['above 100,000']} above 100,000, the largest {costs['largest']}")
        if r["judge"] != "cel":
            informative = r["cases"] - r["unrestricted"] - r["refused"]
            print(f"  informative: {informative} ({percent(informative, r['cases'])}) drawn from inputs both sides"
                  f" could accept, the reference's object one the API server takes; {r['unrestricted']}"
                  f" ({percent(r['unrestricted'], r['cases'])}) drawn with invalid inputs allowed; {r['refused']}"
                  f" drawn from valid inputs whose reference object the API server refuses")
    total = sum(r["cases"] for r in results)
    unexplained = sum(r["unexplained"] for r in results)
    print(f"total: {total} cases, {unexplained} unexplained differences")
    sys.exit(1 if unexplained else 0)


if __name__ == "__main__":
    main()
