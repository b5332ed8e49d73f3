package matrix

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunContextStops: when the context ends after the first of four cells, no
// other cell starts or finishes; the first's result is kept, the others are nil,
// and the error (a *Stopped) counts them and wraps the context's cause. Progress
// is reported only for the cell that finished.
func TestRunContextStops(t *testing.T) {
	cells := shortCells(4)
	o := DefaultOptions()
	o.Policies = []string{"hpa"}
	cause := errors.New("interrupt signal received")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var dones []int
	rs, err := RunContext(ctx, cells, o, 1, func(done, total int, last *Result) {
		require.NotNil(t, last)
		dones = append(dones, done)
		cancel(cause)
	})
	var stopped *Stopped
	require.ErrorAs(t, err, &stopped)
	require.Equal(t, Stopped{Done: 1, Total: 4, Cause: cause}, *stopped)
	require.ErrorIs(t, err, cause)
	require.EqualError(t, err, "stopped after 1 of 4 cells: interrupt signal received")
	require.Equal(t, []int{1}, dones)
	require.Len(t, rs, 4)
	require.NotNil(t, rs[0])
	require.Equal(t, cells[0].Name(), rs[0].Name)
	require.Equal(t, []*Result{nil, nil, nil}, rs[1:])

	// Ended before the start: nothing runs.
	rs, err = RunContext(ctx, cells, o, 2, func(int, int, *Result) { t.Error("progress after the stop") })
	require.ErrorAs(t, err, &stopped)
	require.Equal(t, 0, stopped.Done)
	require.Equal(t, make([]*Result, 4), rs)
}
