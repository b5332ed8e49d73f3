package queueing

import (
	"errors"
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
)

const refPrec = 512

// refErlang computes Erlang B and C in high precision from the textbook sum
// B = (a^c/c!) / Σ_{k=0..c} a^k/k!, independently of the recursion under test.
func refErlang(t testing.TB, a float64, c int) (b, cw float64) {
	t.Helper()
	ba := new(big.Float).SetPrec(refPrec).SetFloat64(a)
	term := new(big.Float).SetPrec(refPrec).SetInt64(1)
	sum := new(big.Float).SetPrec(refPrec).SetInt64(1)
	k := new(big.Float).SetPrec(refPrec)
	for i := 1; i <= c; i++ {
		term.Mul(term, ba)
		term.Quo(term, k.SetInt64(int64(i)))
		sum.Add(sum, term)
	}
	bb := new(big.Float).SetPrec(refPrec).Quo(term, sum)
	// C = B / (1 − ρ(1 − B)).
	rho := new(big.Float).SetPrec(refPrec).Quo(ba, new(big.Float).SetPrec(refPrec).SetInt64(int64(c)))
	one := new(big.Float).SetPrec(refPrec).SetInt64(1)
	den := new(big.Float).SetPrec(refPrec).Sub(one, bb)
	den.Mul(den, rho)
	den.Sub(one, den)
	cc := new(big.Float).SetPrec(refPrec).Quo(bb, den)
	b, _ = bb.Float64()
	cw, _ = cc.Float64()
	return b, cw
}

func relErr(got, want float64) float64 {
	if want == 0 {
		return math.Abs(got)
	}
	return math.Abs(got-want) / math.Abs(want)
}

func TestErlangAgainstHighPrecisionReference(t *testing.T) {
	cases := []struct {
		a float64
		c int
	}{
		{0.5, 1}, {1.5, 2}, {2, 3}, {9.5, 12}, {9.5, 10}, {0.001, 5}, {49.9, 50},
		{90, 100}, {800, 1000}, {999, 1000}, {9000, 10000}, {99000, 100000}, {99990, 100000},
	}
	for _, tc := range cases {
		wantB, wantC := refErlang(t, tc.a, tc.c)
		gotB, err := ErlangB(tc.a, tc.c)
		require.NoError(t, err)
		gotC, err := ErlangC(tc.a, tc.c)
		require.NoError(t, err)
		require.LessOrEqualf(t, relErr(gotB, wantB), 1e-9, "B(a=%v,c=%d) = %v, want %v", tc.a, tc.c, gotB, wantB)
		require.LessOrEqualf(t, relErr(gotC, wantC), 1e-9, "C(a=%v,c=%d) = %v, want %v", tc.a, tc.c, gotC, wantC)
	}
}

// TestTextbookCases checks closed forms: M/M/1 (C = ρ, Wq = ρ/(μ−λ), T ~ Exp(μ−λ))
// and M/M/2 (C = 2ρ²/(1+ρ), Lq = 2ρ³/(1−ρ²)).
func TestTextbookCases(t *testing.T) {
	t.Run("M/M/1", func(t *testing.T) {
		for _, tc := range []struct{ lambda, es float64 }{{5, 0.1}, {0.9, 1}, {99, 0.01}, {1e-6, 1}} {
			m, err := Load{ArrivalRate: tc.lambda, ServiceTime: tc.es}.At(1)
			require.NoError(t, err)
			mu := 1 / tc.es
			rho := tc.lambda / mu
			require.InEpsilon(t, rho, m.WaitProbability, 1e-12)
			require.InEpsilon(t, rho/(mu-tc.lambda), m.MeanWait, 1e-12)
			require.InEpsilon(t, 1/(mu-tc.lambda), m.MeanLatency, 1e-12)
			for _, p := range []float64{50, 90, 95, 99, 99.9} {
				got, err := m.LatencyPercentile(p)
				require.NoError(t, err)
				want := -math.Log1p(-p/100) / (mu - tc.lambda)
				require.InEpsilonf(t, want, got, 1e-9, "p%v", p)
			}
		}
	})
	t.Run("M/M/2", func(t *testing.T) {
		for _, rho := range []float64{0.1, 0.5, 0.8, 0.95} {
			es := 0.2
			lambda := 2 * rho / es
			m, err := Load{ArrivalRate: lambda, ServiceTime: es}.At(2)
			require.NoError(t, err)
			require.InEpsilon(t, 2*rho*rho/(1+rho), m.WaitProbability, 1e-12)
			require.InEpsilon(t, 2*rho*rho*rho/(1-rho*rho), m.MeanQueueLength, 1e-12)
			require.InEpsilon(t, rho, m.Utilization, 1e-15)
		}
	})
	t.Run("issue example", func(t *testing.T) {
		// λ = 95/s, E[S] = 100 ms, c = 12: a = 9.5 Erlangs, ρ = 0.791666…
		m, err := Load{ArrivalRate: 95, ServiceTime: 0.1}.At(12)
		require.NoError(t, err)
		_, wantC := refErlang(t, 9.5, 12)
		require.InEpsilon(t, wantC, m.WaitProbability, 1e-12)
		require.InEpsilon(t, wantC/(12*10-95.0), m.MeanWait, 1e-12)
		require.InEpsilon(t, 95*wantC/(12*10-95.0), m.MeanQueueLength, 1e-12)
	})
}

