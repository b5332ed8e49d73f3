# shellcheck shell=bash
# Sourced by test/infra/env.sh: InfluxDB OSS 1.8.10 built from the Go module proxy (the
# newest release that builds without Rust; it serves the /api/v2 write and Flux query
# endpoints influxdb-client-go/v2 uses). About 2 minutes cold. Exports QAS_INFLUXD.
QAS_INFLUXD="$(go_install_cached influxd 1.8.10 github.com/influxdata/influxdb/cmd/influxd@v1.8.10 -ldflags "-X main.version=1.8.10")"
export QAS_INFLUXD
