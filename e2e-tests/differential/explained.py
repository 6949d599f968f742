"""The differences docs/cel.md and docs/kyverno.md explain under "Differences
that remain": each a predicate over a case and both answers that returns the
section's words, or None for a difference nobody has explained. In each this
policy refuses earlier or more strictly than the reference, or both answers
are right (the order of a map's entries)."""

import json
import re

# This policy's message where an operand failed in a call nested past what
# its cost metering copies (src/cel/libraries/cost_tracker.rs).
UNCOUNTED = "for this policy to count the expression's cost as cel-go does: the expression fails whole"


def orderless(value):
    """A typed value with the items of every list, at any depth, sorted."""
    if isinstance(value, dict) and isinstance(value.get("list"), list):
        return {"list": sorted((orderless(item) for item in value["list"]),
                               key=lambda item: json.dumps(item, sort_keys=True))}
    if isinstance(value, dict):
        return {k: orderless(v) for k, v in value.items()}
    if isinstance(value, list):
        return [orderless(v) for v in value]
    return value


def same_but_order(a, b):
    """Whether two typed lists hold the same items, at any depth, in another
    order; two maps have the same keys and the same values, given to the keys
    in another order (`[3, 1].transformMap(i, v, v).map(k, k)` lists a map's
    keys, then numbers them); or two strings that write one flat list
    (`format()`'s `%s` of a list) with the same items in another order."""
    if isinstance(a, dict) and isinstance(b, dict) and isinstance(a.get("string"), str) \
            and isinstance(b.get("string"), str):
        items = lambda text: sorted(text[1:-1].split(", ")) if re.fullmatch(r"\[[^\[\]]*\]", text) else None
        return a != b and items(a["string"]) is not None and items(a["string"]) == items(b["string"])
    if isinstance(a, dict) and isinstance(b, dict) and isinstance(a.get("map"), list) \
            and isinstance(b.get("map"), list):
        def parts(value, at):
            return sorted(json.dumps(orderless(entry[at]), sort_keys=True) for entry in value["map"])
        return a != b and parts(a, 0) == parts(b, 0) and parts(a, 1) == parts(b, 1)
    if not (isinstance(a, dict) and isinstance(b, dict) and "list" in a and "list" in b):
        return False
    return orderless(a) == orderless(b)


def cel(case, reference, ours):
    statuses = {answer.get("status") for answer in ours.values()}
    if reference.get("status") == "value" and statuses == {"value"}:
        if all(same_but_order(reference.get("value"), answer.get("value")) for answer in ours.values()) \
                and any(reference.get("value") != answer.get("value") for answer in ours.values()):
            return "the order a map's entries are visited in (unspecified: Go's maps and the crate's hash maps)"
        # The same value, counted higher here: what cel-go skips once an
        # operand fails is charged with its block (docs/cel.md).
        costs = [answer["cost"] for answer in ours.values() if "cost" in answer]
        if all(answer.get("value") == reference.get("value") for answer in ours.values()) and costs \
                and isinstance(reference.get("cost"), int) and min(costs) > reference["cost"]:
            return ("counted higher than cel-go, the values alike: what cel-go skips once an operand fails is "
                    "charged with its block here")
        # An expression that picks other entries in another order is asked
        # of cel-go again by the judge (run.py, reference_varies).
        return None
    # A variable (the expression itself is one here) that holds a type value
    # is refused at load: kube-apiserver compiles it and answers.
    if reference.get("status") in ("value", "eval_error") and statuses == {"compile_error"} \
            and all("holds a type value" in (answer.get("message") or "") for answer in ours.values()):
        return "a variable that holds a type value is refused at load (the evaluator keeps none in its variables)"
    # Past the nesting the cost metering copies, an operand's failure fails
    # the whole expression here; cel-go's && or || absorbed it.
    if reference.get("status") == "value" and statuses == {"eval_error"} \
            and all(UNCOUNTED in (answer.get("message") or "") for answer in ours.values()):
        return ("stricter: an operand that fails in a call nested too deep to be counted as cel-go counts it "
                "fails the whole expression (cel-go's && or || absorbs it)")
    return None


REFUSED_EARLIER = [
    (r"is not a valid label value|is not a valid (label|annotation) key|not a valid label",
     "a literal label or annotation the API server would refuse is refused at load"),
    (r"type mismatch: unexpected type name",
     "Object type names that do not follow the field path are refused at load"),
    (r"undeclared reference to 'random'",
     "Kyverno's random() is refused at load (not supported)"),
    (r"uses `http`: Kyverno's http library",
     "Kyverno's http library is refused at load (no host capability for arbitrary HTTP)"),
]


