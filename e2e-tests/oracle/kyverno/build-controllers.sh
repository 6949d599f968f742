#!/usr/bin/env bash
# Builds Kyverno's own admission controller (cmd/kyverno) and background controller
# (cmd/background-controller), at the version go.mod requires, from the Go module proxy into
# a per-machine cache outside the work tree, keyed by go.mod, go.sum and this script, and
# prints its folder. A second run with the same key only prints the folder. Used by
# `make kyverno-judge` (e2e-tests/cluster/kyverno_judge.py), which runs both out of cluster.
# Long on 2 cores the first time (Kyverno's controllers pull in cosign, notation, the cloud
# registries' SDKs); later builds reuse Go's build cache.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
key="$(cat go.mod go.sum build-controllers.sh | sha256sum | cut -c1-16)"
cache="${KYVERNO_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/node-metadata-policy/kyverno-bin}/$key"
if [ -x "$cache/kyverno" ] && [ -x "$cache/background-controller" ]; then
  echo "$cache"
  exit 0
fi
mkdir -p "$cache.tmp"
version="$(go list -m -f '{{.Version}}' github.com/kyverno/kyverno)"
echo "building Kyverno's admission and background controllers ($version) into $cache" >&2
# What `kyverno --version` prints is set the way Kyverno's release build sets it.
ldflags="-s -w -X github.com/kyverno/kyverno/pkg/version.BuildVersion=$version"
nice go build -trimpath -ldflags "$ldflags" -o "$cache.tmp/" \
  github.com/kyverno/kyverno/cmd/kyverno github.com/kyverno/kyverno/cmd/background-controller >&2
rm -rf "$cache"
mv "$cache.tmp" "$cache"
echo "$cache"
