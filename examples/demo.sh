#!/usr/bin/env bash
# `make demo`: the trace-driven simulator compares QAS with Kubernetes' HPA, Knative's KPA
# and an oracle that knows the future, on half a day of the real NASA trace. The oracle is
# routed at random through a Service, as QAS and the HPA are; oracle-pooled may also put a
# capacity-aware activator in front of the pods, as the KPA does, and is its yardstick.
#
# Window 24h:36h of the trace (2 July 1995, 00:00-12:00 server time), rates ×100, compressed
# 10× (ten trace seconds per simulated second: 72 simulated minutes), lognormal service
# times (mean 50 ms, cv 1), 30 s pod init, p95 ≤ 200 ms. Writes out/demo.json and
# out/demo-report.html. Set QAS_SHARED to the shared directory if it is not ../shared.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/bin/qas-decider"
[ -x "$bin" ] || { echo "demo: $bin is missing: run make build" >&2; exit 1; }
shared="${QAS_SHARED:-$(cd "$root/.." && pwd)/shared}"
nasa="$shared/traces/nasa-1995-07-08.rps.gz"
[ -f "$nasa" ] || { echo "demo: $nasa not found: set QAS_SHARED" >&2; exit 1; }
mkdir -p "$root/out"
window=24h:36h scale=100 compress=10
echo "demo: NASA trace window $window (trace time), scale ×$scale, compression $compress trace s per simulated s"
"$bin" simulate --trace "$nasa" --window "$window" --scale "$scale" --compress "$compress" \
	--slo 200ms --percentile 95 --service lognormal:50ms,cv=1 --init 30s \
	--policies qas,hpa,kpa,oracle,oracle-pooled --seed 1 \
	--json "$root/out/demo.json" --report "$root/out/demo-report.html"
echo "demo: wrote out/demo.json and out/demo-report.html"
