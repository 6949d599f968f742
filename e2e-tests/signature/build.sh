#!/usr/bin/env bash
# Builds cosign (go.mod's version) into a per-machine cache outside the work
# tree, keyed by go.mod, go.sum and this script, and prints the binary's path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
key="$(cat go.mod go.sum build.sh | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/node-metadata-policy/cosign-bin/$key"
[ -x "$cache/cosign" ] ||
  echo "building cosign $(go list -m -f '{{.Version}}' github.com/sigstore/cosign/v2) into $cache" >&2
exec ../go-build-cached.sh "$cache" cosign github.com/sigstore/cosign/v2/cmd/cosign
