package stats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func valid() Snapshot {
	start := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	return Snapshot{
		Version: SchemaVersion, InstanceID: "abc", StartTime: start, Time: start.Add(time.Minute), Seq: 3,
		Arrivals: 10, Completions: 9, ServiceSecondsSum: 0.9, ServiceSecondsSumSq: 0.1,
		Latency: Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{8, 1, 0}}, LatencySecondsSum: 1.2,
		Service: Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{8, 0, 0}},
	}
}

func validPool() *Pool {
	return &Pool{OverflowAccepted: 4, OverflowRefused: 1, OverflowTimeout: 1, OverflowError: 1, Pulled: 2, FrontFailures: 30,
		DrainPushed: 1, DrainKept: 3, ExpiredRequeued: 2, ExpiredRelayed: 1,
		OverflowDecision: Histogram{Bounds: []float64{0.001, 0.025}, Counts: []uint64{5, 1, 1}}}
}

func validFront() *Front {
	return &Front{QueueLength: 3, WaitingPulls: 2, Accepted: 20, RefusedFull: 4, Unauthenticated: 5, Dispatched: 15, Expired: 2,
		QueueWait: Histogram{Bounds: []float64{0.01, 1}, Counts: []uint64{10, 5, 2}}}
}

func TestDecodeRoundTripPoolAndFront(t *testing.T) {
	s := valid()
	s.Pool, s.Front = validPool(), validFront()
	doc := encode(t, s)
	require.Contains(t, string(doc), `"pool":{"overflow_accepted":4,"overflow_refused":1,"overflow_timeout":1,"overflow_error":1,"pulled":2,"front_failures":30,"overflow_decision":{`)
	require.Contains(t, string(doc), `"front":{"queue_length":3,"waiting_pulls":2,"accepted":20,"refused_full":4,"unauthenticated":5,"dispatched":15,"expired":2,"queue_wait":{`)
	got, err := Decode(bytes.NewReader(doc))
	require.NoError(t, err)
	require.Equal(t, s, got)
	// Without pooling the document carries neither object.
	require.NotContains(t, string(encode(t, valid())), `"pool"`)
	require.NotContains(t, string(encode(t, valid())), `"front"`)
}

func encode(t testing.TB, s Snapshot) []byte {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return b
}

