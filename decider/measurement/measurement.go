// Package measurement is what crosses between the decider's store and its
// controller: the one type a workload's measurements take on the way in (what the
// proxies and nodes measured over the window, and whether that covers every pod the
// decision needs: Judge), and the sink decisions go out to. It is pure: no
// Kubernetes, no InfluxDB, no logger.
package measurement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/qas-dev/qas/decider/decide"
)

// Query names the workload to measure and what the measurement must cover.
type Query struct {
	Namespace, Workload string
	Now                 time.Time
	// Percentile selects the measured latency: 50, 95 or 99 (the percentiles the
	// collector writes); 0 means 95.
	Percentile float64
	// Pods are the workload's current pods and Ready the subset that is Ready: the
	// pods whose data must be present for the measurement to be complete.
	Pods, Ready []string
	// Nodes are the nodes whose CPU the decision reads: those the workload's pods
	// run on, and for migration every candidate node.
	Nodes []string
	// NeedNodes is true when the decision uses node CPU (vertical or migration
	// enabled); node data then counts towards completeness.
	NeedNodes bool
}

// Source reads a workload's measurements; the decider's store implements it.
type Source interface {
	Measure(ctx context.Context, q Query) (Workload, error)
}

// Workload is what the proxies and nodes measured for one workload over the window.
type Workload struct {
	// ArrivalRates is the λ history in the window, oldest first.
	ArrivalRates []decide.Sample
	// History is λ's long history, downsampled (the store's step means over
	// its span, oldest first), for the recurring-burst detector; empty when
	// the source keeps none. HistoryError says why a read of it failed.
	History      []decide.Sample
	HistoryError string
	// ServiceTime (seconds), ServiceSCV and MeasuredLatency (seconds, at the
	// query's percentile; 0 when that percentile is not measured) are the newest
	// workload point's.
	ServiceTime, ServiceSCV, MeasuredLatency float64
	// ServiceSamples is the requests the newest point's service-time fields are
	// over (0: unknown, from a collector that predates the field).
	ServiceSamples float64
	// MeasuredQuantiles are the newest workload point's latency at p50, p95 and p99
	// (nil unless all three were measured: an idle interval has none), for the
	// engine's closed loop.
	MeasuredQuantiles []decide.LatencyQuantile
	// LatencyBuckets are the newest workload point's latency histogram (the
	// proxies' merged buckets, the interval of MeasuredQuantiles): count per
	// bucket, above the previous bucket's bound, ascending by UpperBound, the
	// last +Inf (the collector leaves out an empty bucket below an empty one:
	// the one above spans it, and counts stay exact at every bound of the
	// proxies' histogram). Nil when the point has
	// none (an idle interval, a collector from before them) or they do not make
	// a histogram; LatencyBucketsError then says why, and also names bucket
	// fields skipped for a malformed name (the others are kept).
	LatencyBuckets      []decide.LatencyBucket
	LatencyBucketsError string
	// ServiceQuantiles are the newest workload point's service-time quantiles
	// (proxy/stats.ServicePercentiles; nil unless all were measured, positive
	// and ascending), for the engine's latency tail.
	ServiceQuantiles []decide.LatencyQuantile
	// ServiceBuckets are the newest workload point's service-time histogram
	// (the proxies' merged service histograms, over the requests served in the
	// interval of ServiceQuantiles), in the form of LatencyBuckets and in the
	// same bounds: count per bucket, ascending by UpperBound, the last +Inf,
	// an empty bucket below an empty one left out. Nil when the point has none
	// (no request served, no proxy that measures service times, a collector
	// from before them) or they do not make a histogram; ServiceBucketsError
	// then says why, and also names bucket fields skipped for a malformed name
	// (the others are kept). A failed read of the buckets loses both
	// histograms (one query reads them) and nothing else.
	ServiceBuckets      []decide.LatencyBucket
	ServiceBucketsError string
	// ShortArrivalRate is the newest point's rate, over ShortWindow (one scrape
	// interval): the engine's fast path sees a burst in it seconds after it starts.
	ShortArrivalRate float64
	ShortWindow      time.Duration
	// RateCV2 is the relative variance of the per-second arrival rate beyond
	// Poisson noise over the window: the workload points' arrival_rate_cv2
	// averaged with their arrival_rate_pairs as weights; RateCV2Pairs is the
	// pairs of seconds summed (0: not measured, and RateCV2 is 0).
	RateCV2, RateCV2Pairs float64
	// ProxyClockOffset is the newest workload point's largest (in magnitude) offset of a
	// pod's proxy clock from the collector's, in seconds (positive: a proxy is ahead).
	// Points are timed by the collector's clock, so it costs no data; it is reported.
	ProxyClockOffset float64
	// OverflowShare (the share of arrivals that went through the front) and
	// FrontQueue (requests waiting in the front) are the newest workload point's
	// pooled data plane (routing pooled; 0 otherwise). After a burst the backlog
	// sits in the front, not on the pods.
	OverflowShare, FrontQueue float64
	// ExpiredRequeuedRate and ExpiredRelayedRate are the newest workload point's
	// accepted overflows per second that a front gave back unseen (no pod took
	// them within its --front-max-wait, or it shut down), which the senders
	// served themselves or answered with the front's 503; FrontRefusedRate the
	// overflows per second the fronts refused with their queue full (served
	// locally). Pooled data plane only; 0 otherwise.
	ExpiredRequeuedRate, ExpiredRelayedRate, FrontRefusedRate float64
	// PooledError names the newest point's pooled fields that were not finite
	// numbers ≥ 0 (overflow_share also ≤ 1): each reads as 0 (none), the
	// other fields stand. Empty when every one was good or absent.
	PooledError string
	// DataTime is when the newest workload point was taken.
	DataTime time.Time
	// Pods are the workload's pods, each with its newest point, sorted by name.
	Pods []Pod
	// Nodes are the newest points of the nodes asked for (and of those the pods run
	// on), sorted by name.
	Nodes []Node
	// Neighbours are other workloads' pods on the nodes the workload's pods run
	// on, Name being "namespace/name", sorted by name: the CPU the neighbour mover
	// compares.
	Neighbours []Pod
	// Complete is true when every Ready pod, and every node of a pod when the
	// query needs nodes, has fresh data (Judge sets it); Missing says what lacks.
	Complete bool
	Missing  []string
}

