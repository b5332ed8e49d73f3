package kubetest

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func certPEMOf(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

const podReadySample = `spec:
  selector: {}
  next:
    statusTemplate: |
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
      {{ end }}
`

func TestPatchPodReady(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		delay     time.Duration
		wantErr   string
		wantDelay bool
	}{
		{name: "adds resources to container statuses only", in: podReadySample},
		{name: "adds a ready delay", in: podReadySample, delay: 1500 * time.Millisecond, wantDelay: true},
		{name: "unknown shape is an error", in: "spec: {}\n", wantErr: "anchor not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := patchPodReady(tt.in, tt.delay)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, 1, strings.Count(out, "resources: {{ .resources | toJson }}"))
			// The resources line belongs to the first (regular) container block.
			require.Less(t, strings.Index(out, "resources:"), strings.Index(out, "initContainerStatuses"))
			require.Equal(t, tt.wantDelay, strings.Contains(out, "durationMilliseconds: 1500"))
		})
	}
}

func TestStartValidatesOptions(t *testing.T) {
	_, err := Start(context.Background(), "/nonexistent", "", t.TempDir(), Options{Kwok: true})
	require.ErrorContains(t, err, "needs the kwok binary")
	_, err = Start(context.Background(), "/nonexistent", "", t.TempDir(), Options{Nodes: []NodeSpec{{Name: "n"}}})
	require.ErrorContains(t, err, "needs Options.Kwok")
	_, err = Start(context.Background(), "/nonexistent", "", t.TempDir(), Options{})
	require.ErrorContains(t, err, "start etcd")
}

func TestDeployment(t *testing.T) {
	own := corev1.Toleration{Key: "own", Operator: corev1.TolerationOpExists}
	spec := corev1.PodSpec{Tolerations: []corev1.Toleration{own}, Containers: []corev1.Container{{Name: "app"}}}
	d := Deployment("ns", "web", 3, spec)
	require.Equal(t, "ns", d.Namespace)
	require.Equal(t, "web", d.Name)
	require.Equal(t, int32(3), *d.Spec.Replicas)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	require.NoError(t, err)
	require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "the Deployment selects its own pods")
	require.Equal(t, "web", d.Spec.Template.Labels["app"])
	require.Equal(t, []corev1.Toleration{own, Toleration()}, d.Spec.Template.Spec.Tolerations)
	require.Equal(t, []corev1.Toleration{own}, spec.Tolerations, "the caller's spec is not changed")
	require.Equal(t, spec.Containers, d.Spec.Template.Spec.Containers)
}

func TestCPU(t *testing.T) {
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	none := corev1.ResourceList{}
	for _, tt := range []struct {
		request, limit string
		want           corev1.ResourceRequirements
	}{
		{request: "250m", limit: "500m", want: corev1.ResourceRequirements{Requests: cpu("250m"), Limits: cpu("500m")}},
		{request: "1", want: corev1.ResourceRequirements{Requests: cpu("1"), Limits: none}},
		{limit: "2", want: corev1.ResourceRequirements{Requests: none, Limits: cpu("2")}},
		{want: corev1.ResourceRequirements{Requests: none, Limits: none}},
	} {
		got := CPU(tt.request, tt.limit)
		require.True(t, apiequality.Semantic.DeepEqual(tt.want, got), "CPU(%q, %q) = %v, want %v", tt.request, tt.limit, got, tt.want)
	}
	require.Panics(t, func() { CPU("a lot", "") })
}
