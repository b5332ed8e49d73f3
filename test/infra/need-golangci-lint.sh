# shellcheck shell=bash
# Sourced by hack/lint.sh (make lint) and test/infra/env.sh: golangci-lint, which checks
# the layering (depguard), import aliases, error wrapping and staticcheck (.golangci.yml).
QAS_GOLANGCI_LINT="$(go_install_cached golangci-lint v2.15.0 github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0)"
export QAS_GOLANGCI_LINT
