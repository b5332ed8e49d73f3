#!/usr/bin/env bash
# qas-proxy benchmark (make bench): the example app's 100-byte endpoint served directly,
# through qas-proxy (its default HTTP/1.1 fast path on one CPU; again as qas-procs2 with
# --procs 2; and as qas-general with --fast-path=false, the net/http path that h2c and
# Upgrades always take), through a bare
# pooled httputil.ReverseProxy, and through nginx as a keep-alive reverse proxy,
# interleaved and
# repeated, all on loopback. Reports medians and ratios, measured in this run:
#   1. closed loop, wrk -t2 -c64: throughput;
#   2. fixed 2000 req/s, fortio: p50/p90/p99 latency and the proxy's CPU per request
#      (utime+stime from /proc, all nginx processes summed).
# No timing is asserted anywhere: this prints numbers for people to read.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=../infra/lib.sh
source "$root/test/infra/lib.sh"
apt_install wrk nginx-light strace
fortio=$(go_install_cached fortio 1.68.2 fortio.org/fortio@v1.68.2)
ROUNDS=${ROUNDS:-3} SECS=${SECS:-8}
# BASELINE_SRC: another checkout of the repository (an older commit); its qas-proxy
# runs as the configuration qas-before, interleaved with the others in every round,
# so a change's cost is a ratio measured in the same run.
BASELINE_SRC=${BASELINE_SRC:-}

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
(cd "$root" && go build -o "$work/" ./proxy/cmd/qas-proxy ./examples/app/cmd/qas-example-app ./test/bench/reverseproxy)
app=$(free_port) proxy=$(free_port) admin=$(free_port) nginx=$(free_port) rp=$(free_port)
general=$(free_port) gadmin=$(free_port) procs2=$(free_port) padmin=$(free_port)
configs="direct qas-proxy qas-procs2 qas-general reverseproxy nginx"
if [ -n "$BASELINE_SRC" ]; then
	mkdir -p "$work/before"
	(cd "$BASELINE_SRC" && go build -o "$work/before/" ./proxy/cmd/qas-proxy)
	configs="direct qas-proxy qas-before qas-procs2 qas-general reverseproxy nginx"
fi
"$work/qas-example-app" --listen "127.0.0.1:$app" & pids+=($!)
wait_port "$app"
"$work/qas-proxy" --listen "127.0.0.1:$proxy" --admin-listen "127.0.0.1:$admin" --upstream "127.0.0.1:$app" --log-level error & 
proxy_pid=$!; pids+=($proxy_pid)
wait_port "$proxy"
"$work/qas-proxy" --fast-path=false --listen "127.0.0.1:$general" --admin-listen "127.0.0.1:$gadmin" --upstream "127.0.0.1:$app" --log-level error &
general_pid=$!; pids+=($general_pid)
wait_port "$general"
"$work/qas-proxy" --procs 2 --listen "127.0.0.1:$procs2" --admin-listen "127.0.0.1:$padmin" --upstream "127.0.0.1:$app" --log-level error &
procs2_pid=$!; pids+=($procs2_pid)
wait_port "$procs2"
before=$(free_port) badmin=$(free_port) before_pid=
if [ -n "$BASELINE_SRC" ]; then
	"$work/before/qas-proxy" --listen "127.0.0.1:$before" --admin-listen "127.0.0.1:$badmin" --upstream "127.0.0.1:$app" --log-level error &
	before_pid=$!; pids+=($before_pid)
	wait_port "$before"
