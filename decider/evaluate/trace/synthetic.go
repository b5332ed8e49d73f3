package trace

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Synthetic traffic for the evaluation matrix, beside seed 000's patterns.
// Each is a rate per second around a base of 1 req/s (scale it with
// Options.Scale); the random ones are drawn from Options.Seed.
const (
	// syntheticHours is the length of bursts and mmpp.
	syntheticHours = 6
	// Bursts: steps of BurstFactor× the base lasting BurstMinutes, starting as
	// a Poisson process with a mean gap of burstGapMinutes.
	burstGapMinutes                  = 20
	burstFactorLo, burstFactorHi     = 3.0, 6.0
	burstMinutesLo, burstMinutesHi   = 1.0, 15.0
	mmppLow, mmppHigh                = 1.0, 5.0
	mmppOffMinutes, mmppOnMinutes    = 10.0, 3.0
	diurnalAmplitude, diurnalSecond  = 0.75, 0.15
	diurnalTroughHour, diurnalPeriod = 2.0, 24.0
	// Recurring: 12 hours of bursts on a clock whose period, size and length
	// are drawn once from the seed, with jitter per occurrence, over a noisy
	// base and unrelated random bursts.
	recurringHours                       = 12
	recurPeriodLo, recurPeriodHi         = 12.0, 45.0 // minutes
	recurFactorLo, recurFactorHi         = 3.0, 6.0
	recurMinutesLo, recurMinutesHi       = 2.0, 8.0
	recurJitterSeconds                   = 20.0
	recurSizeJitter                      = 0.1
	recurNoiseMinutes, recurNoise        = 5.0, 0.15
	recurStrayGapMinutes                 = 60.0
	recurStrayFactorLo, recurStrayFactor = 2.0, 4.0
	recurStrayMinutesLo, recurStrayMins  = 1.0, 5.0
)

// PatternNames lists the patterns Load knows.
func PatternNames() []string {
	return []string{PatternFlashCrowd, PatternIncreaseDecrease, PatternBursts, PatternMMPP, PatternDiurnal, PatternRecurring}
}

func isRandomPattern(name string) bool {
	return name == PatternBursts || name == PatternMMPP || name == PatternRecurring
}

// generate returns the per-second rates of a pattern.
func generate(name string, seed uint64) ([]float64, error) {
	switch name {
	case PatternBursts:
		return Bursts(seed), nil
	case PatternMMPP:
		return MMPP(seed), nil
	case PatternDiurnal:
		return Diurnal(), nil
	case PatternRecurring:
		return Recurring(seed), nil
	}
	return Pattern(name)
}

func patternRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x51ed27a1c9d3b5e7*stream))
}

// Bursts is 6 hours at 1 req/s with steps to 3–6× (uniform) lasting 1–15
// minutes (uniform), starting as a Poisson process (mean gap 20 minutes);
// where steps overlap the higher wins. Edges are instant: the case a
// forecast cannot see coming.
func Bursts(seed uint64) []float64 {
	r := patternRand(seed, 1)
	out := make([]float64, syntheticHours*3600)
	for i := range out {
		out[i] = 1
	}
	t := r.ExpFloat64() * burstGapMinutes * 60
	for int(t) < len(out) {
		f := burstFactorLo + (burstFactorHi-burstFactorLo)*r.Float64()
		d := 60 * (burstMinutesLo + (burstMinutesHi-burstMinutesLo)*r.Float64())
		for i := int(t); i < min(len(out), int(t+d)); i++ {
			out[i] = math.Max(out[i], f)
		}
		t += r.ExpFloat64() * burstGapMinutes * 60
	}
	return out
}

// MMPP is a two-state Markov-modulated Poisson process over 6 hours: off at
// 1 req/s for exponential sojourns of mean 10 minutes, on at 5 req/s for
// mean 3 minutes.
func MMPP(seed uint64) []float64 {
	r := patternRand(seed, 2)
	out := make([]float64, syntheticHours*3600)
	on := false
	t := 0.0
	for int(t) < len(out) {
		mean, rate := mmppOffMinutes, mmppLow
		if on {
			mean, rate = mmppOnMinutes, mmppHigh
		}
		d := r.ExpFloat64() * mean * 60
		for i := int(t); i < min(len(out), int(t+d)); i++ {
			out[i] = rate
		}
		t += d
		on = !on
	}
	return out
}

// Diurnal is a smooth 24-hour day: 1 + 0.75·sin φ − 0.15·cos 2φ, φ the phase
// of the day, lowest (0.4 req/s) at 02:00 and highest (1.9) at 14:00, with
// the half-day harmonic flattening the night and the afternoon as web
// traffic does (the rate is monotone in sin φ, so these are the extremes). A real-time window of a few
// hours takes its ramp or its peak.
func Diurnal() []float64 {
	out := make([]float64, diurnalPeriod*3600)
	for i := range out {
		ph := 2 * math.Pi * (float64(i)/3600 - diurnalTroughHour - diurnalPeriod/4) / diurnalPeriod
		out[i] = 1 + diurnalAmplitude*math.Sin(ph) - diurnalSecond*math.Cos(2*ph)
	}
	return out
}

// Recurring is 12 hours of bursts on a clock, the traffic of cron jobs and
// top-of-the-hour batches: a base of 1 req/s with slow noise (a new level,
// lognormal with σ 0.15, every 5 minutes, linearly interpolated), steps to
// F× the base every P minutes for D minutes, where P (12–45), F (3–6) and D
// (2–8) are drawn once from the seed, each occurrence's onset moved by up to
// ±20 s and its size by up to ±10 % (uniform), and stray bursts that do not
// recur (2–4× for 1–5 minutes, starting as a Poisson process with a mean gap
// of an hour). The first onset is at a random phase of the period. Where
// steps overlap the higher wins.
func Recurring(seed uint64) []float64 {
	r := patternRand(seed, 3)
	period := 60 * (recurPeriodLo + (recurPeriodHi-recurPeriodLo)*r.Float64())
	factor := recurFactorLo + (recurFactorHi-recurFactorLo)*r.Float64()
	dur := 60 * (recurMinutesLo + (recurMinutesHi-recurMinutesLo)*r.Float64())
	n := recurringHours * 3600
	step := int(recurNoiseMinutes * 60)
	knots := make([]float64, n/step+2)
	for i := range knots {
		knots[i] = math.Exp(recurNoise*r.NormFloat64() - recurNoise*recurNoise/2)
	}
	out := make([]float64, n)
	for i := range out {
		k, f := i/step, float64(i%step)/float64(step)
		out[i] = knots[k]*(1-f) + knots[k+1]*f
	}
	burst := func(at, d, f float64) {
		for i := max(0, int(at)); i < min(n, int(at+d)); i++ {
			out[i] = math.Max(out[i], f*out[i])
		}
	}
	base := slices.Clone(out)
	for t := period * r.Float64(); int(t) < n; t += period {
		at := t + recurJitterSeconds*(2*r.Float64()-1)
		f := factor * (1 + recurSizeJitter*(2*r.Float64()-1))
		for i := max(0, int(at)); i < min(n, int(at+dur)); i++ {
			out[i] = math.Max(out[i], f*base[i])
		}
	}
	for t := r.ExpFloat64() * recurStrayGapMinutes * 60; int(t) < n; t += r.ExpFloat64() * recurStrayGapMinutes * 60 {
		f := recurStrayFactorLo + (recurStrayFactor-recurStrayFactorLo)*r.Float64()
		d := 60 * (recurStrayMinutesLo + (recurStrayMins-recurStrayMinutesLo)*r.Float64())
		burst(t, d, f)
	}
	return out
}
