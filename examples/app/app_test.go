package app

import (
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseWork(t *testing.T) {
	tests := []struct {
		query   string
		want    Work
		wantErr string
	}{
		{query: "", want: Work{Dist: Fixed, CV: 1}},
		{query: "cpu=5ms&sleep=20ms&dist=exp", want: Work{CPU: 5 * time.Millisecond, Sleep: 20 * time.Millisecond, Dist: Exponential, CV: 1}},
		{query: "sleep=1s&dist=lognormal&cv=1.5", want: Work{Sleep: time.Second, Dist: Lognormal, CV: 1.5}},
		{query: "cpu=fast", wantErr: `cpu: "fast" is not a duration`},
		{query: "sleep=2h", wantErr: "sleep: 2h0m0s is outside"},
		{query: "sleep=-1s", wantErr: "outside"},
		{query: "dist=pareto", wantErr: `dist: "pareto" is not one of`},
		{query: "cv=0", wantErr: "cv:"},
		{query: "cv=NaN", wantErr: "cv:"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			got, err := ParseWork(q)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestSampleMeans checks each distribution's sample mean (and the lognormal's CV)
// against the requested values, within 4 standard errors of 200,000 draws.
func TestSampleMeans(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	mean := 10 * time.Millisecond
	for _, tt := range []struct {
		dist Dist
		cv   float64
	}{{Fixed, 0}, {Exponential, 1}, {Lognormal, 1.5}} {
		var sum, sumSq float64
		for i := 0; i < n; i++ {
			x := float64(tt.dist.Sample(mean, tt.cv, rng)) / float64(mean)
			sum += x
			sumSq += x * x
		}
		m := sum / n
		sd := math.Sqrt(sumSq/n - m*m)
		se := tt.cv / math.Sqrt(n)
		require.InDelta(t, 1, m, 4*se+1e-9, "%s mean", tt.dist)
		if tt.dist != Fixed {
			require.InDelta(t, tt.cv, sd, 0.1*tt.cv, "%s cv", tt.dist)
		}
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for _, tt := range []struct {
		path string
		code int
		body string
	}{
		{"/bytes?n=100", 200, ""},
		{"/bytes?n=-1", 400, "n: want"},
		{"/work?sleep=1ms", 200, "sleep=1ms"},
		{"/work?dist=x", 400, "dist:"},
		{"/stream?events=2&interval=1ms", 200, "data: 1"},
		{"/healthz", 200, "ok"},
	} {
		resp, err := http.Get(srv.URL + tt.path)
		require.NoError(t, err)
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1000))
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, tt.code, resp.StatusCode, tt.path)
		require.Contains(t, string(body), tt.body, tt.path)
	}
}

func FuzzParseWork(f *testing.F) {
	for _, s := range []string{"cpu=5ms&dist=exp", "sleep=1s&cv=2&dist=lognormal", "cv=1e309", "cpu=9999999h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		w, err := ParseWork(q)
		if err != nil {
			return
		}
		require.True(t, w.CPU >= 0 && w.CPU <= MaxDuration && w.Sleep >= 0 && w.Sleep <= MaxDuration)
		require.True(t, w.CV > 0 && w.CV <= 10)
	})
}
