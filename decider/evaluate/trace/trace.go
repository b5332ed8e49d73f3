// Package trace turns an arrival-rate trace (a file in the format of
// ../shared/traces, or a synthetic pattern from seed 000) into the rate profile
// the simulator replays: one arrival rate per simulated second.
//
// File reading (gzip or plain, one non-negative integer per line, errors naming
// the line, reading stops at the window's end) is internal/trace's; this package
// adds the window, scale and time compression, and the synthetic patterns.
package trace

import (
	"fmt"
	"math"
	"strings"
	"time"

	itrace "github.com/qas-dev/qas/internal/trace"
)

// Options say which part of a trace is replayed and how.
type Options struct {
	// Source is a trace file path (.gz or plain) or "pattern:flash-crowd" /
	// "pattern:increase-decrease".
	Source string
	// Window is the part of the trace to replay, in trace time; zero End
	// means to the end.
	Window itrace.Window
	// Scale multiplies every rate; zero means 1.
	Scale float64
	// Compress is the number of trace seconds per simulated second; zero means 1.
	// The rate of a simulated second is the mean rate of its Compress trace
	// seconds (times Scale): the shape is kept and time runs Compress× faster.
	Compress int
	// Smooth, when positive, is the Poisson scaling: each trace second's rate
	// is the mean count over the Smooth seconds centred on it, times Scale,
	// so the simulator's arrivals are Poisson at the trace's local rate. Zero
	// multiplies each second's count by Scale, which turns every logged
	// request into a batch of Scale correlated ones (far burstier than
	// Poisson at the same mean).
	Smooth int
	// Seed draws the random synthetic patterns (bursts, mmpp, recurring).
	Seed uint64
	// History, when positive, also returns the trace time before the window
	// (up to History of it, scaled and compressed the same way) as
	// Profile.History: what InfluxDB would hold of the workload before the
	// replay starts, for a policy that reads a long history.
	History time.Duration
}

// Profile is the arrival rate of each simulated second, requests per second.
type Profile struct {
	Rates []float64
	// History is the rate of each simulated second before Rates (oldest
	// first), when Options.History asked for it: the trace before the window.
	History []float64
	// Description says which trace, window, scale and compression were used.
	Description string
}

// Duration is the simulated length of the profile.
func (p Profile) Duration() time.Duration { return time.Duration(len(p.Rates)) * time.Second }

// Pattern names.
const (
	PatternFlashCrowd       = "pattern:flash-crowd"
	PatternIncreaseDecrease = "pattern:increase-decrease"
	PatternBursts           = "pattern:bursts"
	PatternMMPP             = "pattern:mmpp"
	PatternDiurnal          = "pattern:diurnal"
	PatternRecurring        = "pattern:recurring"
	// The held-out shapes (HeldOutNames).
	PatternOnOff            = "pattern:onoff"
	PatternSpiky            = "pattern:spiky"
	patternMinutes          = 40
	patternBuffer           = 5 * 60
	patternLow, patternHigh = 1.0, 20.0
	patternFlashShoulder    = 5.0
)

// ParseWindow reads "2h:8h" (either side may be empty).
func ParseWindow(s string) (itrace.Window, error) {
	w, err := itrace.ParseWindow(s)
	if err != nil {
		return w, err
	}
	if w.End != 0 && w.End <= w.Start {
		return w, fmt.Errorf("window %q: end must be after start", s)
	}
	return w, nil
}

