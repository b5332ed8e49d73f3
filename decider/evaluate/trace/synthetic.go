package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
	// Held-out shapes (HeldOutNames): generated for the held-out evaluation
	// only, never screened or tuned on.
	heldOutHours = 6
	// OnOff: onoffSources heavy-tailed ON/OFF sources; ON and OFF periods
	// Pareto with shape onoffShape and scales onoffOnScale and onoffOffScale
	// seconds (means 3.5 × those at shape 1.4), truncated at the trace.
	onoffSources                = 40
	onoffShape                  = 1.4
	onoffOnScale, onoffOffScale = 10.0, 40.0
	onoffRateLo, onoffRateHi    = 0.5, 1.5
	// Spiky: a slowly wandering base (a new lognormal level every
	// spikyNoiseMinutes, σ spikyNoise, interpolated) with flash spikes
	// starting as a Poisson process.
	spikyNoiseMinutes, spikyNoise = 5.0, 0.15
	spikyGapMinutes               = 90.0
	spikyFactorLo, spikyFactorHi  = 2.0, 7.0
	spikyRampLo, spikyRampHi      = 10.0, 90.0  // seconds
	spikyHoldMin, spikyHoldMean   = 30.0, 180.0 // seconds
	spikyDecayLo, spikyDecayHi    = 30.0, 120.0 // seconds
)

// pattern is one of the patterns Load generates: its rates per second from
// a seed, whether it draws anything from the seed (Load's description then
// names the seed), and whether it is a held-out shape.
type pattern struct {
	name            string
	random, heldOut bool
	rates           func(seed uint64) []float64
}

// patterns are every pattern Load knows, in the order PatternNames lists
// them.
var patterns = []pattern{
	{name: PatternFlashCrowd, rates: func(uint64) []float64 { return seed000(flashCrowd) }},
	{name: PatternIncreaseDecrease, rates: func(uint64) []float64 { return seed000(increaseDecrease) }},
	{name: PatternBursts, random: true, rates: Bursts},
	{name: PatternMMPP, random: true, rates: MMPP},
	{name: PatternDiurnal, rates: func(uint64) []float64 { return Diurnal() }},
	{name: PatternRecurring, random: true, rates: Recurring},
	{name: PatternOnOff, random: true, heldOut: true, rates: OnOff},
	{name: PatternSpiky, random: true, heldOut: true, rates: Spiky},
}

// PatternNames lists the patterns Load knows.
func PatternNames() []string {
	names := make([]string, len(patterns))
	for i, p := range patterns {
		names[i] = p.name
	}
	return names
}

// HeldOutNames lists the held-out shapes Load also knows: traffic of
// other shapes than the matrix's, for an evaluation nothing was tuned on.
func HeldOutNames() []string {
	var names []string
	for _, p := range patterns {
		if p.heldOut {
			names = append(names, p.name)
		}
	}
	return names
}

