package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// DistKind names a service- or init-time distribution.
type DistKind string

// Distribution kinds.
const (
	Constant    DistKind = "const"
	Exponential DistKind = "exp"
	Lognormal   DistKind = "lognormal"
	Bimodal     DistKind = "bimodal"
)

// Dist is a distribution of durations in seconds.
type Dist struct {
	Kind DistKind
	// Mean for const, exp and lognormal; CV for lognormal.
	Mean, CV float64
	// Bimodal: Fast with probability 1−P, Slow with probability P.
	Fast, Slow, P float64
	mu, sigma     float64
}

// ParseDist reads "50ms" or "const:50ms", "exp:50ms", "lognormal:50ms,cv=1.5",
// "bimodal:20ms,500ms,p=0.1".
func ParseDist(s string) (Dist, error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		kind, rest = string(Constant), s
	}
	parts := strings.Split(rest, ",")
	dur := func(i int) (float64, error) {
		if i >= len(parts) {
			return 0, fmt.Errorf("distribution %q: missing duration %d", s, i+1)
		}
		d, err := time.ParseDuration(strings.TrimSpace(parts[i]))
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("distribution %q: %q is not a positive duration", s, parts[i])
		}
		return d.Seconds(), nil
	}
	param := func(i int, name string) (float64, error) {
		if i >= len(parts) {
			return 0, fmt.Errorf("distribution %q: missing %s=", s, name)
		}
		k, v, ok := strings.Cut(strings.TrimSpace(parts[i]), "=")
		if !ok || k != name {
			return 0, fmt.Errorf("distribution %q: want %s=NUMBER, got %q", s, name, parts[i])
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return 0, fmt.Errorf("distribution %q: %s=%q is not a non-negative number", s, name, v)
		}
		return f, nil
	}
	var d Dist
	var err error
	want := 1
	switch DistKind(kind) {
	case Constant, Exponential:
		d.Kind = DistKind(kind)
		d.Mean, err = dur(0)
	case Lognormal:
		d.Kind = Lognormal
		want = 2
		if d.Mean, err = dur(0); err == nil {
			d.CV, err = param(1, "cv")
			if err == nil && d.CV == 0 {
				err = fmt.Errorf("distribution %q: cv must be positive", s)
			}
		}
		d.sigma = math.Sqrt(math.Log(1 + d.CV*d.CV))
		d.mu = math.Log(d.Mean) - d.sigma*d.sigma/2
	case Bimodal:
		d.Kind = Bimodal
		want = 3
		if d.Fast, err = dur(0); err == nil {
			if d.Slow, err = dur(1); err == nil {
				d.P, err = param(2, "p")
				if err == nil && d.P > 1 {
					err = fmt.Errorf("distribution %q: p must be in [0,1]", s)
				}
			}
		}
		d.Mean = (1-d.P)*d.Fast + d.P*d.Slow
	default:
		return Dist{}, fmt.Errorf("distribution %q: unknown kind %q (want const, exp, lognormal or bimodal)", s, kind)
	}
	if err != nil {
		return Dist{}, err
	}
	if len(parts) != want {
		return Dist{}, fmt.Errorf("distribution %q: want %d comma-separated fields, got %d", s, want, len(parts))
	}
	return d, nil
}

// Sample draws one value.
func (d *Dist) Sample(r *rand.Rand) float64 {
	switch d.Kind {
	case Exponential:
		return r.ExpFloat64() * d.Mean
	case Lognormal:
		return math.Exp(d.mu + d.sigma*r.NormFloat64())
	case Bimodal:
		if r.Float64() < d.P {
			return d.Slow
		}
		return d.Fast
	}
	return d.Mean
}

// SCV is the squared coefficient of variation.
func (d *Dist) SCV() float64 {
	switch d.Kind {
	case Exponential:
		return 1
	case Lognormal:
		return d.CV * d.CV
	case Bimodal:
		m2 := (1-d.P)*d.Fast*d.Fast + d.P*d.Slow*d.Slow
		return m2/(d.Mean*d.Mean) - 1
	}
	return 0
}

// Quantile is the value at percentile p in (0,100).
func (d *Dist) Quantile(p float64) float64 {
	q := p / 100
	switch d.Kind {
	case Exponential:
		return -d.Mean * math.Log(1-q)
	case Lognormal:
		return math.Exp(d.mu + d.sigma*math.Sqrt2*math.Erfinv(2*q-1))
	case Bimodal:
		if q > 1-d.P {
			return d.Slow
		}
		return d.Fast
	}
	return d.Mean
}

// String is the parseable form.
func (d Dist) String() string {
	sec := func(v float64) string { return time.Duration(v * float64(time.Second)).String() }
	switch d.Kind {
	case Lognormal:
		return fmt.Sprintf("lognormal:%s,cv=%g", sec(d.Mean), d.CV)
	case Bimodal:
		return fmt.Sprintf("bimodal:%s,%s,p=%g", sec(d.Fast), sec(d.Slow), d.P)
	}
	return fmt.Sprintf("%s:%s", d.Kind, sec(d.Mean))
}

// Scaled is the distribution of f × a value of d (f > 0): every duration,
// mean and quantile times f, the same shape.
func (d Dist) Scaled(f float64) Dist {
	d.Mean *= f
	d.Fast *= f
	d.Slow *= f
	if d.Kind == Lognormal {
		d.mu += math.Log(f)
	}
	return d
}
