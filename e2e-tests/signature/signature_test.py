#!/usr/bin/env python3
"""`make signature-test`: the module signed as a publisher signs it and
verified as users require it, offline. Debian's docker-registry on loopback;
cosign (e2e-tests/signature/go.mod, built from the Go module proxy) with a
key pair made for the test and no transparency log (no network reaches these
machines); a Sigstore trust configuration of the test's own (a
ClientTrustConfig whose trusted root lists one placeholder certificate
authority: without any, the Sigstore client refuses even key-based
verification, and without the file kwctl and policy-server fetch Sigstore's
public root over the network).

Three modules are pushed: one signed, one never signed (its own bytes: a
signature belongs to a digest), and one signed and then replaced under the
same tag by an altered module (a custom section more). `kwctl verify` with the key, and policy-server with a verification
config requiring the key (`--verification-path`, the file kubewarden-controller
mounts from a PolicyServer's `verificationConfig`), must take the signed one
(policy-server then mutates a binding) and refuse the other two. Prints one
line per case and `signature-test: passed` or `FAILED`. SKIPPED without
docker-registry, kwctl, policy-server, Go or openssl.

Usage: signature_test.py ANNOTATED.wasm
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "load"))
sys.path.insert(0, os.path.join(HERE, "..", "oci"))
import harness  # noqa: E402
import registry  # noqa: E402

REPOSITORY = "policies/node-metadata-policy"


def build_cosign():
    out = subprocess.run([os.path.join(HERE, "build.sh")], check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout.strip().splitlines()[-1]


def placeholder_ca(work):
    """A self-signed certificate (DER, base64) standing for a Fulcio CA that is never used."""
    key, cert = os.path.join(work, "placeholder-ca.key"), os.path.join(work, "placeholder-ca.der")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-outform", "DER", "-out", cert, "-days", "2",
                    "-subj", "/O=node-metadata-policy test/CN=placeholder"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with open(cert, "rb") as f:
        return base64.b64encode(f.read()).decode()


def trust_config(work):
    path = os.path.join(work, "trust-config.json")
    config = {
        "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
        "trustedRoot": {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [], "ctlogs": [], "timestampAuthorities": [],
            "certificateAuthorities": [{
                "subject": {"organization": "node-metadata-policy test", "commonName": "placeholder"},
                "uri": "https://fulcio.invalid",
                "certChain": {"certificates": [{"rawBytes": placeholder_ca(work)}]},
                "validFor": {"start": "2020-01-01T00:00:00Z"}}]},
        "signingConfig": {"mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
                          "caUrls": [], "oidcUrls": [], "rekorTlogUrls": [], "tsaUrls": []},
    }
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def verification_config(work, public_key):
    """What a PolicyServer's verificationConfig holds: every module must be signed by this key."""
    path = os.path.join(work, "verification.yml")
    with open(public_key) as f:
        key = "".join(f"      {line}" for line in f.readlines())
    with open(path, "w") as f:
        f.write(f"apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: node-metadata-policy-test\n    key: |\n{key}")
    return path


def variant(module, work, label):
    """The module with a custom section named `label` appended: still valid
    WebAssembly, other bytes, so another digest (a signature belongs to a
    digest: the same bytes pushed under another tag are signed too)."""
    with open(module, "rb") as f:
        data = f.read()
    name = label.encode()
    section = bytes([len(name)]) + name + b"\x01"
    path = os.path.join(work, f"{label}.wasm")
    with open(path, "wb") as f:
        f.write(data + b"\x00" + bytes([len(section)]) + section)
    return path


class Signer:
    """cosign with a key pair made for the run (cosign.key, cosign.pub in `work`)."""

    def __init__(self, cosign, reg, work):
        self.cosign, self.work = cosign, work
        self.env = dict(reg.env, COSIGN_PASSWORD="")
        made = self.run("generate-key-pair")
        if made.returncode != 0:
            raise RuntimeError(f"cosign generate-key-pair: {made.stderr[-1000:]}")
        self.public_key = os.path.join(work, "cosign.pub")

    def run(self, *args):
        return subprocess.run([self.cosign, *args], capture_output=True, text=True, env=self.env, cwd=self.work,
                              timeout=300)

    def sign(self, reference):
        """Signs `reference` (host/repository:tag) in the format kwctl and
        policy-server read (not the new bundle format), with no transparency
        log upload."""
        signed = self.run("sign", "--yes", "--key", "cosign.key", "--tlog-upload=false", "--allow-insecure-registry",
                          "--new-bundle-format=false", "--use-signing-config=false", reference)
        if signed.returncode != 0:
            raise RuntimeError(f"cosign sign {reference}: {signed.stderr[-1500:]}")


