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
