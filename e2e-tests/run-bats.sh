#!/usr/bin/env bash
# Runs the kwctl + bats e2e suite when both tools are installed; says so
# plainly when they are not (the wasm-host e2e tests cover the same cases).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v kwctl >/dev/null || missing+=(kwctl)
command -v bats >/dev/null || missing+=(bats)
command -v jq >/dev/null || missing+=(jq)
if ((${#missing[@]})); then
  echo "bats e2e suite: SKIPPED (not installed: ${missing[*]}); the same cases ran in the wasm host above"
  exit 0
fi
make annotated-policy.wasm
bats e2e-tests/e2e.bats
