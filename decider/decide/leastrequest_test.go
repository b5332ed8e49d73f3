package decide

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// erlangTail is P(Erlang(i, rate) > t), written out separately from the model.
func erlangTail(i int, rate, t float64) float64 {
	var sum float64
	for j := range i {
		sum += math.Pow(rate*t, float64(j)) / math.Gamma(float64(j)+1)
	}
	return math.Exp(-rate*t) * sum
}

// TestLeastRequestTail: with κ = 1 a request finding i ahead stays i + 1
// exponential services, so the tail is a mixture of Erlang tails; with κ = 0
// nobody waits; the mean is the tail's integral; the percentile solves the
// tail; the share of arrivals finding i ahead is J(s_i) − J(s_{i+1}), J(s) =
// s/n + (1 − 1/n)s² the chance the pod joined holds at least i (two draws, the
// same pod with probability 1/n), s_{i+1} = ρ·J(s_i).
func TestLeastRequestTail(t *testing.T) {
	for _, tc := range []struct {
		lambda, es float64
		n          int32
	}{
		{lambda: 10, es: 0.05, n: 2},
		{lambda: 70, es: 0.05, n: 5},
		{lambda: 190, es: 0.05, n: 10},
	} {
		m, ok := newLeastRequest(tc.lambda, tc.es, 1, tc.n, nil)
		require.True(t, ok)
		rho := tc.lambda * tc.es / float64(tc.n)
		join := func(s float64) float64 { return s/float64(tc.n) + (1-1/float64(tc.n))*s*s }
		s := 1.0
		for i := 0; i < 4; i++ {
			next := rho * join(s)
			require.InDelta(t, join(s)-join(next), m.ahead[i], 1e-12, "ρ %.2f, %d ahead", rho, i)
			s = next
		}
		var sum float64
		for _, a := range m.ahead {
			sum += a
		}
		require.InDelta(t, 1, sum, 1e-12)
		for _, x := range []float64{0.01, 0.1, 0.3, 1} {
			var want float64
			for i, a := range m.ahead {
				want += a * erlangTail(i+1, 1/tc.es, x)
			}
			require.InDelta(t, want, m.tail(x), 1e-6*math.Max(want, 1e-3), "ρ %.2f, t %v", rho, x)
		}
		p95 := m.latency(95)
		require.InDelta(t, 0.05, m.tail(p95), 1e-6)
		// The mean is ∫ P(T > t) dt.
		var integral float64
		const h = 1e-3
		for x := h / 2; x < 25*tc.es/(1-rho); x += h {
			integral += m.tail(x) * h
		}
		require.InEpsilon(t, m.mean(), integral, 1e-3)
		none, _ := newLeastRequest(tc.lambda, tc.es, 0, tc.n, nil)
		require.InDelta(t, math.Exp(-0.1/tc.es), none.tail(0.1), 1e-12, "κ = 0: nobody waits")
		slow, _ := newLeastRequest(tc.lambda, tc.es, 2, tc.n, nil)
		require.Greater(t, slow.latency(95), p95, "a more variable wait is slower")
	}
	_, ok := newLeastRequest(100, 0.05, 1, 5, nil)
	require.False(t, ok, "ρ = 1 is unstable")
}

// TestLeastRequestLimits: with one pod both draws are that pod and the model is
// its M/M/1 queue exactly (an arrival finds i ahead with probability
// (1 − ρ)ρ^i); as the pods grow it tends to the mean-field limit, s_i =
// ρ^(2^i − 1), where an arrival finds i ahead with probability s_i² − s_{i+1}².
func TestLeastRequestLimits(t *testing.T) {
	const es = 0.05
	one, ok := newLeastRequest(0.6/es, es, 1, 1, nil)
	require.True(t, ok)
	for i := 0; i < 6; i++ {
		require.InDelta(t, 0.4*math.Pow(0.6, float64(i)), one.ahead[i], 1e-12, "%d ahead", i)
	}
	many, ok := newLeastRequest(0.6*1e6/es, es, 1, 1e6, nil)
	require.True(t, ok)
	s := func(i int) float64 { return math.Pow(0.6, math.Pow(2, float64(i))-1) }
	for i := 0; i < 4; i++ {
		require.InDelta(t, s(i)*s(i)-s(i+1)*s(i+1), many.ahead[i], 1e-5, "%d ahead", i)
	}
}
