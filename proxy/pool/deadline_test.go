package pool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDecisionDeadlineFollowsTheFronts: the overflow decision's deadline is the
// configured timeout until 20 answers are known, then ten times their p99 within
// [2 ms, the timeout], over the last 128 answers only.
func TestDecisionDeadlineFollowsTheFronts(t *testing.T) {
	const limit = 25 * time.Millisecond
	repeat := func(d *decisionTimes, n int, t time.Duration) {
		for range n {
			d.add(t)
		}
	}
	for _, tc := range []struct {
		name string
		fill func(*decisionTimes)
		want time.Duration
	}{
		{"no answers yet", func(*decisionTimes) {}, limit},
		{"too few answers", func(d *decisionTimes) { repeat(d, 19, 300*time.Microsecond) }, limit},
		{"fast fronts", func(d *decisionTimes) { repeat(d, 20, 300*time.Microsecond) }, 3 * time.Millisecond},
		{"very fast fronts keep the floor", func(d *decisionTimes) { repeat(d, 50, 50*time.Microsecond) }, decisionFloor},
		{"slow fronts keep the timeout", func(d *decisionTimes) { repeat(d, 50, 10*time.Millisecond) }, limit},
		{"p99, not the mean: one slow answer in a hundred", func(d *decisionTimes) {
			repeat(d, 99, 200*time.Microsecond)
			d.add(time.Millisecond)
		}, 2 * time.Millisecond},
		{"two slow answers in a hundred set the p99", func(d *decisionTimes) {
			repeat(d, 98, 200*time.Microsecond)
			repeat(d, 2, time.Millisecond)
		}, 10 * time.Millisecond},
		{"old answers age out", func(d *decisionTimes) {
			repeat(d, 200, 5*time.Millisecond)
			repeat(d, decisionWindow, 400*time.Microsecond)
		}, 4 * time.Millisecond},
		{"negative times are ignored", func(d *decisionTimes) {
			repeat(d, 19, 400*time.Microsecond)
			d.add(-time.Second)
		}, limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d decisionTimes
			tc.fill(&d)
			require.Equal(t, tc.want, d.deadline(limit))
		})
	}
}
