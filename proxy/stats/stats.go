// Package stats defines the JSON document qas-proxy serves on its admin port at /stats,
// and the decoder consumers (qas-collector) use to read it: strict about every member
// it knows, tolerant of members a newer proxy added (Compatibility between versions).
//
// Every counter is monotonic from process start. StartTime and InstanceID identify the
// process, so a consumer that sees either change, or any counter fall, knows the proxy
// restarted and must rebase instead of producing a negative delta. Seq rises by one for
// every snapshot served, which lets a consumer notice a stale or replayed document.
//
// Units are seconds for every duration and time integral.
//
// # Compatibility between versions
//
// The proxies of a cluster are sidecars, upgraded pod by pod as each
// application rolls out, and qas-collector is upgraded on its own, so for hours
// a collector reads documents from proxies one release newer or older than
// itself. The document therefore evolves by these rules, as the Kubernetes API
// does within one API version:
//
//   - A release may add a member, at the top or inside any object (pool, front,
//     a histogram, arrivals_per_second), without changing SchemaVersion. A
//     reader ignores the members it does not know, whatever their value
//     (Decoded.Ignored lists them, so that an operator can see the skew).
//   - A member added so is optional: a reader treats its absence (an older
//     writer) as "not measured", never as a measured zero where zero would
//     mislead (the service histogram and arrivals_per_second are absent, not
//     empty, from a proxy that predates them).
//   - Changing what a member means, its unit or its type, or removing a member
//     that readers need, is a new SchemaVersion. A reader refuses a document of
//     a version it does not know (*VersionError, naming both versions) before
//     reading any member, since its members may mean something else there.
//
// Every member a reader knows is still checked as strictly as ever: its type,
// finite and in-range numbers (Validate), one document with no trailing data,
// at most MaxDocumentBytes. Version 1 is the only version so far, so a reader
// accepts version 1 only; a reader for version 2 that must read version 1
// proxies during a rollout would convert them.
package stats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// SchemaVersion is the value of Snapshot.Version that this package reads and writes.
const SchemaVersion = 1

// MaxDocumentBytes bounds what Decode reads; a real snapshot is a few kilobytes.
const MaxDocumentBytes = 1 << 20

// DefaultLatencyBounds are the upper bounds, in seconds, of the latency histogram
// buckets. They are roughly logarithmic from 100 µs to 60 s; the last bucket (+Inf) is
// implicit.
var DefaultLatencyBounds = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04,
	0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5,
	10, 15, 30, 60,
}

