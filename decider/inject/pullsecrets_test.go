package inject

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/qas-dev/qas/proxy/sidecar"
)

func TestMutateAddsImagePullSecrets(t *testing.T) {
	refs := func(names ...string) []corev1.LocalObjectReference {
		var out []corev1.LocalObjectReference
		for _, n := range names {
			out = append(out, corev1.LocalObjectReference{Name: n})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		configured []string
		pod, want  []corev1.LocalObjectReference
	}{
		{"none configured", nil, refs("app-registry"), refs("app-registry")},
		{"pod has none", []string{"proxy-registry"}, nil, refs("proxy-registry")},
		{"pod keeps its own, first", []string{"proxy-registry", "mirror"}, refs("app-registry"), refs("app-registry", "proxy-registry", "mirror")},
		{"already there", []string{"app-registry"}, refs("app-registry"), refs("app-registry")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.ImagePullSecrets = tc.configured
			got, res := apply(t, c, appPod(func(p *corev1.Pod) { p.Spec.ImagePullSecrets = tc.pod }))
			require.Empty(t, res.Skip)
			require.NotNil(t, container(got, sidecar.ContainerName), "injected")
			require.Equal(t, tc.want, got.Spec.ImagePullSecrets)
		})
	}
	// A pod that is not injected gets no pull secrets either.
	c := DefaultConfig()
	c.ImagePullSecrets = []string{"proxy-registry"}
	got, res := apply(t, c, appPod(func(p *corev1.Pod) { p.Labels = nil }))
	require.NotEmpty(t, res.Skip)
	require.Empty(t, got.Spec.ImagePullSecrets)
}