# What the policy said at admission, and which docs/cel.md entry explains it.
DECIDED_AT_ADMISSION = [
    (r"which says which object this is",
     "a mutation that renames the object (metadata.name, namespace) is refused"),
    (r"is not a valid (label |annotation )?(key|value)|is not a valid label value|value .* is not a string|"
     r"metadata\.(labels|annotations) is .*, not a map",
     "a label or annotation the API server would refuse fails the mutation, judged by failurePolicy"),
]


def mutation(case, reference, ours):
    """kube-apiserver's answer (refused at creation, its patchers' object,
    `invalid` when its validation refuses the object's metadata) against this
    policy's: each class checks both."""
    if reference.get("status") == "refused" and ours.get("settings_valid", True):
        return cel(case, {"status": "compile_error", "errors": reference.get("errors")},
                   {"policy": {"status": "accepted"}})
    if not ours.get("settings_valid", True):
        return checked_first(reference, ours)
    said = " ".join([ours.get("message") or ""] + (ours.get("warnings") or []))
    (rename_words, rename), (metadata_words, metadata) = DECIDED_AT_ADMISSION
    if reference.get("status") == "invalid" and re.search(metadata_words, said):
        return metadata
    # A key one mutation writes and a later one moves or removes: the policy
    # checks each mutation's object, kube-apiserver only the last.
    invalid_keys = set(re.findall(r'(?:label|annotation) "([^"]+)" is not a valid key', said))
    final = (reference.get("object") or {}).get("metadata") or {}
    if reference.get("status") == "patched" and invalid_keys and ours.get("accepted") \
            and len((case["policy"].get("spec") or {}).get("mutations") or []) > 1 \
            and not invalid_keys & (set(final.get("labels") or {}) | set(final.get("annotations") or {})):
        return ("a label or annotation key the API server would refuse fails the mutation that writes it, "
                "though a later one moves or removes it before kube-apiserver validates the object")
    if reference.get("status") in ("patched", "invalid") and re.search(rename_words, said) and \
            identity(reference.get("object")) != identity(case["object"]):
        return rename
    return None


def checked_first(reference, ours):
    """What the policy refuses at load, or fails at admission, that the
    reference lets through to the API server."""
    if not ours.get("settings_valid", True) and reference.get("status") != "refused":
        message = ours.get("settings_message") or ""
        for pattern, reason in REFUSED_EARLIER:
            if re.search(pattern, message):
                return reason
    said = " ".join([ours.get("message") or ""] + (ours.get("warnings") or []))
    for pattern, reason in DECIDED_AT_ADMISSION:
        if re.search(pattern, said):
            return reason
    return None


def failure_policy(policy):
    """The failurePolicy Kyverno's webhook applies to the policy: for a
    ClusterPolicy or Policy `webhookConfiguration.failurePolicy`, then
    `failurePolicy`; for a MutatingPolicy `failurePolicy`; else Fail."""
    spec = policy.get("spec") or {}
    if policy.get("kind") in ("ClusterPolicy", "Policy"):
        given = (spec.get("webhookConfiguration") or {}).get("failurePolicy") or spec.get("failurePolicy")
    else:
        given = spec.get("failurePolicy")
    return given or "Fail"