func TestDecodeRoundTrip(t *testing.T) {
	s := valid()
	got, err := Decode(bytes.NewReader(encode(t, s)))
	require.NoError(t, err)
	require.Equal(t, s, got)
	require.Equal(t, uint64(9), got.Latency.Total())
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Snapshot)
		raw     string
		wantErr string
	}{
		{name: "version", mutate: func(s *Snapshot) { s.Version = 2 }, wantErr: "version 2"},
		{name: "no instance", mutate: func(s *Snapshot) { s.InstanceID = "" }, wantErr: "instance_id"},
		{name: "no start", mutate: func(s *Snapshot) { s.StartTime = time.Time{} }, wantErr: "start_time"},
		{name: "time before start", mutate: func(s *Snapshot) { s.Time = s.StartTime.Add(-time.Second) }, wantErr: "before start_time"},
		{name: "completions exceed arrivals", mutate: func(s *Snapshot) { s.Completions = 11 }, wantErr: "exceed arrivals"},
		{name: "negative sum", mutate: func(s *Snapshot) { s.BusySeconds = -1 }, wantErr: "busy_seconds"},
		{name: "negative gauge", mutate: func(s *Snapshot) { s.InFlight = -1 }, wantErr: "negative gauge"},
		{name: "bucket count", mutate: func(s *Snapshot) { s.Latency.Counts = s.Latency.Counts[:2] }, wantErr: "counts for 2 bounds"},
		{name: "bounds order", mutate: func(s *Snapshot) { s.Latency.Bounds = []float64{1, 0.1} }, wantErr: "latency bound 1"},
		// One extreme but finite value (a broken or hostile proxy) made +Inf rates and
		// blocked every write to InfluxDB (issue #18).
		{name: "extreme in-flight integral", mutate: func(s *Snapshot) { s.InFlightSeconds = 1.7976931348623157e308 }, wantErr: "in_flight_seconds is 1.7976931348623157e+308, more than arrivals × uptime"},
		{name: "service sum beyond uptime", mutate: func(s *Snapshot) { s.ServiceSecondsSum = 10 * 121 }, wantErr: "service_seconds_sum"},
		{name: "sum of squares beyond uptime", mutate: func(s *Snapshot) { s.ServiceSecondsSumSq = 0.9*121 + 1 }, wantErr: "service_seconds_sum_sq"},
		{name: "ttfb beyond uptime", mutate: func(s *Snapshot) { s.TTFBSecondsSum = 1e300 }, wantErr: "ttfb_seconds_sum"},
		{name: "queue wait beyond uptime", mutate: func(s *Snapshot) { s.QueueWaitSecondsSum = 1e20 }, wantErr: "queue_wait_seconds_sum"},
		{name: "latency sum beyond uptime", mutate: func(s *Snapshot) { s.LatencySecondsSum = 10*121 + 1 }, wantErr: "latency_seconds_sum is 1211, more than arrivals × uptime"},
		{name: "latency sum negative", mutate: func(s *Snapshot) { s.LatencySecondsSum = -0.5 }, wantErr: "latency_seconds_sum is -0.5, want a finite value ≥ 0"},
		{name: "latency sum NaN", raw: "NAN", wantErr: "latency_seconds_sum is NaN"},
		{name: "busy beyond uptime", mutate: func(s *Snapshot) { s.BusySeconds = 121 }, wantErr: "busy_seconds is 121, more than uptime"},
		{name: "in flight beyond arrivals", mutate: func(s *Snapshot) { s.InFlight = 11 }, wantErr: "in_flight 11 exceeds arrivals 10"},
		{name: "histogram beyond arrivals", mutate: func(s *Snapshot) { s.Latency.Counts = []uint64{8, 1, 2} }, wantErr: "more observations than arrivals 10"},
		{name: "histogram overflow", mutate: func(s *Snapshot) { s.Arrivals = math.MaxUint64; s.Latency.Counts = []uint64{math.MaxUint64, 1, 0} }, wantErr: "more observations than arrivals"},
		{name: "pool attempts beyond twice the arrivals", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.OverflowError = 15 }, wantErr: "pool overflow attempts exceed twice the arrivals 10"},
		{name: "pool drain kept beyond arrivals", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.DrainKept = 11 }, wantErr: "pool drain_kept 11 exceeds arrivals 10"},
		{name: "pool drain pushes beyond accepted", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.DrainPushed = 5 }, wantErr: "pool drain_pushed 5 exceeds overflow_accepted 4"},
		{name: "pool expiries beyond accepted", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.ExpiredRequeued, s.Pool.ExpiredRelayed = 3, 2 }, wantErr: "pool expired_requeued 3 + expired_relayed 2 exceed overflow_accepted 4"},
		{name: "pool attempts overflow", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.OverflowRefused = math.MaxUint64 }, wantErr: "pool overflow attempts exceed"},
		{name: "pool pulled beyond arrivals", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.Pulled = 11 }, wantErr: "pool pulled 11 exceeds arrivals 10"},
		{name: "pool decision beyond attempts", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.OverflowDecision.Counts[0] = 9 }, wantErr: "pool overflow_decision histogram counts more observations than overflow attempts 7"},
		{name: "pool decision buckets", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.OverflowDecision.Counts = nil }, wantErr: "pool overflow_decision has 0 counts"},
		{name: "pool decision bound NaN", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.OverflowDecision.Bounds[0] = -1 }, wantErr: "pool overflow_decision bound 0"},
		{name: "front negative gauge", mutate: func(s *Snapshot) { s.Front = validFront(); s.Front.WaitingPulls = -1 }, wantErr: "front has a negative gauge"},
		{name: "front left beyond accepted", mutate: func(s *Snapshot) { s.Front = validFront(); s.Front.Expired = 20 }, wantErr: "front dispatched 15 + expired 20 exceed accepted 20"},
		{name: "front queue beyond accepted", mutate: func(s *Snapshot) { s.Front = validFront(); s.Front.QueueLength = 4 }, wantErr: "front queue_length 4 exceeds"},
		{name: "front wait beyond left", mutate: func(s *Snapshot) { s.Front = validFront(); s.Front.QueueWait.Counts[1] = 10 }, wantErr: "front queue_wait histogram counts more observations than dispatched + expired 17"},
		{name: "service bounds differ from latency's", mutate: func(s *Snapshot) { s.Service.Bounds = []float64{0.2, 1} }, wantErr: "service histogram has 2 bounds and 3 counts, want the latency histogram's"},
		{name: "service counts without bounds", mutate: func(s *Snapshot) { s.Service.Bounds = nil }, wantErr: "service histogram has 0 bounds"},
		{name: "service bounds without counts", mutate: func(s *Snapshot) { s.Service.Counts = nil }, wantErr: "service histogram has 2 bounds and 0 counts"},
		{name: "service count beyond completions", mutate: func(s *Snapshot) { s.Service.Counts = []uint64{8, 1, 1} }, wantErr: "more observations than completions 9"},
		{name: "service histogram overflow", mutate: func(s *Snapshot) {
			s.Arrivals, s.Completions = math.MaxUint64, math.MaxUint64
			s.Service.Counts = []uint64{math.MaxUint64, 1, 0}
		}, wantErr: "more observations than completions"},
		// Members this reader does not know are ignored, but the ones it knows
		// are still checked: a newer proxy's document is no way around them.
		{name: "unknown member beside a known one of the wrong type", raw: `{"version":1,"surprise":true,"arrivals":"many"}`,
			wantErr: "stats: decode: json: cannot unmarshal string into Go struct field document.Snapshot.arrivals of type uint64"},
		{name: "unknown member beside a negative time sum", mutate: func(s *Snapshot) { s.BusySeconds = -1 }, raw: "UNKNOWN", wantErr: "busy_seconds is -1, want a finite value ≥ 0"},
		{name: "unknown member beside a bad histogram", mutate: func(s *Snapshot) { s.Latency.Bounds = []float64{1, 0.1} }, raw: "UNKNOWN", wantErr: "latency bound 1"},
		{name: "unknown member beside a pool of the wrong type", raw: `{"version":1,"surprise":{"a":[1]},"pool":[1]}`, wantErr: "cannot unmarshal array into Go struct field document.Snapshot.pool of type stats.Pool"},
		{name: "unknown pool member beside a bad pool count", mutate: func(s *Snapshot) { s.Pool = validPool(); s.Pool.Pulled = 11 }, raw: "UNKNOWN", wantErr: "pool pulled 11 exceeds arrivals 10"},
		{name: "a known member in another case is read, and checked", raw: `{"version":1,"surprise":1,"ARRIVALS":"many"}`, wantErr: "cannot unmarshal string into Go struct field document.Snapshot.arrivals"},
		{name: "unknown member in a document with trailing data", raw: "UNKNOWN TRAIL", wantErr: "trailing data"},
		{name: "version 0 (none)", raw: `{"surprise":1,"instance_id":"a"}`, wantErr: "stats: version 0, want 1 (the only schema version this reader knows)"},
		{name: "version not a number", raw: `{"version":"1"}`, wantErr: "cannot unmarshal string into Go struct field document.Snapshot.version of type int"},
		{name: "garbage", raw: `<html>`, wantErr: "decode"},
		{name: "trailing", raw: "TRAIL", wantErr: "trailing data"},
		{name: "too large", raw: `"` + strings.Repeat("x", MaxDocumentBytes) + `"`, wantErr: "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc []byte
			switch {
			case tt.raw == "TRAIL":
				doc = append(encode(t, valid()), []byte(" {}")...)
			case tt.raw == "UNKNOWN TRAIL":
				doc = append(withMember(t, encode(t, valid()), "{", `"surprise":[1,{"x":"NaN"}]`), []byte(" {}")...)
			case tt.raw == "UNKNOWN":
				s := valid()
				tt.mutate(&s)
				doc = withMember(t, encode(t, s), "{", `"surprise":[1,{"x":"NaN"}]`)
				if s.Pool != nil {
					doc = withMember(t, doc, `"pool":{`, `"handed_off":{"n":1e999}`)
				}
			case tt.raw == "NAN":
				// JSON has no NaN; Validate is what a consumer calls on a document it
				// built otherwise.
				s := valid()
				s.LatencySecondsSum = math.NaN()
				require.ErrorContains(t, s.Validate(), tt.wantErr)
				return
			case tt.raw != "":
				doc = []byte(tt.raw)
			default:
				s := valid()
				tt.mutate(&s)
				doc = encode(t, s)
			}
			_, err := Decode(bytes.NewReader(doc))
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestDecodeWithoutService: a proxy that does not measure service times (an
// older one, during a rolling upgrade) sends no service histogram; that is
// valid, and reads as empty.
func TestDecodeWithoutService(t *testing.T) {
	s := valid()
	s.Service = Histogram{}
	raw := encode(t, s)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	delete(m, "service")
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	got, err := Decode(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Zero(t, got.Service.Total())
	require.Empty(t, got.Service.Bounds)
}

// TestDecodeWithoutLatencySum: a proxy from before latency_seconds_sum (during a
// rolling upgrade) sends none; that is valid, and reads as 0.
func TestDecodeWithoutLatencySum(t *testing.T) {
	raw := encode(t, valid())
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	require.Contains(t, m, "latency_seconds_sum")
	delete(m, "latency_seconds_sum")
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	got, err := Decode(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Zero(t, got.LatencySecondsSum)
	require.Equal(t, uint64(9), got.Latency.Total())
}

func FuzzDecode(f *testing.F) {
	b, _ := json.Marshal(valid())
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	pooled := valid()
	pooled.Pool, pooled.Front = validPool(), validFront()
	b, _ = json.Marshal(pooled)
	f.Add(b)
	f.Add([]byte(`{"latency":{"bounds":[1e309],"counts":[1,2]}}`))
	withSeries := valid()
	withSeries.ArrivalsPerSecond = validPerSecond(withSeries)
	b, _ = json.Marshal(withSeries)
	f.Add(b)
	base := strings.TrimSuffix(string(encode(f, valid())), "}")
	for _, series := range []string{
		`{"end_unix":1795338059,"counts":[-1,2,0,3]}`, `{"end_unix":1795338059,"counts":[-2]}`, `{"end_unix":0,"counts":[1]}`,
		`{"end_unix":1795338059,"counts":[]}`, `{"end_unix":"x","counts":[1]}`, `[1,2]`, `null`, `{"end_unix":1795338059,"counts":[1],"x":1}`,
		`{"end_unix":1795338059,"counts":[9223372036854775807,9223372036854775807]}`,
	} {
		f.Add([]byte(base + `,"arrivals_per_second":` + series + "}"))
	}
	f.Add([]byte(`{"version":1,"instance_id":"a","start_time":"2026-01-01T00:00:00Z","time":"2026-01-01T00:01:00Z","arrivals":3,"completions":2,` +
		`"latency":{"bounds":[1],"counts":[1,1]},"service":{"bounds":[1],"counts":[2,0]}}`))
	// A newer proxy's documents: members this reader does not know, at the top
	// and inside objects, of odd values.
	newer := encode(f, full())
	newer = withMember(f, newer, "{", `"added_later":{"a":[1e999,"NaN",null]}`)
	newer = withMember(f, newer, `"pool":{`, `"handed_off":[{"x":1}]`)
	newer = withMember(f, newer, `"latency":{`, `"exemplars":"NaN"`)
	newer = withMember(f, newer, `"arrivals_per_second":{`, `"start_unix":-1`)
	f.Add(newer)
	f.Add([]byte(`{"version":2,"arrivals":{"client":1}}`))
	f.Add([]byte(`{"version":1,"surprise":true,"ARRIVALS":"many"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := DecodeDetail(bytes.NewReader(data))
		// The fast path (no member this reader does not know) and the general one
		// agree, on errors too.
		slow, slowErr := decodeAny(data)
		if err != nil {
			require.EqualError(t, slowErr, err.Error())
			return
		}
		require.NoError(t, slowErr)
		require.Equal(t, d, slow)
		s, dropped := d.Snapshot, d.Dropped
		if dropped != nil {
			require.Nil(t, s.ArrivalsPerSecond, "a dropped series is left out")
		}
		require.LessOrEqual(t, len(d.Ignored), d.IgnoredCount)
		require.LessOrEqual(t, len(d.Ignored), MaxIgnoredListed)
		for _, name := range d.Ignored {
			if strings.Contains(name, ".") || strings.HasSuffix(name, "…") {
				continue
			}
			for known := range snapshotMembers {
				require.False(t, strings.EqualFold(name, known), "%q is a member this reader knows", name)
			}
		}
		// A member added by a newer proxy changes nothing this reader knows.
		trimmed := bytes.TrimLeft(data, " \t\r\n")
		if len(trimmed) > 0 && trimmed[0] == '{' {
			again, err := DecodeDetail(bytes.NewReader(withMember(t, trimmed, "{", `"zz_added_later":[{"n":1e999},"NaN"]`)))
			require.NoError(t, err)
			require.Equal(t, d.Snapshot, again.Snapshot)
			require.Equal(t, d.Dropped, again.Dropped)
			require.Equal(t, d.IgnoredCount+1, again.IgnoredCount)
		}
		// Whatever decodes must satisfy the invariants and survive a round trip.
		require.NoError(t, s.Validate())
		again, dropped, err := DecodeDropping(bytes.NewReader(encode(t, s)))
		require.NoError(t, err)
		require.NoError(t, dropped)
		require.Equal(t, s.Arrivals, again.Arrivals)
		require.Equal(t, s.ArrivalsPerSecond, again.ArrivalsPerSecond)
	})
}

// validPerSecond is a series valid in s: its last second ended before s.Time.
func validPerSecond(s Snapshot) *PerSecond {
	return &PerSecond{EndUnix: s.Time.Unix() - 1, Counts: []int64{-1, 2, 0, 3}}
}

func TestDecodeArrivalsPerSecondRoundTrip(t *testing.T) {
	s := valid()
	s.ArrivalsPerSecond = validPerSecond(s)
	doc := encode(t, s)
	require.Contains(t, string(doc), `"arrivals_per_second":{"end_unix":1795338059,"counts":[-1,2,0,3]}`)
	got, dropped, err := DecodeDropping(bytes.NewReader(doc))
	require.NoError(t, err)
	require.NoError(t, dropped)
	require.Equal(t, s, got)
	require.Equal(t, int64(1795338056), got.ArrivalsPerSecond.StartUnix())
	require.Equal(t, int64(2), got.ArrivalsPerSecond.At(1795338057))
	require.Equal(t, int64(-1), got.ArrivalsPerSecond.At(1795338055))
	require.NotContains(t, string(encode(t, valid())), `arrivals_per_second`, "omitted when absent")
}

// TestDecodeDropsABadArrivalsPerSecond: a bad series is an error that names it,
// and costs only itself: the rest of the document is kept.
func TestDecodeDropsABadArrivalsPerSecond(t *testing.T) {
	end := valid().Time.Unix() - 1
	long := make([]int64, MaxPerSecondCounts+1)
	tests := []struct {
		name, series, wantErr string
	}{
		{"wrong type", `"many"`, "arrivals_per_second: json: cannot unmarshal string"},
		{"end_unix not a number", `{"end_unix":"x","counts":[1]}`, "arrivals_per_second: json: cannot unmarshal string"},
		{"unknown member beside a bad count", `{"end_unix":` + itoa(end) + `,"counts":[1,-2],"start":3}`, "arrivals_per_second count 1 is -2"},
		{"unknown member beside counts of the wrong type", `{"end_unix":` + itoa(end) + `,"counts":"1","start":3}`, "arrivals_per_second: json: cannot unmarshal string"},
		{"no counts", `{"end_unix":` + itoa(end) + `,"counts":[]}`, "arrivals_per_second has 0 counts, want 1 to 600"},
		{"counts null", `{"end_unix":` + itoa(end) + `}`, "arrivals_per_second has 0 counts"},
		{"too long", `{"end_unix":` + itoa(end) + `,"counts":` + string(mustJSON(t, long)) + `}`, "arrivals_per_second has 601 counts"},
		{"below missing", `{"end_unix":` + itoa(end) + `,"counts":[1,-2]}`, "arrivals_per_second count 1 is -2, want ≥ 0 or -1 (missing)"},
		{"more than the arrivals", `{"end_unix":` + itoa(end) + `,"counts":[6,5]}`, "arrivals_per_second counts more requests than arrivals 10"},
		{"overflowing counts", `{"end_unix":` + itoa(end) + `,"counts":[9223372036854775807,9223372036854775807]}`, "counts more requests than arrivals"},
		{"end before the process", `{"end_unix":` + itoa(valid().StartTime.Unix()-61) + `,"counts":[1]}`, "arrivals_per_second end_unix 1795337939 is outside the process's lifetime"},
		{"end after the snapshot", `{"end_unix":` + itoa(end+62) + `,"counts":[1]}`, "outside the process's lifetime"},
	}
	base := strings.TrimSuffix(string(encode(t, valid())), "}")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped, err := DecodeDropping(strings.NewReader(base + `,"arrivals_per_second":` + tt.series + "}"))
			require.NoError(t, err, "the document is kept")
			require.ErrorContains(t, dropped, tt.wantErr)
			require.Equal(t, valid(), got, "everything but the series")
			// Decode keeps the document too, and Validate names the series.
			got, err = Decode(strings.NewReader(base + `,"arrivals_per_second":` + tt.series + "}"))
			require.NoError(t, err)
			require.Nil(t, got.ArrivalsPerSecond)
		})
	}
	t.Run("null is absent", func(t *testing.T) {
		got, dropped, err := DecodeDropping(strings.NewReader(base + `,"arrivals_per_second":null}`))
		require.NoError(t, err)
		require.NoError(t, dropped)
		require.Equal(t, valid(), got)
	})
	t.Run("validate names it", func(t *testing.T) {
		s := valid()
		s.ArrivalsPerSecond = &PerSecond{EndUnix: end, Counts: []int64{-3}}
		require.ErrorContains(t, s.Validate(), "arrivals_per_second count 0 is -3")
	})
	t.Run("a broken document is still refused", func(t *testing.T) {
		s := valid()
		s.Completions = 11
		s.ArrivalsPerSecond = validPerSecond(s)
		_, _, err := DecodeDropping(bytes.NewReader(encode(t, s)))
		require.ErrorContains(t, err, "completions 11 exceed arrivals 10")
	})
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// withMember inserts the member text (`"name":value`) into doc just after
// the first occurrence of at, which opens an object (`{` for the document,
// `"pool":{` for the pool).
func withMember(t testing.TB, doc []byte, at, member string) []byte {
	t.Helper()
	i := bytes.Index(doc, []byte(at))
	require.GreaterOrEqual(t, i, 0, "%s is in the document", at)
	i += len(at)
	out := append([]byte(nil), doc[:i]...)
	out = append(out, member...)
	if doc[i] != '}' {
		out = append(out, ',')
	}
	return append(out, doc[i:]...)
}

// full is a document with every member this reader knows: the pool and front
// sections, the service histogram and an arrivals_per_second series.
func full() Snapshot {
	s := valid()
	s.Pool, s.Front = validPool(), validFront()
	s.ArrivalsPerSecond = validPerSecond(s)
	return s
}

// TestDecodeNewerDocument: a document from a newer proxy, which adds members
// this reader does not know (top-level and inside every object), is read: every
// member it knows exactly as without them, whatever the unknown members hold,
// and the unknown ones are listed by their paths.
func TestDecodeNewerDocument(t *testing.T) {
	odd := []string{
		`{"nested":{"deeper":[1,2,{"x":null}]},"n":-1}`, `[1e999,-1e999,"NaN","+Inf",null,true]`, `"NaN"`, `1e999`, `-0`, `null`,
		`"` + strings.Repeat("z", 10_000) + `"`, strings.Repeat("[", 500) + strings.Repeat("]", 500), `{"version":2,"arrivals":"many"}`,
	}
	places := []struct{ at, prefix string }{
		{"{", ""}, {`"latency":{`, "latency."}, {`"service":{`, "service."}, {`"pool":{`, "pool."},
		{`"overflow_decision":{`, "pool.overflow_decision."}, {`"front":{`, "front."}, {`"queue_wait":{`, "front.queue_wait."},
		{`"arrivals_per_second":{`, "arrivals_per_second."},
	}
	want := full()
	base := encode(t, want)
	for _, p := range places {
		for i, v := range odd {
			t.Run(fmt.Sprintf("%s%d", p.prefix, i), func(t *testing.T) {
				doc := withMember(t, base, p.at, `"added_later":`+v)
				d, err := DecodeDetail(bytes.NewReader(doc))
				require.NoError(t, err)
				require.NoError(t, d.Dropped)
				require.Equal(t, want, d.Snapshot, "every known member is read exactly")
				require.Equal(t, []string{p.prefix + "added_later"}, d.Ignored)
				require.Equal(t, 1, d.IgnoredCount)
				requireSamePaths(t, doc, d)
			})
		}
	}
	t.Run("everywhere at once", func(t *testing.T) {
		doc := base
		var paths []string
		for _, p := range places {
			doc = withMember(t, doc, p.at, `"added_later":{"a":[1,"NaN"]},"also_new":7`)
			paths = append(paths, p.prefix+"added_later", p.prefix+"also_new")
		}
		d, err := DecodeDetail(bytes.NewReader(doc))
		require.NoError(t, err)
		require.Equal(t, want, d.Snapshot)
		require.Len(t, d.Ignored, MaxIgnoredListed)
		require.Equal(t, len(paths), d.IgnoredCount)
		slices.Sort(paths)
		require.Equal(t, paths[:MaxIgnoredListed], d.Ignored)
		got, err := Decode(bytes.NewReader(doc))
		require.NoError(t, err)
		require.Equal(t, want, got, "Decode reads it too")
	})
	t.Run("a known member in another case is read, not ignored", func(t *testing.T) {
		doc := bytes.Replace(base, []byte(`"arrivals":10`), []byte(`"Arrivals":10`), 1)
		// A long s (escaped in the JSON text): encoding/json folds it to s.
		doc = bytes.Replace(doc, []byte(`"seq":3`), []byte(`"\u017fEQ":3`), 1)
		require.Contains(t, string(doc), `"\u017fEQ":3`)
		d, err := DecodeDetail(bytes.NewReader(doc))
		require.NoError(t, err)
		require.Equal(t, want, d.Snapshot)
		require.Empty(t, d.Ignored)
	})
	t.Run("an invalid series is still dropped, its unknown member listed", func(t *testing.T) {
		s := full()
		s.ArrivalsPerSecond.Counts = []int64{-2}
		doc := withMember(t, encode(t, s), `"arrivals_per_second":{`, `"start":3`)
		d, err := DecodeDetail(bytes.NewReader(doc))
		require.NoError(t, err)
		require.ErrorContains(t, d.Dropped, "arrivals_per_second count 0 is -2")
		s.ArrivalsPerSecond = nil
		require.Equal(t, s, d.Snapshot)
		require.Equal(t, []string{"arrivals_per_second.start"}, d.Ignored)
	})
}

// requireSamePaths checks that DecodeDetail's fast path (a document with no
// member it does not know) and its general path give the same answer.
func requireSamePaths(t testing.TB, doc []byte, d Decoded) {
	t.Helper()
	slow, err := decodeAny(doc)
	require.NoError(t, err)
	require.Equal(t, d, slow)
}

// TestDecodeIgnoredListIsBounded: a hostile document naming thousands of long
// members costs a bounded list (and log line): the first names, each cut, and
// their count.
func TestDecodeIgnoredListIsBounded(t *testing.T) {
	doc := encode(t, valid())
	for i := range 1000 {
		doc = withMember(t, doc, "{", fmt.Sprintf(`"%04d%s":%d`, i, strings.Repeat("é", 100), i))
	}
	d, err := DecodeDetail(bytes.NewReader(doc))
	require.NoError(t, err)
	require.Equal(t, valid(), d.Snapshot)
	require.Equal(t, 1000, d.IgnoredCount)
	require.Len(t, d.Ignored, MaxIgnoredListed)
	for i, name := range d.Ignored {
		require.LessOrEqual(t, len(name), maxIgnoredName+len("…"))
		require.True(t, utf8.ValidString(name), "cut on a rune boundary")
		require.True(t, strings.HasSuffix(name, "…"))
		require.True(t, strings.HasPrefix(name, fmt.Sprintf("%04d", i)), "the first names in order: %q", name)
	}
	// The same names every time (the collector compares them to log once).
	for range 10 {
		again, err := DecodeDetail(bytes.NewReader(doc))
		require.NoError(t, err)
		require.Equal(t, d.Ignored, again.Ignored)
	}
}

// TestDecodeOtherVersion: a document of a schema version this reader does not
// know is refused with an error naming both versions, before its members are
// read (they may mean something else there: a type error would hide the
// version).
func TestDecodeOtherVersion(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		version int
	}{
		{"newer, same members", strings.Replace(string(encode(t, full())), `"version":1`, `"version":2`, 1), 2},
		{"newer, a member changed type", `{"version":2,"instance_id":"a","arrivals":{"client":3,"pulled":1},"latency":[1,2]}`, 2},
		{"newer, version in another case", `{"VERSION":3,"arrivals":"many"}`, 3},
		{"older than any", `{"version":-1,"arrivals":[]}`, -1},
	}
	// Two version members, in different cases: the last counts, as for the
	// decoder, whichever the path (an unknown member takes the general one).
	twice := func(first, last int) string {
		return strings.Replace(string(encode(t, valid())), `"version":1`, fmt.Sprintf(`"Version":%d,"surprise":1,"VERSION":%d`, first, last), 1)
	}
	tests = append(tests, struct {
		name    string
		doc     string
		version int
	}{"two versions, the last newer", twice(1, 2), 2})
	t.Run("two versions, the last this one", func(t *testing.T) {
		for range 20 {
			d, err := DecodeDetail(strings.NewReader(twice(2, 1)))
			require.NoError(t, err)
			require.Equal(t, valid(), d.Snapshot)
			require.Equal(t, []string{"surprise"}, d.Ignored)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeDetail(strings.NewReader(tt.doc))
			var ve *VersionError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.version, ve.Version)
			require.EqualError(t, err, fmt.Sprintf("stats: version %d, want 1 (the only schema version this reader knows)", tt.version))
		})
	}
}

// TestDecodeOlderDocument: a document from a proxy that predates the members
// added last (git log proxy/stats/stats.go: the service histogram,
// latency_seconds_sum, arrivals_per_second, the pool's drain and expiry
// counts) is read, each of them absent: the service histogram empty (not a
// histogram of zeros), no series, the counts 0 as an older proxy that never
// drained meant.
func TestDecodeOlderDocument(t *testing.T) {
	raw := encode(t, full())
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	for _, k := range []string{"service", "latency_seconds_sum", "arrivals_per_second"} {
		require.Contains(t, m, k)
		delete(m, k)
	}
	pool := m["pool"].(map[string]any)
	for _, k := range []string{"drain_pushed", "drain_kept", "expired_requeued", "expired_relayed"} {
		require.Contains(t, pool, k)
		delete(pool, k)
	}
	old, err := json.Marshal(m)
	require.NoError(t, err)
	d, err := DecodeDetail(bytes.NewReader(old))
	require.NoError(t, err)
	require.NoError(t, d.Dropped)
	require.Empty(t, d.Ignored)
	want := full()
	want.Service, want.LatencySecondsSum, want.ArrivalsPerSecond = Histogram{}, 0, nil
	want.Pool.DrainPushed, want.Pool.DrainKept, want.Pool.ExpiredRequeued, want.Pool.ExpiredRelayed = 0, 0, 0, 0
	require.Equal(t, want, d.Snapshot)
	require.Nil(t, d.Snapshot.Service.Counts, "absent, not zeros")
}

// knownNames are every member name of the document, at every depth.
func knownNames() []string {
	var out []string
	var walk func(m members)
	walk = func(m members) {
		for name, sub := range m {
			out = append(out, name)
			walk(sub)
		}
	}
	walk(snapshotMembers)
	return out
}

// TestFoldNameIsEqualFold: a member name folds to a known name exactly when
// encoding/json would match them (bytes.EqualFold), non-ASCII runes included.
func TestFoldNameIsEqualFold(t *testing.T) {
	for _, name := range []string{
		"seq", "SEQ", "Seq", "\u017feq", "\u017fEQ", "\u212aind", "front", "FRONT", "ƒront", "se\u0071", "in_flight", "IN_FLIGHT",
		"ın_flight", "İn_flight", "seq\x00", "", "é", "queue_wait", "QUEUE_WAİT", "\xff", "bounds", "BOUNDS", "counts", "\u212aounts",
	} {
		requireFoldIsEqualFold(t, name)
	}
}

func requireFoldIsEqualFold(t *testing.T, name string) {
	t.Helper()
	folded, ok := foldName(name)
	for _, known := range knownNames() {
		require.Equal(t, strings.EqualFold(name, known), ok && folded == known, "%q against %q", name, known)
	}
}

func FuzzFoldName(f *testing.F) {
	for _, name := range knownNames() {
		f.Add(name)
		f.Add(strings.ToUpper(name))
		f.Add(strings.ReplaceAll(strings.ReplaceAll(name, "k", "\u212a"), "s", "\u017f"))
	}
	f.Fuzz(func(t *testing.T, name string) { requireFoldIsEqualFold(t, name) })
}
