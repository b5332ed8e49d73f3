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
# shellcheck source=lib.sh
source "$here/lib.sh"

shopt -s nullglob
# One installer at a time per cache: concurrent `make test` runs (or parallel shells)
# would otherwise build the same tool into the same directory at once.
exec 9>"$QAS_CACHE/.install.lock"
flock 9
for need in "$here"/need-*.sh; do
	# shellcheck source=/dev/null
	source "$need"
done
flock -u 9
exec 9>&-

export QAS_INTEGRATION=required
[ $# -gt 0 ] || { echo "usage: $0 COMMAND..." >&2; exit 2; }
exec "$@"
