#!/usr/bin/env bash
# Shared helpers for test/infra/*.sh and test/bench/*.sh. Source it; don't run it.
export QAS_CACHE="${QAS_CACHE:-$HOME/.cache/qas}"
mkdir -p "$QAS_CACHE"
_qas_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export QAS_SHARED="${QAS_SHARED:-$(cd "$_qas_lib_dir/../../.." && pwd)/shared}"

log() { echo "infra: $*" >&2; }

# apt_install PKG... installs Debian packages that are missing, running apt-get update
# at most once a day.
apt_install() {
	local missing=()
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "apt-get install ${missing[*]}"
	if [ ! -f "$QAS_CACHE/.apt-updated" ] || [ -n "$(find "$QAS_CACHE/.apt-updated" -mmin +1440 2>/dev/null)" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 update -qq >&2
		touch "$QAS_CACHE/.apt-updated"
	fi
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# go_install_cached NAME VERSION PKG@VERSION [go install flags...] installs a Go command
# into $QAS_CACHE/NAME-VERSION/ once and prints the binary's path.
go_install_cached() {
	local name=$1 version=$2 pkg=$3
	shift 3
	local dir="$QAS_CACHE/$name-$version"
	if [ ! -x "$dir/$name" ]; then
		log "building $name $version into $dir (once)"
		mkdir -p "$dir"
		GOBIN="$dir" GOFLAGS=-buildvcs=false go install "$@" "$pkg" >&2
	fi
	echo "$dir/$name"
}

# free_port prints a loopback TCP port nothing listens on (a moment ago).
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}

# wait_port PORT waits up to 10 s for something to listen on 127.0.0.1:PORT.
wait_port() {
	local _
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "nothing listens on 127.0.0.1:$1" >&2
	return 1
}
