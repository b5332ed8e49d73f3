package inject_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qas-dev/qas/decider/inject/injecttest"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/sidecar"
)

func TestProxyFlagsValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // substring of the error; empty = valid
	}{
		{[]string{`--proxy-resources={"requests":{"cpu":"100m"},"limits":{"memory":"64Mi"}}`}, ""},
		{[]string{`--proxy-resources=`}, ""},
		{[]string{`--proxy-image-pull-secrets=regcred, mirror-cred`}, ""},
		{[]string{`--proxy-resources={"requests":{"cpu":"lots"}}`}, "--proxy-resources"},
		{[]string{`--proxy-resources={"request":{"cpu":"1"}}`}, `unknown field "request"`},
		{[]string{`--proxy-resources=cpu=1`}, "--proxy-resources"},
		{[]string{`--proxy-resources={"limits":{}} {}`}, "trailing data"},
		{[]string{`--proxy-image-pull-secrets=Not_A_Name`}, `--proxy-image-pull-secrets: "Not_A_Name" is not a Secret name`},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			o := parseOptions(t, tc.args...)
			err := o.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, cli.IsUsage(err), "%v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestRunInjectsConfiguredProxy runs the webhook process (`qas-decider webhook` with
// the flags the chart passes from webhook.proxy.resources and imagePullSecrets)
// behind the real kube-apiserver: an opted-in pod comes back with the sidecar's
// resources and the pull secret added to its own.
func TestRunInjectsConfiguredProxy(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	injecttest.Start(t, c, ns,
		`--proxy-resources={"requests":{"cpu":"120m","memory":"48Mi"},"limits":{"cpu":"1","memory":"96Mi"}}`,
		"--proxy-image-pull-secrets=proxy-registry")

	// The caBundle and the webhook reach the apiserver asynchronously; with failurePolicy
	// Ignore, early pods are admitted unchanged.
	n := 0
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n++
		spec := optedInPod()
		spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "app-registry"}}
		p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", n), Labels: map[string]string{sidecar.InjectLabel: "true"}},
			Spec:       spec,
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return hasSidecar(p), nil
	})
	require.NoError(t, err, "no pod came back injected")
	require.Equal(t, []corev1.LocalObjectReference{{Name: "app-registry"}, {Name: "proxy-registry"}}, pod.Spec.ImagePullSecrets)
	proxy := pod.Spec.Containers[len(pod.Spec.Containers)-1]
	require.Equal(t, sidecar.ContainerName, proxy.Name)
	for name, want := range map[string]resource.Quantity{
		"requests.cpu": resource.MustParse("120m"), "requests.memory": resource.MustParse("48Mi"),
		"limits.cpu": resource.MustParse("1"), "limits.memory": resource.MustParse("96Mi"),
	} {
		var got resource.Quantity
		switch name {
		case "requests.cpu":
			got = proxy.Resources.Requests[corev1.ResourceCPU]
		case "requests.memory":
			got = proxy.Resources.Requests[corev1.ResourceMemory]
		case "limits.cpu":
			got = proxy.Resources.Limits[corev1.ResourceCPU]
		case "limits.memory":
			got = proxy.Resources.Limits[corev1.ResourceMemory]
		}
		require.Zero(t, want.Cmp(got), "%s = %s, want %s", name, got.String(), want.String())
	}
}