// Snapshot is one reading of a proxy's counters.
type Snapshot struct {
	Version    int       `json:"version"`
	InstanceID string    `json:"instance_id"` // random per process start
	StartTime  time.Time `json:"start_time"`  // process start
	Time       time.Time `json:"time"`        // when this snapshot was taken
	Seq        uint64    `json:"seq"`         // 1 for the first snapshot served, then +1

	// ConcurrencyLimit is the per-pod limit k (0 = unlimited); QueueLimit bounds the
	// requests waiting for a slot.
	ConcurrencyLimit int `json:"concurrency_limit"`
	QueueLimit       int `json:"queue_limit"`

	// Arrivals counts requests accepted by the proxy (including ones later rejected);
	// Completions counts requests whose response finished or failed.
	Arrivals    uint64 `json:"arrivals"`
	Completions uint64 `json:"completions"`

	// Service time runs from the moment the request got a concurrency slot (or arrived,
	// without a limit) to the end of the response. Queue wait is counted apart.
	ServiceSecondsSum   float64 `json:"service_seconds_sum"`
	ServiceSecondsSumSq float64 `json:"service_seconds_sum_sq"`
	// TTFBSecondsSum sums time from slot to the first response byte.
	TTFBSecondsSum float64 `json:"ttfb_seconds_sum"`

	// Queued counts requests that had to wait for a slot; QueueWaitSecondsSum is the
	// sum of their waits; Rejected counts 503s for a full queue.
	Queued              uint64  `json:"queued"`
	QueueWaitSecondsSum float64 `json:"queue_wait_seconds_sum"`
	Rejected            uint64  `json:"rejected"`

	// InFlight and Waiting are gauges at Time. InFlightSeconds is ∫ in-flight dt, so the
	// mean concurrency over a window is ΔInFlightSeconds / Δt (Little's law check);
	// BusySeconds is the time with at least one request in flight.
	InFlight        int64   `json:"in_flight"`
	Waiting         int64   `json:"waiting"`
	InFlightSeconds float64 `json:"in_flight_seconds"`
	BusySeconds     float64 `json:"busy_seconds"`

	// Codes counts completed responses by status class: index 0 = 1xx … 4 = 5xx.
	Codes [5]uint64 `json:"codes"`
	// UpstreamErrors (502), UpstreamTimeouts (504) and ClientCancels (client went away
	// before the response ended) are subsets of Completions.
	UpstreamErrors   uint64 `json:"upstream_errors"`
	UpstreamTimeouts uint64 `json:"upstream_timeouts"`
	ClientCancels    uint64 `json:"client_cancels"`

	// Latency is the histogram of the latency a client feels at the proxy: queue wait
	// plus service time.
	Latency Histogram `json:"latency"`
	// LatencySecondsSum is the sum of the latencies Latency counts, every one of
	// them: unlike service plus queue wait, it includes requests relayed from a
	// shared front (no service time here) and the time an overflow attempt took.
	// A proxy from before it sends none (0).
	LatencySecondsSum float64 `json:"latency_seconds_sum"`
	// Service is the histogram of the service times of the completed requests that
	// were served (ServiceSecondsSum's), in Latency's buckets: the decider models the
	// latency tail from its quantiles. Empty (no bounds, no counts) from a proxy
	// that does not measure it.
	Service Histogram `json:"service"`

	// Pool is present when the sidecar overflows to, and pulls from, a shared front
	// (issue #20); Front is present when the process runs in front mode.
	Pool  *Pool  `json:"pool,omitempty"`
	Front *Front `json:"front,omitempty"`

	// ArrivalsPerSecond counts the requests that arrived from clients in each of
	// the last whole wall-clock seconds (issue #15), for the variability of the
	// arrival rate from second to second. Omitted until the proxy has counted a
	// second, and by a proxy from before it.
	ArrivalsPerSecond *PerSecond `json:"arrivals_per_second,omitempty"`
}

// PerSecond is a series of counts of consecutive whole wall-clock seconds on the
// proxy's clock, oldest first: Counts[len(Counts)-1] is the second that began at
// the Unix time EndUnix, Counts[i] the one that began len(Counts)-1-i seconds
// earlier. A count of ratevar.Missing (-1) marks a second whose count is not
// known (the proxy was not counting yet, or a tick came too late to say which
// second its arrivals belong to).
type PerSecond struct {
	EndUnix int64   `json:"end_unix"`
	Counts  []int64 `json:"counts"`
}

// MaxPerSecondCounts bounds PerSecond.Counts in a document: qas-proxy sends 32;
// a longer series is a broken or hostile proxy.
const MaxPerSecondCounts = 600

// StartUnix is the Unix time at which the series' first second began.
func (p PerSecond) StartUnix() int64 { return p.EndUnix - int64(len(p.Counts)) + 1 }

// At returns the count of the second that began at the Unix time sec, or
// ratevar.Missing when the series does not cover it.
func (p PerSecond) At(sec int64) int64 {
	i := sec - p.StartUnix()
	if i < 0 || i >= int64(len(p.Counts)) {
		return missing
	}
	return p.Counts[i]
}

// missing is ratevar.Missing (this package imports nothing of the project's).
const missing = -1

// DefaultDecisionBounds are the bucket bounds, in seconds, of Pool.OverflowDecision:
// the time from sending an overflow request to the front's accept or refuse, which the
// sidecar bounds by its decision deadline (25 ms by default).
var DefaultDecisionBounds = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025,
	0.05, 0.1, 0.25, 1,
}

