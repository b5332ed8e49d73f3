# shellcheck shell=bash
# Sourced by test/infra/env.sh. Builds helm v4.3.1 from the Go module proxy (once, about
# 4 minutes cold) into $QAS_CACHE/helm-v4.3.1/ and exports QAS_HELM. The chart tests
# (test/chart) run it offline with HELM_CACHE_HOME, HELM_CONFIG_HOME and HELM_DATA_HOME
# under a temporary directory.
qas_helm_version=v4.3.1
QAS_HELM="$(go_install_cached helm "$qas_helm_version" "helm.sh/helm/v4/cmd/helm@$qas_helm_version" \
	-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$qas_helm_version")"
"$QAS_HELM" version --short >/dev/null 2>&1 || { log "helm at $QAS_HELM does not run"; return 1; }
export QAS_HELM
unset qas_helm_version
