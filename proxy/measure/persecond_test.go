package measure

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/proxy/stats"
)

// secondClock is a settable clock.
type secondClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *secondClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *secondClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// at is the Unix time sec plus ms milliseconds.
func at(sec int64, ms int) time.Time {
	return time.Unix(sec, int64(ms)*int64(time.Millisecond))
}

// missingBut is a ring of PerSecondRing Missing counts ending with tail.
func missingBut(tail ...int64) []int64 {
	out := slices.Repeat([]int64{ratevar.Missing}, PerSecondRing-len(tail))
	return append(out, tail...)
}

func arrive(r *Recorder, n int) {
	for range n {
		r.Arrive()
	}
}

func TestPerSecondCountsEachSecondOnTime(t *testing.T) {
	clock := &secondClock{t: at(100, 300)}
	r := New(clock.now, 0, 0)
	p := r.CountPerSecond(nil)
	arrive(r, 2) // during the second the counter started in: not a whole second
	clock.set(at(101, 2))
	p.Tick()
	require.Nil(t, p.Snapshot(), "no second counted yet")
	require.Nil(t, r.Snapshot().ArrivalsPerSecond, "the field is omitted until a second is counted")

	arrive(r, 5)
	clock.set(at(102, 10))
	p.Tick()
	arrive(r, 3)
	clock.set(at(103, 100)) // exactly PerSecondMaxLate: still on time
	p.Tick()
	clock.set(at(104, 1))
	p.Tick() // a second without arrivals counts 0
	require.Equal(t, &stats.PerSecond{EndUnix: 103, Counts: missingBut(ratevar.Missing, 5, 3, 0)}, p.Snapshot())

	snap := r.Snapshot()
	require.NoError(t, snap.Validate())
	require.Equal(t, p.Snapshot(), snap.ArrivalsPerSecond)
}

func TestPerSecondLateWakeMakesItsSecondsMissing(t *testing.T) {
	clock := &secondClock{t: at(100, 500)}
	r := New(clock.now, 0, 0)
	p := r.CountPerSecond(nil)
	for _, step := range []struct {
		sec      int64
		ms       int
		arrivals int
	}{
		{101, 1, 0},
		{102, 1, 4},   // 101: 4
		{103, 250, 6}, // late: 102 cannot be told from 103's first 250 ms
		{104, 2, 7},   // the previous wake was late: 103 lost its first 250 ms
		{105, 2, 1},   // 104: 1
		{107, 3, 9},   // a wake that slept through 105 and 106: neither is known
		{108, 3, 2},   // 107: 2
	} {
		arrive(r, step.arrivals)
		clock.set(at(step.sec, step.ms))
		p.Tick()
	}
	require.Equal(t, &stats.PerSecond{EndUnix: 107,
		Counts: missingBut(ratevar.Missing, 4, ratevar.Missing, ratevar.Missing, 1, ratevar.Missing, ratevar.Missing, 2)}, p.Snapshot())
}

func TestPerSecondRingKeepsTheLast32Seconds(t *testing.T) {
	clock := &secondClock{t: at(1000, 0)}
	r := New(clock.now, 0, 0)
	p := r.CountPerSecond(nil)
	p.Tick() // at the boundary itself: 999 Missing, counting from 1000
	var want []int64
	for i := range int64(40) {
		arrive(r, int(i))
		clock.set(at(1001+i, 5))
		p.Tick()
		want = append(want, i)
	}
	got := p.Snapshot()
	// The wake at 1001+i closes the second 1000+i.
	require.Equal(t, int64(1039), got.EndUnix)
	require.Equal(t, want[len(want)-PerSecondRing:], got.Counts)
	require.Equal(t, int64(39), got.At(1039))
	require.Equal(t, int64(8), got.At(1008))
	require.Equal(t, int64(ratevar.Missing), got.At(1007), "before the ring")
	require.Equal(t, int64(ratevar.Missing), got.At(1040), "after the ring")
}

