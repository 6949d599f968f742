#!/usr/bin/env bash
# Builds one Go package of the module in the current folder into CACHE (a
# per-machine folder outside the work tree, named by the caller after what it
# was built from) and prints the binary's path; when CACHE already holds it,
# only prints the path. Usage: go-build-cached.sh CACHE BINARY PACKAGE
set -euo pipefail
cache=$1 binary=$2 package=$3
if [ -x "$cache/$binary" ]; then
  echo "$cache/$binary"
  exit 0
fi
rm -rf "$cache.tmp"
mkdir -p "$cache.tmp"
go build -trimpath -o "$cache.tmp/$binary" "$package" >&2
rm -rf "$cache"
mv "$cache.tmp" "$cache"
echo "$cache/$binary"
