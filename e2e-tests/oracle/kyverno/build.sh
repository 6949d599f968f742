#!/usr/bin/env bash
# Builds the Kyverno oracle (Kyverno's engine, from the Go module proxy) and, beside it,
# kyverno-test (Kyverno's own `kyverno test` command) into a per-machine cache outside the
# work tree, keyed by go.mod, go.sum, the Go files and this script, and prints the
# oracle's path. A second run with the same key only prints the path. The first build
# compiles Kyverno and its dependencies: long on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
key="$(cat go.mod go.sum ./*.go kyverno-test/*.go build.sh | sha256sum | cut -c1-16)"
cache="${ORACLE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/node-metadata-policy/oracle-bin}/$key"
if [ -x "$cache/kyverno-oracle" ] && [ -x "$cache/kyverno-test" ]; then
  echo "$cache/kyverno-oracle"
  exit 0
fi
mkdir -p "$cache.tmp"
echo "building the Kyverno oracle ($(go list -m -f '{{.Path}} {{.Version}}' github.com/kyverno/kyverno)) into $cache" >&2
nice go build -trimpath -ldflags "-s -w" -o "$cache.tmp/kyverno-oracle" . >&2
nice go build -trimpath -ldflags "-s -w" -o "$cache.tmp/kyverno-test" ./kyverno-test >&2
rm -rf "$cache"
mv "$cache.tmp" "$cache"
echo "$cache/kyverno-oracle"