func TestPerSecondAfterARestartOrAClockStep(t *testing.T) {
	clock := &secondClock{t: at(200, 0)}
	r := New(clock.now, 0, 0)
	p := r.CountPerSecond(nil)
	for sec := int64(200); sec <= 203; sec++ {
		arrive(r, 3)
		clock.set(at(sec, 1))
		p.Tick()
	}
	// The first wake (200.001) closes 199, which the counter did not see whole.
	require.Equal(t, &stats.PerSecond{EndUnix: 202, Counts: missingBut(ratevar.Missing, 3, 3, 3)}, p.Snapshot())

	t.Run("a new process counts from its own start", func(t *testing.T) {
		clock := &secondClock{t: at(203, 700)}
		r := New(clock.now, 0, 0)
		p := r.CountPerSecond(nil)
		arrive(r, 9) // in the partial second 203
		clock.set(at(204, 1))
		p.Tick()
		arrive(r, 2)
		clock.set(at(205, 1))
		p.Tick()
		require.Equal(t, &stats.PerSecond{EndUnix: 204, Counts: missingBut(ratevar.Missing, 2)}, p.Snapshot())
	})

	t.Run("a clock stepped back starts the series over", func(t *testing.T) {
		arrive(r, 5)
		clock.set(at(150, 2))
		p.Tick()
		require.Nil(t, p.Snapshot(), "nothing counted on the new clock yet")
		arrive(r, 4)
		clock.set(at(151, 2))
		p.Tick()
		require.Equal(t, &stats.PerSecond{EndUnix: 150, Counts: missingBut(4)}, p.Snapshot())
		// A repeated wake in the same second records nothing.
		arrive(r, 1)
		clock.set(at(151, 900))
		p.Tick()
		clock.set(at(152, 3))
		p.Tick()
		require.Equal(t, &stats.PerSecond{EndUnix: 151, Counts: missingBut(4, 1)}, p.Snapshot())
	})
}

func TestPerSecondLeavesPulledArrivalsOut(t *testing.T) {
	clock := &secondClock{t: at(300, 0)}
	r := New(clock.now, 0, 0)
	p := r.CountPerSecond(nil)
	p.Tick()
	arrive(r, 3)
	for range 4 {
		r.ArrivePulled()
	}
	clock.set(at(301, 1))
	p.Tick()
	snap := r.Snapshot()
	require.Equal(t, uint64(7), snap.Arrivals, "pulled requests are arrivals in /stats")
	require.Equal(t, missingBut(3), snap.ArrivalsPerSecond.Counts, "but they arrived from clients at their sender")
	require.NoError(t, snap.Validate())
}

// TestPerSecondRunWakesAtEachBoundary runs the loop on a fake sleep that
// advances the clock by what it is asked to wait, plus a lateness the test
// chooses per wake.
func TestPerSecondRunWakesAtEachBoundary(t *testing.T) {
	clock := &secondClock{t: at(500, 400)}
	r := New(clock.now, 0, 0)
	lateness := []time.Duration{time.Millisecond, 2 * time.Millisecond, 300 * time.Millisecond, time.Millisecond, time.Millisecond, 0}
	var asked []time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := 0
	sleep := func(ctx context.Context, d time.Duration) error {
		asked = append(asked, d)
		if wake == len(lateness) {
			cancel()
			return ctx.Err()
		}
		arrive(r, 10*wake)
		clock.set(clock.now().Add(d + lateness[wake]))
		wake++
		return nil
	}
	p := r.CountPerSecond(sleep)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	require.Equal(t, []time.Duration{600 * time.Millisecond, 999 * time.Millisecond, 998 * time.Millisecond,
		700 * time.Millisecond, 999 * time.Millisecond, 999 * time.Millisecond, time.Second}, asked)
	// Wakes at 501.001 (start), 502.002 (501: 10), 503.3 (late: 502 Missing),
	// 504.001 (503 Missing), 505.001 (504: 40), 506.000 (505: 50).
	require.Equal(t, &stats.PerSecond{EndUnix: 505, Counts: missingBut(ratevar.Missing, 10, ratevar.Missing, ratevar.Missing, 40, 50)}, p.Snapshot())
}

func TestRealSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, RealSleep(ctx, time.Hour), context.Canceled)
	require.NoError(t, RealSleep(context.Background(), time.Nanosecond))
}
