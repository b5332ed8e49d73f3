// Package app is the example application QAS's demo, tests and benchmarks run behind
// qas-proxy. Its endpoints burn CPU and/or sleep for configurable, random times:
//
//	GET /work?cpu=5ms&sleep=20ms&dist=exp        mean 5 ms of CPU plus mean 20 ms asleep
//	GET /work?sleep=50ms&dist=lognormal&cv=1.5   lognormal with coefficient of variation 1.5
//	GET /bytes?n=100                             n bytes, at once
//	GET /stream?events=5&interval=100ms          server-sent events, flushed one by one
//	GET /healthz                                 ok
package app

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Dist names a distribution of times around a mean.
type Dist string

const (
	Fixed       Dist = "fixed"
	Exponential Dist = "exp"
	Lognormal   Dist = "lognormal"
)

// Work is what one /work request does.
type Work struct {
	CPU, Sleep time.Duration // means
	Dist       Dist
	CV         float64 // lognormal coefficient of variation
}

// MaxDuration bounds each mean, so a request cannot ask for an hour of work.
const MaxDuration = time.Minute

// ParseWork reads /work's query. Errors name the parameter.
func ParseWork(q url.Values) (Work, error) {
	w := Work{Dist: Fixed, CV: 1}
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{{"cpu", &w.CPU}, {"sleep", &w.Sleep}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return Work{}, fmt.Errorf("%s: %q is not a duration such as 5ms", p.name, v)
		}
		if d < 0 || d > MaxDuration {
			return Work{}, fmt.Errorf("%s: %s is outside [0, %s]", p.name, d, MaxDuration)
		}
		*p.dst = d
	}
	if v := q.Get("dist"); v != "" {
		switch Dist(v) {
		case Fixed, Exponential, Lognormal:
			w.Dist = Dist(v)
		default:
			return Work{}, fmt.Errorf("dist: %q is not one of fixed, exp, lognormal", v)
		}
	}
	if v := q.Get("cv"); v != "" {
		cv, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(cv) || cv <= 0 || cv > 10 {
			return Work{}, fmt.Errorf("cv: %q is not a number in (0, 10]", v)
		}
		w.CV = cv
	}
	return w, nil
}

// Sample draws one time with the given mean from the distribution.
func (d Dist) Sample(mean time.Duration, cv float64, rng *rand.Rand) time.Duration {
	if mean <= 0 {
		return 0
	}
	m := float64(mean)
	switch d {
	case Exponential:
		return time.Duration(rng.ExpFloat64() * m)
	case Lognormal:
		sigma2 := math.Log(1 + cv*cv)
		mu := math.Log(m) - sigma2/2
		return time.Duration(math.Exp(mu + math.Sqrt(sigma2)*rng.NormFloat64()))
	default:
		return mean
	}
}

// Burn keeps the CPU busy for d of wall time.
func Burn(d time.Duration) {
	end := time.Now().Add(d)
	x := 1.0
	for time.Now().Before(end) {
		for i := 0; i < 1000; i++ {
			x = x*1.0000001 + 1e-9
		}
	}
	sink = x
}

// sink keeps the busy loop's result alive, so that the compiler cannot drop the loop.
var sink float64 //nolint:unused // written only, on purpose

// Handler returns the app's handler.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /work", func(w http.ResponseWriter, r *http.Request) {
		work, err := ParseWork(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		cpu := work.Dist.Sample(work.CPU, work.CV, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
		sleep := work.Dist.Sample(work.Sleep, work.CV, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
		Burn(cpu)
		select {
		case <-time.After(sleep):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "cpu=%s sleep=%s\n", cpu.Round(time.Microsecond), sleep.Round(time.Microsecond))
	})
	mux.HandleFunc("GET /bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 0 || n > 64<<20 {
			http.Error(w, "n: want a byte count in [0, 64Mi]", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write([]byte(strings.Repeat("x", n)))
	})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		events, err1 := strconv.Atoi(r.URL.Query().Get("events"))
		interval, err2 := time.ParseDuration(r.URL.Query().Get("interval"))
		if err1 != nil || err2 != nil || events < 1 || events > 10000 || interval < 0 || interval > MaxDuration {
			http.Error(w, "events: 1..10000 and interval: a duration up to 1m are required", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < events; i++ {
			fmt.Fprintf(w, "data: %d\n\n", i)
			http.NewResponseController(w).Flush()
			select {
			case <-time.After(interval):
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux
}
