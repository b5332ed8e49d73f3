package stats

import (
	"bytes"
	"encoding/json"
	"testing"
)

// BenchmarkDecode decodes a full document (pool, front, series, the default
// latency and service buckets), as the collector does for every pod every
// cycle: one with only members this reader knows (the fast path), and one
// from a newer proxy with a member added at the top and in the pool (the
// general path).
func BenchmarkDecode(b *testing.B) {
	s := full()
	s.Latency = Histogram{Bounds: DefaultLatencyBounds, Counts: make([]uint64, len(DefaultLatencyBounds)+1)}
	s.Service = Histogram{Bounds: DefaultLatencyBounds, Counts: make([]uint64, len(DefaultLatencyBounds)+1)}
	s.Latency.Counts[3], s.Service.Counts[3] = 9, 8
	doc, err := json.Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	newer := withMember(b, withMember(b, doc, "{", `"added_later":{"a":[1,2]}`), `"pool":{`, `"handed_off":3`)
	for _, bc := range []struct {
		name string
		doc  []byte
	}{{"known", doc}, {"newer", newer}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(bytes.NewReader(bc.doc)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
