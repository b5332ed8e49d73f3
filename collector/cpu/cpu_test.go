package cpu

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestNodePoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    NodeCPU
		util float64
	}{
		{"half used", NodeCPU{Name: "n", Time: t0, Usage: 2, Allocatable: 4}, 0.5},
		{"unknown allocatable", NodeCPU{Name: "n", Time: t0, Usage: 2}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.util, tc.n.Utilization(), 1e-12)
			p := NodePoint(tc.n)
			require.Equal(t, influx.Node, p.Name())
			m, _ := influx.Lookup(influx.Node)
			require.Len(t, p.FieldList(), len(m.Fields), "every declared field is written")
			for _, f := range p.FieldList() {
				found := false
				for _, d := range m.Fields {
					found = found || d.Name == f.Key
				}
				require.True(t, found, "field %s is declared", f.Key)
			}
		})
	}
}

// metricsAPI serves metrics.k8s.io/v1beta1 as metrics-server would: discovery, node
// metrics and pod metrics.
func metricsAPI(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	reply := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			require.NoError(t, json.NewEncoder(w).Encode(v))
		}
	}
	mux.Handle("GET /apis/metrics.k8s.io/v1beta1", reply(metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: "metrics.k8s.io/v1beta1",
		APIResources: []metav1.APIResource{
			{Name: "nodes", Kind: "NodeMetrics", Verbs: []string{"get", "list"}},
			{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: []string{"get", "list"}},
		},
	}))
	mux.Handle("GET /apis/metrics.k8s.io/v1beta1/nodes", reply(metricsv1beta1.NodeMetricsList{
		TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: "metrics.k8s.io/v1beta1"},
		Items: []metricsv1beta1.NodeMetrics{
			{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}, Timestamp: metav1.NewTime(t0), Window: metav1.Duration{Duration: 15 * time.Second},
				Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}},
			{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Timestamp: metav1.NewTime(t0), Window: metav1.Duration{Duration: 15 * time.Second},
				Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}},
			{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Timestamp: metav1.NewTime(t0),
				Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		},
	}))
	mux.Handle("GET /apis/metrics.k8s.io/v1beta1/namespaces/shop/pods", reply(metricsv1beta1.PodMetricsList{
		TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: "metrics.k8s.io/v1beta1"},
		Items: []metricsv1beta1.PodMetrics{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1"}, Timestamp: metav1.NewTime(t0),
			Containers: []metricsv1beta1.ContainerMetrics{
				{Name: "app", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
				{Name: "qas-proxy", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}},
			},
		}},
	}))
	return mux
}

// TestSourceThroughRealAPIServer reads CPU through a real kube-apiserver, which
// serves metrics.k8s.io through its aggregation layer from a test server.
func TestSourceThroughRealAPIServer(t *testing.T) {
	c := kubetest.StartT(t, kubetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for name, cpu := range map[string]string{"node-a": "4", "node-b": "2"} {
		n, err := c.Clientset().CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		n.Status.Capacity = n.Status.Allocatable
		_, err = c.Clientset().CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	stop, err := c.RegisterAPIService(ctx, "metrics.k8s.io", "v1beta1", metricsAPI(t))
	require.NoError(t, err)
	t.Cleanup(stop)

	mc, err := metricsclient.NewForConfig(c.Config)
	require.NoError(t, err)
	src := &Source{Kube: c.Clientset(), Metrics: mc}
	nodes, err := src.Nodes(ctx)
	require.NoError(t, err)
	require.Equal(t, []NodeCPU{
		{Name: "node-a", Time: t0, Usage: 3, Allocatable: 4},
		{Name: "node-b", Time: t0, Usage: 1.5, Allocatable: 2},
	}, utc(nodes))
	pods, err := src.Pods(ctx, "shop")
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"shop/web-1": 0.27}, pods)

	// metrics-server gone: the APIService is unavailable and the error says which API.
	stop()
	_, err = src.Nodes(ctx)
	require.ErrorContains(t, err, "metrics.k8s.io")
}

func utc(ns []NodeCPU) []NodeCPU {
	for i := range ns {
		ns[i].Time = ns[i].Time.UTC()
	}
	return ns
}
