package trace

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/testenv"
)

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		window  Window
		want    []float64
		wantErr string
	}{
		{name: "all", in: "1\n2\n3\n", want: []float64{1, 2, 3}},
		{name: "window", in: "1\n2\n3\n4\n", window: Window{Start: time.Second, End: 3 * time.Second}, want: []float64{2, 3}},
		{name: "stops at the window end without reading further", in: "1\n2\nbad\n", window: Window{End: 2 * time.Second}, want: []float64{1, 2}},
		{name: "spaces", in: " 5 \r\n", want: []float64{5}},
		{name: "bad line named", in: "1\n2\n-3\n", wantErr: `line 3: "-3" is not a non-negative integer`},
		{name: "float", in: "1.5\n", wantErr: "line 1"},
		{name: "empty window", in: "1\n", window: Window{Start: 5 * time.Second}, wantErr: "holds no seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(strings.NewReader(tt.in), tt.window)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestReadGzip(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	_, _ = gz.Write([]byte("7\n8\n"))
	require.NoError(t, gz.Close())
	got, err := Read(&buf, Window{})
	require.NoError(t, err)
	require.Equal(t, []float64{7, 8}, got)
}

func TestParseWindow(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    Window
		wantErr string
	}{
		{in: "", want: Window{}},
		{in: "2h:8h", want: Window{Start: 2 * time.Hour, End: 8 * time.Hour}},
		{in: ":30m", want: Window{End: 30 * time.Minute}},
		{in: "1h:", want: Window{Start: time.Hour}},
		{in: "8h:2h", wantErr: "start < end"},
		{in: "2h", wantErr: "START:END"},
		{in: "x:1h", wantErr: "start"},
	} {
		got, err := ParseWindow(tt.in)
		if tt.wantErr != "" {
			require.ErrorContains(t, err, tt.wantErr, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

// TestNASATrace reads a window of the real NASA trace from ../shared/traces.
func TestNASATrace(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "traces", "nasa-1995-07-08.rps.gz")
	if _, err := os.Stat(path); err != nil {
		if testenv.Required() {
			t.Fatalf("the NASA trace is missing: %v", err)
		}
		t.Skipf("no ../shared/traces: %v", err)
	}
	rates, err := ReadFile(path, Window{Start: 12 * time.Hour, End: 13 * time.Hour})
	require.NoError(t, err)
	require.Len(t, rates, 3600)
	var sum float64
	for _, r := range rates {
		sum += r
	}
	// Midday on 1 July 1995: busier than the trace's 0.68 req/s mean.
	require.Greater(t, sum/3600, 0.68)
}

func FuzzRead(f *testing.F) {
	f.Add([]byte("1\n2\n"), int64(0), int64(0))
	f.Add([]byte{0x1f, 0x8b, 0, 0}, int64(0), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, start, end int64) {
		w := Window{Start: time.Duration(start%100) * time.Second, End: time.Duration(end%100) * time.Second}
		rates, err := Read(bytes.NewReader(data), w)
		if err != nil {
			return
		}
		for _, r := range rates {
			require.GreaterOrEqual(t, r, 0.0)
		}
	})
}
