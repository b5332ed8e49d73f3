package stats

import (
	"errors"
	"fmt"
	"math"
)

// ErrRestart means two snapshots come from different proxy processes (or a counter went
// backwards): the older one is no base for a delta, and the consumer must rebase.
var ErrRestart = errors.New("stats: proxy restarted between snapshots")

// Window is what happened between two snapshots of one proxy.
type Window struct {
	Seconds     float64 // length of the window
	Arrivals    uint64
	Completions uint64
	// ArrivalRate is λ in requests per second.
	ArrivalRate float64
	// ServiceMean is E[S] in seconds and ServiceSCV its squared coefficient of
	// variation (variance / mean²); both zero without completions.
	ServiceMean, ServiceSCV float64
	// QueueWaitMean is the mean wait for a concurrency slot over all completions.
	QueueWaitMean float64
	// MeanInFlight is the time-average of requests in service (Little's law: it should
	// be close to λ·E[S]); Busy is the share of the window with any request in flight.
	MeanInFlight, Busy float64
	// Errors counts 5xx responses.
	Errors  uint64
	Latency Histogram
}

// Between returns the window from prev to cur. It fails with ErrRestart when the two
// come from different processes or any counter decreased, and with another error when
// cur is not later than prev.
func Between(prev, cur Snapshot) (Window, error) {
	if prev.InstanceID != cur.InstanceID || !prev.StartTime.Equal(cur.StartTime) {
		return Window{}, ErrRestart
	}
	if cur.Arrivals < prev.Arrivals || cur.Completions < prev.Completions || cur.ServiceSecondsSum < prev.ServiceSecondsSum ||
		cur.InFlightSeconds < prev.InFlightSeconds || cur.Codes[4] < prev.Codes[4] {
		return Window{}, fmt.Errorf("%w: a counter decreased", ErrRestart)
	}
	dt := cur.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		return Window{}, fmt.Errorf("stats: snapshot seq %d is not later than seq %d", cur.Seq, prev.Seq)
	}
	w := Window{
		Seconds:      dt,
		Arrivals:     cur.Arrivals - prev.Arrivals,
		Completions:  cur.Completions - prev.Completions,
		MeanInFlight: (cur.InFlightSeconds - prev.InFlightSeconds) / dt,
		Busy:         math.Min(1, (cur.BusySeconds-prev.BusySeconds)/dt),
		Errors:       cur.Codes[4] - prev.Codes[4],
	}
	w.ArrivalRate = float64(w.Arrivals) / dt
	if n := float64(w.Completions); n > 0 {
		sum := cur.ServiceSecondsSum - prev.ServiceSecondsSum
		sumSq := cur.ServiceSecondsSumSq - prev.ServiceSecondsSumSq
		w.ServiceMean = sum / n
		if w.ServiceMean > 0 {
			variance := math.Max(0, sumSq/n-w.ServiceMean*w.ServiceMean)
			w.ServiceSCV = variance / (w.ServiceMean * w.ServiceMean)
		}
		w.QueueWaitMean = (cur.QueueWaitSecondsSum - prev.QueueWaitSecondsSum) / n
	}
	h, err := cur.Latency.Sub(prev.Latency)
	if err != nil {
		return Window{}, err
	}
	w.Latency = h
	return w, nil
}

// Sub returns h − prev bucket by bucket; the bounds must match.
func (h Histogram) Sub(prev Histogram) (Histogram, error) {
	if len(h.Bounds) != len(prev.Bounds) || len(h.Counts) != len(prev.Counts) {
		return Histogram{}, errors.New("stats: histograms have different buckets")
	}
	out := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Bounds {
		if h.Bounds[i] != prev.Bounds[i] {
			return Histogram{}, errors.New("stats: histograms have different buckets")
		}
	}
	for i := range h.Counts {
		if h.Counts[i] < prev.Counts[i] {
			return Histogram{}, fmt.Errorf("%w: histogram bucket %d decreased", ErrRestart, i)
		}
		out.Counts[i] = h.Counts[i] - prev.Counts[i]
	}
	return out, nil
}

// Add returns the bucket-wise sum of h and o (merging pods); the bounds must match.
func (h Histogram) Add(o Histogram) (Histogram, error) {
	if len(o.Counts) == 0 {
		return h, nil
	}
	if len(h.Counts) == 0 {
		return o, nil
	}
	if len(h.Bounds) != len(o.Bounds) || len(h.Counts) != len(o.Counts) {
		return Histogram{}, errors.New("stats: histograms have different buckets")
	}
	out := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Counts {
		out.Counts[i] = h.Counts[i] + o.Counts[i]
	}
	return out, nil
}

// Quantile estimates the q-quantile (q in [0,1]) by linear interpolation inside the
// bucket that holds it, as Prometheus' histogram_quantile does. It returns NaN for an
// empty histogram and the last bound when the quantile lies beyond it.
func (h Histogram) Quantile(q float64) float64 {
	total := h.Total()
	if total == 0 || math.IsNaN(q) || q < 0 || q > 1 {
		return math.NaN()
	}
	rank := q * float64(total)
	var cum uint64
	for i, c := range h.Counts {
		if float64(cum+c) >= rank && c > 0 {
			if i == len(h.Bounds) {
				return h.Bounds[len(h.Bounds)-1]
			}
			lo := 0.0
			if i > 0 {
				lo = h.Bounds[i-1]
			}
			return lo + (h.Bounds[i]-lo)*(rank-float64(cum))/float64(c)
		}
		cum += c
	}
	return h.Bounds[len(h.Bounds)-1]
}
