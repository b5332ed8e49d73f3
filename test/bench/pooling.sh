#!/usr/bin/env bash
# Pooled data plane benchmark (issue #20, docs/pooling.md): the same pods with and
# without pooling, in the same run, on loopback.
#
# PODS example apps (/work, exponential service of mean SERVICE, asleep, so the two
# shared cores do not bound it), each behind a qas-proxy sidecar with k = 1. A random
# balancer (test/bench/randlb: each request to a pod chosen at random, as a Service
# does) sends qas-loadgen's Poisson load to them, and measures every request's latency.
#   random:  the sidecars queue their own requests (today's data plane);
#   pooled:  the same, plus --pool-fronts: a sidecar whose slot is busy overflows to a
#            qas-proxy --mode front, and a free slot pulls from it.
# Load: BASE_RHO of the pods' capacity for BASE s, BURST× that for BURST_S s, then
# BASE_RHO again for BASE s; p50, p95 and late % (latency above SLO, or a 5xx) over the
# whole replay, per configuration, configurations interleaved over ROUNDS rounds, and
# the pooled/random ratios of the medians. Then the added p50 with no queue: a light
# load (NOQ_RATE/s of /work?sleep=0) through both, where nothing overflows.
# No timing is asserted anywhere: this prints numbers for people to read.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=../infra/lib.sh
source "$root/test/infra/lib.sh"
ROUNDS=${ROUNDS:-2} PODS=${PODS:-4} SERVICE_MS=${SERVICE_MS:-50} BASE_RHO=${BASE_RHO:-0.3} BURST=${BURST:-3}
BASE=${BASE:-15} BURST_S=${BURST_S:-15} SLO=${SLO:-200ms} NOQ_RATE=${NOQ_RATE:-50} NOQ_SECS=${NOQ_SECS:-10}
SIM_SEEDS=${SIM_SEEDS:-10}

