#!/usr/bin/env python3
"""`make sync-release-info`: writes release.env's OCI_REPOSITORY and SOURCE_URL,
and Cargo.toml's version, into every file that repeats them. The values it
replaces are the ones metadata.yml holds now."""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
COPIES = ["metadata.yml", "artifacthub-pkg.yml", "README.md", "examples/cluster-admission-policy.yaml",
          "docs/recipes.md", "docs/kyverno.md", "docs/development.md"]


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def main():
    env = dict(line.split("=", 1) for line in read("release.env").splitlines()
               if line.strip() and not line.startswith("#"))
    version = re.search(r'^version = "([^"]+)"', read("Cargo.toml"), re.M).group(1)
    metadata = read("metadata.yml")
    old_repo = re.search(r"io\.kubewarden\.policy\.ociUrl: (\S+)", metadata).group(1)
    old_source = re.search(r"io\.kubewarden\.policy\.source: (\S+)", metadata).group(1)
    old_version = re.search(r"io\.kubewarden\.policy\.version: (\S+)", metadata).group(1)
    for path in COPIES:
        text = read(path)
        new = text.replace(old_source, env["SOURCE_URL"].strip())
        new = new.replace(f"{old_repo}:v{old_version}", f"{env['OCI_REPOSITORY'].strip()}:v{version}")
        new = new.replace(old_repo, env["OCI_REPOSITORY"].strip())
        new = re.sub(r"(io\.kubewarden\.policy\.version: )\S+", rf"\g<1>{version}", new)
        new = re.sub(r"^version: \S+", f"version: {version}", new, flags=re.M) if path == "artifacthub-pkg.yml" else new
        if new != text:
            with open(os.path.join(ROOT, path), "w") as f:
                f.write(new)
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