fi
"$work/reverseproxy" "127.0.0.1:$rp" "127.0.0.1:$app" &
rp_pid=$!; pids+=($rp_pid)
wait_port "$rp"
cat >"$work/nginx.conf" <<CONF
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/body; proxy_temp_path $work/proxy; fastcgi_temp_path $work/fcgi;
  uwsgi_temp_path $work/uwsgi; scgi_temp_path $work/scgi;
  upstream app { server 127.0.0.1:$app; keepalive 128; }
  server {
    listen 127.0.0.1:$nginx;
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
nginx -c "$work/nginx.conf" -p "$work"
wait_port "$nginx"

hz=$(getconf CLK_TCK)
declare -A port=([direct]=$app [qas-proxy]=$proxy [qas-before]=$before [qas-procs2]=$procs2 [qas-general]=$general [reverseproxy]=$rp [nginx]=$nginx)
cpu_ns() { # CPU time of the configuration's server processes so far, in ns
	local pids_of
	case $1 in
	qas-proxy) pids_of=$proxy_pid ;;
	qas-before) pids_of=$before_pid ;;
	qas-general) pids_of=$general_pid ;;
	qas-procs2) pids_of=$procs2_pid ;;
	reverseproxy) pids_of=$rp_pid ;;
	nginx) pids_of="$(cat "$work/nginx.pid") $(pgrep -P "$(cat "$work/nginx.pid")" | tr '\n' ' ')" ;;
	*) echo 0; return ;;
	esac
	# Every thread's run time from schedstat (ns; Go's threads and nginx's workers live
	# as long as the run), so that a round's few hundred ms of CPU is not rounded to
	# clock ticks (10 ms, 2 % of a round); utime+stime in ticks where there is none.
	local sum=0 p t
	for p in $pids_of; do
		if [ -r "/proc/$p/schedstat" ]; then
			for t in /proc/"$p"/task/*/schedstat; do sum=$((sum + $(cut -d' ' -f1 "$t" 2>/dev/null || echo 0))); done
		else
			sum=$((sum + $(awk -v ns=$((1000000000 / hz)) '{print ($14 + $15) * ns}' "/proc/$p/stat")))
		fi
	done
	echo "$sum"
}
url() { echo "http://127.0.0.1:${port[$1]}/bytes?n=100"; }

declare -A rps p50 p90 p99 cpu
for round in $(seq "$ROUNDS"); do
	# Odd rounds run the configurations in order, even rounds in reverse: a fixed order
	# biased the comparison (the same binary as its own baseline came out 16 % slower at
	# p50 when measured second), and alternating cancels the position in the medians.
	order=$configs
	if [ $((round % 2)) -eq 0 ]; then order=$(echo "$configs" | tr ' ' '\n' | tac | tr '\n' ' '); fi
	for cfg in $order; do
		r=$(wrk -t2 -c64 -d"${SECS}s" "$(url "$cfg")" | awk '/Requests\/sec/ {print $2}')
		rps[$cfg]="${rps[$cfg]:-} $r"
		before=$(cpu_ns "$cfg")
		out=$("$fortio" load -quiet -qps 2000 -c 32 -t "${SECS}s" -r 0.00001 "$(url "$cfg")" 2>&1)
		after=$(cpu_ns "$cfg")
		n=$(echo "$out" | awk '/^All done/ {print $3}')
		for q in 50 90 99; do
			# Only the response-time histogram: under load fortio first prints a sleep-time
			# histogram ("Aggregated Sleep Time") with percentiles of its own.
			v=$(echo "$out" | awk -v q="$q" '/^Aggregated Function Time/ {f=1} f && !done && $1=="#" && $2=="target" && $3==q"%" {print $4; done=1}')
			eval "p$q[\$cfg]=\"\${p$q[\$cfg]:-} $v\""
		done
		cpu[$cfg]="${cpu[$cfg]:-} $(awk -v t=$((after - before)) -v n="$n" 'BEGIN { printf "%.9f", (n > 0 ? t / 1e9 / n : 0) }')"
		echo "round $round $cfg: wrk ${r} req/s; fortio ${n} requests" >&2
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
ratio() { # ratio NAME_A NAME_B ARRAY: A's median over B's (0 if B's is 0)
	local -n arr=$3
	awk -v a="$(echo "${arr[$1]}" | median)" -v b="$(echo "${arr[$2]}" | median)" 'BEGIN{print (b>0 ? a/b : 0)}'
}
printf '\nqas-proxy benchmark: %d interleaved rounds of %ds, example app /bytes?n=100, loopback, %s cores\n' "$ROUNDS" "$SECS" "$(nproc)"
printf '%-12s %14s %10s %10s %10s %10s %14s\n' config "wrk -c64 rps" "vs direct" "p50 µs" "p90 µs" "p99 µs" "CPU µs/req"
for cfg in $configs; do
	printf '%-12s %14.0f %9.2fx %10.0f %10.0f %10.0f %14s\n' "$cfg" "$(echo "${rps[$cfg]}" | median)" "$(ratio "$cfg" direct rps)" \
		"$(echo "${p50[$cfg]}" | median | awk '{print $1*1e6}')" "$(echo "${p90[$cfg]}" | median | awk '{print $1*1e6}')" \
		"$(echo "${p99[$cfg]}" | median | awk '{print $1*1e6}')" \
		"$( [ "$cfg" = direct ] && echo - || echo "${cpu[$cfg]}" | median | awk '{printf "%.1f", $1*1e6}')"
done
pp50=$(echo "${p50[qas-proxy]}" | median); np50=$(echo "${p50[nginx]}" | median); dp50=$(echo "${p50[direct]}" | median)
printf '\nadded p50 at 2000 req/s: qas-proxy %+.0f µs, nginx %+.0f µs\n' "$(awk -v a="$pp50" -v b="$dp50" 'BEGIN{print (a-b)*1e6}')" "$(awk -v a="$np50" -v b="$dp50" 'BEGIN{print (a-b)*1e6}')"
printf 'qas-proxy vs bare ReverseProxy: throughput %.2fx, CPU per request %.2fx\n' \
	"$(ratio qas-proxy reverseproxy rps)" "$(ratio qas-proxy reverseproxy cpu)"
printf 'qas-proxy vs nginx: throughput %.2fx, CPU per request %.2fx\n' "$(ratio qas-proxy nginx rps)" "$(ratio qas-proxy nginx cpu)"
# The same ratios taken within each round (configurations measured minutes apart on a
# shared machine drift together), then the median over rounds.
paired() { # paired NAME_A NAME_B ARRAY: median over rounds of A/B
	local -n arr=$3
	paste <(echo "${arr[$1]}" | tr ' ' '\n' | grep -v '^$') <(echo "${arr[$2]}" | tr ' ' '\n' | grep -v '^$') |
		awk '$2 > 0 {print $1 / $2}' | median
}
printf 'per-round medians: qas-proxy/nginx throughput %.2fx, CPU per request %.2fx; qas-proxy/direct throughput %.2fx; qas-procs2/qas-proxy CPU per request %.2fx, throughput %.2fx\n' \
	"$(paired qas-proxy nginx rps)" "$(paired qas-proxy nginx cpu)" "$(paired qas-proxy direct rps)" \
	"$(paired qas-procs2 qas-proxy cpu)" "$(paired qas-procs2 qas-proxy rps)"
if [ -n "$BASELINE_SRC" ]; then
	printf 'qas-proxy vs qas-before (%s): throughput %.2fx, CPU per request %.2fx, p50 %.2fx, p99 %.2fx; per-round throughput %.2fx, CPU per request %.2fx\n' \
		"$(cd "$BASELINE_SRC" && git rev-parse --short HEAD 2>/dev/null || echo "$BASELINE_SRC")" \
		"$(ratio qas-proxy qas-before rps)" "$(ratio qas-proxy qas-before cpu)" "$(ratio qas-proxy qas-before p50)" "$(ratio qas-proxy qas-before p99)" \
		"$(paired qas-proxy qas-before rps)" "$(paired qas-proxy qas-before cpu)"
	printf 'qas-before vs nginx: throughput %.2fx, CPU per request %.2fx; vs bare ReverseProxy: throughput %.2fx, CPU per request %.2fx\n' \
		"$(ratio qas-before nginx rps)" "$(ratio qas-before nginx cpu)" "$(ratio qas-before reverseproxy rps)" "$(ratio qas-before reverseproxy cpu)"
fi

# System calls per request, counted (strace -c -f) while fortio sends 1000 req/s for
# 5 s: unlike CPU time they do not move with the machine's load. A change that adds a
# system call to every request shows here even when CPU time cannot resolve it.
syscalls() { # syscalls CFG: prints "total name=calls..." per request
	local pid_of=$1 port_of=$2 out=$work/strace.$1 n
	"$fortio" load -quiet -qps 1000 -c 32 -t 2s "http://127.0.0.1:$port_of/bytes?n=100" >/dev/null 2>&1 # warm the pool
	strace -c -f -p "$pid_of" -o "$out" 2>/dev/null &
	local tracer=$!
	sleep 0.5
	n=$("$fortio" load -quiet -qps 1000 -c 32 -t 5s "http://127.0.0.1:$port_of/bytes?n=100" 2>&1 | awk '/^All done/ {print $3}')
	sleep 0.3
	kill -INT "$tracer" 2>/dev/null || true
	wait "$tracer" 2>/dev/null || true
	awk -v n="$n" '$4 ~ /^[0-9]+$/ && $NF != "total" && $4 / n >= 0.05 {s = s sprintf(" %s=%.2f", $NF, $4 / n)} $NF == "total" {t = $4 / n} END {printf "%.2f (%s )", t, s}' "$out"
}
if command -v strace >/dev/null; then
	printf '\nsystem calls per request at 1000 req/s (strace -c -f, 5 s; calls of at least 0.05 per request named):\n'
	printf '  qas-proxy  %s\n' "$(syscalls "$proxy_pid" "$proxy")"
	if [ -n "$BASELINE_SRC" ]; then
		printf '  qas-before %s\n' "$(syscalls "$before_pid" "${port[qas-before]}")"
	fi
fi
