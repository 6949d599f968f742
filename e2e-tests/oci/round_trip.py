#!/usr/bin/env python3
"""The OCI path as users take it, on loopback: Debian's docker-registry
(distribution 2.8), `kwctl push` of the annotated module, `kwctl pull` back
(same bytes, and the manifest digest kwctl reports is the registry's),
`kwctl inspect` and `kwctl scaffold manifest` read from the registry, and
policy-server started with `module: registry://...` mutating a binding.
Then Kyverno's `imageRegistry` context live: a ClusterPolicy pinning each
container's image to its digest, run by kwctl and by policy-server against
this registry (the image being the pushed module), must write the digest the
registry reports.

release.yml publishes with `kwctl push`; this is the check that what it
pushes can be pulled back and served. Prints SKIPPED and exits 0 when
docker-registry, kwctl or policy-server is missing.

Usage: round_trip.py ANNOTATED.wasm
"""
import base64
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "load"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import registry  # noqa: E402

REPOSITORY = "policies/node-metadata-policy"
TAG = "round-trip"


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def manifest_digest(registry_url, reference):
    """The digest the registry itself gives the manifest (HEAD, as an OCI client asks)."""
    req = urllib.request.Request(
        f"{registry_url}/v2/{REPOSITORY}/manifests/{reference}", method="HEAD",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["Docker-Content-Digest"]


def resolve_to_digest_policy():
    """Kyverno's resolve-image-to-digest, as a ClusterPolicy pasted as the settings."""
    return {
        "apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "resolve-image-to-digest"},
        "spec": {"rules": [{
            "name": "resolve-to-digest",
            "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "mutate": {"foreach": [{
                "list": "request.object.spec.containers",
                "context": [{"name": "resolvedRef",
                             "imageRegistry": {"reference": "{{ element.image }}", "jmesPath": "resolvedImage"}}],
                "patchStrategicMerge": {"spec": {"containers": [
                    {"name": "{{ element.name }}", "image": "{{ resolvedRef }}"}]}},
            }]},
        }]},
    }


def pod_request(image):
    """test_data/pod-with-node-name.json with its one container's image replaced."""
    with open(harness.data("pod-with-node-name.json")) as f:
        request = json.load(f)
    request["object"]["spec"]["containers"][0]["image"] = image
    return request


def image_patch(answer_patch):
    """The image a JSON Patch (base64, as kwctl and policy-server send it) writes, or None."""
    for op in json.loads(base64.b64decode(answer_patch or "") or "[]"):
        if op.get("path") == "/spec/containers/0/image":
            return op.get("value")
    return None


