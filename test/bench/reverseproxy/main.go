// Command reverseproxy is the benchmark's baseline: a bare, pooled
// httputil.ReverseProxy with no measurement, as DESIGN.md section 7 asks qas-proxy to be
// compared with. Usage: reverseproxy LISTEN UPSTREAM.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: reverseproxy LISTEN UPSTREAM")
		os.Exit(2)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: os.Args[2]})
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second}
	// A request cancelled because its client left (wrk stopping at the end of a run)
	// is not a proxy error worth a log line; anything else still is.
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if !errors.Is(err, context.Canceled) {
			log.Printf("http: proxy error: %v", err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	srv := &http.Server{Addr: os.Args[1], Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