// refTail is the sojourn tail exactly as DESIGN.md writes it, without the
// rearrangement used by the implementation.
func refTail(cw, mu, theta, t float64) float64 {
	return (1-cw)*math.Exp(-mu*t) + cw*(theta*math.Exp(-mu*t)-mu*math.Exp(-theta*t))/(theta-mu)
}

func TestPercentileAgainstReference(t *testing.T) {
	cases := []struct {
		lambda, es float64
		c          int
		p          float64
	}{
		{95, 0.1, 12, 95}, {95, 0.1, 12, 99}, {95, 0.1, 10, 50}, {8, 1, 10, 95},
		{900, 0.1, 100, 99}, {9985, 0.1, 1000, 95}, {99000, 1, 100000, 99.9}, {1, 1, 3, 90},
	}
	for _, tc := range cases {
		m, err := Load{ArrivalRate: tc.lambda, ServiceTime: tc.es}.At(tc.c)
		require.NoError(t, err)
		_, cw := refErlang(t, tc.lambda*tc.es, tc.c)
		mu := 1 / tc.es
		theta := float64(tc.c)*mu - tc.lambda
		got, err := m.LatencyPercentile(tc.p)
		require.NoError(t, err)
		// The reference solution: the root of refTail = 1 − p by bisection on refTail.
		lo, hi := 0.0, 1e6*tc.es
		for i := 0; i < 300; i++ {
			mid := (lo + hi) / 2
			if refTail(cw, mu, theta, mid) > 1-tc.p/100 {
				lo = mid
			} else {
				hi = mid
			}
		}
		require.InEpsilonf(t, lo, got, 1e-9, "p%v of λ=%v E[S]=%v c=%d", tc.p, tc.lambda, tc.es, tc.c)
	}
}

func TestContinuityAtThetaEqualsMu(t *testing.T) {
	// c = 2, λ = μ gives θ = 2μ − μ = μ exactly.
	es := 0.1
	mu := 1 / es
	exact, err := Load{ArrivalRate: mu, ServiceTime: es}.At(2)
	require.NoError(t, err)
	require.Equal(t, exact.waitRate, exact.mu)
	for _, tt := range []float64{0.01, 0.1, 0.3, 1, 3} {
		limit := (1 + exact.WaitProbability*mu*tt) * math.Exp(-mu*tt)
		require.InEpsilon(t, limit, exact.TailProbability(tt), 1e-14)
		for _, eps := range []float64{1e-15, 1e-12, 1e-9, 1e-6} {
			for _, sign := range []float64{-1, 1} {
				near, err := Load{ArrivalRate: mu * (1 + sign*eps), ServiceTime: es}.At(2)
				require.NoError(t, err)
				require.InEpsilonf(t, limit, near.TailProbability(tt), 100*eps+1e-13, "t=%v eps=%v", tt, sign*eps)
			}
		}
	}
	p, err := exact.LatencyPercentile(95)
	require.NoError(t, err)
	require.InEpsilon(t, 0.95, 1-exact.TailProbability(p), 1e-12)
}

