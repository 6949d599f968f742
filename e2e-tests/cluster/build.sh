#!/usr/bin/env bash
# Builds the reference control plane (kube-apiserver, kube-scheduler,
# kube-controller-manager, etcd) and kubelet from the Go module proxy into a per-machine
# cache outside the work tree, keyed by go.mod and go.sum, and prints its
# folder. A second run with the same go.sum only prints the folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
key="$(cat go.mod go.sum build.sh | sha256sum | cut -c1-16)"
cache="${CLUSTER_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/node-metadata-policy/cluster-bin}/$key"
if [ -x "$cache/etcd" ] && [ -x "$cache/kube-apiserver" ] && [ -x "$cache/kube-scheduler" ] \
    && [ -x "$cache/kube-controller-manager" ] && [ -x "$cache/kubelet" ]; then
  echo "$cache"
  exit 0
fi
mkdir -p "$cache.tmp"
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
# What `kube-apiserver --version` prints (and kubelet reports in its Node's
# status): Kubernetes' release build sets it the same way.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version \
  -X k8s.io/component-base/version.gitMajor=1 \
  -X k8s.io/component-base/version.gitMinor=$(echo "$k8s_version" | cut -d. -f2) \
  -X k8s.io/component-base/version.gitTreeState=clean"
echo "building kube-apiserver, kube-scheduler, kube-controller-manager, kubelet $k8s_version and etcd into $cache" >&2
go build -trimpath -ldflags "$ldflags" -o "$cache.tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubelet ./etcd >&2
rm -rf "$cache"
mv "$cache.tmp" "$cache"
echo "$cache"
