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
}

// Profile is the arrival rate of each simulated second, requests per second.
type Profile struct {
	Rates []float64
	// Description says which trace, window, scale and compression were used.
	Description string
}

// Duration is the simulated length of the profile.
func (p Profile) Duration() time.Duration { return time.Duration(len(p.Rates)) * time.Second }

// Pattern names.
const (
	PatternFlashCrowd        = "pattern:flash-crowd"
	PatternIncreaseDecrease  = "pattern:increase-decrease"
	patternMinutes           = 40
	patternBuffer            = 5 * 60
	patternLow, patternHigh  = 1.0, 20.0
	patternFlashRiseSeconds  = 60
	patternFlashPlateauShare = 0.1
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
	var perSecond []float64
	switch {
	case strings.HasPrefix(o.Source, "pattern:"):
		p, err := Pattern(o.Source)
		if err != nil {
			return Profile{}, err
		}
		perSecond, err = window(p, o.Window)
		if err != nil {
			return Profile{}, err
		}
	case o.Source == "":
		return Profile{}, fmt.Errorf("no trace: give a file or %s / %s", PatternFlashCrowd, PatternIncreaseDecrease)
	default:
		var err error
		if perSecond, err = itrace.ReadFile(o.Source, o.Window); err != nil {
			return Profile{}, err
		}
	}
	rates := Compress(perSecond, o.Compress, o.Scale)
	end := "end"
	if o.Window.End != 0 {
		end = o.Window.End.String()
	}
	desc := fmt.Sprintf("%s, window %s:%s (%d trace seconds), scale ×%g, compression %d trace s per simulated s (%d simulated s)",
		o.Source, o.Window.Start, end, len(perSecond), o.Scale, o.Compress, len(rates))
	return Profile{Rates: rates, Description: desc}, nil
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

// Pattern generates seed 000's synthetic workloads (section 5.4.2), one rate per
// second over 40 minutes: a 5-minute buffer at 1 req/s at each end, and between
// them either a linear rise from 1 to 20 req/s and back down
// (increase-decrease), or a sudden jump to 20 req/s held briefly and falling
// back (flash-crowd). The paper gives the range, length and buffers; the shape
// of the flash crowd's edges (one-minute rise, plateau of a tenth of the
// middle, exponential-like decay over the rest) is ours.
func Pattern(name string) ([]float64, error) {
	total := patternMinutes * 60
	mid := total - 2*patternBuffer
	out := make([]float64, total)
	for i := range out {
		out[i] = patternLow
	}
	switch name {
	case PatternIncreaseDecrease:
		half := float64(mid) / 2
		for i := 0; i < mid; i++ {
			x := float64(i) / half
			if x > 1 {
				x = 2 - x
			}
			out[patternBuffer+i] = patternLow + (patternHigh-patternLow)*x
		}
	case PatternFlashCrowd:
		plateau := int(float64(mid) * patternFlashPlateauShare)
		decay := mid - patternFlashRiseSeconds - plateau
		for i := 0; i < mid; i++ {
			var v float64
			switch {
			case i < patternFlashRiseSeconds:
				v = patternLow + (patternHigh-patternLow)*float64(i+1)/patternFlashRiseSeconds
			case i < patternFlashRiseSeconds+plateau:
				v = patternHigh
			default:
				x := float64(i-patternFlashRiseSeconds-plateau) / float64(decay)
				v = patternLow + (patternHigh-patternLow)*(1-x)*(1-x)
			}
			out[patternBuffer+i] = v
		}
	default:
		return nil, fmt.Errorf("unknown pattern %q: want %s or %s", name, PatternFlashCrowd, PatternIncreaseDecrease)
	}
	return out, nil
}
