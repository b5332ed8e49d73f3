// Package cpu reads absolute CPU usage from the resource metrics API
// (metrics.k8s.io, served by metrics-server) and node capacity from the Node objects.
//
// What each number means: usage is the cores a node or pod used, averaged by
// metrics-server over its window (usually 15-30 s), absolute — not a share of the
// request. Allocatable is the node's allocatable CPU. Utilisation is usage /
// allocatable (the φ of migration).
//
// Throttling: the cAdvisor CFS counters (container_cpu_cfs_throttled_periods_total)
// are only reachable from the kubelet's /metrics/cadvisor, not through metrics.k8s.io;
// this package does not read them, so decide.Pod.ThrottledFraction stays 0 (unknown)
// and qas_pod carries no throttling field.
package cpu

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/qas-dev/qas/internal/influx"
)

// Source reads CPU from the API server.
type Source struct {
	Kube    kubernetes.Interface
	Metrics metricsclient.Interface
}

// NodeCPU is one node's CPU in cores.
type NodeCPU struct {
	Name               string
	Time               time.Time
	Usage, Allocatable float64
}

// Utilization is usage / allocatable, or 0 when allocatable is unknown.
func (n NodeCPU) Utilization() float64 {
	if n.Allocatable <= 0 {
		return 0
	}
	return n.Usage / n.Allocatable
}

// Nodes returns every node that has both metrics and an allocatable CPU, sorted by name.
func (s *Source) Nodes(ctx context.Context) ([]NodeCPU, error) {
	ms, err := s.Metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cpu: list node metrics (metrics.k8s.io): %w", err)
	}
	nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cpu: list nodes: %w", err)
	}
	alloc := map[string]float64{}
	for _, n := range nodes.Items {
		if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
			alloc[n.Name] = float64(q.MilliValue()) / 1000
		}
	}
	var out []NodeCPU
	for _, m := range ms.Items {
		a, ok := alloc[m.Name]
		if !ok {
			continue
		}
		out = append(out, NodeCPU{Name: m.Name, Time: m.Timestamp.Time, Usage: float64(m.Usage.Cpu().MilliValue()) / 1000, Allocatable: a})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Pods returns each pod's CPU usage in cores (summed over its containers, the sidecar
// included), by namespace/name. namespace "" means all.
func (s *Source) Pods(ctx context.Context, namespace string) (map[string]float64, error) {
	ms, err := s.Metrics.MetricsV1beta1().PodMetricses(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cpu: list pod metrics (metrics.k8s.io): %w", err)
	}
	out := make(map[string]float64, len(ms.Items))
	for _, m := range ms.Items {
		var milli int64
		for _, c := range m.Containers {
			milli += c.Usage.Cpu().MilliValue()
		}
		out[m.Namespace+"/"+m.Name] = float64(milli) / 1000
	}
	return out, nil
}

// NodePoint is the qas_node point of n.
func NodePoint(n NodeCPU) *write.Point {
	return write.NewPoint(influx.Node, map[string]string{"node": n.Name}, map[string]any{
		"cpu_usage_cores": n.Usage, "cpu_allocatable_cores": n.Allocatable, "cpu_utilization": n.Utilization(),
	}, n.Time)
}
