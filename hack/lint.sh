#!/usr/bin/env bash
# Usage: hack/lint.sh [golangci-lint run flags...]
#
# Runs golangci-lint with the repository's .golangci.yml (the layering rules, import
# aliases, error wrapping, staticcheck). The pinned version is built once into
# $QAS_CACHE by test/infra/need-golangci-lint.sh, under the same lock as the other
# tools.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../test/infra/lib.sh
source "$root/test/infra/lib.sh"
exec 9>"$QAS_CACHE/.install.lock"
flock 9
# shellcheck source=../test/infra/need-golangci-lint.sh
source "$root/test/infra/need-golangci-lint.sh"
flock -u 9
exec 9>&-
cd "$root"
exec "$QAS_GOLANGCI_LINT" run "$@" ./...
