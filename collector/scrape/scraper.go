package scrape

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/proxy/stats"
)

// Scraper fetches /stats from many proxies at once, each request bounded by a timeout,
// and turns the documents into intervals. A proxy that fails, times out or serves
// garbage is skipped with a logged reason and a metric; the others are unaffected.
type Scraper struct {
	Client      *http.Client
	Concurrency int
	Timeout     time.Duration
	// Now is the collector's clock (default time.Now): every point is timed by it.
	Now func() time.Time

	log     *zap.Logger
	tracker *Tracker
	mu      sync.Mutex // guards tracker and ignored
	// ignored is, per target whose last document had members this collector
	// does not know, the process and the names last logged.
	ignored map[string]ignoredNote

	failures    *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	rebases     *prometheus.CounterVec
	scrapes     prometheus.Counter
	skewedGauge prometheus.Gauge
}

// ignoredNote is what was logged of one target's unknown members.
type ignoredNote struct{ instance, names string }

// Failure reasons, the label of qas_collector_scrape_failures_total.
const (
	FailRequest = "request"
	FailStatus  = "http_status"
	FailDecode  = "invalid_document"
	// FailVersion: a document of a schema version this collector does not know
	// (stats.VersionError), which it cannot read without misreading it.
	FailVersion = "unsupported_version"
)

// NewScraper returns a scraper; reg may be nil.
func NewScraper(client *http.Client, concurrency int, timeout time.Duration, reg prometheus.Registerer, log *zap.Logger) *Scraper {
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}
	}
	if concurrency <= 0 {
		concurrency = 64
	}
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	s := &Scraper{
		Client: client, Concurrency: concurrency, Timeout: timeout, Now: time.Now, log: log, tracker: NewTracker(),
		ignored: map[string]ignoredNote{},
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qas_collector_scrape_failures_total", Help: "Scrapes skipped, by reason.",
		}, []string{"reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qas_collector_dropped_fields_total", Help: "Optional /stats fields left out because they were invalid (the rest of the document was kept), by field.",
		}, []string{"field"}),
		rebases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qas_collector_rebases_total", Help: "Snapshots taken as a new baseline instead of a delta, by reason.",
		}, []string{"reason"}),
		scrapes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "qas_collector_scrapes_total", Help: "Scrapes attempted.",
		}),
		skewedGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "qas_collector_proxies_with_unknown_fields",
			Help: "Proxies whose last /stats document had fields this collector does not know and ignored (proxies newer than the collector, during a rollout).",
		}),
	}
	if reg != nil {
		reg.MustRegister(s.failures, s.dropped, s.rebases, s.scrapes, s.skewedGauge)
	}
	return s
}

// Result is one target's outcome in a cycle.
type Result struct {
	Target   Target
	Interval Interval
	// OK is true when Interval holds a delta; otherwise Reason says why not (a
	// failure or a rebase).
	OK     bool
	Reason string
	Err    error
}

// Cycle scrapes every target once and returns one Result per target, in order.
func (s *Scraper) Cycle(ctx context.Context, targets []Target) []Result {
	results := make([]Result, len(targets))
	sem := make(chan struct{}, s.Concurrency)
	var wg sync.WaitGroup
	docs := make([]stats.Decoded, len(targets))
	received := make([]time.Time, len(targets))
	offsets := make([]time.Duration, len(targets))
	for i, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			sent := s.Now()
			doc, reason, err := s.fetch(ctx, t.URL)
			received[i] = s.Now()
			results[i] = Result{Target: t, Reason: reason, Err: err}
			docs[i] = doc
			// The proxy took its snapshot while the request was out: compare its clock
			// with the middle of the round trip.
			offsets[i] = doc.Snapshot.Time.Sub(sent.Add(received[i].Sub(sent) / 2))
		}()
	}
	wg.Wait()
	keep := make(map[string]bool, len(targets))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range targets {
		keep[t.Key()] = true
		s.scrapes.Inc()
		if results[i].Err != nil {
			s.failures.WithLabelValues(results[i].Reason).Inc()
			s.log.Warn("scrape skipped", zap.String("pod", t.Key()), zap.String("reason", results[i].Reason), zap.Error(results[i].Err))
			continue
		}
		s.noteIgnored(t, docs[i])
		iv, reason, ok := s.tracker.Observe(t, docs[i].Snapshot)
		if ok {
			iv.ScrapedAt, iv.ClockOffset = received[i], offsets[i]
		}
		results[i].Interval, results[i].OK, results[i].Reason = iv, ok, reason
		if !ok {
			s.rebases.WithLabelValues(reason).Inc()
			if reason != ReasonFirst {
				s.log.Warn("rebased", zap.String("pod", t.Key()), zap.String("reason", reason))
			}
		}
	}
	s.tracker.Forget(keep)
	for k := range s.ignored {
		if !keep[k] {
			delete(s.ignored, k)
		}
	}
	s.skewedGauge.Set(float64(len(s.ignored)))
	return results
}

// noteIgnored logs the members of t's document that this collector does not
// know and ignored (the proxy is newer: version skew during a rollout, which
// stats' compatibility rule allows), once per proxy process and set of names:
// an operator sees the skew without a line every scrape.
func (s *Scraper) noteIgnored(t Target, d stats.Decoded) {
	if d.IgnoredCount == 0 {
		delete(s.ignored, t.Key())
		return
	}
	note := ignoredNote{instance: d.Snapshot.InstanceID, names: strings.Join(d.Ignored, "\x00")}
	if s.ignored[t.Key()] == note {
		return
	}
	s.ignored[t.Key()] = note
	s.log.Info("proxy's /stats has fields this collector does not know; they are ignored (the proxy is newer than the collector)",
		zap.String("pod", t.Key()), zap.String("instance", d.Snapshot.InstanceID), zap.Strings("fields", d.Ignored), zap.Int("count", d.IgnoredCount))
}

// fetch gets and decodes one /stats document.
func (s *Scraper) fetch(ctx context.Context, url string) (stats.Decoded, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return stats.Decoded{}, FailRequest, err
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return stats.Decoded{}, FailRequest, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return stats.Decoded{}, FailStatus, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	d, err := stats.DecodeDetail(resp.Body)
	if err != nil {
		reason := FailDecode
		if _, ok := errors.AsType[*stats.VersionError](err); ok {
			reason = FailVersion
		}
		return stats.Decoded{}, reason, fmt.Errorf("GET %s: %w", url, err)
	}
	if d.Dropped != nil {
		// Only arrivals_per_second is optional in this way.
		s.dropped.WithLabelValues(FieldArrivalsPerSecond).Inc()
		s.log.Warn("invalid field left out", zap.String("url", url), zap.String("field", FieldArrivalsPerSecond), zap.Error(d.Dropped))
	}
	return d, "", nil
}

// FieldArrivalsPerSecond is the label of qas_collector_dropped_fields_total for
// an invalid arrivals_per_second series.
const FieldArrivalsPerSecond = "arrivals_per_second"

// Dropped returns the count of documents whose field was left out as invalid.
func (s *Scraper) Dropped(field string) float64 { return counter(s.dropped.WithLabelValues(field)) }

// Failures returns the count of skipped scrapes for reason.
func (s *Scraper) Failures(reason string) float64 { return counter(s.failures.WithLabelValues(reason)) }

// ProxiesWithUnknownFields is how many proxies' last documents had fields this
// collector does not know.
func (s *Scraper) ProxiesWithUnknownFields() float64 { return gauge(s.skewedGauge) }

// Rebases returns the count of rebases for reason.
func (s *Scraper) Rebases(reason string) float64 { return counter(s.rebases.WithLabelValues(reason)) }