// findPattern is the pattern named name.
func findPattern(name string) (pattern, error) {
	for _, p := range patterns {
		if p.name == name {
			return p, nil
		}
	}
	return pattern{}, fmt.Errorf("unknown pattern %q: want %s", name, strings.Join(PatternNames(), ", "))
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
	out := wanderingBase(r, n, recurNoiseMinutes, recurNoise)
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

// OnOff is 6 hours of self-similar traffic, the shape measured on web and
// LAN links (Willinger, Taqqu, Sherman and Wilson, 1997): the sum of 40
// sources, each alternating between ON, sending at its own rate (uniform in
// 0.5–1.5 of a common one), and OFF, silent, for periods drawn from Pareto
// laws of shape 1.4 (scales 10 s ON, 40 s OFF: means 35 s and 140 s, a fifth
// of the time ON). Heavy-tailed periods make the sum bursty at every time
// scale (Hurst parameter (3 − 1.4)/2 = 0.8): the counts' variance over a
// window grows faster than the window, where a Poisson or MMPP source's
// flattens out within minutes. Each source starts in a random state, part
// way through its first period. The rates are normalised to a mean of
// exactly 1 req/s.
func OnOff(seed uint64) []float64 {
	r := patternRand(seed, 4)
	n := heldOutHours * 3600
	out := make([]float64, n)
	pareto := func(scale float64) float64 {
		return scale * math.Pow(1-r.Float64(), -1/onoffShape)
	}
	onMean := onoffShape * onoffOnScale / (onoffShape - 1)
	offMean := onoffShape * onoffOffScale / (onoffShape - 1)
	for range onoffSources {
		rate := onoffRateLo + (onoffRateHi-onoffRateLo)*r.Float64()
		on := r.Float64() < onMean/(onMean+offMean)
		t := 0.0
		first := true
		for int(t) < n {
			d := pareto(onoffOnScale)
			if !on {
				d = pareto(onoffOffScale)
			}
			if first {
				d *= r.Float64()
				first = false
			}
			if on {
				for i := int(t); i < min(n, int(t+d)); i++ {
					out[i] += rate
				}
			}
			t += d
			on = !on
		}
	}
	return normalise(out)
}

// Spiky is 6 hours of a steady workload hit by unannounced flash crowds: a
// base of 1 req/s wandering slowly (a new lognormal level, σ 0.15, every 5
// minutes, linearly interpolated) and spikes starting as a Poisson process
// (mean gap 90 minutes), each rising to 2–7× the base (uniform) over a ramp
// of 10–90 s, holding for 30 s plus an exponential time (mean 3 minutes),
// and falling back over 30–120 s. Where spikes overlap the higher wins. A
// window of a few hours holds none, one or several: the cells without one
// say what holding capacity against them costs, those with one whether it
// was held.
func Spiky(seed uint64) []float64 {
	r := patternRand(seed, 5)
	n := heldOutHours * 3600
	base := wanderingBase(r, n, spikyNoiseMinutes, spikyNoise)
	out := slices.Clone(base)
	uniform := func(lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }
	for t := r.ExpFloat64() * spikyGapMinutes * 60; int(t) < n; t += r.ExpFloat64() * spikyGapMinutes * 60 {
		f := uniform(spikyFactorLo, spikyFactorHi)
		ramp := uniform(spikyRampLo, spikyRampHi)
		hold := spikyHoldMin + r.ExpFloat64()*spikyHoldMean
		decay := uniform(spikyDecayLo, spikyDecayHi)
		for i := int(math.Ceil(t)); i < min(n, int(t+ramp+hold+decay)); i++ {
			x := float64(i) - t // in [0, ramp + hold + decay)
			g := 1.0
			switch {
			case x < ramp:
				g = x / ramp
			case x > ramp+hold:
				g = 1 - (x-ramp-hold)/decay
			}
			out[i] = math.Max(out[i], base[i]*(1+(f-1)*g))
		}
	}
	return out
}

// wanderingBase is n seconds of a base of 1 req/s wandering slowly: a new
// lognormal level of mean 1 and σ sigma every minutes, linearly interpolated.
func wanderingBase(r *rand.Rand, n int, minutes, sigma float64) []float64 {
	step := int(minutes * 60)
	knots := make([]float64, n/step+2)
	for i := range knots {
		knots[i] = math.Exp(sigma*r.NormFloat64() - sigma*sigma/2)
	}
	out := make([]float64, n)
	for i := range out {
		k, f := i/step, float64(i%step)/float64(step)
		out[i] = knots[k]*(1-f) + knots[k+1]*f
	}
	return out
}

// normalise scales rates to a mean of 1 (unchanged if all are zero).
func normalise(rates []float64) []float64 {
	var sum float64
	for _, v := range rates {
		sum += v
	}
	if sum <= 0 {
		return rates
	}
	k := float64(len(rates)) / sum
	for i := range rates {
		rates[i] *= k
	}
	return rates
}
