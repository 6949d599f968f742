#!/usr/bin/env bash
# Builds kubelet from the control plane's module (go.mod: the same
# k8s.io/kubernetes, the same replaces) into a per-machine cache of its own,
# keyed by go.mod, go.sum and this script, and prints its folder. go.sum holds
# the checksums of what build.sh builds; kubelet needs a few modules more
# (k8s.io/cri-streaming, an OpenTelemetry wrapper), so the build runs on a
# copy of both files (-modfile) to which Go adds those checksums, checked
# against the checksum database, leaving go.sum and build.sh's cache key as
# they are.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
key="$(cat go.mod go.sum build-kubelet.sh | sha256sum | cut -c1-16)"
cache="${CLUSTER_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/node-metadata-policy/kubelet-bin}/$key"
if [ -x "$cache/kubelet" ]; then
  echo "$cache"
  exit 0
fi
rm -rf "$cache.tmp"
mkdir -p "$cache.tmp"
cp go.mod "$cache.tmp/kubelet.mod"
cp go.sum "$cache.tmp/kubelet.sum"
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
echo "building kubelet $k8s_version into $cache" >&2
# The version kubelet prints and reports in its Node's status.
go build -modfile "$cache.tmp/kubelet.mod" -mod=mod -trimpath \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version" -o "$cache.tmp/" \
  k8s.io/kubernetes/cmd/kubelet >&2
rm -rf "$cache"
mv "$cache.tmp" "$cache"
echo "$cache"