// Pod is one pod's newest point.
type Pod struct {
	Name, Node string
	Time       time.Time
	// ServiceTime is the pod's mean service time in seconds; CPUUsage its absolute
	// CPU usage in cores; CPURequest and CPULimit in millicores (0 limit: none).
	ServiceTime, CPUUsage float64
	CPURequest, CPULimit  int64
	// ThrottledFraction is the share of CFS periods throttled, in [0, 1]. The
	// store leaves it 0 (unknown): the collector reads CPU from metrics.k8s.io,
	// which has no throttling counters (those are on the kubelet's
	// /metrics/cadvisor). The engine's throttling signal works once a source
	// fills it.
	ThrottledFraction float64
	// InService and Queued are the proxy's gauges at the end of the pod's newest
	// interval (requests in service, and waiting for a slot); InFlightMean is the
	// time-average in service over it. A backlog shows in them before it shows in
	// rates.
	InService, Queued, InFlightMean float64
	// MeasuredLatency is the pod's latency at the query's percentile (0 when that
	// percentile is not measured).
	MeasuredLatency float64
}

// Node is one node's newest point.
type Node struct {
	Name string
	Time time.Time
	// UsedCPU in cores, absolute; AllocatableCPU in millicores.
	UsedCPU        float64
	AllocatableCPU int64
}

// Pod returns the pod named name.
func (w Workload) Pod(name string) (Pod, bool) {
	return find(w.Pods, name, func(p Pod) string { return p.Name })
}

// Node returns the node named name.
func (w Workload) Node(name string) (Node, bool) {
	return find(w.Nodes, name, func(n Node) string { return n.Name })
}

// Neighbour returns the neighbour pod key ("namespace/name").
func (w Workload) Neighbour(key string) (Pod, bool) {
	return find(w.Neighbours, key, func(p Pod) string { return p.Name })
}

// find is a linear search: the lists are short (a workload's pods, a cluster's
// nodes), and a producer that does not sort them still gets correct answers.
func find[T any](list []T, name string, key func(T) string) (T, bool) {
	if i := slices.IndexFunc(list, func(x T) bool { return key(x) == name }); i >= 0 {
		return list[i], true
	}
	var zero T
	return zero, false
}

// Judge keeps what describes the workload now and says whether it is complete, the
// one place the decider judges freshness and coverage:
//   - a pod that is not among q.Pods has gone since; its old numbers describe
//     nothing now and are dropped;
//   - a pod whose newest point is older than the newest workload point by more
//     than maxAge is stale (no longer scraped) and dropped (maxAge 0 keeps all);
//   - the measurement is complete when every Ready pod has data and, when q needs
//     nodes, every node one of the pods runs on has data. Incomplete data never
//     scales down (decide.Snapshot.Complete).
func (w Workload) Judge(q Query, maxAge time.Duration) Workload {
	stale := func(t time.Time) bool { return maxAge > 0 && w.DataTime.Sub(t) > maxAge }
	current := make(map[string]bool, len(q.Pods))
	for _, p := range q.Pods {
		current[p] = true
	}
	out := w
	out.Pods, out.Missing = nil, nil
	for _, p := range w.Pods {
		if current[p.Name] && !stale(p.Time) {
			out.Pods = append(out.Pods, p)
		}
	}
	// Nodes and neighbours are kept whatever their age: metrics-server stamps node
	// usage with the end of its own window, which may lag the proxies' points, and
	// the controller joins neighbours with the pods that exist.
	out.Nodes = w.Nodes
	for _, p := range q.Ready {
		if _, ok := out.Pod(p); !ok {
			out.Missing = append(out.Missing, "pod "+p)
		}
	}
	if q.NeedNodes {
		seen := map[string]bool{}
		for _, p := range out.Pods {
			if p.Node == "" || seen[p.Node] {
				continue
			}
			seen[p.Node] = true
			if _, ok := out.Node(p.Node); !ok {
				out.Missing = append(out.Missing, "node "+p.Node)
			}
		}
	}
	out.Complete = len(out.Missing) == 0
	return out
}

// MissingSummary says what Judge found missing, in one line.
func (w Workload) MissingSummary() string {
	if len(w.Missing) == 0 {
		return ""
	}
	const most = 5
	s := strings.Join(w.Missing[:min(len(w.Missing), most)], ", ")
	if len(w.Missing) > most {
		s += fmt.Sprintf(" and %d more", len(w.Missing)-most)
	}
	return "no fresh data of " + s
}

// DecisionSink stores decisions for dashboards; the decider's store implements it
// with InfluxDB.
type DecisionSink interface {
	RecordDecision(ctx context.Context, of DecisionOf, d decide.Decision, dryRun bool) error
}

// DecisionOf names what a decision is about: the QueueAutoscaler and the workload it
// scales (its scaleTargetRef's name, which is what the collector tags measurements
// with).
type DecisionOf struct {
	Namespace, Name, Workload string
}