work=$(mktemp -d)
pids=()
cleanup() {
	local rc=$?
	[ "$rc" -ne 0 ] && [ -f "$work/log" ] && tail -20 "$work/log" >&2
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
(cd "$root" && go build -o "$work/" ./proxy/cmd/qas-proxy ./examples/app/cmd/qas-example-app ./examples/loadgen/cmd/qas-loadgen ./test/bench/randlb \
	./decider/cmd/qas-decider)
head -c 32 /dev/urandom >"$work/secret"

# launch ARGS...: runs ARGS with @L@ and @A@ replaced by two free ports, and retries
# with new ports if it exits (other processes on the machine take ports too); sets L
# and A.
launch() {
	local try pid i args
	for try in 1 2 3 4 5; do
		L=$(free_port) A=$(free_port)
		args=("${@//@L@/$L}")
		args=("${args[@]//@A@/$A}")
		"${args[@]}" >>"$work/log" 2>&1 &
		pid=$!
		for i in $(seq 200); do
			if (exec 3<>"/dev/tcp/127.0.0.1/$L") 2>/dev/null; then
				pids+=("$pid")
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill "$pid" 2>/dev/null || true
		echo "retrying $1 (try $try)" >&2
	done
	echo "could not start $*" >&2
	return 1
}
apps=() random=() pooled=() padmins=() radmins=()
launch "$work/qas-proxy" --mode front --listen 127.0.0.1:@L@ --admin-listen 127.0.0.1:@A@ --workload bench \
	--pool-secret-file "$work/secret" --log-level error
front=$L fadmin=$A
for i in $(seq "$PODS"); do
	launch "$work/qas-example-app" --listen 127.0.0.1:@L@
	a=$L
	apps+=("$a")
	launch "$work/qas-proxy" --listen 127.0.0.1:@L@ --admin-listen 127.0.0.1:@A@ --upstream "127.0.0.1:$a" --concurrency 1 --log-level error
	random+=("127.0.0.1:$L") radmins+=("$A")
	launch "$work/qas-proxy" --listen 127.0.0.1:@L@ --admin-listen 127.0.0.1:@A@ --upstream "127.0.0.1:$a" --concurrency 1 \
		--workload bench --pool-secret-file "$work/secret" --pool-fronts "127.0.0.1:$front" --log-level error
	pooled+=("127.0.0.1:$L") padmins+=("$A")
done
join() {
	local IFS=,
	echo "$*"
}
launch "$work/randlb" 127.0.0.1:@L@ "$(join "${random[@]}")"
lb_random=$L
launch "$work/randlb" 127.0.0.1:@L@ "$(join "${pooled[@]}")"
lb_pooled=$L
declare -A lb=([random]=$lb_random [pooled]=$lb_pooled)

# The burst trace: requests per second.
base_rate=$(awk -v p="$PODS" -v s="$SERVICE_MS" -v r="$BASE_RHO" 'BEGIN{printf "%d", p*1000/s*r + 0.5}')
{
	for _ in $(seq "$BASE"); do echo "$base_rate"; done
	for _ in $(seq "$BURST_S"); do echo $((base_rate * BURST)); done
	for _ in $(seq "$BASE"); do echo "$base_rate"; done
} >"$work/trace"

report() { curl -fsS "http://127.0.0.1:${lb[$1]}/__randlb/report?slo=$SLO"; }
# stats ADMIN...: each sidecar's /stats, one JSON document a line.
stats() {
	local a
	for a in "$@"; do curl -fsS "http://127.0.0.1:$a/stats"; echo; done
}
# served: the service seconds and completions the unpooled sidecars have counted
# (slot to response end, as the decider reads them), summed. (The pooled sidecars
# also count the requests they relay for the front, which their app does not serve.)
served() {
	stats "${radmins[@]}" | python3 -c '
import json, sys
s = n = 0
for line in sys.stdin:
    if line.strip():
        d = json.loads(line)
        s += d["service_seconds_sum"]
        n += d["completions"]
print(s, n)'
}
declare -A p50 p95 late noq
svc_s=0 svc_n=0
for round in $(seq "$ROUNDS"); do
	for cfg in random pooled; do
		report "$cfg" >/dev/null
		if [ "$cfg" = random ]; then read -r s0 n0 < <(served); fi
		"$work/qas-loadgen" --target "http://127.0.0.1:${lb[$cfg]}" --path "/work?sleep=${SERVICE_MS}ms&dist=exp" \
			--trace "$work/trace" --seed "$round" --interval 1h --max-in-flight 5000 >"$work/loadgen-$cfg-$round" 2>&1
		read -r n a b c f < <(report "$cfg")
		p50[$cfg]="${p50[$cfg]:-} $a" p95[$cfg]="${p95[$cfg]:-} $b" late[$cfg]="${late[$cfg]:-} $c"
		if [ "$cfg" = random ]; then
			read -r s1 n1 < <(served)
			svc_s=$(awk -v a="$svc_s" -v b="$s0" -v c="$s1" 'BEGIN{print a+c-b}')
			svc_n=$(awk -v a="$svc_n" -v b="$n0" -v c="$n1" 'BEGIN{print a+c-b}')
		fi
		echo "round $round $cfg: $n ok, $f failed, p50 ${a}s p95 ${b}s late $c" >&2
		sleep 2 # let the queues empty
	done
	for cfg in random pooled; do
		report "$cfg" >/dev/null
		"$work/qas-loadgen" --target "http://127.0.0.1:${lb[$cfg]}" --path "/work?sleep=0" --rate "$NOQ_RATE" \
			--duration "${NOQ_SECS}s" --seed "$round" --interval 1h >/dev/null 2>&1
		read -r n a _ _ _ < <(report "$cfg")
		noq[$cfg]="${noq[$cfg]:-} $a"
	done
done
fstats=$(curl -fsS "http://127.0.0.1:$fadmin/stats")

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
m() { local -n arr=$1; echo "${arr[$2]}" | median; }
printf '\npooling benchmark: %d pods, k = 1, exp service %d ms, load %.0f/s (ρ %.2f) then %d× for %ds, SLO %s, %d rounds, loopback, %s cores\n' \
	"$PODS" "$SERVICE_MS" "$base_rate" "$BASE_RHO" "$BURST" "$BURST_S" "$SLO" "$ROUNDS" "$(nproc)"
printf '%-8s %10s %10s %10s\n' config "p50 ms" "p95 ms" "late %"
for cfg in random pooled; do
	printf '%-8s %10.1f %10.1f %10.2f\n' "$cfg" "$(m p50 "$cfg" | awk '{print $1*1000}')" "$(m p95 "$cfg" | awk '{print $1*1000}')" \
		"$(m late "$cfg" | awk '{print $1*100}')"
done
printf 'pooled/random: p50 %.2fx, p95 %.2fx, late %.2fx\n' \
	"$(awk -v a="$(m p50 pooled)" -v b="$(m p50 random)" 'BEGIN{print (b>0?a/b:0)}')" \
	"$(awk -v a="$(m p95 pooled)" -v b="$(m p95 random)" 'BEGIN{print (b>0?a/b:0)}')" \
	"$(awk -v a="$(m late pooled)" -v b="$(m late random)" 'BEGIN{print (b>0?a/b:0)}')"
printf 'no queue (%d/s of /work?sleep=0 for %ds): p50 random %.0f µs, pooled %.0f µs, added %+.0f µs\n' "$NOQ_RATE" "$NOQ_SECS" \
	"$(m noq random | awk '{print $1*1e6}')" "$(m noq pooled | awk '{print $1*1e6}')" \
	"$(awk -v a="$(m noq pooled)" -v b="$(m noq random)" 'BEGIN{print (a-b)*1e6}')"
stats "${padmins[@]}" | python3 -c '
import json, sys
t = {}
for line in sys.stdin:
    if line.strip():
        for k, v in json.loads(line)["pool"].items():
            if isinstance(v, int):
                t[k] = t.get(k, 0) + v
print("pooled sidecars: " + ", ".join("%s %d" % kv for kv in sorted(t.items())))'
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (the pooled path has more hops: on a machine short of CPU each pays a scheduling delay)"
echo "front: $(echo "$fstats" | python3 -c 'import json,sys; f=json.load(sys.stdin)["front"]; print("accepted %d, dispatched %d, expired %d, refused full %d" % (f["accepted"], f["dispatched"], f["expired"], f["refused_full"]))')"

# The simulator on the same trace (qas-decider simulate: static pods, Poisson arrivals
# at each second's rate, seeds 1..SIM_SEEDS, medians), beside the live figures: once
# with the nominal service time and the simulator's default hop, once with what this
# run measured: the unpooled sidecars' mean service time (served: the sleep plus the
# proxy's and the app's own time) and, for the overflow plane, a hop of half the median
# overflow decision (a round trip to the front).
decision=$(stats "${padmins[@]}" | python3 -c '
import json, sys
bounds, counts = None, None
for line in sys.stdin:
    if line.strip():
        h = json.loads(line)["pool"]["overflow_decision"]
        bounds = h["bounds"]
        counts = [a + b for a, b in zip(counts, h["counts"])] if counts else list(h["counts"])
n = sum(counts or [])
if n == 0:
    print(0)
    sys.exit()
rank, cum = n / 2, 0
for i, c in enumerate(counts):
    if c and cum + c >= rank:
        lo = bounds[i - 1] if i > 0 else 0
        hi = bounds[i] if i < len(bounds) else bounds[-1]
        print(lo + (hi - lo) * (rank - cum) / c)
        break
    cum += c')
measured=$(awk -v s="$svc_s" -v n="$svc_n" 'BEGIN{printf "%.6f", (n>0 ? s/n : 0)}')
hop=$(awk -v d="$decision" 'BEGIN{printf "%.6f", d/2}')
# simulated ROUTING SERVICE_S HOP_S: the medians over the seeds of p50, p95 (seconds)
# and the late share (%).
simulated() {
	local r
	for r in $(seq "$SIM_SEEDS"); do
		"$work/qas-decider" simulate --trace "$work/trace" --policies "static:$PODS" --initial-replicas "$PODS" \
			--routing "$1" --service "exp:${2}s" --hop "${3}s" --slo "$SLO" --concurrency 1 \
			--scaling poisson --poisson-window 1s --seed "$r" --json "$work/sim.json" >/dev/null
		python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["policies"][0]; print(p["latency_seconds"]["p50"], p["latency_seconds"]["p95"], p["requests_over_target_pct"])' "$work/sim.json"
	done | python3 -c '
import statistics as st, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print(*(st.median(c) for c in zip(*rows)))'
}
nominal=$(awk -v s="$SERVICE_MS" 'BEGIN{printf "%.6f", s/1000}')
printf '\nsimulated on the same trace (%d seeds, medians), against the live figures above:\n' "$SIM_SEEDS"
printf '%-40s %10s %10s %10s\n' "simulation" "p50 ms" "p95 ms" "late %"
for row in "random nominal" "overflow nominal" "random measured" "overflow measured"; do
	read -r routing which <<<"$row"
	if [ "$which" = nominal ]; then
		svc=$nominal h=0.0005
	else
		svc=$measured h=$hop
	fi
	[ "$routing" = random ] && h=0
	read -r a b c < <(simulated "$routing" "$svc" "$h")
	printf '%-40s %10.1f %10.1f %10.2f\n' "$(printf '%s, service %.1f ms, hop %.2f ms' "$routing" "$(awk -v s="$svc" 'BEGIN{print s*1000}')" "$(awk -v h="$h" 'BEGIN{print h*1000}')")" \
		"$(awk -v a="$a" 'BEGIN{print a*1000}')" "$(awk -v b="$b" 'BEGIN{print b*1000}')" "$c"
done
