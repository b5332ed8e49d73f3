package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	proxyapp "github.com/qas-dev/qas/proxy/app"
)

func TestFrontConfigValidate(t *testing.T) {
	require.NoError(t, DefaultFrontConfig().Validate())
	for _, tt := range []struct {
		name string
		mod  func(*FrontConfig)
		want string
	}{
		{"no image", func(f *FrontConfig) { f.Image = "" }, "front image"},
		{"no replica", func(f *FrontConfig) { f.Replicas = 0 }, "front replicas 0"},
		{"port out of range", func(f *FrontConfig) { f.Port = 70000 }, "port numbers"},
		{"ports collide", func(f *FrontConfig) { f.Port = f.AdminPort }, "both 9901"},
		{"bad pull secret", func(f *FrontConfig) { f.ImagePullSecrets = []string{"Not_A_Name"} }, `pull secret "Not_A_Name"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := DefaultFrontConfig()
			tt.mod(&f)
			require.ErrorContains(t, f.Validate(), tt.want)
		})
	}
}

// TestFrontDeploymentHash: the hash that decides whether the front is rewritten
// changes with what the decider writes, and only with it.
func TestFrontDeploymentHash(t *testing.T) {
	base := hashOf(FrontDeployment("shop", "web", DefaultFrontConfig()))
	require.Equal(t, base, hashOf(FrontDeployment("shop", "web", DefaultFrontConfig())), "deterministic")
	for _, mod := range []func(*FrontConfig){
		func(f *FrontConfig) { f.Image = "other:1" },
		func(f *FrontConfig) { f.Replicas = 3 },
		func(f *FrontConfig) {
			f.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		},
		func(f *FrontConfig) { f.NodeSelector = map[string]string{"pool": "edge"} },
	} {
		f := DefaultFrontConfig()
		mod(&f)
		require.NotEqual(t, base, hashOf(FrontDeployment("shop", "web", f)))
	}
	// The front's pods: scraped by the collector as web's front, skipped by the webhook.
	d := FrontDeployment("shop", "web", DefaultFrontConfig())
	labels := d.Spec.Template.Labels
	require.Equal(t, "web", labels["qas.dev/front-of"])
	require.Equal(t, "true", labels["qas.dev/inject"])
	require.Equal(t, "true", d.Spec.Template.Annotations["qas.dev/injected"])
	require.Equal(t, FrontContainerName, d.Spec.Template.Spec.Containers[0].Name)
	require.Subset(t, labels, d.Spec.Selector.MatchLabels)
}

// TestFrontArgsPassTheProxysValidation: the front's command line is one qas-proxy
// accepts in front mode (the contract with proxy/app, checked on its own parser).
func TestFrontArgsPassTheProxysValidation(t *testing.T) {
	d := FrontDeployment("shop", "web", DefaultFrontConfig())
	f, err := proxyapp.Parse(d.Spec.Template.Spec.Containers[0].Args, func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, proxyapp.ModeFront, f.Mode)
	require.Equal(t, "web", f.Workload)
	require.Equal(t, "/var/run/qas/pool/key", f.PoolSecretFile)
	require.Equal(t, ":9902", f.Listen)
}
