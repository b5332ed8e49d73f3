// Package injecttest registers and runs the sidecar-injection webhook against a real
// apiserver (internal/testenv/kubetest) for the tests of decider/inject and
// decider/e2e: registered as the Helm chart registers it, and run as `qas-decider
// webhook` runs it.
package injecttest

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// Register points a MutatingWebhookConfiguration for the pods of ns at url as the
// chart registers the webhook: webhook inject.qas.dev, the chart's default
// objectSelector (every pod not labelled qas.dev/inject=false) and failurePolicy
// Ignore. It returns the configuration's name; the configuration is deleted when t
// ends.
func Register(t testing.TB, c *kubetest.Cluster, ns, url string) string {
	t.Helper()
	ignore := admissionregistrationv1.Ignore
	name := "qas-inject-" + ns
	c.RegisterPodWebhook(t, ns, name, admissionregistrationv1.MutatingWebhook{
		Name:           "inject.qas.dev",
		ClientConfig:   admissionregistrationv1.WebhookClientConfig{URL: &url},
		ObjectSelector: inject.DefaultObjectSelector(),
		FailurePolicy:  &ignore,
	})
	return name
}

// Start registers the webhook for the pods of ns (Register) and runs it as
// `qas-decider webhook` runs it on a free loopback port, with a self-managed
// certificate for 127.0.0.1 that it keeps in a Secret in ns and in the registration's
// caBundle; args are further flags. It returns the MutatingWebhookConfiguration's name
// and the port. The webhook stops when t ends, and must stop without error. The
// apiserver calls it only once the registration reaches its admission chain
// (asynchronously), so the first pods may be admitted unchanged.
func Start(t testing.TB, c *kubetest.Cluster, ns string, args ...string) (webhookConfig string, port int) {
	t.Helper()
	port = testenv.FreePort(t)
	webhookConfig = Register(t, c, ns, fmt.Sprintf("https://127.0.0.1:%d/mutate", port))
	var o inject.Options
	args = append([]string{
		"--kubeconfig=" + c.Kubeconfig, "--namespace=" + ns, "--webhook-config=" + webhookConfig,
		"--dns-names=127.0.0.1", fmt.Sprintf("--listen=127.0.0.1:%d", port),
	}, args...)
	if err := cli.Parse(o.FlagSet(), inject.EnvPrefix, args, func(string) string { return "" }); err != nil {
		t.Fatalf("webhook flags %v: %v", args, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inject.Run(ctx, o, zap.NewNop()) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("webhook: %v", err)
		}
	})
	return webhookConfig, port
}
