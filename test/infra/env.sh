#!/usr/bin/env bash
# Usage: test/infra/env.sh COMMAND...
#
# Makes sure every external tool the tests need is installed or built (once, into
# $QAS_CACHE, keyed by version), exports where each one is, and runs COMMAND with
# QAS_INTEGRATION=required so that an integration test whose tool is missing fails
# instead of skipping.
#
# Each test/infra/need-*.sh is sourced in turn; it installs one tool and exports its
# variables (for example QAS_INFLUXD=/path/to/influxd). They use the helpers below.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export QAS_CACHE="${QAS_CACHE:-$HOME/.cache/qas}"
mkdir -p "$QAS_CACHE"
export QAS_SHARED="${QAS_SHARED:-$(cd "$here/../../.." && pwd)/shared}"

log() { echo "infra: $*" >&2; }

# apt_install PKG... installs Debian packages that are missing, running apt-get update once.
apt_install() {
	local missing=()
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "apt-get install ${missing[*]}"
	if [ ! -f "$QAS_CACHE/.apt-updated" ] || [ -n "$(find "$QAS_CACHE/.apt-updated" -mmin +1440 2>/dev/null)" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
		touch "$QAS_CACHE/.apt-updated"
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

shopt -s nullglob
for need in "$here"/need-*.sh; do
	# shellcheck source=/dev/null
	source "$need"
done

export QAS_INTEGRATION=required
[ $# -gt 0 ] || { echo "usage: $0 COMMAND..." >&2; exit 2; }
exec "$@"
