#!/usr/bin/env bash
# Builds the Kubernetes judge of `make differential` into a per-machine cache
# outside the work tree, keyed by its sources, and prints the binary's path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
key="$(cat go.mod go.sum build.sh ./*.go | sha256sum | cut -c1-16)"
cache="${ORACLE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/node-metadata-policy/oracle-bin}/kubernetes-$key"
[ -x "$cache/kubernetes-oracle" ] ||
  echo "building the Kubernetes judge (k8s.io/apiserver $(go list -m -f '{{.Version}}' k8s.io/apiserver)) into $cache" >&2
exec ../../go-build-cached.sh "$cache" kubernetes-oracle .
