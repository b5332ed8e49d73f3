package trace

import (
	"bytes"
	"compress/gzip"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	itrace "github.com/qas-dev/qas/internal/trace"
)

func writeTrace(t *testing.T, content string, gz bool) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.rps")
	data := []byte(content)
	if gz {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, err := w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		data = b.Bytes()
		p += ".gz"
	}
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

func TestLoad(t *testing.T) {
	const six = "1\n2\n3\n4\n5\n6\n"
	for _, tc := range []struct {
		name    string
		content string
		gz      bool
		opts    Options
		want    []float64
		wantErr string
	}{
		{name: "plain", content: six, want: []float64{1, 2, 3, 4, 5, 6}},
		{name: "gzip", content: six, gz: true, want: []float64{1, 2, 3, 4, 5, 6}},
		{name: "scale", content: six, opts: Options{Scale: 10}, want: []float64{10, 20, 30, 40, 50, 60}},
		{name: "compress averages groups", content: six, opts: Options{Compress: 2}, want: []float64{1.5, 3.5, 5.5}},
		{name: "compress partial last group", content: six, opts: Options{Compress: 4}, want: []float64{2.5, 5.5}},
		{name: "window in trace time", content: six, opts: Options{Window: itrace.Window{Start: 2 * time.Second, End: 5 * time.Second}}, want: []float64{3, 4, 5}},
		{name: "window then compress and scale", content: six, opts: Options{Window: itrace.Window{Start: time.Second}, Compress: 5, Scale: 2}, want: []float64{8}},
		{name: "bad line names its number", content: "1\n2\nx\n", wantErr: "line 3"},
		{name: "negative is bad", content: "1\n-2\n", wantErr: "line 2"},
		{name: "bad line after the window is not read", content: "1\n2\nx\n", opts: Options{Window: itrace.Window{End: 2 * time.Second}}, want: []float64{1, 2}},
		{name: "empty window", content: six, opts: Options{Window: itrace.Window{Start: time.Hour}}, wantErr: "holds no seconds"},
		{name: "negative scale", content: six, opts: Options{Scale: -1}, wantErr: "scale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Source = writeTrace(t, tc.content, tc.gz)
			p, err := Load(tc.opts)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, p.Rates)
			require.Contains(t, p.Description, "compression")
		})
	}
}

func TestPatterns(t *testing.T) {
	for _, name := range []string{PatternFlashCrowd, PatternIncreaseDecrease} {
		t.Run(name, func(t *testing.T) {
			p, err := Load(Options{Source: name})
			require.NoError(t, err)
			require.Len(t, p.Rates, 40*60, "40 minutes")
			for i := 0; i < 300; i++ {
				require.Equal(t, 1.0, p.Rates[i], "5-minute buffer at the start")
				require.Equal(t, 1.0, p.Rates[len(p.Rates)-1-i], "5-minute buffer at the end")
			}
			peak := 0.0
			for _, r := range p.Rates {
				require.GreaterOrEqual(t, r, 1.0)
				peak = max(peak, r)
			}
			require.InDelta(t, 20, peak, 0.1)
		})
	}
	_, err := Load(Options{Source: "pattern:nope"})
	require.ErrorContains(t, err, "unknown pattern")
}

// TestFlashCrowdShape checks seed 000 §5.4.2's flash crowd at its
// breakpoints: 5 min at 1, 1 → 5 over 11 min, 5 → 20 in 4 min, 20 → 5 in
// 4 min, 5 → 1 over 11 min, 5 min at 1; and the increase-decrease ramp
// 1 → 20 → 1 over 15 + 15 minutes.
func TestFlashCrowdShape(t *testing.T) {
	fc := seed000(flashCrowd)
	at := func(x []float64, minute float64) float64 { return x[int(minute*60)] }
	const tol = 0.1 // the rate at the middle of a second on a ramp of at most 3.75 req/s per minute
	for _, c := range []struct{ minute, want float64 }{
		{4.99, 1}, {5, 1}, {10.5, 3}, {16, 5}, {18, 12.5}, {19.99, 20}, {20, 20}, {22, 12.5}, {24, 5}, {29.5, 3}, {34.99, 1}, {35, 1}, {39.99, 1},
	} {
		require.InDelta(t, c.want, at(fc, c.minute), tol, "flash crowd at minute %v", c.minute)
	}
	id := seed000(increaseDecrease)
	for _, c := range []struct{ minute, want float64 }{{5, 1}, {12.5, 10.5}, {20, 20}, {27.5, 10.5}, {35, 1}} {
		require.InDelta(t, c.want, at(id, c.minute), tol, "increase-decrease at minute %v", c.minute)
	}
}

