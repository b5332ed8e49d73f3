package trace

import (
	"math"
	"math/rand/v2"
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
)

// PatternNames lists the patterns Load knows.
func PatternNames() []string {
	return []string{PatternFlashCrowd, PatternIncreaseDecrease, PatternBursts, PatternMMPP, PatternDiurnal}
}

func isRandomPattern(name string) bool { return name == PatternBursts || name == PatternMMPP }

// generate returns the per-second rates of a pattern.
func generate(name string, seed uint64) ([]float64, error) {
	switch name {
	case PatternBursts:
		return Bursts(seed), nil
	case PatternMMPP:
		return MMPP(seed), nil
	case PatternDiurnal:
		return Diurnal(), nil
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
