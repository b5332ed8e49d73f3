package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// minuteRun is a two-minute run with the given idle CPU share (%) and mean
// latency per minute.
func minuteRun(name string, idle, latency [2]float64) *Result {
	r := &Result{Policy: name, MinuteMeanLatency: latency[:], CPUUsed: make([]float64, 120), CPURequestedPerSecond: make([]float64, 120)}
	for s := range 120 {
		r.CPURequestedPerSecond[s] = 1
		r.CPUUsed[s] = 1 - idle[s/60]/100
	}
	return r
}

func TestSeed000Statistic(t *testing.T) {
	// Idle CPU 10, 20 % (predictive) and 20, 20 % (reactive): mean 17.5, sd
	// 5√3/2, z-scores −√3, 1/√3, 1/√3, 1/√3. Latency 1, 1 s and 2, 2 s: z-scores
	// −1, −1, 1, 1. s = −z(e) − z(q): predictive √3 + 1 and −1/√3 + 1,
	// reactive −1/√3 − 1 twice; d = 2 + 4/√3 and 2: mean 2 + 2/√3, sd 2/√3,
	// z = √3 + 1.
	pred := minuteRun("predictive-hpa", [2]float64{10, 20}, [2]float64{1, 1})
	react := minuteRun("hpa-cooldown", [2]float64{20, 20}, [2]float64{2, 2})
	st := Seed000Compare(pred, react)
	require.Equal(t, 2, st.Minutes)
	require.InDelta(t, 2+2/math.Sqrt(3), st.Mean, 1e-9)
	require.InDelta(t, 2/math.Sqrt(3), st.StdDev, 1e-9)
	require.InDelta(t, math.Sqrt(3)+1, st.Z, 1e-9)
	require.InDelta(t, 0.00315, st.P, 1e-4, "P(Z > 2.732)")
	// The other way round the differences change sign: p becomes 1 − p.
	back := Seed000Compare(react, pred)
	require.InDelta(t, -st.Z, back.Z, 1e-9)
	require.InDelta(t, 1-st.P, back.P, 1e-9)
	// A minute without requests in either run is left out.
	pred.MinuteMeanLatency[1] = 0
	require.Equal(t, 1, Seed000Compare(pred, react).Minutes)
}