// TestSyntheticPatterns checks the matrix's synthetic traffic: bursts are
// steps of 3–6× the base lasting 1–15 minutes; the MMPP alternates 1 and
// 5 req/s with about a fifth of the time on (3 / (10 + 3)); the diurnal day
// is smooth, lowest at 02:00 and highest at 14:00; a seed draws the same
// trace again and another seed another.
func TestSyntheticPatterns(t *testing.T) {
	b := Bursts(1)
	require.Len(t, b, 6*3600)
	runs, on := 0, 0
	for i := 0; i < len(b); {
		if b[i] == 1 {
			i++
			continue
		}
		j := i
		for j < len(b) && b[j] > 1 {
			require.GreaterOrEqual(t, b[j], 3.0)
			require.LessOrEqual(t, b[j], 6.0)
			j++
		}
		if j < len(b) {
			require.GreaterOrEqual(t, j-i, 59, "a burst lasts at least a minute")
		}
		runs++
		on += j - i
		i = j
	}
	require.Greater(t, runs, 5)
	require.Equal(t, b, Bursts(1))
	require.NotEqual(t, b, Bursts(2))

	m := MMPP(1)
	high := 0
	for _, v := range m {
		require.True(t, v == 1 || v == 5, "MMPP rate %v", v)
		if v == 5 {
			high++
		}
	}
	require.InDelta(t, 3.0/13, float64(high)/float64(len(m)), 0.12)

	d := Diurnal()
	require.Len(t, d, 24*3600)
	lo, hi := 0, 0
	for i := range d {
		if d[i] < d[lo] {
			lo = i
		}
		if d[i] > d[hi] {
			hi = i
		}
		if i > 0 {
			require.Less(t, math.Abs(d[i]-d[i-1]), 1e-3, "smooth")
		}
	}
	require.InDelta(t, 2*3600, lo, 60)
	require.InDelta(t, 14*3600, hi, 60)
	require.InDelta(t, 0.4, d[lo], 1e-3)
	require.InDelta(t, 1.9, d[hi], 1e-3)

	p, err := Load(Options{Source: PatternBursts, Seed: 7, Window: itrace.Window{End: time.Hour}, Scale: 20})
	require.NoError(t, err)
	require.Len(t, p.Rates, 3600)
	require.Contains(t, p.Description, "seed 7")
}

