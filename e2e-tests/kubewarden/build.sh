#!/usr/bin/env bash
# Builds kubectl and kube-proxy (go.mod's Kubernetes release) into a
# per-machine cache outside the work tree, keyed by go.mod, go.sum and this
# script, and prints the folder. A second run only prints the folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
key="$(cat go.mod go.sum build.sh | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/node-metadata-policy/kubewarden-stack-bin/$key"
if [ -x "$cache/kubectl" ] && [ -x "$cache/kube-proxy" ]; then
  echo "$cache"
  exit 0
fi
version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
echo "building kubectl and kube-proxy $version into $cache" >&2
rm -rf "$cache.tmp" && mkdir -p "$cache.tmp"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version \
  -X k8s.io/component-base/version.gitMajor=1 \
  -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2) \
  -X k8s.io/component-base/version.gitTreeState=clean"
go build -trimpath -ldflags "$ldflags" -o "$cache.tmp/" k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kube-proxy >&2
rm -rf "$cache"
mv "$cache.tmp" "$cache"
echo "$cache"
