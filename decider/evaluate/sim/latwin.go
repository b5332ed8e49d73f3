package sim

import "github.com/qas-dev/qas/decider/evaluate/policy"

// latBuckets is the number of the window's buckets: two of Histogram's
// 1 % buckets each, so a quantile is within about 2 %.
const latBuckets = (histSize + 1) / 2

// latSlots are the closed seconds kept plus the one being filled.
const latSlots = policy.LatencyHistory + 1

// latWindow keeps one coarse histogram of response times per simulated
// second for the last policy.LatencyHistory seconds: what a policy may
// measure of the latency (policy.Latencies).
type latWindow struct {
	ring [latSlots][latBuckets]uint32
	n    [latSlots]int
	// cur is the ring slot of the second being filled; filled counts the
	// closed seconds kept (at most LatencyHistory).
	cur, filled int
}

// add counts a latency whose Histogram bucket is b in the current second.
func (w *latWindow) add(b int) {
	w.ring[w.cur][b/2]++
	w.n[w.cur]++
}

// next closes the current second and opens the next.
func (w *latWindow) next() {
	w.cur = (w.cur + 1) % latSlots
	w.ring[w.cur] = [latBuckets]uint32{}
	w.n[w.cur] = 0
	w.filled = min(w.filled+1, policy.LatencyHistory-1)
}

// Quantile implements policy.Latencies over the last w closed seconds.
func (w *latWindow) Quantile(secs int, p float64) (float64, bool) {
	secs = min(max(secs, 0), w.filled)
	total := 0
	for i := 1; i <= secs; i++ {
		total += w.n[(w.cur-i+latSlots)%latSlots]
	}
	if total == 0 || !(p > 0 && p < 100) {
		return 0, false
	}
	rank := int(float64(total)*p/100 + 0.999999999)
	c := 0
	for b := 0; b < latBuckets; b++ {
		for i := 1; i <= secs; i++ {
			c += int(w.ring[(w.cur-i+latSlots)%latSlots][b])
		}
		if c >= rank {
			return bucketUpper(min(2*b+1, histSize-1)), true
		}
	}
	return bucketUpper(histSize - 1), true
}
