#!/usr/bin/env bash
# `make demo`: a one-minute taste of `make evaluate`. The trace-driven simulator
# compares QAS with Kubernetes' HPA and Knative's KPA (at its defaults, and with
# a 5-minute scale-down-delay), each against the yardsticks of its own data
# plane: the clairvoyant oracle, the reactive oracle and the lower bound,
# through a Service for qas and the HPA, pooled (an activator) for the KPA.
#
# Real time, no compression: two half hours of the NASA trace, 2 July 1995
# 10:00-10:30 at ×50 with each logged request multiplied (bursty batches) and
# 14:00-14:30 at ×100 with Poisson scaling, lognormal service (50 ms, cv 1.2),
# 45 s pod init, seed 1, p95 ≤ 200 ms, k = 1. Writes out/demo/results.md, results.json and
# report.html. Set QAS_SHARED to the shared directory if it is not ../shared.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/bin/qas-decider"
[ -x "$bin" ] || { echo "demo: $bin is missing: run make build" >&2; exit 1; }
shared="${QAS_SHARED:-$(cd "$root/.." && pwd)/shared}"
nasa="$shared/traces/nasa-1995-07-08.rps.gz"
[ -f "$nasa" ] || { echo "demo: $nasa not found: set QAS_SHARED" >&2; exit 1; }
"$bin" evaluate --demo --nasa "$nasa" --out "$root/out/demo"
