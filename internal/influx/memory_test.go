package influx

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"go.uber.org/zap"
)

// podLikePoint is a point shaped like the collector's qas_pod point: four tags, thirteen
// float fields.
func podLikePoint(i int, at time.Time) *write.Point {
	fields := map[string]any{}
	for _, f := range Schema[0].Fields {
		fields[f.Name] = 0.123456789 * float64(i%1000+1)
	}
	return write.NewPoint(Pod, map[string]string{"namespace": "shop", "workload": "checkout",
		"pod": fmt.Sprintf("checkout-7d9f8c6b5-%05d", i%5000), "node": fmt.Sprintf("node-%03d", i%100)}, fields, at)
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkWriterBufferBytesPerPoint fills a buffer of 100,000 pod points and reports
// the live heap it holds per point ("bytes/point", the bound the chart's values
// document) and the cost of one more Write once it is full ("B/op", "ns/op").
// "points" is the baseline measured in the same run: the buffer the writer kept before
// issue #18, a slice of *write.Point that copied itself on every Write when full;
// "writer" is the Writer, holding line protocol in a ring.
func BenchmarkWriterBufferBytesPerPoint(b *testing.B) {
	const buffered = 100_000
	at := time.Now()
	b.Run("points", func(b *testing.B) {
		before := heapInUse()
		buf := make([]*write.Point, 0, buffered)
		for i := range buffered {
			buf = append(buf, podLikePoint(i, at.Add(time.Duration(i))))
		}
		perPoint := float64(heapInUse()-before) / buffered
		pts := make([]*write.Point, 64)
		for i := range pts {
			pts[i] = podLikePoint(i, at)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			buf = append(buf, pts[i%len(pts)])
			over := len(buf) - buffered
			buf = append(buf[:0:0], buf[over:]...) // what Write did when full
		}
		b.StopTimer()
		b.ReportMetric(perPoint, "bytes/point") // after the loop: ResetTimer clears reported metrics
		if len(buf) != buffered {
			b.Fatalf("buffered %d, want %d", len(buf), buffered)
		}
	})
	b.Run("writer", func(b *testing.B) {
		w, err := NewWriter(WriterConfig{URL: "http://127.0.0.1:1", Bucket: "qas/autogen", BufferPoints: buffered,
			FlushInterval: time.Hour}, nil, zap.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		defer func() { close(w.stop); <-w.stopped }()
		before := heapInUse()
		for i := range buffered {
			w.Write(podLikePoint(i, at.Add(time.Duration(i))))
		}
		perPoint := float64(heapInUse()-before) / buffered
		pts := make([]*write.Point, 64)
		for i := range pts {
			pts[i] = podLikePoint(i, at)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			w.Write(pts[i%len(pts)])
		}
		b.StopTimer()
		b.ReportMetric(perPoint, "bytes/point")
		if w.Buffered() != buffered {
			b.Fatalf("buffered %d, want %d", w.Buffered(), buffered)
		}
	})
}
