package pool

import (
	"slices"
	"sync"
	"time"
)

// The overflow decision's deadline follows the fronts' recent answers: ten times
// the p99 of the last decisionWindow decisions a front made (accepted or refused),
// within [decisionFloor, the configured timeout]. A front that answers in 100 µs
// but then hangs costs a request about a millisecond before it queues locally,
// not the whole --pool-decision-timeout; until decisionMinSamples answers are
// known, the configured timeout applies.
const (
	decisionWindow     = 128
	decisionMinSamples = 20
	decisionFactor     = 10
	// decisionFloor keeps a deadline above a loaded host's scheduling delays (a
	// front replica that misses it is avoided for a second).
	decisionFloor = 2 * time.Millisecond
)

// decisionTimes keeps the recent decision times.
type decisionTimes struct {
	mu   sync.Mutex
	ring [decisionWindow]time.Duration
	n    int // samples kept, at most decisionWindow
	next int
}

// add records a front's decision time (timeouts are not decisions: they would
// only say the deadline was reached).
func (d *decisionTimes) add(t time.Duration) {
	if t < 0 {
		return
	}
	d.mu.Lock()
	d.ring[d.next] = t
	d.next = (d.next + 1) % decisionWindow
	d.n = min(d.n+1, decisionWindow)
	d.mu.Unlock()
}

// deadline is the wait for the next decision: limit until enough answers are
// known, then decisionFactor × their p99 within [decisionFloor, limit].
func (d *decisionTimes) deadline(limit time.Duration) time.Duration {
	d.mu.Lock()
	if d.n < decisionMinSamples {
		d.mu.Unlock()
		return limit
	}
	s := slices.Clone(d.ring[:d.n])
	d.mu.Unlock()
	slices.Sort(s)
	p99 := s[(len(s)*99+99)/100-1]
	return min(limit, max(decisionFloor, decisionFactor*p99))
}