// Pool counts a sidecar's use of the pooled data plane. An overflow attempt ends in
// exactly one of accepted (the front took the request; the sidecar relays its
// response), refused (the front answered no: queue full or not authenticated),
// timeout (no decision within the deadline) or error (connect or protocol failure);
// the last three leave the request in the local queue untouched.
type Pool struct {
	OverflowAccepted uint64 `json:"overflow_accepted"`
	OverflowRefused  uint64 `json:"overflow_refused"`
	OverflowTimeout  uint64 `json:"overflow_timeout"`
	OverflowError    uint64 `json:"overflow_error"`
	// Pulled counts requests this sidecar pulled from a front and served locally.
	Pulled uint64 `json:"pulled"`
	// FrontFailures counts the times a front replica was marked suspect (refusal,
	// timeout, connect or pull error), overflow and pull alike.
	FrontFailures uint64 `json:"front_failures"`
	// OverflowDecision is the histogram of the decision time of every overflow attempt.
	OverflowDecision Histogram `json:"overflow_decision"`
	// DrainPushed and DrainKept count the requests that waited in the local queue
	// while the pod drained (or would have), each offered to a front once: taken
	// by it (a subset of OverflowAccepted; the response, or the front's 503, was
	// relayed), or served here after all (refused, no decision in time, no front,
	// or given back unseen). ExpiredRequeued and ExpiredRelayed split the accepted overflows that the front
	// gave up without any pod's app seeing them (its max wait, or it shut down):
	// served here after all (the sender could resend them whole), or the front's
	// 503 relayed to the client. Omitted when zero, so a collector built before
	// them still reads a sidecar that never drained or saw an expiry.
	DrainPushed     uint64 `json:"drain_pushed,omitempty"`
	DrainKept       uint64 `json:"drain_kept,omitempty"`
	ExpiredRequeued uint64 `json:"expired_requeued,omitempty"`
	ExpiredRelayed  uint64 `json:"expired_relayed,omitempty"`
}

// Front counts a front replica's shared queues (summed over workloads).
type Front struct {
	// QueueLength (overflow requests waiting for a pull) and WaitingPulls (pulls
	// waiting for a request) are gauges at Snapshot.Time.
	QueueLength  int64 `json:"queue_length"`
	WaitingPulls int64 `json:"waiting_pulls"`
	// Accepted counts overflow requests taken into a queue; RefusedFull those refused
	// with 503 because the queue was at its length bound; Unauthenticated the overflow
	// requests and pulls refused with 403.
	Accepted        uint64 `json:"accepted"`
	RefusedFull     uint64 `json:"refused_full"`
	Unauthenticated uint64 `json:"unauthenticated"`
	// Dispatched counts accepted requests handed to a pull; Expired those that waited
	// past the maximum wait and were answered 503.
	Dispatched uint64 `json:"dispatched"`
	Expired    uint64 `json:"expired"`
	// QueueWait is the histogram of the time accepted requests waited for a pull
	// (dispatched or expired).
	QueueWait Histogram `json:"queue_wait"`
}

// Histogram is a non-cumulative bucketed histogram: Counts[i] counts observations in
// (Bounds[i-1], Bounds[i]]; Counts[len(Bounds)] counts those above the last bound.
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
}

// Total returns the number of observations.
func (h Histogram) Total() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Decode reads and validates one snapshot. Any error names the field at fault.
// An invalid optional series (arrivals_per_second) is left out, the rest kept,
// and members this reader does not know are ignored: DecodeDetail says which.
func Decode(r io.Reader) (Snapshot, error) {
	d, err := DecodeDetail(r)
	return d.Snapshot, err
}

// DecodeDropping is Decode, and reports in dropped an optional field that was
// present but invalid and left out of s (nil: none). err is for the document
// as a whole: s is then unusable.
func DecodeDropping(r io.Reader) (s Snapshot, dropped, err error) {
	d, err := DecodeDetail(r)
	return d.Snapshot, d.Dropped, err
}

// Decoded is one document read by DecodeDetail, and what was left out of it.
type Decoded struct {
	Snapshot Snapshot
	// Dropped is why an optional field that was present but invalid was left
	// out of Snapshot (nil: none was).
	Dropped error
	// Ignored lists the members of the document that this reader does not
	// know, which a newer writer added (the package doc's compatibility rule),
	// by their paths ("pool.handed_off"), each cut to maxIgnoredName bytes:
	// the first MaxIgnoredListed in sorted order, so that the same document
	// lists the same names. IgnoredCount counts them all.
	Ignored      []string
	IgnoredCount int
}

// MaxIgnoredListed bounds Decoded.Ignored: a hostile document can name
// thousands of members, which a log line must not carry.
const MaxIgnoredListed = 16

// maxIgnoredName bounds each name in Decoded.Ignored, for the same reason.
const maxIgnoredName = 64

// document is a Snapshot whose optional series is read apart (the outer field
// hides the embedded one of the same name), so that a malformed one, of any
// type, costs only itself.
type document struct {
	Snapshot
	ArrivalsPerSecond json.RawMessage `json:"arrivals_per_second,omitempty"`
}

