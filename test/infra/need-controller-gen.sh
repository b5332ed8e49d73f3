# shellcheck shell=bash
# Sourced by test/infra/env.sh and hack/generate.sh: controller-gen, which generates the
# API's deepcopy code and CRD (make generate; a test checks they are up to date).
QAS_CONTROLLER_GEN="$(go_install_cached controller-gen v0.23.0 sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0)"
export QAS_CONTROLLER_GEN
