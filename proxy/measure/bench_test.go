package measure

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRequest is one request's recording on the proxy's hot path: arrival,
// service start, end (latency and service time observed), with the real clock.
func BenchmarkRequest(b *testing.B) {
	r := New(nil, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		arrived := r.Arrive()
		began := r.Begin()
		r.End(arrived, began, time.Microsecond, 200, OK)
	}
}

// BenchmarkRequestParallel is BenchmarkRequest from every CPU at once: the counters'
// cache lines are shared, as on a busy proxy.
func BenchmarkRequestParallel(b *testing.B) {
	r := New(nil, 0, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			arrived := r.Arrive()
			began := r.Begin()
			r.End(arrived, began, time.Microsecond, 200, OK)
		}
	})
}

// BenchmarkOverflowed is the sender's recording of a request a front served:
// arrival, then EndOverflowed.
func BenchmarkOverflowed(b *testing.B) {
	r := New(nil, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		r.EndOverflowed(r.Arrive(), 200, OK)
	}
}

// BenchmarkRequestWhileCountingPerSecond is BenchmarkRequest with the
// per-second arrival counter running beside it, waking every millisecond
// instead of every second: a thousand times its real cost, to show that the
// request path does not pay for it.
func BenchmarkRequestWhileCountingPerSecond(b *testing.B) {
	r := New(nil, 0, 0)
	p := r.CountPerSecond(func(ctx context.Context, d time.Duration) error {
		return RealSleep(ctx, time.Millisecond)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	b.ReportAllocs()
	for b.Loop() {
		arrived := r.Arrive()
		began := r.Begin()
		r.End(arrived, began, time.Microsecond, 200, OK)
	}
}