func TestProperties(t *testing.T) {
	for _, es := range []float64{0.001, 0.1, 2} {
		for _, a := range []float64{0.3, 7.7, 95, 4321} {
			l := Load{ArrivalRate: a / es, ServiceTime: es}
			prevMean, prevWait, prevP99 := math.Inf(1), math.Inf(1), math.Inf(1)
			first := int(math.Floor(a)) + 1
			for c := first; c <= first+60; c++ {
				m, err := l.At(c)
				require.NoError(t, err)
				require.GreaterOrEqual(t, m.WaitProbability, 0.0)
				require.LessOrEqual(t, m.WaitProbability, 1.0)
				require.Less(t, m.Utilization, 1.0)
				require.LessOrEqual(t, m.MeanLatency, prevMean, "mean latency must not rise with c")
				if prevWait > 1e-290 { // Below that the wait is lost in rounding.
					require.Less(t, m.MeanWait, prevWait, "mean wait must fall with c")
				}
				require.GreaterOrEqual(t, m.MeanLatency, es)
				var prevP float64
				for _, p := range []float64{1, 50, 90, 95, 99, 99.99} {
					v, err := m.LatencyPercentile(p)
					require.NoError(t, err)
					require.Greater(t, v, prevP, "percentiles must be ordered")
					prevP = v
				}
				p99, _ := m.LatencyPercentile(99)
				require.LessOrEqual(t, p99, prevP99, "p99 must not rise with c")
				prevMean, prevWait, prevP99 = m.MeanLatency, m.MeanWait, p99
			}
		}
	}
}

func TestLargeServerCountsStayFinite(t *testing.T) {
	for _, c := range []int{1000, 50_000, 100_000} {
		for _, rho := range []float64{1e-9, 0.5, 0.9, 0.99, 0.9999, 1 - 1e-9} {
			l := Load{ArrivalRate: rho * float64(c) / 0.05, ServiceTime: 0.05}
			m, err := l.At(c)
			require.NoError(t, err)
			for _, v := range []float64{m.WaitProbability, m.MeanWait, m.MeanLatency, m.MeanQueueLength} {
				require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "c=%d rho=%v: %+v", c, rho, m)
			}
			p, err := m.LatencyPercentile(99)
			require.NoError(t, err)
			require.False(t, math.IsNaN(p) || math.IsInf(p, 0))
			require.GreaterOrEqual(t, p, -math.Log(0.01)*0.05*(1-1e-12))
		}
	}
}

func TestUnstable(t *testing.T) {
	for _, tc := range []struct {
		lambda, es float64
		c          int
	}{{10, 0.1, 1}, {11, 0.1, 1}, {120, 0.1, 12}, {1e6, 1, 100_000}} {
		_, err := Load{ArrivalRate: tc.lambda, ServiceTime: tc.es}.At(tc.c)
		require.ErrorIs(t, err, ErrUnstable)
		var ue *UnstableError
		require.ErrorAs(t, err, &ue)
		require.Equal(t, tc.c, ue.Servers)
		_, err = ErlangC(tc.lambda*tc.es, tc.c)
		require.ErrorIs(t, err, ErrUnstable)
	}
}

