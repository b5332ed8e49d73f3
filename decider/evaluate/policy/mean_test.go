package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMeansOverTheLastSeconds: Rate and avgInFlight average the last w seconds, fewer
// at the start, and are 0 before the first.
func TestMeansOverTheLastSeconds(t *testing.T) {
	o := &Observation{}
	require.Zero(t, o.Rate(5))
	require.Zero(t, avgInFlight(o, 5))
	o.Seconds = []Second{{Arrivals: 1, InFlight: 0.5}, {Arrivals: 2, InFlight: 1}, {Arrivals: 3, InFlight: 1.5}, {Arrivals: 6, InFlight: 4}}
	for _, tc := range []struct {
		w                 int
		rate, avgInFlight float64
	}{
		{w: 1, rate: 6, avgInFlight: 4},
		{w: 2, rate: 4.5, avgInFlight: 2.75},
		{w: 4, rate: 3, avgInFlight: 1.75},
		{w: 60, rate: 3, avgInFlight: 1.75}, // fewer seconds than the window
	} {
		require.Equal(t, tc.rate, o.Rate(tc.w), "Rate(%d)", tc.w)
		require.Equal(t, tc.avgInFlight, avgInFlight(o, tc.w), "avgInFlight(%d)", tc.w)
	}
}
