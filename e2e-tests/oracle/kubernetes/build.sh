#!/usr/bin/env bash
# Builds the Kubernetes judge of `make differential` into a per-machine cache
# outside the work tree, keyed by its sources, and prints the binary's path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
key="$(cat go.mod go.sum build.sh ./*.go | sha256sum | cut -c1-16)"
cache="${ORACLE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/node-metadata-policy/oracle-bin}/kubernetes-$key"
if [ -x "$cache/kubernetes-oracle" ]; then
  echo "$cache/kubernetes-oracle"
  exit 0
fi
echo "building the Kubernetes judge (k8s.io/apiserver $(go list -m -f '{{.Version}}' k8s.io/apiserver)) into $cache" >&2
mkdir -p "$cache.tmp"
go build -trimpath -o "$cache.tmp/kubernetes-oracle" . >&2
rm -rf "$cache"
mv "$cache.tmp" "$cache"
echo "$cache/kubernetes-oracle"