// Load reads or generates the per-trace-second rates, then windows, compresses
// and scales them.
func Load(o Options) (Profile, error) {
	if o.Scale == 0 {
		o.Scale = 1
	}
	if o.Compress == 0 {
		o.Compress = 1
	}
	if o.Scale < 0 || math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0) {
		return Profile{}, fmt.Errorf("scale %v: must be a positive number", o.Scale)
	}
	if o.Compress < 0 {
		return Profile{}, fmt.Errorf("compress %d: must be a positive number of trace seconds per simulated second", o.Compress)
	}
	if o.History < 0 {
		return Profile{}, fmt.Errorf("history %s: must not be negative", o.History)
	}
	var perSecond, before []float64
	random := false // drawn from the seed
	switch {
	case strings.HasPrefix(o.Source, "pattern:"):
		pat, err := findPattern(o.Source)
		if err != nil {
			return Profile{}, err
		}
		random = pat.random
		p := pat.rates(o.Seed)
		perSecond, err = window(p, o.Window)
		if err != nil {
			return Profile{}, err
		}
		if o.History > 0 {
			first := int(o.Window.Start / time.Second)
			before = p[max(0, first-int(o.History/time.Second)):first]
		}
	case o.Source == "":
		return Profile{}, fmt.Errorf("no trace: give a file or one of %s", strings.Join(PatternNames(), ", "))
	default:
		var err error
		if perSecond, err = itrace.ReadFile(o.Source, o.Window); err != nil {
			return Profile{}, err
		}
		if o.History > 0 && o.Window.Start > 0 {
			hw := itrace.Window{Start: max(0, o.Window.Start-o.History), End: o.Window.Start}
			if before, err = itrace.ReadFile(o.Source, hw); err != nil {
				return Profile{}, err
			}
		}
	}
	if o.Smooth < 0 {
		return Profile{}, fmt.Errorf("smooth %d: must be a number of seconds ≥ 0", o.Smooth)
	}
	scaling := "counts multiplied"
	if o.Smooth > 0 {
		perSecond = CentredMean(perSecond, o.Smooth)
		before = CentredMean(before, o.Smooth)
		scaling = fmt.Sprintf("Poisson at the %d s centred mean", o.Smooth)
	}
	rates := Compress(perSecond, o.Compress, o.Scale)
	var history []float64
	if len(before) > 0 {
		history = Compress(before, o.Compress, o.Scale)
	}
	end := "end"
	if o.Window.End != 0 {
		end = o.Window.End.String()
	}
	src := o.Source
	if random {
		src = fmt.Sprintf("%s (seed %d)", o.Source, o.Seed)
	}
	desc := fmt.Sprintf("%s, window %s:%s (%d trace seconds), scale ×%g (%s), compression %d trace s per simulated s (%d simulated s)",
		src, o.Window.Start, end, len(perSecond), o.Scale, scaling, o.Compress, len(rates))
	if len(history) > 0 {
		desc += fmt.Sprintf(", with %d simulated s of history before it", len(history))
	}
	return Profile{Rates: rates, History: history, Description: desc}, nil
}

func window(p []float64, w itrace.Window) ([]float64, error) {
	first, last := int(w.Start/time.Second), len(p)
	if w.End != 0 {
		last = min(last, int(w.End/time.Second))
	}
	if first >= last {
		return nil, fmt.Errorf("the window %s:%s holds no seconds (the pattern has %d)", w.Start, w.End, len(p))
	}
	return p[first:last], nil
}

// CentredMean is each second's mean over the w seconds centred on it, cut to
// the series.
func CentredMean(x []float64, w int) []float64 {
	prefix := make([]float64, len(x)+1)
	for i, v := range x {
		prefix[i+1] = prefix[i] + v
	}
	out := make([]float64, len(x))
	for i := range x {
		lo, hi := max(0, i-w/2), min(len(x), i-w/2+w)
		out[i] = (prefix[hi] - prefix[lo]) / float64(hi-lo)
	}
	return out
}

// Compress averages every n consecutive trace seconds into one simulated
// second and multiplies by scale; a last partial group is averaged over its own
// length.
func Compress(perSecond []float64, n int, scale float64) []float64 {
	out := make([]float64, 0, (len(perSecond)+n-1)/n)
	for i := 0; i < len(perSecond); i += n {
		j := min(i+n, len(perSecond))
		s := 0.0
		for _, v := range perSecond[i:j] {
			s += v
		}
		out = append(out, scale*s/float64(j-i))
	}
	return out
}

// Seed 000's synthetic workloads (section 5.4.2 and its footnote 6), as
// their linear segments after the first buffer (seed000):
//   - increase-decrease: 1 → 20 req/s linearly over 15 minutes, then back to 1
//     over 15 minutes (the text says "from sending 30 requests per second"
//     on the way down, a slip: the pattern's maximum is 20);
//   - flash-crowd: 1 → 5 req/s over 11 minutes, 5 → 20 in 4 minutes, 20 → 5 in
//     4 minutes, 5 → 1 over 11 minutes.
var (
	increaseDecrease = []segment{{15 * 60, patternLow, patternHigh}, {15 * 60, patternHigh, patternLow}}
	flashCrowd       = []segment{{11 * 60, patternLow, patternFlashShoulder}, {4 * 60, patternFlashShoulder, patternHigh},
		{4 * 60, patternHigh, patternFlashShoulder}, {11 * 60, patternFlashShoulder, patternLow}}
)

// seed000 is one of seed 000's patterns, one rate per second over 40
// minutes: 1 req/s but for segs, which start after a 5-minute buffer and end
// before another.
func seed000(segs []segment) []float64 {
	out := make([]float64, patternMinutes*60)
	for i := range out {
		out[i] = patternLow
	}
	i := patternBuffer
	for _, sg := range segs {
		for j := 0; j < sg.seconds; j++ {
			// The rate at the middle of second j of the segment.
			out[i] = sg.from + (sg.to-sg.from)*(float64(j)+0.5)/float64(sg.seconds)
			i++
		}
	}
	return out
}

// segment is a linear ramp of a pattern.
type segment struct {
	seconds  int
	from, to float64
}
