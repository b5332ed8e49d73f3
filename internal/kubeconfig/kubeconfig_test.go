package kubeconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(good, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: secret-token}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`), 0o600))
	cfg, err := Load(good)
	require.NoError(t, err)
	require.Equal(t, "https://127.0.0.1:6443", cfg.Host)
	require.Equal(t, "secret-token", cfg.BearerToken)

	missing := filepath.Join(dir, "missing")
	_, err = Load(missing)
	require.ErrorContains(t, err, "set --kubeconfig outside a cluster")
	require.ErrorContains(t, err, missing)

	// Outside a pod there is no in-cluster configuration.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err = Load("")
	require.ErrorContains(t, err, "set --kubeconfig outside a cluster")
	require.ErrorContains(t, err, "unable to load in-cluster configuration")
}
