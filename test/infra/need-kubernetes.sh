# shellcheck shell=bash
# Sourced by test/infra/env.sh. Builds, once, a real Kubernetes control plane from the Go
# module proxy (no containers, no prebuilt downloads) and kwok, the fake kubelet:
#   $QAS_CACHE/kubernetes-v1.36.3/bin/{kube-apiserver,kube-scheduler,kube-controller-manager,kubectl,etcd}
#   $QAS_CACHE/kwok-v0.8.0/kwok
# and exports QAS_KUBE_BIN (the bin directory) and QAS_KWOK.
#
# go install refuses k8s.io/kubernetes because of its replace directives, so a throwaway
# module requires it and replaces every staging module with its v0.x release
# (shared/recipes/kubernetes.md). About 12 minutes cold on 2 cores; seconds when cached.
qas_k8s_version=1.36.3
qas_kwok_version=0.8.0
qas_k8s_dir="$QAS_CACHE/kubernetes-v$qas_k8s_version"
qas_k8s_bins=(kube-apiserver kube-scheduler kube-controller-manager kubectl etcd)

qas_k8s_built() {
	local b
	for b in "${qas_k8s_bins[@]}"; do [ -x "$qas_k8s_dir/bin/$b" ] || return 1; done
	"$qas_k8s_dir/bin/kube-apiserver" --version 2>/dev/null | grep -q "v$qas_k8s_version"
}

if ! qas_k8s_built; then
	log "building Kubernetes v$qas_k8s_version binaries into $qas_k8s_dir (once; ~12 min cold)"
	qas_src="$qas_k8s_dir/src"
	mkdir -p "$qas_src" "$qas_k8s_dir/bin"
	printf 'module k8sbins\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v%s\n' "$qas_k8s_version" >"$qas_src/go.mod"
	(cd "$qas_src" && go mod download k8s.io/kubernetes@v$qas_k8s_version) >&2
	qas_mod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$qas_k8s_version.mod"
	{
		echo "replace ("
		sed -n '/^replace/,/^)/p' "$qas_mod" | awk -v v="v0.${qas_k8s_version#1.}" '/=>/{print "\t"$1" => "$1" "v}'
		echo ")"
	} >>"$qas_src/go.mod"
	qas_ld="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		qas_ld="$qas_ld -X $p.gitVersion=v$qas_k8s_version -X $p.gitMajor=1 -X $p.gitMinor=36"
	done
	(cd "$qas_src" && GOFLAGS=-mod=mod go build -ldflags "$qas_ld" -o "$qas_k8s_dir/bin/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl &&
		GOFLAGS=-mod=mod go build -ldflags "-s -w" -o "$qas_k8s_dir/bin/etcd" go.etcd.io/etcd/server/v3) >&2
	qas_k8s_built || { log "Kubernetes build did not produce working binaries"; return 1; }
fi
export QAS_KUBE_BIN="$qas_k8s_dir/bin"
QAS_KWOK="$(go_install_cached kwok "v$qas_kwok_version" "sigs.k8s.io/kwok/cmd/kwok@v$qas_kwok_version" -ldflags "-s -w")"
export QAS_KWOK
unset qas_src qas_mod qas_ld p
# kwok's stage YAMLs (node and pod lifecycles) come from its module; kubetest adapts them.
QAS_KWOK_STAGES="$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$qas_kwok_version/kustomize/stage"
[ -d "$QAS_KWOK_STAGES" ] || (cd "$QAS_CACHE" && GOFLAGS=-mod=mod go mod download "sigs.k8s.io/kwok@v$qas_kwok_version") >&2
export QAS_KWOK_STAGES
