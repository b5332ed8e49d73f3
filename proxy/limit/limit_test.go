package limit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/measure"
)

func TestNoLimitAdmitsAll(t *testing.T) {
	l := New(0, 5)
	rec := measure.New(nil, 0, 0)
	for i := 0; i < 3; i++ {
		require.Equal(t, Admitted, l.Admit(rec, rec.Now(), nil))
	}
	l.Release()
	require.Zero(t, rec.Snapshot().Queued)
}

func TestQueueThenReject(t *testing.T) {
	tests := []struct {
		name string
		// leave closes the waiter's gone channel instead of freeing a slot.
		leave        bool
		want         Result
		wantRejected uint64
	}{
		{name: "slot frees", want: Admitted, wantRejected: 1},
		{name: "client leaves while queued", leave: true, want: Gone, wantRejected: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := time.Unix(1000, 0)
			now := func() time.Time { return clock }
			rec := measure.New(now, 1, 1)
			l := New(1, 1)
			require.Equal(t, Admitted, l.Admit(rec, now(), nil))
			gone := make(chan struct{})
			got := make(chan Result)
			go func() { got <- l.Admit(rec, now(), gone) }()
			require.Eventually(t, func() bool { return rec.Snapshot().Waiting == 1 }, 10*time.Second, time.Millisecond)
			require.Equal(t, Full, l.Admit(rec, now(), nil), "k busy and the queue full")
			if tt.leave {
				close(gone)
			} else {
				l.Release()
			}
			require.Equal(t, tt.want, <-got)
			s := rec.Snapshot()
			require.Equal(t, tt.wantRejected, s.Rejected)
			require.Equal(t, uint64(1), s.Queued)
			require.Zero(t, s.Waiting)
		})
	}
}

func TestPoolingStates(t *testing.T) {
	var none *Limiter
	require.False(t, none.Saturated(), "no limit: never saturated, so never overflows")
	require.False(t, none.Idle())
	require.False(t, none.TryAdmit())

	l := New(1, 5)
	freed := l.EnableFreed()
	rec := measure.New(nil, 1, 5)
	require.True(t, l.Idle())
	require.False(t, l.Saturated())
	require.True(t, l.TryAdmit())
	require.True(t, l.Saturated())
	require.False(t, l.Idle())
	require.False(t, l.TryAdmit(), "no free slot")

	// A request waiting locally: not saturated (a new one queues behind it), and a
	// pull never takes the slot ahead of it.
	got := make(chan Result, 1)
	go func() { got <- l.Admit(rec, rec.Now(), nil) }()
	require.Eventually(t, func() bool { return rec.Snapshot().Waiting == 1 }, 5*time.Second, time.Millisecond)
	require.False(t, l.Saturated())
	l.Release()
	require.Equal(t, Admitted, <-got)
	<-freed
	require.False(t, l.TryAdmit(), "the waiter has the slot")
	l.Release()
	<-freed
	require.True(t, l.Idle())
	require.True(t, l.TryAdmit())
	l.Release()
}

// TestDrainedKeepsItsPlace: a request waiting when the drain begins leaves the wait
// with Drained and keeps its place (the queue bound counts it, no pull may take a
// slot ahead of it); Readmit serves it in that place and records its whole wait
// once; Leave gives the place up. A request that would wait once the drain began
// is Drained at once, unless the queue is full.
func TestDrainedKeepsItsPlace(t *testing.T) {
	clock := time.Unix(1000, 0)
	now := func() time.Time { return clock }
	rec := measure.New(now, 1, 2)
	l := New(1, 2)
	require.Equal(t, Admitted, l.Admit(rec, now(), nil))
	drain := make(chan struct{})
	arrived := now()
	got := make(chan Result, 1)
	go func() { got <- l.AdmitOrDrain(rec, arrived, nil, drain) }()
	require.Eventually(t, func() bool { return rec.Snapshot().Waiting == 1 }, 10*time.Second, time.Millisecond)
	clock = clock.Add(3 * time.Second)
	close(drain)
	require.Equal(t, Drained, <-got)
	s := rec.Snapshot()
	require.Zero(t, s.Waiting, "no longer waiting")
	require.Zero(t, s.Queued, "not counted as queued yet")
	require.False(t, l.Saturated(), "its place is held: a new request does not overflow ahead of it")
	require.False(t, l.TryAdmit(), "nor does a pull take a slot ahead of it")

	// Another request arrives during the drain: it would wait, so it is Drained at
	// once with a place of its own; a third finds the queue (2) full.
	require.Equal(t, Drained, l.AdmitOrDrain(rec, now(), nil, drain))
	require.Equal(t, Full, l.AdmitOrDrain(rec, now(), nil, drain), "the held places count against the bound")
	l.Leave() // the second went to a front

	go func() { got <- l.Readmit(rec, arrived, nil) }()
	require.Eventually(t, func() bool { return rec.Snapshot().Waiting == 1 }, 10*time.Second, time.Millisecond)
	clock = clock.Add(time.Second)
	l.Release()
	require.Equal(t, Admitted, <-got)
	s = rec.Snapshot()
	require.Equal(t, uint64(1), s.Queued, "the readmitted request is counted once")
	require.InDelta(t, 4.0, s.QueueWaitSecondsSum, 1e-9, "its whole wait, from arrival")
	require.Zero(t, s.Waiting)
	l.Release()
	require.True(t, l.Idle(), "every place was given back")
	require.True(t, l.TryAdmit())
	l.Release()

	var none *Limiter
	require.Equal(t, Admitted, none.AdmitOrDrain(rec, now(), nil, drain))
	require.Equal(t, Admitted, none.Readmit(rec, now(), nil))
	none.Leave()
	require.False(t, none.Busy())
}