// validated is the document's snapshot without its optional series (read
// apart: series), and Validate's verdict on it.
func (doc document) validated() (Snapshot, error) {
	s := doc.Snapshot
	s.ArrivalsPerSecond = nil
	return s, s.Validate()
}

// series is the document's arrivals_per_second as sent, nil when absent or null.
func (doc document) series() json.RawMessage {
	if raw := doc.ArrivalsPerSecond; len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		return raw
	}
	return nil
}

// DecodeDetail reads and validates one snapshot, as Decode, and says what it
// left out: an invalid optional series (Decoded.Dropped) and the members it
// does not know (Decoded.Ignored). Members it does not know are no error, at
// any depth and of any value; every member it knows must have its type and
// pass Validate. A document of another schema version is refused with a
// *VersionError before its members are read, since they may mean something
// else there. err is for the document as a whole: the Decoded is then
// unusable.
func DecodeDetail(r io.Reader) (Decoded, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxDocumentBytes+1))
	if err != nil {
		return Decoded{}, fmt.Errorf("stats: read: %w", err)
	}
	if len(data) > MaxDocumentBytes {
		return Decoded{}, fmt.Errorf("stats: document larger than %d bytes", MaxDocumentBytes)
	}
	if d, ok, err := decodeKnown(data); ok {
		return d, err
	}
	return decodeAny(data)
}

// decodeKnown is DecodeDetail's fast path, for a document every member of
// which this reader knows (no version skew): one strict pass. ok is false
// when the document has a member it does not know or does not decode at all;
// decodeAny then reads it (and names what is wrong), so that both paths give
// the same answer.
func decodeKnown(data []byte) (d Decoded, ok bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc document
	if dec.Decode(&doc) != nil {
		return Decoded{}, false, nil
	}
	if dec.More() {
		return Decoded{}, true, errors.New("stats: trailing data after the document")
	}
	if d.Snapshot, err = doc.validated(); err != nil {
		return Decoded{}, true, err
	}
	if raw := doc.series(); raw != nil {
		sdec := json.NewDecoder(bytes.NewReader(raw))
		sdec.DisallowUnknownFields()
		var p PerSecond
		if sdec.Decode(&p) != nil {
			return Decoded{}, false, nil
		}
		d = d.withSeries(&p)
	}
	return d, true, nil
}

// decodeAny is DecodeDetail for any document: it reads the members this
// reader knows and lists the others.
func decodeAny(data []byte) (Decoded, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return Decoded{}, fmt.Errorf("stats: decode: %w", err)
	}
	if dec.More() {
		return Decoded{}, errors.New("stats: trailing data after the document")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return Decoded{}, fmt.Errorf("stats: decode: %w", err)
	}
	if err := checkVersion(raw); err != nil {
		return Decoded{}, err
	}
	var doc document
	if err := json.Unmarshal(raw, &doc); err != nil {
		return Decoded{}, fmt.Errorf("stats: decode: %w", err)
	}
	var d Decoded
	snapshotMembers.unknown(top, "", &d)
	// The first names in order, not the first met (a map's order is random):
	// the same document lists the same names, which the collector compares to
	// log a proxy's skew once.
	slices.Sort(d.Ignored)
	d.IgnoredCount = len(d.Ignored)
	d.Ignored = slices.Clip(d.Ignored[:min(len(d.Ignored), MaxIgnoredListed)])
	var err error
	if d.Snapshot, err = doc.validated(); err != nil {
		return Decoded{}, err
	}
	if raw := doc.series(); raw != nil {
		// Members it does not know are ignored, as everywhere in the document.
		var p PerSecond
		if err := json.Unmarshal(raw, &p); err != nil {
			d.Dropped = fmt.Errorf("stats: arrivals_per_second: %w", err)
			return d, nil
		}
		d = d.withSeries(&p)
	}
	return d, nil
}

// withSeries is d with the arrivals_per_second series p if it is valid for
// d's snapshot, and otherwise d with p left out and Dropped saying why.
func (d Decoded) withSeries(p *PerSecond) Decoded {
	if err := p.validate(d.Snapshot); err != nil {
		d.Dropped = err
		return d
	}
	d.Snapshot.ArrivalsPerSecond = p
	return d
}

// VersionError is the error for a document of a schema version this reader
// does not know.
type VersionError struct{ Version int }

func (e *VersionError) Error() string {
	return fmt.Sprintf("stats: version %d, want %d (the only schema version this reader knows)", e.Version, SchemaVersion)
}