func TestInvalidInput(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name  string
		run   func() error
		field string
	}{
		{"NaN rate", func() error { _, err := Load{ArrivalRate: nan, ServiceTime: 1}.At(1); return err }, "arrival rate"},
		{"negative rate", func() error { _, err := Load{ArrivalRate: -1, ServiceTime: 1}.At(1); return err }, "arrival rate"},
		{"infinite rate", func() error { _, err := Load{ArrivalRate: math.Inf(1), ServiceTime: 1}.At(1); return err }, "arrival rate"},
		{"zero service", func() error { _, err := Load{ArrivalRate: 1, ServiceTime: 0}.At(1); return err }, "service time"},
		{"negative service", func() error { _, err := Load{ArrivalRate: 1, ServiceTime: -1}.At(1); return err }, "service time"},
		{"NaN service", func() error { _, err := Load{ArrivalRate: 1, ServiceTime: nan}.At(1); return err }, "service time"},
		{"zero servers", func() error { _, err := Load{ArrivalRate: 1, ServiceTime: 1}.At(0); return err }, "servers"},
		{"too many servers", func() error { _, err := Load{ArrivalRate: 1, ServiceTime: 1}.At(MaxServers + 1); return err }, "servers"},
		{"negative SCV", func() error {
			_, err := Load{ArrivalRate: 1, ServiceTime: 1, AllenCunneen: true, ServiceSCV: -1}.At(2)
			return err
		}, "service SCV"},
		{"overflowing load", func() error { _, err := Load{ArrivalRate: 1e308, ServiceTime: 1e308}.At(1); return err }, "arrival rate"},
		{"percentile 0", func() error {
			m, _ := Load{ArrivalRate: 1, ServiceTime: 1}.At(2)
			_, err := m.LatencyPercentile(0)
			return err
		}, "percentile"},
		{"percentile 100", func() error {
			m, _ := Load{ArrivalRate: 1, ServiceTime: 1}.At(2)
			_, err := m.LatencyPercentile(100)
			return err
		}, "percentile"},
		{"percentile NaN", func() error {
			m, _ := Load{ArrivalRate: 1, ServiceTime: 1}.At(2)
			_, err := m.LatencyPercentile(nan)
			return err
		}, "percentile"},
		{"zero metrics", func() error { _, err := Metrics{}.LatencyPercentile(50); return err }, "metrics"},
		{"negative Erlang load", func() error { _, err := ErlangB(-1, 3); return err }, "offered load"},
		{"negative Erlang servers", func() error { _, err := ErlangB(1, -3); return err }, "servers"},
		{"min target zero", func() error { _, err := Load{ArrivalRate: 1, ServiceTime: 1}.MinServers(0, 0); return err }, "target"},
		{"min percentile 100", func() error { _, err := Load{ArrivalRate: 1, ServiceTime: 1}.MinServers(5, 100); return err }, "percentile"},
		{"min concurrency 0", func() error {
			_, err := Load{ArrivalRate: 1, ServiceTime: 1}.MinPods(0, LayoutPooled, 5, 0)
			return err
		}, "concurrency"},
		{"per-pod zero pods", func() error { _, err := Load{ArrivalRate: 1, ServiceTime: 1}.PerPod(0, 1); return err }, "pods"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
		})
	}
}

// linearMinPods is the reference for MinPods: the plain scan the thesis uses.
func linearMinPods(t *testing.T, l Load, k int, lay Layout, target, p float64) int {
	for n := 1; n < 1_000_000; n++ {
		m, err := l.Pods(n, k, lay)
		if errors.Is(err, ErrUnstable) {
			continue
		}
		require.NoError(t, err)
		v, err := m.Latency(p)
		require.NoError(t, err)
		if v <= target {
			return n
		}
	}
	t.Fatal("no solution")
	return 0
}

func TestMinPodsMatchesLinearScan(t *testing.T) {
	loads := []Load{
		{ArrivalRate: 95, ServiceTime: 0.1},
		{ArrivalRate: 3, ServiceTime: 0.25},
		{ArrivalRate: 2000, ServiceTime: 0.05},
		{ArrivalRate: 0, ServiceTime: 0.05},
		{ArrivalRate: 95, ServiceTime: 0.1, AllenCunneen: true, ArrivalSCV: 1, ServiceSCV: 4},
		{ArrivalRate: 95, ServiceTime: 0.1, AllenCunneen: true, ArrivalSCV: 0.5, ServiceSCV: 0.2},
	}
	for _, l := range loads {
		for _, k := range []int{1, 4} {
			for _, lay := range []Layout{LayoutPooled, LayoutPerPod} {
				for _, tc := range []struct{ target, p float64 }{{0.12, 0}, {0.101, 0}, {0.5, 95}, {0.35, 95}, {1, 99}} {
					want := linearMinPods(t, l, k, lay, tc.target*l.ServiceTime/0.1, tc.p)
					got, err := l.MinPods(k, lay, tc.target*l.ServiceTime/0.1, tc.p)
					require.NoError(t, err)
					require.Equalf(t, want, got, "load %+v k=%d %s target=%v p=%v", l, k, lay, tc.target, tc.p)
				}
			}
		}
	}
}

func TestMinServersLarge(t *testing.T) {
	l := Load{ArrivalRate: 95000 / 0.1, ServiceTime: 0.1}
	c, err := l.MinServers(0.12, 99)
	// p99 of service alone is 0.46 s > 0.12 s.
	require.ErrorIs(t, err, ErrInfeasible)
	require.Zero(t, c)
	c, err = l.MinServers(0.5, 99)
	require.NoError(t, err)
	m, err := l.At(c)
	require.NoError(t, err)
	v, _ := m.LatencyPercentile(99)
	require.LessOrEqual(t, v, 0.5)
	m, err = l.At(c - 1)
	if err == nil {
		v, _ = m.LatencyPercentile(99)
		require.Greater(t, v, 0.5)
	} else {
		require.ErrorIs(t, err, ErrUnstable)
	}
}

