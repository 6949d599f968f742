#!/usr/bin/env bash
# Builds kubewarden-controller (the release of kwctl and policy-server this
# project is tested with) from a git copy of the public
# kubewarden/kubewarden-controller repository, with its dependencies from the
# Go module proxy, into a per-machine cache outside the work tree; prints the
# folder holding `controller` and the chart's CRDs (`crds/`). Nothing of its
# source is kept in this repository.
#
# KUBEWARDEN_CONTROLLER_GIT: the git copy (default: .mirror/kubewarden+kubewarden-controller/repo
# beside the project's folder, or in /work, where the session tools fetch it). Exits 3 when there
# is none.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tag=v1.35.0
mirror=.mirror/kubewarden+kubewarden-controller/repo
repo="${KUBEWARDEN_CONTROLLER_GIT:-$here/../../../$mirror}"
[ -n "${KUBEWARDEN_CONTROLLER_GIT:-}" ] || [ -d "$repo" ] || repo="/work/$mirror"
if ! git -C "$repo" rev-parse -q --verify "refs/tags/$tag" >/dev/null 2>&1; then
  echo "no git copy of kubewarden/kubewarden-controller with tag $tag at $repo (set KUBEWARDEN_CONTROLLER_GIT)" >&2
  exit 3
fi
commit="$(git -C "$repo" rev-parse "$tag^{commit}")"
key="$(cat "$here/build-controller.sh" | sha256sum | cut -c1-8)-${commit:0:12}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/node-metadata-policy/kubewarden-controller/$key"
if [ -x "$cache/controller" ]; then
  echo "$cache"
  exit 0
fi
echo "building kubewarden-controller $tag ($commit) into $cache" >&2
rm -rf "$cache.tmp" && mkdir -p "$cache.tmp/src"
git -C "$repo" archive "$tag" go.mod go.sum cmd api internal charts | tar -x -C "$cache.tmp/src"
(cd "$cache.tmp/src" && CGO_ENABLED=0 go build -trimpath -o "$cache.tmp/controller" ./cmd/controller) >&2
mkdir -p "$cache.tmp/crds"
cp "$cache.tmp/src"/charts/kubewarden-crds/templates/policies.kubewarden.io_*.yaml "$cache.tmp/crds/"
rm -rf "$cache"
mv "$cache.tmp" "$cache"
echo "$cache"
