package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool"
)

// BenchmarkH2OverflowChecks measures what an HTTP/2 request that finds every slot
// busy costs to check (mobility, and wellFormedH2, which every HTTP/2 request
// passes) against building the head it carries to the front (overflowHead), the
// baseline, in the same run: a gRPC call's fields.
func BenchmarkH2OverflowChecks(b *testing.B) {
	sc, err := pool.NewSidecar(pool.SidecarConfig{Workload: workload, Keys: keyring(b, secretFile(b)),
		Fronts: pool.Static{"127.0.0.1:1"}, Counters: measure.New(time.Now, 1, 1).EnablePool()})
	if err != nil {
		b.Fatal(err)
	}
	p := &Proxy{pool: sc}
	r, err := http.NewRequest("POST", "http://shop.example/pkg.Service/Method", http.NoBody)
	if err != nil {
		b.Fatal(err)
	}
	r.Proto, r.ProtoMajor, r.ProtoMinor, r.RequestURI, r.RemoteAddr = "HTTP/2.0", 2, 0, "/pkg.Service/Method", "10.0.0.1:4242"
	r.ContentLength = -1
	r.Header = http.Header{"Content-Type": {"application/grpc"}, "Te": {"trailers"}, "User-Agent": {"grpc-go/1.85.0"},
		"Grpc-Timeout": {"4999984u"}, "Grpc-Accept-Encoding": {"gzip"}, "Authorization": {"Bearer abcdefghijklmnopqrstuvwxyz0123456789"}}
	b.Run("overflowHead (baseline)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = overflowHead(r)
		}
	})
	b.Run("mobility", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if p.mobility(r) != movesOnceRead {
				b.Fatal("not movable")
			}
		}
	})
	b.Run("wellFormedH2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !wellFormedH2(r) {
				b.Fatal("malformed")
			}
		}
	})
}
