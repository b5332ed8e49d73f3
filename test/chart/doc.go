// Package chart holds the tests of the Helm chart (charts/qas), its dashboards, the
// Dockerfiles and the example manifests: rendering and schema checks with the real
// helm binary, and an install into a real control plane (kube-apiserver, etcd,
// scheduler, controller-manager and kwok) with the real qas-decider running against
// it. Run them through test/infra/env.sh, which builds helm ($QAS_HELM) and the rest.
package chart
