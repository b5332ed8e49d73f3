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