// checkVersion refuses the document doc when its version member is a number
// other than SchemaVersion. A version that is no number, or none, is left to
// the decoder and Validate, which name it. The member is found as the decoder
// finds it (by encoding/json itself: a name equal under case folding, the
// last of several), so that both read the same one.
func checkVersion(doc json.RawMessage) error {
	var only struct {
		Version json.RawMessage `json:"version"`
	}
	if json.Unmarshal(doc, &only) != nil || only.Version == nil {
		return nil
	}
	var v int
	if err := json.Unmarshal(only.Version, &v); err != nil || v == SchemaVersion {
		return nil // a version of the wrong type: the decoder names it
	}
	return &VersionError{Version: v}
}

// members is the set of JSON member names of a struct type, folded
// (foldName), each with the members of its value when that is an object this
// package decodes member by member (a struct or a pointer to one; nil
// otherwise).
type members map[string]members

// foldName is name as encoding/json matches a member's name to a field's
// (bytes.EqualFold), for this package's names, which are ASCII: ASCII letters
// in lower case, and the two non-ASCII runes whose case folding reaches an
// ASCII letter, the Kelvin sign and the long s, as k and s. ok is false when
// name holds any other non-ASCII rune: no ASCII name equals it under folding.
// One map lookup per member then replaces a comparison with every name, which
// a hostile document of 100,000 members would make costly.
func foldName(name string) (string, bool) {
	plain := true
	for i := range len(name) {
		if c := name[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			plain = false
			break
		}
	}
	if plain {
		return name, true
	}
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		switch {
		case r == '\u212a': // Kelvin sign
			r = 'k'
		case r == '\u017f': // long s
			r = 's'
		case r >= utf8.RuneSelf:
			return "", false
		case 'A' <= r && r <= 'Z':
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String(), true
}

// snapshotMembers are the members of a /stats document.
var snapshotMembers = membersOf(reflect.TypeFor[Snapshot]())

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// membersOf lists t's JSON members as encoding/json names them. A type that
// decodes itself (time.Time) is a value, not an object to look into.
func membersOf(t reflect.Type) members {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	out := members{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		folded, ok := foldName(name)
		if !ok {
			panic("stats: member name " + name + " is not ASCII")
		}
		out[folded] = membersOf(f.Type)
	}
	return out
}

// unknown adds to d.Ignored the members of the object obj that m does not
// know, by their paths under prefix, and looks into the known ones that are
// objects.
// A known member that is not an object where one belongs is left to the
// decoder, which names it.
func (m members) unknown(obj map[string]json.RawMessage, prefix string, d *Decoded) {
	for k, v := range obj {
		folded, ok := foldName(k)
		sub, known := m[folded]
		if !ok || !known {
			d.Ignored = append(d.Ignored, truncateName(prefix+k))
			continue
		}
		if sub == nil {
			continue
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(v, &inner) == nil {
			sub.unknown(inner, prefix+k+".", d)
		}
	}
}

// truncateName cuts name to maxIgnoredName bytes, on a rune boundary.
func truncateName(name string) string {
	if len(name) <= maxIgnoredName {
		return name
	}
	cut := maxIgnoredName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…"
}

// A document's time sums may exceed its uptime by the wall clock's error:
// uptimeSlackSeconds, or uptimeSlackRatio of the uptime if more.
const (
	uptimeSlackSeconds = 60
	uptimeSlackRatio   = 0.01
)

// Validate checks the invariants a consumer relies on, and that every number is
// finite and within what the process could have measured since it started.
func (s Snapshot) Validate() error {
	if s.Version != SchemaVersion {
		return &VersionError{Version: s.Version}
	}
	if s.InstanceID == "" {
		return errors.New("stats: instance_id is empty")
	}
	if s.StartTime.IsZero() {
		return errors.New("stats: start_time is missing")
	}
	if s.Time.Before(s.StartTime) {
		return errors.New("stats: time is before start_time")
	}
	if s.Completions > s.Arrivals {
		return fmt.Errorf("stats: completions %d exceed arrivals %d", s.Completions, s.Arrivals)
	}
	// Every time sum is bounded by what the process could have accumulated since it
	// started: no request lasts longer than the uptime U, so each per-request sum is at
	// most arrivals·U, the in-flight integral too (at most arrivals in flight), busy time
	// at most U, and the sum of squares at most U times the sum. A finite value beyond
	// these (1e308 seconds) is a broken or hostile proxy, and would overflow the
	// rates and sums computed from it.
	uptime := s.Time.Sub(s.StartTime).Seconds()
	limit := uptime + max(uptimeSlackSeconds, uptime*uptimeSlackRatio)
	perRequest := float64(s.Arrivals) * limit
	for _, c := range []struct {
		name  string
		v     float64
		bound float64
		why   string
	}{
		{"service_seconds_sum", s.ServiceSecondsSum, perRequest, "arrivals × uptime"},
		{"service_seconds_sum_sq", s.ServiceSecondsSumSq, s.ServiceSecondsSum * limit, "service_seconds_sum × uptime"},
		{"ttfb_seconds_sum", s.TTFBSecondsSum, perRequest, "arrivals × uptime"},
		{"queue_wait_seconds_sum", s.QueueWaitSecondsSum, perRequest, "arrivals × uptime"},
		{"latency_seconds_sum", s.LatencySecondsSum, perRequest, "arrivals × uptime"},
		{"in_flight_seconds", s.InFlightSeconds, perRequest, "arrivals × uptime"},
		{"busy_seconds", s.BusySeconds, limit, "uptime"},
	} {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) || c.v < 0 {
			return fmt.Errorf("stats: %s is %v, want a finite value ≥ 0", c.name, c.v)
		}
		if c.v > c.bound {
			return fmt.Errorf("stats: %s is %v, more than %s (%v) allows", c.name, c.v, c.why, c.bound)
		}
	}
	if s.InFlight < 0 || s.Waiting < 0 || s.ConcurrencyLimit < 0 || s.QueueLimit < 0 {
		return errors.New("stats: negative gauge or limit")
	}
	if uint64(s.InFlight) > s.Arrivals {
		return fmt.Errorf("stats: in_flight %d exceeds arrivals %d", s.InFlight, s.Arrivals)
	}
	// Every observation is a request that arrived.
	if err := validHistogram("latency", s.Latency, s.Arrivals, "arrivals"); err != nil {
		return err
	}
	if s.Pool != nil {
		if err := s.Pool.validate(s.Arrivals); err != nil {
			return err
		}
	}
	if s.Front != nil {
		if err := s.Front.validate(); err != nil {
			return err
		}
	}
	if s.ArrivalsPerSecond != nil {
		if err := s.ArrivalsPerSecond.validate(s); err != nil {
			return err
		}
	}
	return s.validateService()
}

// perSecondClockSlack is how far, in seconds, a PerSecond series' last second
// may lie outside the snapshot's process lifetime on its own clock: the wall
// clock may have been stepped between the tick that recorded it and the
// snapshot.
const perSecondClockSlack = 60

// validate checks an arrivals_per_second series against the snapshot s that
// carries it: a bounded length, counts that are Missing or counts of requests
// that arrived (all of them together at most the arrivals), a last second
// within the process's lifetime on its clock.
func (p *PerSecond) validate(s Snapshot) error {
	if len(p.Counts) == 0 || len(p.Counts) > MaxPerSecondCounts {
		return fmt.Errorf("stats: arrivals_per_second has %d counts, want 1 to %d", len(p.Counts), MaxPerSecondCounts)
	}
	lo, hi := s.StartTime.Unix()-perSecondClockSlack, s.Time.Unix()+perSecondClockSlack
	if p.EndUnix < lo || p.EndUnix > hi {
		return fmt.Errorf("stats: arrivals_per_second end_unix %d is outside the process's lifetime [%d, %d] (start_time and time, ± %d s)",
			p.EndUnix, lo, hi, perSecondClockSlack)
	}
	var total uint64
	for i, c := range p.Counts {
		if c < missing {
			return fmt.Errorf("stats: arrivals_per_second count %d is %d, want ≥ 0 or -1 (missing)", i, c)
		}
		if c > 0 {
			if uint64(c) > s.Arrivals-total {
				return fmt.Errorf("stats: arrivals_per_second counts more requests than arrivals %d", s.Arrivals)
			}
			total += uint64(c)
		}
	}
	return nil
}

// validate checks a sidecar's pool counters: every overflow attempt and every pulled
// request is a request that arrived at this proxy (an overflow at most twice, a
// pull at most once).
func (p *Pool) validate(arrivals uint64) error {
	// A request is offered at most twice: at admission, and from the local queue
	// when the pod drains.
	attempts, ok := sumCapped(min(arrivals, math.MaxUint64/2)*2, p.OverflowAccepted, p.OverflowRefused, p.OverflowTimeout, p.OverflowError)
	if !ok {
		return fmt.Errorf("stats: pool overflow attempts exceed twice the arrivals %d", arrivals)
	}
	if p.Pulled > arrivals {
		return fmt.Errorf("stats: pool pulled %d exceeds arrivals %d", p.Pulled, arrivals)
	}
	if p.DrainKept > arrivals {
		return fmt.Errorf("stats: pool drain_kept %d exceeds arrivals %d", p.DrainKept, arrivals)
	}
	if p.DrainPushed > p.OverflowAccepted {
		return fmt.Errorf("stats: pool drain_pushed %d exceeds overflow_accepted %d", p.DrainPushed, p.OverflowAccepted)
	}
	if _, ok := sumCapped(p.OverflowAccepted, p.ExpiredRequeued, p.ExpiredRelayed); !ok {
		return fmt.Errorf("stats: pool expired_requeued %d + expired_relayed %d exceed overflow_accepted %d", p.ExpiredRequeued, p.ExpiredRelayed, p.OverflowAccepted)
	}
	return validHistogram("pool overflow_decision", p.OverflowDecision, attempts, "overflow attempts")
}

// validate checks a front's counters: a request leaves the queue once, dispatched or
// expired, and only after it was accepted.
func (f *Front) validate() error {
	if f.QueueLength < 0 || f.WaitingPulls < 0 {
		return errors.New("stats: front has a negative gauge")
	}
	left, ok := sumCapped(f.Accepted, f.Dispatched, f.Expired)
	if !ok {
		return fmt.Errorf("stats: front dispatched %d + expired %d exceed accepted %d", f.Dispatched, f.Expired, f.Accepted)
	}
	if uint64(f.QueueLength) > f.Accepted-left {
		return fmt.Errorf("stats: front queue_length %d exceeds accepted %d less dispatched and expired", f.QueueLength, f.Accepted)
	}
	return validHistogram("front queue_wait", f.QueueWait, left, "dispatched + expired")
}

// sumCapped returns the sum of vs and whether it stays within limit; the cap also
// keeps a hostile document from overflowing the sum.
func sumCapped(limit uint64, vs ...uint64) (uint64, bool) {
	var total uint64
	for _, v := range vs {
		if v > limit-total {
			return 0, false
		}
		total += v
	}
	return total, true
}

// CheckShape checks h's shape: one count per bucket (its bounds and one above
// them), the bounds finite, positive and increasing; name says which histogram
// in the error.
func (h Histogram) CheckShape(name string) error {
	if len(h.Counts) != len(h.Bounds)+1 {
		return fmt.Errorf("stats: %s has %d counts for %d bounds, want bounds+1", name, len(h.Counts), len(h.Bounds))
	}
	for i, b := range h.Bounds {
		if math.IsNaN(b) || math.IsInf(b, 0) || b <= 0 || (i > 0 && b <= h.Bounds[i-1]) {
			return fmt.Errorf("stats: %s bound %d (%v) is not positive and increasing", name, i, b)
		}
	}
	return nil
}

// validHistogram checks that h has one count per bucket, positive increasing finite
// bounds, and at most limit observations.
func validHistogram(name string, h Histogram, limit uint64, limitName string) error {
	if err := h.CheckShape(name); err != nil {
		return err
	}
	if _, ok := sumCapped(limit, h.Counts...); !ok {
		return fmt.Errorf("stats: %s histogram counts more observations than %s %d", name, limitName, limit)
	}
	return nil
}

// validateService checks the service-time histogram: absent, or in the latency
// histogram's buckets and counting at most the completions (a rejected request
// completes without service).
func (s Snapshot) validateService() error {
	if len(s.Service.Bounds) == 0 && len(s.Service.Counts) == 0 {
		return nil
	}
	if !sameBuckets(s.Service, Histogram{Bounds: s.Latency.Bounds, Counts: s.Latency.Counts}) {
		return fmt.Errorf("stats: service histogram has %d bounds and %d counts, want the latency histogram's %d bounds and %d counts",
			len(s.Service.Bounds), len(s.Service.Counts), len(s.Latency.Bounds), len(s.Latency.Counts))
	}
	var total uint64
	for _, c := range s.Service.Counts {
		if c > s.Completions-total {
			return fmt.Errorf("stats: service histogram counts more observations than completions %d", s.Completions)
		}
		total += c
	}
	return nil
}