func TestAllenCunneen(t *testing.T) {
	base := Load{ArrivalRate: 95, ServiceTime: 0.1}
	mm, err := base.At(12)
	require.NoError(t, err)
	// ca² = cs² = 1 is M/M/c exactly.
	same, err := Load{ArrivalRate: 95, ServiceTime: 0.1, AllenCunneen: true, ArrivalSCV: 1, ServiceSCV: 1}.At(12)
	require.NoError(t, err)
	require.InEpsilon(t, mm.MeanWait, same.MeanWait, 1e-15)
	// cs² = 3: the wait doubles ((1+3)/2 = 2).
	g, err := Load{ArrivalRate: 95, ServiceTime: 0.1, AllenCunneen: true, ArrivalSCV: 1, ServiceSCV: 3}.At(12)
	require.NoError(t, err)
	require.InEpsilon(t, 2*mm.MeanWait, g.MeanWait, 1e-12)
	require.InEpsilon(t, 2*mm.MeanQueueLength, g.MeanQueueLength, 1e-12)
	require.Equal(t, mm.WaitProbability, g.WaitProbability)
	p1, _ := mm.LatencyPercentile(95)
	p2, _ := g.LatencyPercentile(95)
	require.Greater(t, p2, p1)
	// Deterministic traffic (both SCVs 0): nobody waits.
	d, err := Load{ArrivalRate: 95, ServiceTime: 0.1, AllenCunneen: true}.At(12)
	require.NoError(t, err)
	require.Zero(t, d.MeanWait)
	require.InEpsilon(t, 0.1, d.MeanLatency, 1e-15)
}

func TestPerPodIsWorseThanPooled(t *testing.T) {
	l := Load{ArrivalRate: 95, ServiceTime: 0.1}
	pooled, err := l.Pods(12, 1, LayoutPooled)
	require.NoError(t, err)
	perPod, err := l.Pods(12, 1, LayoutPerPod)
	require.NoError(t, err)
	require.Greater(t, perPod.MeanLatency, pooled.MeanLatency)
	// One pod: both layouts are the same queue.
	a, _ := l.Pods(1, 12, LayoutPerPod)
	b, _ := l.Pods(1, 12, LayoutPooled)
	require.Equal(t, a.MeanLatency, b.MeanLatency)
	// Per pod, each M/M/1 queue sees λ/12.
	mu, lam := 10.0, 95.0/12
	require.InEpsilon(t, 1/(mu-lam), perPod.MeanLatency, 1e-12)
	require.Equal(t, "per-pod", LayoutPerPod.String())
	require.Equal(t, "pooled", LayoutPooled.String())
}

func FuzzModel(f *testing.F) {
	f.Add(95.0, 0.1, 12, 95.0, 0.12, 1.0, 1.0)
	f.Add(0.0, 1.0, 1, 50.0, 1.0, 0.0, 0.0)
	f.Add(99999.0, 1.0, 100000, 99.9, 10.0, 2.0, 5.0)
	f.Add(-1.0, math.NaN(), -5, 100.0, -1.0, -1.0, math.Inf(1))
	f.Fuzz(func(t *testing.T, lambda, es float64, c int, p, target, ca, cs float64) {
		if c > 200_000 {
			c %= 200_000 // Keep each input fast; MaxServers itself is checked elsewhere.
		}
		l := Load{ArrivalRate: lambda, ServiceTime: es, AllenCunneen: ca != 1 || cs != 1, ArrivalSCV: ca, ServiceSCV: cs}
		m, err := l.At(c)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) && !errors.Is(err, ErrUnstable) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		for _, v := range []float64{m.Utilization, m.WaitProbability, m.MeanQueueLength, m.MeanWait, m.MeanLatency} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("bad metric %v in %+v for %+v c=%d", v, m, l, c)
			}
		}
		if m.WaitProbability > 1 || m.Utilization >= 1 {
			t.Fatalf("probability out of range: %+v", m)
		}
		if v, err := m.LatencyPercentile(p); err == nil && (math.IsNaN(v) || v < 0 || math.IsInf(v, 0)) {
			t.Fatalf("bad percentile %v at p=%v for %+v", v, p, m)
		}
		if l.OfferedLoad() < 1e5 && target < 1e6*es {
			if n, err := l.MinPods(1, LayoutPerPod, target, 0); err == nil && n < 1 {
				t.Fatalf("MinPods returned %d", n)
			}
		}
	})
}
