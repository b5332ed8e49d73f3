package measure

import (
	"context"
	"sync"
	"time"

	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/proxy/stats"
)

// Per-second arrival counts (issue #15): how many requests arrived from clients
// in each whole wall-clock second, for the variability of the arrival rate from
// second to second. The request path does nothing more than it did before: a
// goroutine wakes at each whole second, reads the cumulative counters and
// records the difference for the second that just ended.
const (
	// PerSecondRing is how many seconds the /stats document carries: a collector
	// scraping every 30 s or more often misses none.
	PerSecondRing = 32
	// PerSecondMaxLate is how long after its boundary a wake may come and still
	// close its second: later, the arrivals it reads may belong to the next
	// second, so that second (and the next, which lost them) counts as Missing.
	PerSecondMaxLate = 100 * time.Millisecond
)

// Sleep waits for d or until ctx ends, whichever is first; it returns
// ctx.Err() in the latter case. Tests inject a fake one with the fake clock.
type Sleep func(ctx context.Context, d time.Duration) error

// RealSleep sleeps on a timer.
func RealSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PerSecond counts a Recorder's client arrivals per whole second of its clock.
// Create it with Recorder.CountPerSecond and run it with Run.
type PerSecond struct {
	now   Clock
	sleep Sleep
	read  func() uint64 // cumulative client arrivals

	mu sync.Mutex
	// counts is a ring of the last PerSecondRing seconds' counts; the second
	// that began at end is at counts[next-1], and next wraps.
	counts [PerSecondRing]int64
	next   int
	end    int64 // Unix second of the newest recorded second
	// known is true once a second was counted (not Missing): the series is
	// served from then on.
	known bool

	// The last wake: the boundary it closed (Unix second), the cumulative count
	// it read, whether it came late. started is false before the first wake.
	started  bool
	boundary int64
	cum      uint64
	late     bool
}

// CountPerSecond attaches a per-second counter of r's client arrivals (every
// arrival except those pulled from a front, which count at their sender) to r,
// which then serves it in its snapshots, and returns it. sleep waits on r's
// clock (nil: RealSleep). The counter counts nothing until Run runs.
func (r *Recorder) CountPerSecond(sleep Sleep) *PerSecond {
	if sleep == nil {
		sleep = RealSleep
	}
	p := &PerSecond{now: r.now, sleep: sleep, read: r.clientArrivals}
	for i := range p.counts {
		p.counts[i] = ratevar.Missing
	}
	r.perSecond.Store(p)
	return p
}

// Run wakes at every whole second of the clock and records the second that just
// ended, until ctx ends.
func (p *PerSecond) Run(ctx context.Context) {
	for {
		t := p.now()
		next := t.Truncate(time.Second).Add(time.Second)
		if err := p.sleep(ctx, next.Sub(t)); err != nil {
			return
		}
		p.Tick()
	}
}

// Tick records the seconds since the last tick from the clock's reading and
// the cumulative arrivals now. Run calls it just after each whole second; it
// is exported for tests.
func (p *PerSecond) Tick() {
	t := p.now()
	c := p.read()
	b := t.Truncate(time.Second)
	boundary, late := b.Unix(), t.Sub(b) > PerSecondMaxLate
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.started:
		// The counter started during the second that ends at boundary (or the
		// wake came after several): no second before boundary is known.
		p.started = true
		p.end = boundary - 1
		p.push(ratevar.Missing)
	case boundary == p.boundary:
		// A second wake within the same second (a timer that fired early on a
		// clock stepped forward and back): nothing ended since the last one.
		return
	case boundary < p.boundary:
		// The clock stepped back: the seconds already recorded are dated by the
		// old clock and the ones to come could overlap them. Start over.
		for i := range p.counts {
			p.counts[i] = ratevar.Missing
		}
		p.end, p.known = boundary-1, false
	default:
		gap := boundary - p.boundary
		// The arrivals since the last wake belong to the second that just ended
		// only if both wakes came on time and one second apart.
		count := int64(c - min(p.cum, c))
		if gap > 1 || late || p.late {
			count = ratevar.Missing
		}
		for range min(gap-1, PerSecondRing) {
			p.push(ratevar.Missing)
		}
		p.push(count)
		p.end = boundary - 1
	}
	p.boundary, p.cum, p.late = boundary, max(c, p.cum), late
}

// push appends a second's count to the ring. p.mu must be held.
func (p *PerSecond) push(count int64) {
	p.counts[p.next] = count
	p.next = (p.next + 1) % PerSecondRing
	if count != ratevar.Missing {
		p.known = true
	}
}

// Snapshot returns the series, oldest first, or nil before a second was counted.
func (p *PerSecond) Snapshot() *stats.PerSecond {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.known {
		return nil
	}
	out := &stats.PerSecond{EndUnix: p.end, Counts: make([]int64, PerSecondRing)}
	for i := range PerSecondRing {
		out.Counts[i] = p.counts[(p.next+i)%PerSecondRing]
	}
	return out
}
