package trace

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
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
	// The flash crowd reaches its peak within its first minute, the ramp does not.
	fc, _ := Pattern(PatternFlashCrowd)
	id, _ := Pattern(PatternIncreaseDecrease)
	require.Equal(t, 20.0, fc[300+60])
	require.Less(t, id[300+60], 5.0)
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
