#!/usr/bin/env bash
# The QAS demo on a built-in default: two "pods" (the example app, each behind its own
# qas-proxy sidecar with a concurrency limit) receive a window of the real NASA trace,
# replayed 60x faster, round-robin as a Service would spread it. Every 2 s it prints
# what each proxy measured; at the end it asks the queueing model what p95 latency two
# such pods should give and how many pods a 100 ms p95 target needs.
#
# Run it with `make demo` (which builds bin/ first). Everything runs on 127.0.0.1 and is
# stopped on exit.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/bin"
for b in qas-proxy qas-example-app qas-loadgen qas-decider; do
	[ -x "$bin/$b" ] || { echo "demo: $bin/$b is missing: run make build" >&2; exit 1; }
done
# shellcheck source=../test/infra/lib.sh
source "$root/test/infra/lib.sh" # free_port, wait_port, $QAS_SHARED
shared="$QAS_SHARED"
nasa="$shared/traces/nasa-1995-07-08.rps.gz"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

pods=2 concurrency=2
targets="" stats=""
for i in $(seq "$pods"); do
	app=$(free_port) serve=$(free_port) admin=$(free_port)
	"$bin/qas-example-app" --listen "127.0.0.1:$app" & pids+=($!)
	wait_port "$app"
	"$bin/qas-proxy" --listen "127.0.0.1:$serve" --admin-listen "127.0.0.1:$admin" --upstream "127.0.0.1:$app" \
		--concurrency "$concurrency" --queue 200 --drain 0s --log-level warn 2>/dev/null & pids+=($!)
	wait_port "$serve"
	wait_port "$admin"
	targets="$targets${targets:+,}http://127.0.0.1:$serve"
	stats="$stats${stats:+,}http://127.0.0.1:$admin/stats"
done

# Work per request: exponential, mean 2 ms of CPU plus 18 ms waiting on a backend.
path="/work?cpu=2ms&sleep=18ms&dist=exp"
if [ -f "$nasa" ]; then
	load=(--trace "$nasa" --window 12h:12h30m --compress 60 --scale 0.5)
	echo "== NASA-HTTP trace, 1 Jul 1995 12:00-12:30 (server time), 60x compressed (1 trace minute = 1 s), rates x0.5"
else
	load=(--rate 40 --duration 30s)
	echo "== $nasa not found: constant 40 req/s for 30 s instead"
fi
echo "== $pods pods, each qas-proxy (concurrency $concurrency) -> example app; requests: GET $path"
echo
summary=$(mktemp)
"$bin/qas-loadgen" --target "$targets" --path "$path" "${load[@]}" --watch "$stats" --interval 2s --summary "$summary"
read -r lambda es p95 <"$summary"
rm -f "$summary"
echo
echo "== the queueing model for the measured λ and E[S] on $pods pods x $concurrency concurrent requests (per-pod M/M/$concurrency),"
echo "== to set against the p95 the proxies measured above:"
"$bin/qas-decider" model --arrival-rate "$lambda" --service-time "${es}s" --servers "$pods" --concurrency "$concurrency" \
	--percentile 95 --target 100ms --output text || true
