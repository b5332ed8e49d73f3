package loadgen

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMainFlags(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(tr, []byte("1\n2\nx\n"), 0o600))
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--rate=1"}, "invalid --target"},
		{[]string{"--target=http://x"}, "invalid --rate: give --rate or --trace"},
		{[]string{"--target=http://x", "--rate=1", "--trace=" + tr}, "not both"},
		{[]string{"--target=http://x", "--trace=" + tr}, `line 3: "x" is not a non-negative integer`},
		{[]string{"--target=http://x", "--trace=" + tr, "--window=5"}, "invalid --window"},
		{[]string{"--target=http://x", "--rate=1", "--compress=0"}, "invalid --compress"},
		{[]string{"--target=http://x", "--rate=1", "--interval=0s"}, "invalid --interval"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), tt.args, func(string) string { return "" }, &out, &errb)
		require.Equal(t, 2, code, tt.args)
		require.Contains(t, errb.String(), tt.wantErr, tt.args)
	}
}

func TestTraceRatesCompressAndScale(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(tr, []byte("1\n2\n3\n4\n5\n"), 0o600))
	rates, err := traceRates(tr, "", 10, 2)
	require.NoError(t, err)
	require.Equal(t, []float64{30, 70, 50}, rates)
}

func TestMainSendsLoad(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"--target=" + srv.URL, "--rate=100", "--duration=500ms"}, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, out.String(), "0 failed")
	require.Contains(t, out.String(), "client latency: p50")
}