// TestPoissonScaling: the Poisson scaling replaces each second's count by
// the centred mean count, so scaled sparse counts keep their mean but lose
// the per-second batches.
func TestPoissonScaling(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sparse")
	var b strings.Builder
	for i := 0; i < 600; i++ {
		if i%3 == 0 {
			b.WriteString("3\n")
		} else {
			b.WriteString("0\n")
		}
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	raw, err := Load(Options{Source: path, Scale: 100})
	require.NoError(t, err)
	smooth, err := Load(Options{Source: path, Scale: 100, Smooth: 60})
	require.NoError(t, err)
	require.Contains(t, raw.Description, "counts multiplied")
	require.Contains(t, smooth.Description, "Poisson at the 60 s centred mean")
	mean := func(x []float64) float64 {
		s := 0.0
		for _, v := range x {
			s += v
		}
		return s / float64(len(x))
	}
	require.InDelta(t, mean(raw.Rates), mean(smooth.Rates), 0.01*mean(raw.Rates))
	require.Equal(t, 300.0, raw.Rates[0])
	require.Equal(t, 0.0, raw.Rates[1])
	for i := 30; i < 570; i++ {
		require.InDelta(t, 100, smooth.Rates[i], 5, "second %d", i)
	}
	_, err = Load(Options{Source: path, Smooth: -1})
	require.ErrorContains(t, err, "smooth -1")
}

func TestParseWindow(t *testing.T) {
	w, err := ParseWindow("2h:8h")
	require.NoError(t, err)
	require.Equal(t, itrace.Window{Start: 2 * time.Hour, End: 8 * time.Hour}, w)
	for _, bad := range []string{"8h:2h", "2h", "x:1h", "1h:1h"} {
		_, err := ParseWindow(bad)
		require.Error(t, err, bad)
	}
}

func TestNASAWindowReadsOnlyToItsEnd(t *testing.T) {
	path := filepath.Join("..", "..", "..", "..", "shared", "traces", "nasa-1995-07-08.rps.gz")
	if v := os.Getenv("QAS_SHARED"); v != "" {
		path = filepath.Join(v, "traces", "nasa-1995-07-08.rps.gz")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the shared NASA trace is needed: %v", err)
	}
	p, err := Load(Options{Source: path, Window: itrace.Window{Start: time.Hour, End: 3 * time.Hour}, Compress: 60, Scale: 10})
	require.NoError(t, err)
	require.Len(t, p.Rates, 120)
	require.Contains(t, p.Description, "scale ×10")
}

func FuzzLoad(f *testing.F) {
	f.Add("1\n2\n3\n", 2)
	f.Add("0\n\n5", 1)
	f.Add("x", 3)
	f.Fuzz(func(t *testing.T, content string, compress int) {
		if compress < 1 || compress > 100 || strings.ContainsRune(content, 0x1f) {
			return
		}
		p := filepath.Join(t.TempDir(), "f")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		prof, err := Load(Options{Source: p, Compress: compress})
		if err != nil {
			return
		}
		for _, r := range prof.Rates {
			require.GreaterOrEqual(t, r, 0.0)
		}
	})
}

// TestRecurringPattern: the recurring pattern's bursts come back at one
// period (the same for every onset of a seed, drawn from the seed), over a
// base near 1 req/s; the seed decides it; Load returns the hours before the
// window as History, scaled like the window.
func TestRecurringPattern(t *testing.T) {
	r := Recurring(1)
	require.Len(t, r, 12*3600)
	require.Equal(t, r, Recurring(1))
	require.NotEqual(t, r, Recurring(2))
	// Onsets: the first second of a step above twice the rate a minute before.
	var onsets []int
	for i := 60; i < len(r); i++ {
		if r[i] > 2.5*r[i-60] && r[i-1] <= 2.5*r[i-61] {
			onsets = append(onsets, i)
		}
	}
	require.Greater(t, len(onsets), 12)
	// The most common gap between consecutive onsets (to the minute) is the
	// period; most gaps are it (the rest are stray bursts and their splits).
	gaps := map[int]int{}
	for i := 1; i < len(onsets); i++ {
		gaps[(onsets[i]-onsets[i-1]+30)/60]++
	}
	best, total := 0, 0
	for g, n := range gaps {
		total += n
		if n > gaps[best] {
			best = g
		}
	}
	require.GreaterOrEqual(t, best, int(recurPeriodLo))
	require.LessOrEqual(t, best, int(recurPeriodHi)+1)
	require.Greater(t, gaps[best]+gaps[best-1]+gaps[best+1], total/3, "gaps %v", gaps)

	p, err := Load(Options{Source: PatternRecurring, Seed: 1, Window: itrace.Window{Start: 6 * time.Hour, End: 7 * time.Hour}, Scale: 20, History: 2 * time.Hour})
	require.NoError(t, err)
	require.Len(t, p.Rates, 3600)
	require.Len(t, p.History, 2*3600)
	require.InDelta(t, 20*r[4*3600], p.History[0], 1e-9)
	require.InDelta(t, 20*r[6*3600-1], p.History[len(p.History)-1], 1e-9)
	require.InDelta(t, 20*r[6*3600], p.Rates[0], 1e-9)
	require.Contains(t, p.Description, "7200 simulated s of history")

	// History longer than what precedes the window: what there is.
	p, err = Load(Options{Source: PatternRecurring, Seed: 1, Window: itrace.Window{Start: time.Hour, End: 2 * time.Hour}, History: 6 * time.Hour})
	require.NoError(t, err)
	require.Len(t, p.History, 3600)
	_, err = Load(Options{Source: PatternRecurring, History: -time.Second})
	require.ErrorContains(t, err, "history")
}

// TestFileHistory: a trace file's seconds before the window come back as
// History.
func TestFileHistory(t *testing.T) {
	path := writeTrace(t, "1\n2\n3\n4\n5\n6\n", false)
	p, err := Load(Options{Source: path, Window: itrace.Window{Start: 4 * time.Second}, Scale: 2, History: 3 * time.Second})
	require.NoError(t, err)
	require.Equal(t, []float64{10, 12}, p.Rates)
	require.Equal(t, []float64{4, 6, 8}, p.History)
	p, err = Load(Options{Source: path, Window: itrace.Window{Start: 4 * time.Second}})
	require.NoError(t, err)
	require.Nil(t, p.History)
}

// TestOnOffIsSelfSimilar: the ON/OFF pattern is 6 hours at a mean of exactly
// 1 req/s, drawn from its seed, and bursty at every time scale: the variance
// of its means over windows of 1 to 20 minutes falls as the window to the
// power 2H − 2 with H near the (3 − 1.4)/2 = 0.8 its Pareto periods give
// (white noise: 0.5), averaged over ten seeds.
func TestOnOffIsSelfSimilar(t *testing.T) {
	o := OnOff(1)
	require.Len(t, o, 6*3600)
	require.Equal(t, o, OnOff(1))
	require.NotEqual(t, o, OnOff(2))
	var h float64
	for seed := uint64(1); seed <= 10; seed++ {
		x := OnOff(seed)
		var sum float64
		for _, v := range x {
			require.GreaterOrEqual(t, v, 0.0)
			sum += v
		}
		require.InDelta(t, 1, sum/float64(len(x)), 1e-9, "seed %d", seed)
		h += varianceTimeHurst(x) / 10
	}
	require.InDelta(t, 0.8, h, 0.08)
	flat := make([]float64, 6*3600)
	for i := range flat {
		flat[i] = 1 + 0.3*math.Sin(float64(i*i)) // no memory beyond a second
	}
	require.Less(t, varianceTimeHurst(flat), 0.6, "the estimate tells short memory from long")
}

// TestSpikyRampsAndSpikes: the spiky pattern is 6 hours around a base of
// 1 req/s whose spikes rise over a ramp of at least 10 s, never in a step,
// and come about every 90 minutes: counted over a hundred seeds (some 400
// spikes) as runs above 1.6 × the trace's median.
func TestSpikyRampsAndSpikes(t *testing.T) {
	s := Spiky(1)
	require.Len(t, s, 6*3600)
	require.Equal(t, s, Spiky(1))
	require.NotEqual(t, s, Spiky(2))
	var spikes, highest float64
	const seeds = 100
	for seed := uint64(1); seed <= seeds; seed++ {
		x := Spiky(seed)
		med := slices.Clone(x)
		slices.Sort(med)
		median := med[len(med)/2]
		require.InDelta(t, 1, median, 0.15, "seed %d: the base", seed)
		above := false
		for i, v := range x {
			if !(v > 0) {
				t.Fatalf("seed %d, second %d: rate %v", seed, i, v)
			}
			// A ramp adds at most (7 − 1)/10 of the base a second.
			if i > 0 && v/x[i-1] > 1.61 {
				t.Fatalf("seed %d, second %d: a step from %v to %v", seed, i, x[i-1], v)
			}
			if v > 1.6*median && !above {
				spikes++
			}
			above = v > 1.6*median
			highest = math.Max(highest, v/median)
		}
	}
	require.InDelta(t, 4, spikes/seeds, 1, "6 hours at a mean gap of 90 minutes")
	require.Greater(t, highest, 4.0, "spikes reach several times the base")
	require.Less(t, highest, 7*1.6, "and at most 7 × a base within its wander")
}

// varianceTimeHurst estimates the Hurst parameter from how the variance of
// x's means over windows of 1, 2, 5, 10 and 20 minutes falls with the
// window (slope 2H − 2 in log–log).
func varianceTimeHurst(x []float64) float64 {
	var lx, ly []float64
	for _, m := range []int{60, 120, 300, 600, 1200} {
		var means []float64
		for i := 0; i+m <= len(x); i += m {
			var s float64
			for _, v := range x[i : i+m] {
				s += v
			}
			means = append(means, s/float64(m))
		}
		var mu, v float64
		for _, q := range means {
			mu += q / float64(len(means))
		}
		for _, q := range means {
			v += (q - mu) * (q - mu) / float64(len(means)-1)
		}
		lx, ly = append(lx, math.Log(float64(m))), append(ly, math.Log(v))
	}
	var mx, my, sxx, sxy float64
	for i := range lx {
		mx, my = mx+lx[i]/float64(len(lx)), my+ly[i]/float64(len(lx))
	}
	for i := range lx {
		sxx += (lx[i] - mx) * (lx[i] - mx)
		sxy += (lx[i] - mx) * (ly[i] - my)
	}
	return 1 + sxy/sxx/2
}
