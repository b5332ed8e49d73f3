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

// BenchmarkWriterBufferBytesPerPoint fills a writer whose InfluxDB never answers (no
// flush runs) with b.N pod points, and reports the live heap the buffer holds per point
// ("bytes/point"), the bound the chart's values document, and the bytes allocated per
// Write of one point once the buffer is full ("B/op").
func BenchmarkWriterBufferBytesPerPoint(b *testing.B) {
	const buffered = 100_000
	w, err := NewWriter(WriterConfig{URL: "http://127.0.0.1:1", Bucket: "qas/autogen", BufferPoints: buffered,
		FlushInterval: time.Hour}, nil, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { close(w.stop); <-w.stopped }()
	at := time.Now()
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
	b.ReportMetric(perPoint, "bytes/point") // after the loop: ResetTimer clears reported metrics
	if w.Buffered() != buffered {
		b.Fatalf("buffered %d, want %d", w.Buffered(), buffered)
	}
}
