// Package version tests, on real processes, that the version a release build stamps
// into the binaries (the Dockerfiles' -ldflags "-X
// github.com/qas-dev/qas/internal/version.Version=${VERSION}") reaches the user: every
// binary's --version, the start-up log line of each server, and the
// qas_*_build_info metric on each /metrics. The collector and the decider run against
// a real kube-apiserver and InfluxDB: run the tests through test/infra/env.sh.
package version
