package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/qas-dev/qas/internal/version"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/stats"
)

// Admin serves the admin endpoints.
type Admin struct {
	rec      *measure.Recorder
	upstream string
	draining *atomic.Bool
	mux      *http.ServeMux

	mu        sync.Mutex
	checkedAt time.Time
	reachable bool
}

// NewAdmin returns the admin handler. /readyz fails while draining is set or while the
// upstream refuses connections (a front has no upstream: "").
func NewAdmin(rec *measure.Recorder, upstream string, draining *atomic.Bool) *Admin {
	a := &Admin{rec: rec, upstream: upstream, draining: draining, mux: http.NewServeMux()}
	reg := prometheus.NewRegistry()
	// The Go runtime's and the process's own metrics (goroutines, memory, open file
	// descriptors, RSS, CPU), as every Go exporter has them.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&collector{rec: rec}, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "qas_proxy_build_info",
		Help: "Always 1; the labels say which build of qas-proxy this is.", ConstLabels: version.Labels()}, func() float64 { return 1 }))
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	a.mux.HandleFunc("GET /stats", a.stats)
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	a.mux.HandleFunc("GET /readyz", a.readyz)
	return a
}

func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

func (a *Admin) stats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a.rec.Snapshot())
}

func (a *Admin) readyz(w http.ResponseWriter, r *http.Request) {
	if a.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	if a.upstream != "" && !a.upstreamReachable(r.Context()) {
		http.Error(w, "upstream "+a.upstream+" unreachable", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// upstreamReachable dials the application, at most once a second however often the
// kubelet probes.
func (a *Admin) upstreamReachable(ctx context.Context) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if time.Since(a.checkedAt) < time.Second {
		return a.reachable
	}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", a.upstream)
	if err == nil {
		conn.Close()
	}
	a.reachable, a.checkedAt = err == nil, time.Now()
	return a.reachable
}

// collector exposes the recorder's counters as Prometheus metrics, read at scrape time
// so the request path pays nothing for them.
type collector struct{ rec *measure.Recorder }

var (
	descArrivals    = prometheus.NewDesc("qas_proxy_requests_arrived_total", "Requests accepted by the proxy.", nil, nil)
	descCompletions = prometheus.NewDesc("qas_proxy_requests_completed_total", "Requests whose response finished or failed.", nil, nil)
	descResponses   = prometheus.NewDesc("qas_proxy_responses_total", "Completed requests by status class.", []string{"class"}, nil)
	descService     = prometheus.NewDesc("qas_proxy_service_seconds_total", "Sum of service times (slot to response end).", nil, nil)
	descServiceSq   = prometheus.NewDesc("qas_proxy_service_seconds_squared_total", "Sum of squared service times, for the variance.", nil, nil)
	descTTFB        = prometheus.NewDesc("qas_proxy_ttfb_seconds_total", "Sum of times to first response byte.", nil, nil)
	descQueued      = prometheus.NewDesc("qas_proxy_queued_total", "Requests that waited for a concurrency slot.", nil, nil)
	descQueueWait   = prometheus.NewDesc("qas_proxy_queue_wait_seconds_total", "Sum of waits for a concurrency slot.", nil, nil)
	descRejected    = prometheus.NewDesc("qas_proxy_rejected_total", "Requests refused with 503 because the queue was full.", nil, nil)
	descRefused     = prometheus.NewDesc("qas_proxy_refused_total",
		"Requests the proxy refused itself before they reached the app or counted as arrivals, by reason: "+
			"connect (CONNECT in any case, 405), malformed_h2 (HTTP/2 :method or :path, 400), "+
			"request_target (HTTP/1 target neither origin form nor http(s) absolute URI, 400), "+
			"ambiguous_framing (Content-Length with Transfer-Encoding or disagreeing lengths, 400). "+
			"Requests net/http's own parser refuses (malformed request line or fields, missing Host, oversized head) are not counted.",
		[]string{"reason"}, nil)
	descInFlight    = prometheus.NewDesc("qas_proxy_in_flight", "Requests being served now.", nil, nil)
	descWaiting     = prometheus.NewDesc("qas_proxy_waiting", "Requests waiting for a slot now.", nil, nil)
	descInFlightInt = prometheus.NewDesc("qas_proxy_in_flight_seconds_total", "Integral of in-flight requests over time (Little's law).", nil, nil)
	descBusy        = prometheus.NewDesc("qas_proxy_busy_seconds_total", "Time with at least one request in flight.", nil, nil)
	descErrors      = prometheus.NewDesc("qas_proxy_upstream_failures_total", "Requests the upstream failed.", []string{"kind"}, nil)
	descLatency     = prometheus.NewDesc("qas_proxy_latency_seconds", "Latency at the proxy: queue wait plus service.", nil, nil)
	descServiceTime = prometheus.NewDesc("qas_proxy_service_time_seconds", "Service time of served requests: slot to response end, no queue wait.", nil, nil)
	descStart       = prometheus.NewDesc("qas_proxy_start_time_seconds", "Process start, Unix time.", nil, nil)

	descPoolOverflow = prometheus.NewDesc("qas_proxy_pool_overflow_total", "Overflow attempts to a shared front, by outcome.", []string{"outcome"}, nil)
	descPoolPulled   = prometheus.NewDesc("qas_proxy_pool_pulled_total", "Requests pulled from a shared front and served here.", nil, nil)
	descPoolFailures = prometheus.NewDesc("qas_proxy_pool_front_failures_total", "Times a front replica was marked suspect.", nil, nil)
	descPoolDecision = prometheus.NewDesc("qas_proxy_pool_overflow_decision_seconds", "Time from sending an overflow request to the front's decision.", nil, nil)
	descPoolDrain    = prometheus.NewDesc("qas_proxy_pool_drain_total", "Requests of the local queue offered to a front as the pod drained, by outcome.", []string{"outcome"}, nil)
	descPoolExpired  = prometheus.NewDesc("qas_proxy_pool_expired_total", "Accepted overflows the front gave back unseen, by what the sender did.", []string{"action"}, nil)

	descFrontQueue    = prometheus.NewDesc("qas_front_queue_length", "Overflow requests waiting for a pull now.", nil, nil)
	descFrontPulls    = prometheus.NewDesc("qas_front_waiting_pulls", "Pulls waiting for a request now.", nil, nil)
	descFrontAccepted = prometheus.NewDesc("qas_front_accepted_total", "Overflow requests taken into a queue.", nil, nil)
	descFrontRefused  = prometheus.NewDesc("qas_front_refused_total", "Overflow requests or pulls refused, by reason.", []string{"reason"}, nil)
	descFrontLeft     = prometheus.NewDesc("qas_front_left_total", "Queued requests that left the queue, dispatched to a pull or expired.", []string{"how"}, nil)
	descFrontWait     = prometheus.NewDesc("qas_front_queue_wait_seconds", "Time accepted requests waited for a pull.", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descArrivals, descCompletions, descResponses, descService, descServiceSq, descTTFB,
		descQueued, descQueueWait, descRejected, descRefused, descInFlight, descWaiting, descInFlightInt, descBusy, descErrors, descLatency, descServiceTime, descStart,
		descPoolOverflow, descPoolPulled, descPoolFailures, descPoolDecision, descPoolDrain, descPoolExpired,
		descFrontQueue, descFrontPulls, descFrontAccepted, descFrontRefused, descFrontLeft, descFrontWait} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.rec.Snapshot()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter(descArrivals, float64(s.Arrivals))
	counter(descCompletions, float64(s.Completions))
	for i, class := range []string{"1xx", "2xx", "3xx", "4xx", "5xx"} {
		counter(descResponses, float64(s.Codes[i]), class)
	}
	counter(descService, s.ServiceSecondsSum)
	counter(descServiceSq, s.ServiceSecondsSumSq)
	counter(descTTFB, s.TTFBSecondsSum)
	counter(descQueued, float64(s.Queued))
	counter(descQueueWait, s.QueueWaitSecondsSum)
	counter(descRejected, float64(s.Rejected))
	// Not in the /stats document: read from the recorder directly.
	for _, f := range measure.Refusals {
		counter(descRefused, float64(c.rec.Refused(f)), f.String())
	}
	gauge(descInFlight, float64(s.InFlight))
	gauge(descWaiting, float64(s.Waiting))
	counter(descInFlightInt, s.InFlightSeconds)
	counter(descBusy, s.BusySeconds)
	counter(descErrors, float64(s.UpstreamErrors), "error")
	counter(descErrors, float64(s.UpstreamTimeouts), "timeout")
	counter(descErrors, float64(s.ClientCancels), "client_cancel")
	// The sum of every observation (service plus queue wait would miss the
	// requests relayed from a front, and the time of an overflow attempt).
	ch <- prometheus.MustNewConstHistogram(descLatency, s.Latency.Total(), s.LatencySecondsSum, cumulative(s.Latency))
	// ServiceSecondsSum sums the histogram's observations (read just after its counts).
	ch <- prometheus.MustNewConstHistogram(descServiceTime, s.Service.Total(), s.ServiceSecondsSum, cumulative(s.Service))
	gauge(descStart, float64(s.StartTime.UnixNano())/1e9)
	if p := s.Pool; p != nil {
		counter(descPoolOverflow, float64(p.OverflowAccepted), "accepted")
		counter(descPoolOverflow, float64(p.OverflowRefused), "refused")
		counter(descPoolOverflow, float64(p.OverflowTimeout), "timeout")
		counter(descPoolOverflow, float64(p.OverflowError), "error")
		counter(descPoolPulled, float64(p.Pulled))
		counter(descPoolFailures, float64(p.FrontFailures))
		counter(descPoolDrain, float64(p.DrainPushed), "pushed")
		counter(descPoolDrain, float64(p.DrainKept), "kept")
		counter(descPoolExpired, float64(p.ExpiredRequeued), "requeued")
		counter(descPoolExpired, float64(p.ExpiredRelayed), "relayed")
		// The JSON document has no sum of decision times; the bucket midpoints estimate it.
		ch <- prometheus.MustNewConstHistogram(descPoolDecision, p.OverflowDecision.Total(), estimatedSum(p.OverflowDecision), cumulative(p.OverflowDecision))
	}
	if f := s.Front; f != nil {
		gauge(descFrontQueue, float64(f.QueueLength))
		gauge(descFrontPulls, float64(f.WaitingPulls))
		counter(descFrontAccepted, float64(f.Accepted))
		counter(descFrontRefused, float64(f.RefusedFull), "full")
		counter(descFrontRefused, float64(f.Unauthenticated), "unauthenticated")
		counter(descFrontLeft, float64(f.Dispatched), "dispatched")
		counter(descFrontLeft, float64(f.Expired), "expired")
		ch <- prometheus.MustNewConstHistogram(descFrontWait, f.QueueWait.Total(), estimatedSum(f.QueueWait), cumulative(f.QueueWait))
	}
}

// cumulative returns h's buckets as Prometheus wants them: upper bound → count of
// observations at or below it.
func cumulative(h stats.Histogram) map[float64]uint64 {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b] = cum
	}
	return buckets
}

// estimatedSum estimates the sum of h's observations from its bucket midpoints (the
// last bound for the overflow bucket).
func estimatedSum(h stats.Histogram) float64 {
	var sum, lo float64
	for i, c := range h.Counts {
		mid := h.Bounds[len(h.Bounds)-1]
		if i < len(h.Bounds) {
			mid = (lo + h.Bounds[i]) / 2
			lo = h.Bounds[i]
		}
		sum += float64(c) * mid
	}
	return sum
}