def kyverno(case, reference, ours):
    """Kyverno's engine answers with the object as its patches leave it; the
    API server then decodes and validates it. The policy checks first. Each
    class looks at both answers: what Kyverno's engine gave (its status, its
    message or its object) and what the policy did (its decision, its words
    and its object)."""
    kyverno_object, our_object = reference.get("object"), ours.get("object") or case["object"]
    if reference.get("status") == "refused" and ours.get("settings_valid", True) and \
            case["policy"].get("kind") == "MutatingPolicy":
        # Kyverno's compiler refused an expression this policy took at load:
        # the classes of cel-go's compile errors, as for kube-apiserver's.
        return cel(case, {"status": "compile_error", "errors": [reference.get("message") or ""]},
                   {"policy": {"status": "accepted"}})
    rejected = ours.get("settings_valid", True) and ours.get("accepted") is False
    said = " ".join([ours.get("message") or ""] + (ours.get("warnings") or []))
    if not ours.get("settings_valid", True) and reference.get("status") != "refused":
        message = ours.get("settings_message") or ""
        # Kyverno's validation took the policy (Go's map order reached the
        # other place first), whatever its engine then did with it.
        if "labels and annotations supports only string values" in message:
            return ("Kyverno checks a patch's metadata or its spec.template.metadata for strings, whichever "
                    "Go's map order reaches first; here both")
        # Kyverno took the policy (any answer but a refusal); this policy
        # refused it at load for what its text holds.
        for pattern, reason in REFUSED_EARLIER:
            if re.search(pattern, message):
                return reason
        return None
    if reference.get("status") == "patched" and refused_metadata(kyverno_object):
        # The API server refuses the object Kyverno's patch leaves; the policy
        # refuses the request, or on a Binding leaves the keys out.
        if rejected and re.search(DECIDED_AT_ADMISSION[1][0], said):
            return DECIDED_AT_ADMISSION[1][1]
        if not rejected and without_refused_metadata(kyverno_object) == without_refused_metadata(our_object):
            return DECIDED_AT_ADMISSION[1][1]
        # A CEL policy under Ignore: the mutation fails here and the policy's
        # changes go; Kyverno's patch goes to the API server, which refuses it.
        if not rejected and case["policy"].get("kind") not in ("ClusterPolicy", "Policy") and \
                failure_policy(case["policy"]) == "Ignore" and our_object == case["object"] and \
                re.search(DECIDED_AT_ADMISSION[1][0], said):
            return DECIDED_AT_ADMISSION[1][1]
    # Kyverno's patch renames the object, which the API server refuses; here
    # the mutation fails, judged by failurePolicy (rejected, or under Ignore
    # the policy's changes go).
    if reference.get("status") == "patched" and identity(kyverno_object) != identity(case["object"]) and \
            (rejected or our_object == case["object"]) and re.search(DECIDED_AT_ADMISSION[0][0], said):
        return DECIDED_AT_ADMISSION[0][1]
    if kyverno_object and not rejected and nulls_as_empty(kyverno_object) == our_object:
        return "a null label or annotation (a copy from a missing member) is the empty string the API server stores"
    if "failed to convert original object to typed object" in (reference.get("message") or "") and \
            not rejected and our_object != case["object"]:
        return ("a MutatingPolicy whose JSONPatch wrote a value of the wrong type: Kyverno fails a later "
                "ApplyConfiguration, here the API server refuses the object")
    return None


QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def valid_key(key):
    """A label or annotation key the API server takes (a qualified name)."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and not (prefix and len(prefix) <= 253 and DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(QUALIFIED_NAME.match(name))


def refused_entries(obj):
    """The (section, key) pairs of the object's labels and annotations the
    API server refuses: keys that are not qualified names, values that are not
    strings, label values that are not valid label values."""
    metadata = (obj or {}).get("metadata") if isinstance(obj, dict) else None
    refused = []
    for section in ("labels", "annotations"):
        entries = (metadata or {}).get(section) if isinstance(metadata, dict) else None
        if entries is None:
            continue
        if not isinstance(entries, dict):
            refused.append((section, None))
            continue
        for key, value in entries.items():
            if value is None:
                continue  # read as the empty string
            if not valid_key(key) or not isinstance(value, str) or (
                    section == "labels" and value and (len(value) > 63 or not QUALIFIED_NAME.match(value))):
                refused.append((section, key))
    return refused


def refused_metadata(obj):
    return bool(refused_entries(obj))


def without_refused_metadata(obj):
    """The object without the labels and annotations the API server refuses."""
    obj = json.loads(json.dumps(obj or {}))
    for section, key in refused_entries(obj):
        entries = obj["metadata"]
        if key is None:
            entries.pop(section, None)
        else:
            entries[section].pop(key, None)
            if not entries[section]:
                entries.pop(section)
    return obj


def identity(obj):
    metadata = (obj or {}).get("metadata") or {}
    return (obj or {}).get("kind"), metadata.get("name"), metadata.get("namespace")


def nulls_as_empty(obj):
    """The object with null labels and annotations read as the API server reads them."""
    obj = json.loads(json.dumps(obj))
    for field in ("labels", "annotations"):
        entries = (obj.get("metadata") or {}).get(field)
        if isinstance(entries, dict):
            for key, value in entries.items():
                if value is None:
                    entries[key] = ""
    return obj