def check(ok, what):
    print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return ok


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    module = os.path.abspath(sys.argv[1])
    missing = [t for t in ("docker-registry", "kwctl", "policy-server") if shutil.which(t) is None]
    if missing:
        print(f"OCI round trip: SKIPPED (not installed: {', '.join(missing)}; "
              ".ci/run installs docker-registry from Debian, docs/development.md says where kwctl and "
              "policy-server come from)")
        return 0

    work = tempfile.mkdtemp(prefix="node-metadata-oci-")
    processes = []
    try:
        reg = registry.Registry(work, processes)
        if not reg.start():
            print("OCI round trip: docker-registry did not start; its log:")
            print(open(reg.log).read()[-2000:])
            return 1
        port, sources = reg.port, reg.sources
        uri = f"registry://127.0.0.1:{port}/{REPOSITORY}:{TAG}"

        print(f"OCI round trip through docker-registry on 127.0.0.1:{port}")
        ok = True
        pushed = json.loads(reg.kwctl("push", "--sources-path", sources, "-o", "json", module, uri))
        pushed_digest = pushed["immutable_ref"].rsplit("@", 1)[1]
        ok &= check(pushed_digest == manifest_digest(reg.url, TAG),
                    f"kwctl push: manifest {pushed_digest} is the registry's")
        pulled = os.path.join(work, "pulled.wasm")
        reg.kwctl("pull", "--sources-path", sources, "-o", pulled, uri)
        ok &= check(sha256(pulled) == sha256(module), f"kwctl pull: same bytes (sha256 {sha256(module)[:16]}...)")
        digest = reg.kwctl("digest", "--sources-path", sources, uri).strip()
        ok &= check(digest.endswith("@" + pushed_digest), f"kwctl digest: {digest.rsplit('@', 1)[-1]}")

        # inspect reads kwctl's store, which a pull without -o fills.
        reg.kwctl("pull", "--sources-path", sources, uri)
        inspect = reg.kwctl("inspect", uri)
        wanted = ["mutating:                     true", "context aware:                true",
                  "pods/binding", "kind: Node", "io.kubewarden.policy.version"]
        ok &= check(all(w in inspect for w in wanted), "kwctl inspect: mutating, context aware, pods/binding, "
                    "Node, the version annotation")

        # What scaffold writes from the registry's copy must be what it writes
        # from the local module (packaging.rs checks that one against
        # examples/cluster-admission-policy.yaml: rules, mutating,
        # contextAwareResources), the module line aside.
        def scaffold(source):
            text = reg.kwctl("scaffold", "manifest", "--sources-path", sources, "--type",
                         "ClusterAdmissionPolicy", "--allow-context-aware", source)
            return "\n".join(line for line in text.splitlines() if not line.strip().startswith("module:"))
        from_registry, from_file = scaffold(uri), scaffold(module)
        ok &= check(from_registry == from_file and "mutating: true" in from_registry
                    and "- pods/binding" in from_registry,
                    "kwctl scaffold manifest: same manifest from the registry as from the file")
        example = open(os.path.join(harness.ROOT, "examples", "cluster-admission-policy.yaml")).read()
        ok &= check("module: registry://" in example and "mutating: true" in example
                    and "pods/binding" in example and "kind: Node" in example,
                    "examples/cluster-admission-policy.yaml names a registry:// module, mutating, "
                    "pods/binding and Node")

        # Each ClusterAdmissionPolicy under examples/, its module pointed at
        # this registry, through kwctl run: kwctl takes the manifest (rules,
        # settings, contextAwareResources) and the policy mutates a binding.
        for name in sorted(os.listdir(os.path.join(harness.ROOT, "examples"))):
            text = open(os.path.join(harness.ROOT, "examples", name)).read()
            for i, doc in enumerate(text.split("\n---\n")):
                if "kind: ClusterAdmissionPolicy" not in doc:
                    continue
                manifest = os.path.join(work, f"{name}-{i}.yaml")
                with open(manifest, "w") as f:
                    f.write(re.sub(r"(?m)^(\s*module:).*$", rf"\1 {uri}", doc))
                run = json.loads(reg.kwctl("run", "--sources-path", sources, "--allow-context-aware",
                                       "--replay-host-capabilities-interactions",
                                       harness.data("sessions/node-1.yml"),
                                       "--request-path", harness.data("binding.json"), manifest))
                ok &= check(run.get("allowed") is True and bool(run.get("patch")),
                            f"examples/{name}: kwctl run with the module from the registry mutates a binding")

        # imageRegistry, live: kwctl asks this registry for the image's digest.
        image = f"127.0.0.1:{port}/{REPOSITORY}:{TAG}"
        pinned = f"127.0.0.1:{port}/{REPOSITORY}@{pushed_digest}"
        pod = os.path.join(work, "pod.json")
        with open(pod, "w") as f:
            json.dump(pod_request(image), f)
        run = json.loads(reg.kwctl("run", "--sources-path", sources, "--settings-json",
                               json.dumps(resolve_to_digest_policy()), "--request-path", pod, module))
        ok &= check(run.get("allowed") is True and image_patch(run.get("patch")) == pinned,
                    f"imageRegistry through kwctl: {image} pinned to the registry's digest ({pinned[-71:]})")

        stub = harness.start_stub(processes, [harness.data("node-1.json")])
        if stub is None:
            print("OCI round trip: the stub API server did not start")
            return 1
        policies = {"node-metadata": harness.entry(uri, {}),
                    "resolve-digest": harness.entry(uri, resolve_to_digest_policy(), resources=[])}
        url, server, log = harness.start_policy_server(processes, work, policies, stub,
                                                       extra_args=["--sources-path", sources])
        if url is None:
            print("OCI round trip: policy-server did not become ready; its log:")
            print(open(log).read()[-3000:])
            return 1
        downloaded = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(work, "downloads")) for f in fs]
        ok &= check(len(downloaded) == 1 and sha256(downloaded[0]) == sha256(module),
                    "policy-server pulled the same bytes from registry://")
        answer = harness.post(f"{url}/validate/node-metadata", harness.review("binding.json"))["response"]
        patch = json.loads(base64.b64decode(answer.get("patch", "")) or "[]")
        ok &= check(answer.get("allowed") is True and "us-east-2a" in json.dumps(patch),
                    f"policy-server (module: registry://...) mutates a binding: {json.dumps(patch)[:120]}")
        review = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                             "request": pod_request(image)})
        answer = harness.post(f"{url}/validate/resolve-digest", review)["response"]
        ok &= check(answer.get("allowed") is True and image_patch(answer.get("patch")) == pinned,
                    "imageRegistry through policy-server: the same digest")
        print("OCI round trip: " + ("passed" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        harness.stop(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
