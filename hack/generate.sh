#!/usr/bin/env bash
# Generates the API's deepcopy code and the QueueAutoscaler CRD with controller-gen, and
# refreshes the Helm chart's copies of the CRD and config/rbac.
# Usage: hack/generate.sh [OUTDIR]   (OUTDIR defaults to the repository; the up-to-date test,
# decider/api/v1alpha1's TestGeneratedFilesUpToDate, runs it on a temporary copy and
# compares). $QAS_CONTROLLER_GEN, when set (test/infra/env.sh sets it), names the
# controller-gen binary; otherwise it is built once into $QAS_CACHE.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root}"
# shellcheck source=../test/infra/lib.sh
source "$root/test/infra/lib.sh"
if [ -z "${QAS_CONTROLLER_GEN:-}" ]; then
	# shellcheck source=../test/infra/need-controller-gen.sh
	source "$root/test/infra/need-controller-gen.sh"
fi
cd "$out"
"$QAS_CONTROLLER_GEN" object paths=./decider/api/...
# Floats (percentile, tolerance, node threshold) are part of the API on purpose.
"$QAS_CONTROLLER_GEN" crd:allowDangerousTypes=true paths=./decider/api/... output:crd:dir=./config/crd
# The Helm chart ships copies (Helm reads only files inside the chart); test/chart
# checks they are byte-equal.
if [ -d ./charts/qas ]; then
	cp ./config/crd/qas.dev_queueautoscalers.yaml ./charts/qas/crds/
	cp ./config/rbac/decider-clusterrole.yaml ./config/rbac/decider-leader-election-role.yaml ./charts/qas/files/
fi
