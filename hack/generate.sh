#!/usr/bin/env bash
# Generates the API's deepcopy code and the QueueAutoscaler CRD with controller-gen.
# Usage: hack/generate.sh [OUTDIR]   (OUTDIR defaults to the repository; the up-to-date test
# generates into a temporary copy and compares).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root}"
# shellcheck source=../test/infra/lib.sh
source "$root/test/infra/lib.sh"
source "$root/test/infra/need-controller-gen.sh"
cd "$out"
"$QAS_CONTROLLER_GEN" object paths=./decider/api/...
# Floats (percentile, tolerance, node threshold) are part of the API on purpose.
"$QAS_CONTROLLER_GEN" crd:allowDangerousTypes=true paths=./decider/api/... output:crd:dir=./config/crd
# The Helm chart ships copies (Helm reads only files inside the chart); test/chart
# checks they are byte-equal.
if [ -d ./charts/qas ]; then
	cp ./config/crd/qas.dev_queueautoscalers.yaml ./charts/qas/crds/
	cp ./config/rbac/decider-clusterrole.yaml ./charts/qas/files/
fi
