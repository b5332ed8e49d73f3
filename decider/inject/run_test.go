package inject_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qas-dev/qas/decider/certs"
	"github.com/qas-dev/qas/decider/inject/injecttest"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"defaults", nil, ""},
		{"bad admin port", []string{"--admin-port=0"}, "admin-port"},
		{"no image", []string{"--proxy-image="}, "proxy-image"},
		{"no secret", []string{"--secret="}, "secret"},
		{"no names", []string{"--dns-names= , "}, "dns-names"},
		{"cert-manager needs no secret", []string{"--cert-dir=/x", "--secret=", "--dns-names="}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := parseOptions(t, tc.args...)
			err := o.Validate()
			if tc.flag == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, cli.IsUsage(err), "%v", err)
			require.Contains(t, err.Error(), "--"+tc.flag)
		})
	}
}

// TestRunSelfManaged runs the webhook process logic against the real apiserver: it
// creates the Secret, fills the caBundle and serves with that certificate.
func TestRunSelfManaged(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hookName, port := injecttest.Start(t, c, ns)

	var sec map[string][]byte
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, "qas-webhook-tls", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		sec = s.Data
		return true, nil
	})
	require.NoError(t, err, "the Secret was not created")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(sec[certs.KeyCACert]))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	require.NoError(t, err, "the webhook did not serve with the Secret's certificate")
	hook, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, hookName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, sec[certs.KeyCACert], hook.Webhooks[0].ClientConfig.CABundle)
}