class Run:
    def __init__(self):
        self.failed = 0

    def case(self, ok, line, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'}  {line}" + (f": {detail}" if detail and not ok else ""))
        self.failed += 0 if ok else 1


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    module = os.path.abspath(sys.argv[1])
    missing = [t for t in ("docker-registry", "kwctl", "policy-server", "go", "openssl") if shutil.which(t) is None]
    if missing:
        print(f"signature test: SKIPPED (not installed: {', '.join(missing)})")
        return 0
    cosign = build_cosign()
    work = tempfile.mkdtemp(prefix="node-metadata-signature-")
    processes = []
    run = Run()
    try:
        reg = registry.Registry(work, processes)
        if not reg.start():
            print(f"signature test: docker-registry did not start:\n{open(reg.log).read()[-2000:]}")
            return 1
        signer = Signer(cosign, reg, work)
        print(f"{subprocess.run([cosign, 'version', '--json'], capture_output=True, text=True).stdout.strip()[:200]}")

        def sign(tag):
            signer.sign(f"{reg.host}/{REPOSITORY}:{tag}")

        reg.kwctl("push", "--sources-path", reg.sources, module, reg.uri(REPOSITORY, "signed"))
        sign("signed")
        reg.kwctl("push", "--sources-path", reg.sources, variant(module, work, "unsigned"),
                  reg.uri(REPOSITORY, "unsigned"))
        reg.kwctl("push", "--sources-path", reg.sources, module, reg.uri(REPOSITORY, "altered"))
        sign("altered")
        reg.kwctl("push", "--sources-path", reg.sources, variant(module, work, "altered"),
                  reg.uri(REPOSITORY, "altered"))

        trust = trust_config(work)
        verification = verification_config(work, os.path.join(work, "cosign.pub"))
        checked = signer.run("verify", "--key", "cosign.pub", "--insecure-ignore-tlog=true",
                             "--allow-insecure-registry", f"{reg.host}/{REPOSITORY}:signed")
        run.case(checked.returncode == 0, "cosign verify: the signed module carries the key's signature",
                 checked.stderr[-500:])

        for tag, want in (("signed", True), ("unsigned", False), ("altered", False)):
            verified = reg.kwctl_run("verify", "--sources-path", reg.sources, "--sigstore-trust-config", trust,
                                     "--verification-config-path", verification, reg.uri(REPOSITORY, tag))
            why = (verified.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1][:300]
            run.case((verified.returncode == 0) == want,
                     f"kwctl verify: {tag} module {'verified' if want else 'refused'}"
                     + ("" if want else f" ({why})"), verified.stderr[-800:])

        stub = harness.start_stub(processes, [harness.data("node-1.json")])
        extra = ["--sources-path", reg.sources, "--sigstore-trust-config", trust, "--verification-path", verification]
        for tag, want in (("signed", True), ("unsigned", False), ("altered", False)):
            policies = {"node-metadata": harness.entry(reg.uri(REPOSITORY, tag), {})}
            first = len(processes)
            os.makedirs(os.path.join(work, tag))
            url, server, log = harness.start_policy_server(processes, os.path.join(work, tag), policies, stub,
                                                           extra_args=extra, ready_seconds=120)
            if want:
                answer = {}
                if url:
                    answer = harness.post(f"{url}/validate/node-metadata", harness.review("binding.json"))["response"]
                patch = base64.b64decode(answer.get("patch", "")).decode()
                run.case(url is not None and answer.get("allowed") is True and "us-east-2a" in patch,
                         "policy-server: signed module verified, loaded and mutating a binding",
                         open(log).read()[-1500:] if log else "")
            else:
                text = open(log).read() if log and os.path.exists(log) else ""
                reason = next((line for line in text.splitlines() if "verif" in line.lower() or "signature" in
                               line.lower()), text.strip().splitlines()[-1] if text.strip() else "")
                exited = server is not None and server.poll() not in (None, 0)
                run.case(url is None and exited, f"policy-server: {tag} module refused ({reason.strip()[:300]})",
                         text[-1500:])
            harness.stop(processes[first:])
            del processes[first:]
        print(f"signature-test: {'passed' if not run.failed else 'FAILED'}")
        return 1 if run.failed else 0
    finally:
        harness.stop(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
