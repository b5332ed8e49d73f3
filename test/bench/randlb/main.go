// Command randlb is the pooling benchmark's stand-in for a Kubernetes Service: an HTTP
// reverse proxy that sends each request to a backend chosen uniformly at random, and
// records every request's latency as its client feels it. GET /__randlb/report?slo=200ms
// prints "n p50_s p95_s late_fraction" for the requests since the last report and
// starts a new window. Usage: randlb LISTEN BACKEND[,BACKEND...].
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: randlb LISTEN BACKEND[,BACKEND...]")
		os.Exit(2)
	}
	var backends []*url.URL
	for _, b := range strings.Split(os.Args[2], ",") {
		backends = append(backends, &url.URL{Scheme: "http", Host: b})
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(backends[rand.IntN(len(backends))])
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				log.Printf("randlb: %v", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	var mu sync.Mutex
	var lat []float64
	var failed int
	mux := http.NewServeMux()
	mux.HandleFunc("/__randlb/report", func(w http.ResponseWriter, r *http.Request) {
		slo, err := time.ParseDuration(r.URL.Query().Get("slo"))
		if err != nil {
			http.Error(w, "slo: "+err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		l, f := lat, failed
		lat, failed = nil, 0
		mu.Unlock()
		sort.Float64s(l)
		q := func(p float64) float64 {
			if len(l) == 0 {
				return 0
			}
			return l[min(int(p*float64(len(l))), len(l)-1)]
		}
		late := 0
		for _, v := range l {
			if v > slo.Seconds() {
				late++
			}
		}
		frac := 0.0
		if len(l) > 0 {
			frac = float64(late+f) / float64(len(l)+f)
		}
		fmt.Fprintf(w, "%d %.6f %.6f %.6f %d\n", len(l), q(0.5), q(0.95), frac, f)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		rp.ServeHTTP(sw, r)
		d := time.Since(start).Seconds()
		mu.Lock()
		if sw.code >= 500 {
			failed++ // a failed request counts as late
		} else {
			lat = append(lat, d)
		}
		mu.Unlock()
	})
	srv := &http.Server{Addr: os.Args[1], Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
