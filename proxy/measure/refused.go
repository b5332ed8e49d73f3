package measure

// Refusal is why the proxy refused a request itself, before the request counted as
// an arrival and before any of it reached the application. Requests that net/http's
// own parser refuses (a malformed request line or field, a missing Host, a head over
// the size limit, an HTTP/2 protocol error, ...) are answered before the proxy's
// code sees them and are not counted here.
type Refusal uint8

const (
	// RefusedConnect: a CONNECT, in any case and on any protocol (405).
	RefusedConnect Refusal = iota
	// RefusedMalformedH2: an HTTP/2 request whose :method is not a token or whose
	// :path is not a request target of visible ASCII (400).
	RefusedMalformedH2
	// RefusedRequestTarget: an HTTP/1 request target that is neither origin form
	// nor an http(s) absolute URI with a host, which the app would get rewritten
	// (400, connection closed).
	RefusedRequestTarget
	// RefusedAmbiguousFraming: an HTTP/1 request whose body framing is ambiguous
	// (RFC 9112 section 6.3: Transfer-Encoding with Content-Length, or
	// Content-Length values that disagree), a request smuggling attempt (400,
	// connection closed), whichever path met it.
	RefusedAmbiguousFraming
	numRefusals
)

// Refusals lists every Refusal, in order.
var Refusals = [numRefusals]Refusal{RefusedConnect, RefusedMalformedH2, RefusedRequestTarget, RefusedAmbiguousFraming}

// refusalNames are the reasons' label values on /metrics.
var refusalNames = [numRefusals]string{"connect", "malformed_h2", "request_target", "ambiguous_framing"}

// String is the reason's label value on /metrics.
func (f Refusal) String() string {
	if f >= numRefusals {
		return "unknown"
	}
	return refusalNames[f]
}

// Refuse counts a request the proxy refused for reason f. Such a request is neither
// an arrival nor a completion: it reached no application.
func (r *Recorder) Refuse(f Refusal) {
	if f < numRefusals {
		r.refused[f].Add(1)
	}
}

// Refused returns how many requests the proxy refused for reason f. The counts are
// not in the /stats document (its schema is the collector's), only on /metrics.
func (r *Recorder) Refused(f Refusal) uint64 {
	if f >= numRefusals {
		return 0
	}
	return r.refused[f].Load()
}
